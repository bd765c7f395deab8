"""Expert parallelism in one forward pass: which tokens reach a MoE layer, how many experts they touch, what an EP
rank dispatches, and the time of the dispatch + combine all-to-all (arrays broadcast).

Tokens. A replica's attention runs data-parallel over its ep groups; B sequences over dp x ep groups put
ceil(B / dp) on the busiest replica and ceil(B / (dp ep)) on its busiest group. Only the groups that hold
sequences route tokens, so the tokens that reach the replica's MoE layer in one pass are its own sequences' tokens,
min(ep x seqs per group, replica sequences per micro-batch) x new tokens each -- B at one replica, not
ceil(B / ep) x ep: with fewer sequences than groups the idle groups route nothing and cost nothing extra
(engine/static_batch.py passes stage_seqs; training fills every group, so the default is ep x seqs).

Experts touched. Each of T tokens picks k of E experts uniformly: E (1 - (1 - k/E)^T) distinct experts are read
(DeepSeek-V3, E = 256, k = 8: 8 at T = 1, 15.75 at T = 2, all 256 by T ~ 1,000). An EP rank holds ceil(E / ep) of
the experts (layout.expert_share) and reads those of them that are touched, a binomial count; every MoE layer waits
for the busiest rank, which at a small batch reads well above the mean (busiest_rank_experts: 2.5 experts against 1
for one DeepSeek-V3 token over EP8).

Routing skew. Real routers do not spread tokens evenly, and every MoE layer waits for its busiest EP rank (the
all-to-all is a barrier). TensorRT-LLM measured DeepSeek-R1's expert loads in serving (tech blog 4, "Scaling
Expert Parallelism in TensorRT-LLM", Table 1: EP32 on GB200, machine-translation data, per-layer per-iteration
averages): per expert slot a mean of 128 routed tokens with a standard deviation of 164.1 (coefficient of
variation 1.28), per rank of 8 slots a mean of 1,024 with 491.6 (0.48 = 1.28 / sqrt(8): the experts' loads add as
if independent). So a rank of E/ep experts carries a load of CV_rank = 1.28 / sqrt(E/ep), and the busiest of ep
ranks about 1 + CV_rank z(ep) times the mean (`routing_imbalance`), z(n) the expected largest of n standard normals
(Blom's approximation). Check at the blog's EP32: 1 + 0.45 x 2.07 = 1.94 against the measured 2.56 (the hottest
rank 1.564 x more than the mean): the real tail is heavier than normal (DeepEP PR #393 fits per-rank counts with a
log-normal), so at large EP this under-states the skew. With EPLB's redundant experts the same table reads a rank
standard deviation of 52.0 of 1,024 (CV 0.051, 1.11 x the mean at the hottest rank): `EPLB_RANK_CV`. The skew is
model- and data-dependent (vLLM PR #50647 measured 1.069 x on Kimi at EP16 without EPLB); `ep_imbalance` sets it.

All-to-all. Each rank of a group of tp chips sends its 1/tp share of its group's T x k x d_model activations
in the dispatch and receives them back in the combine; the busiest rank gets ep_imbalance x the mean. The
group spans tp x ep chips placed by mapping/placement.py, priced for its slowest member (engine/collectives.py).
How the tokens travel (`ep_comm`, one of EP_COMM):
- "bf16": one bf16 copy per routed expert both ways (a plain all-to-all);
- "fp8": the dispatch in FP8 (e4m3 + one fp32 scale per 128 values, 1.03 B per value), the combine in bf16, still
  one copy per expert (DeepEP's low-latency kernels, pure RDMA; DeepSeek-V3 report sec. 3.3.2 / 3.5.1: dispatch
  quantized to FP8, combine kept in BF16);
- "deepep": FP8 dispatch, bf16 combine, and one copy per remote DOMAIN across the scale-out network, forwarded to
  the experts' chips on scale-up (DeepEP's normal kernels; DeepSeek-V3 report sec. 3.2.2: "each token will be sent
  to at most 4 nodes ... once it reaches the target nodes, we will endeavor to ensure that it is instantaneously
  forwarded via NVLink"). The scale-out bytes per token are then d_model x the expected remote domains its k
  experts sit in, which group-limited routing (Model.routing_groups / routing_group_limit: DeepSeek-V3 n_group 8,
  topk_group 4) bounds further (`remote_domains`). The forwarding's scale-up traffic is not added (scale-up links
  carry it ~9x faster than scale-out ones on HGX; said in the note).
  A decode pass never runs those normal kernels: DeepEP decodes with its low-latency kernels, which send one FP8
  copy per routed expert over RDMA (no per-domain forwarding) so that the step is CUDA-graph friendly (DeepEP
  docs/legacy.md: "low-latency kernels with pure RDMA" for "latency-sensitive inference decoding", measured at
  128 tokens, top-8, FP8 dispatch / BF16 combine on H800 + CX7: 39-48 GB/s per rank at EP32-256, 78-96% of the
  ~50 GB/s NIC, i.e. the one-copy-per-expert payload at link speed; LMSYS, "Large-scale EP on 96 H100s",
  2025-05-05: normal dispatch for prefill, low-latency for decode, the two incompatible in one group), so
  "deepep" times a decode pass as "fp8" (`transport`).

Two-micro-batch overlap (ep_overlap: DeepSeek's dual-batch overlap, SGLang's TBO). Per layer the compute of each
micro-batch is an attention side A (projections, core attention, norms, router, shared expert) and a routed-expert
side M (quantize, permute, grouped GEMMs, unpermute), and its transfers are the dispatch D and the combine K, in the
chain A -> D -> M -> K. One micro-batch's transfers can only run beside the other's compute, and there are two
schedules (deepseek-ai/profile-data README figures; open-infra-index day 6):
- decode's 5-stage pipeline splits the attention side in two, one part beside the other micro-batch's dispatch and
  one beside its combine, and runs the routed experts alone: per layer M + max(A, D + K);
- prefill's pairs every compute block with a transfer (attention beside a dispatch and a combine, experts beside a
  dispatch and a combine): per layer (max(A, K) + max(A, D) + max(M, D) + max(M, K)) / 2 (A, M, D, K summed over
  both micro-batches).
The engine runs the shorter (`overlap_exposed`); both are >= max(A + M, D + K), the bound a perfect overlap would
reach. Check against DeepSeek's decode profile (EP128, 128 requests x 2 tokens per GPU, 4K context, H800; kernel
times per micro-batch read from profile-data decode.json by zdszero.github.io/Computer/Artificial_Intelligence/
deepseek_profile.html): A ~ 388 + 19 + shared, M ~ 128 us, DeepEP's D + K at EP128 ~ 192 + 369 us: M + max(A, D + K)
~ 690 us per micro-batch, 1.38 ms per layer against the 1.43 ms the trace shows (87.32 ms for 61 layers).
While DeepEP's normal kernels overlap (prefill), they hold NORMAL_COMM_SMS of the chip's SMs (profile-data prefill
figure: "Computation 108 SMs, Communication 24 SMs" on H800's 132; docs/legacy.md: Buffer.set_num_sms(24)), so the
compute of the MoE layers runs on the rest: each op's compute leg x cu / (cu - 24) (`overlap_compute`; the training
step does the same with DualPipe's 20 SMs, engine/train_step.py). Unknown compute units: no slowdown.
"""
from __future__ import annotations

import math

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.specs.model import Model

# DeepSeek-R1 expert loads in serving (TensorRT-LLM tech blog 4, Table 1, without EPLB): sd 164.1 / mean 128 per slot
EXPERT_LOAD_CV = 164.1 / 128.0
# the same table with EPLB (9 slots per rank, EP32): sd 52.0 / mean 1,024 per rank
EPLB_RANK_CV = 52.0 / 1024.0

ACT_BYTES = 2.0  # activations in bf16 (the same figure as forward.ACT_BYTES)
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128   # e4m3 values + one fp32 scale per 128 (DeepEP's FP8 dispatch)
EP_COMM = ("bf16", "fp8", "deepep")
NORMAL_COMM_SMS = 24     # SMs DeepEP's normal kernels hold while they overlap compute (module docstring)
# the ops of a MoE layer on each side of the dispatch -> experts -> combine chain (module docstring)
ATTENTION_SIDE = ("attn_proj", "act_quant", "norms", "router", "topk", "shared_experts")
EXPERT_SIDE = ("moe_quant", "moe_permute", "experts", "moe_down_quant", "moe_unpermute")
CORE_ATTENTION = ("attention", "attention_local")
COMM_NOTE = {"bf16": "", "fp8": "; FP8 dispatch, bf16 combine, one copy per expert",
             "deepep-decode": "; DeepEP low-latency kernels: FP8 dispatch, bf16 combine, one copy per expert over RDMA",
             "deepep": "; FP8 dispatch, bf16 combine, one copy per remote domain across scale-out (forwarding on "
                       "scale-up not added)"}


def _log_choose_ratio(a, b, r):
    """log(C(a - b, r) / C(a, r)) for real a >= b >= 0 and integer r (0 taken as log 0 = -inf where a - b < r):
    the chance that r draws without replacement from a items all miss b of them."""
    from math import lgamma
    a, b = np.asarray(a, float), np.asarray(b, float)
    lg = np.frompyfunc(lgamma, 1, 1)
    ok = a - b - r + 1 > 0
    safe = np.where(ok, a - b - r + 1, 1.0)
    val = np.asarray(lg(a - b + 1) + lg(a - r + 1) - lg(safe) - lg(a + 1), dtype=float)
    return np.where(ok, val, -np.inf)


def remote_domains(m: Model, share):
    """Chance that one token's k routed experts reach a given OTHER domain, when that domain holds
    `share` of the experts (the experts of an EP group lie contiguously on its ranks, so a domain holding c of the p
    ranks holds c / p of them); arrays broadcast, share in (0, 1].
    Unrestricted: a domain is missed when all k experts fall outside it, C(E - sE, k) / C(E, k). Group-limited
    (G groups, the token's experts inside M of them): a domain holding s G >= 1 groups is missed when all M groups
    are elsewhere, C(G - sG, M) / C(G, M); a domain holding part of one group is hit when that group is chosen (M / G)
    and one of its ~k / M experts there lands in the part, 1 - (1 - sG)^(k / M). The smaller of the two applies.
    Returns the chance that one given remote domain is hit; the caller multiplies by the number of remote domains."""
    E, k = float(m.n_experts), int(m.experts_per_token)
    s = np.clip(np.asarray(share, float), 0.0, 1.0)
    p_free = 1.0 - np.exp(_log_choose_ratio(E, s * E, k))
    G, M = m.routing_groups, m.routing_group_limit
    if G <= 1 or not M:
        return p_free
    sg = s * G
    p_whole = 1.0 - np.exp(_log_choose_ratio(float(G), sg, M))
    p_part = (M / G) * (1.0 - (1.0 - np.minimum(sg, 1.0)) ** (k / M))
    return np.minimum(p_free, np.where(sg >= 1.0, p_whole, p_part))


def experts_touched(m: Model, tokens):
    """Expected distinct routed experts that `tokens` tokens read in one MoE layer: E (1 - (1 - k/E)^tokens)."""
    E, k = m.n_experts, m.experts_per_token
    return E * (1.0 - (1.0 - k / E) ** np.asarray(tokens, float))


def busiest_rank_experts(m: Model, tokens, ep, share):
    """Expected distinct routed experts the busiest of `ep` ranks reads in one MoE layer when `tokens` tokens route
    (arrays broadcast): each rank holds n = ceil(E / ep) experts (share = n / E), each expert touched with chance
    p = 1 - (1 - k/E)^tokens, so a rank's count is Binomial(n, p) and the layer waits for the largest of ep of them:
    E[max] = sum_{x=0}^{n-1} (1 - F(x)^ep), F the binomial CDF (the ranks taken as independent; a token's k experts
    are distinct, which correlates them slightly negatively, so this errs high by a little). At a small batch the
    busiest rank reads well above the mean n p: DeepSeek-V3 (E 256, k 8) over EP8 at 4 tokens, 6.56 experts
    against 3.82 (1.72x); the gap closes as every expert is touched (1.09x at 64 tokens, 1.0 by ~256). ep = 1: the
    mean, E p, as before. The weights the busiest rank reads set a memory-bound step's time (every MoE layer waits
    for it at the combine)."""
    E, k = m.n_experts, m.experts_per_token
    tokens, ep, share = np.broadcast_arrays(np.asarray(tokens, float), np.asarray(ep, float),
                                            np.asarray(share, float))
    shape = tokens.shape
    tokens, ep, share = tokens.ravel(), ep.ravel(), share.ravel()
    n = np.rint(share * E).astype(np.int64)
    p = 1.0 - (1.0 - k / E) ** tokens
    out = n * p                                     # the mean, right where ep = 1 or every expert is touched
    todo = (ep > 1) & (p < 1.0) & (p > 0.0)
    if not todo.any():
        return out.reshape(shape)
    # the sum over x for each distinct (n, p, ep) once: a sweep repeats the same batches across layouts
    key = np.stack([n[todo], p[todo], ep[todo]], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    un, up, uep = uniq[:, 0].astype(np.int64), uniq[:, 1], uniq[:, 2]
    top = int(un.max())
    x = np.arange(top + 1, dtype=float)
    lg = np.array([math.lgamma(i + 1.0) for i in range(top + 1)])
    nn = un[:, None]
    logc = lg[nn] - lg[None, :] - lg[np.maximum(nn - x[None, :].astype(np.int64), 0)]
    inside = x[None, :] <= nn                      # a rank's count runs 0..n; past n the pmf is 0, not exp(junk)
    with np.errstate(divide="ignore", invalid="ignore"):
        logpmf = logc + x[None, :] * np.log(up)[:, None] + (nn - x[None, :]) * np.log1p(-up)[:, None]
    pmf = np.exp(np.where(inside, logpmf, -np.inf))
    cdf = np.minimum(np.cumsum(pmf, axis=1), 1.0)
    tail = np.where(x[None, :] < nn, 1.0 - cdf ** uep[:, None], 0.0)
    out[todo] = np.maximum(tail.sum(axis=1)[inv.ravel()], out[todo])
    return out.reshape(shape)


def ep_dispatch_bytes(m: Model, tokens, tp=1.0):
    """Bytes one expert-parallel rank sends per MoE layer in the dispatch all-to-all (and receives back in the
    combine): each of its `tokens` goes to top-k experts as d_model activations (ACT_BYTES each), and a rank of a
    tp group sends its 1/tp share of them. The busiest rank's imbalance multiplies this (not included here)."""
    return tokens * m.experts_per_token * m.d_model * ACT_BYTES / tp


def scaleout_copies_share(m: Model, p, span, hw):
    """For "deepep": the scale-out bytes with one copy per remote domain over those with one copy per expert, for
    the worst-placed rank of a group of p chips (its domain holds piece_min of them; the others are spread over the
    group's other domains): remote domains x hit chance / (k x (p - piece_min) / p). 1 where nothing crosses."""
    p = np.asarray(p, float)
    if span is not None:
        n, lo = np.asarray(span.domains, float), np.asarray(span.piece_min, float)
    else:
        d = float(hw.scaleup_domain)
        n, lo = np.maximum(np.ceil(p / d), 1.0), np.minimum(p, d)
    other = np.maximum(n - 1.0, 1.0)
    crossing = np.maximum(p - lo, 0.0) / p                   # share of the experts outside the rank's domain
    per_domain = crossing / other
    copies = other * remote_domains(m, np.where(per_domain > 0, per_domain, 1.0))
    per_expert = m.experts_per_token * crossing
    return np.where((n > 1) & (per_expert > 0), np.minimum(copies / np.where(per_expert > 0, per_expert, 1.0), 1.0),
                    1.0)


def expected_max_normal(n):
    """Expected largest of n independent standard normals (Blom 1958: Phi^-1((n - 0.375) / (n + 0.25))); 0 at n=1."""
    from statistics import NormalDist      # here, not at the top: statistics' import is ~2 ms of every start
    n = np.maximum(np.asarray(n, float), 1.0)
    inv = np.vectorize(NormalDist().inv_cdf, otypes=[float])
    return inv((n - 0.375) / (n + 0.25))


def routing_imbalance(m: Model, ep, *, eplb: bool = False):
    """Busiest EP rank's routed tokens / the mean (>= 1; 1 where ep = 1 or the model is dense): 1 + CV_rank z(ep),
    CV_rank = EXPERT_LOAD_CV / sqrt(E / ep) (EPLB_RANK_CV with EPLB). Module docstring for the sources."""
    ep = np.asarray(ep, float)
    if not m.is_moe:
        return np.ones_like(ep)
    per_rank = np.maximum(m.n_experts / np.maximum(ep, 1.0), 1.0)
    cv = EPLB_RANK_CV if eplb else EXPERT_LOAD_CV / np.sqrt(per_rank)
    return np.where(ep > 1, 1.0 + cv * expected_max_normal(ep), 1.0)


def imbalance_factor(m: Model, ep, spec=1.0):
    """The busiest EP rank's routed tokens / the mean for an ep_imbalance `spec` (arrays over ep): "routing" or
    "eplb" (routing_imbalance), else the number given; 1 where ep = 1."""
    ep = np.asarray(ep, float)
    if isinstance(spec, str):
        return routing_imbalance(m, ep, eplb=spec == "eplb")
    return np.where(ep > 1, float(spec), 1.0)


def transport(comm: str, phase: str) -> str:
    """The transport a pass of `phase` runs for the deployment's `comm`: DeepEP decodes with its low-latency
    kernels, one copy per expert ("fp8"); everything else as stated (module docstring)."""
    return "fp8" if comm == "deepep" and phase == "decode" else comm


def alltoall_parts(m: Model, hw, tokens, tp, ep, eff_link: float, *, imbalance=1.0, up_bw=None, span=None,
                   comm: str = "bf16"):
    """(dispatch, combine) time of one MoE layer (s) for a rank whose attention group holds `tokens` tokens; 0 where
    ep = 1 (tensor parallelism alone never dispatches tokens). span: the placement of the tp x ep chips. comm: how
    the tokens travel (EP_COMM, module docstring)."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    payload = ep_dispatch_bytes(m, tokens, tp)
    payload = payload * np.where(ep > 1, np.asarray(imbalance, float), 1.0)   # the busiest rank receives more
    p = tp * ep
    if comm == "bf16":
        disp = comb = coll.all_to_all(payload, p, hw, eff_link, up_bw=up_bw, span=span)
    else:
        out_scale = scaleout_copies_share(m, p, span, hw) if comm == "deepep" else 1.0
        disp = coll.all_to_all(payload * FP8_DISPATCH_BYTES / ACT_BYTES, p, hw, eff_link, up_bw=up_bw, span=span,
                               out_scale=out_scale)
        comb = coll.all_to_all(payload, p, hw, eff_link, up_bw=up_bw, span=span, out_scale=out_scale)
    return np.where(ep > 1, disp, 0.0), np.where(ep > 1, comb, 0.0)


def alltoall_s(m: Model, hw, tokens, tp, ep, eff_link: float, *, imbalance=1.0, up_bw=None, span=None,
               comm: str = "bf16"):
    """Dispatch + combine time of one MoE layer (s): alltoall_parts summed."""
    disp, comb = alltoall_parts(m, hw, tokens, tp, ep, eff_link, imbalance=imbalance, up_bw=up_bw, span=span,
                                comm=comm)
    return disp + comb


def overlap_compute(ops: dict, n_layers: int, slow=1.0):
    """(attention side, routed-expert side) compute of one MoE layer (s, per occurrence) from a pass's ops
    (forward.PassCost.ops), each op's compute leg x `slow` (the SMs the transfers hold, module docstring): core
    attention counts its per-layer share of the pass."""
    def t(op):
        return np.maximum(op.compute_s * slow, op.memory_s) if np.any(np.asarray(slow) != 1.0) else op.time_s
    a = sum(t(ops[k]) for k in ATTENTION_SIDE if k in ops)
    a = a + sum(t(ops[k]) * ops[k].count for k in CORE_ATTENTION if k in ops) / n_layers
    return a, sum(t(ops[k]) for k in EXPERT_SIDE if k in ops)


def overlap_exposed(a, e, disp, comb):
    """Per MoE layer, the time two micro-batches add to the layer's compute a + e (attention side, expert side) with
    the dispatch and combine `disp`, `comb` (all summed over both micro-batches): the shorter of the decode and the
    prefill schedule (module docstring) minus a + e, >= max(0, disp + comb - a - e)."""
    decode = e + np.maximum(a, disp + comb)
    prefill = 0.5 * (np.maximum(a, comb) + np.maximum(a, disp) + np.maximum(e, disp) + np.maximum(e, comb))
    return np.maximum(np.minimum(decode, prefill) - (a + e), 0.0)


def moe_layer_compute_s(ops: dict, n_layers: int):
    """Per-occurrence time of the non-communication work of one MoE layer, from a pass's ops: overlap_compute's two
    sides together."""
    a, e = overlap_compute(ops, n_layers)
    return a + e
