"""Expert parallelism in one forward pass: which tokens reach a MoE layer, how many experts they touch, what an EP
rank dispatches, and the time of the dispatch + combine all-to-all (arrays broadcast).

Tokens. A replica's attention runs data-parallel over its ep groups; B sequences over dp x ep groups put
ceil(B / dp) on the busiest replica and ceil(B / (dp ep)) on its busiest group. Only the groups that hold
sequences route tokens, so the tokens that reach the replica's MoE layer in one pass are its own sequences' tokens,
min(ep x seqs per group, replica sequences per micro-batch) x new tokens each -- B at one replica, not
ceil(B / ep) x ep: with fewer sequences than groups the idle groups route nothing and cost nothing extra
(engine/static_batch.py passes stage_seqs; training fills every group, so the default is ep x seqs).

Experts touched. Each of T tokens picks k of E experts uniformly: E (1 - (1 - k/E)^T) distinct experts are read
(DeepSeek-V3, E = 256, k = 8: 8 at T = 1, 15.75 at T = 2, all 256 by T ~ 1,000). The busiest EP rank holds
ceil(E / ep) / E of them (layout.expert_share).

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
"""
from __future__ import annotations

import numpy as np

from statistics import NormalDist

from tokenmath.engine import collectives as coll
from tokenmath.specs.model import Model

# DeepSeek-R1 expert loads in serving (TensorRT-LLM tech blog 4, Table 1, without EPLB): sd 164.1 / mean 128 per slot
EXPERT_LOAD_CV = 164.1 / 128.0
# the same table with EPLB (9 slots per rank, EP32): sd 52.0 / mean 1,024 per rank
EPLB_RANK_CV = 52.0 / 1024.0

ACT_BYTES = 2.0  # activations in bf16 (the same figure as forward.ACT_BYTES)
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128   # e4m3 values + one fp32 scale per 128 (DeepEP's FP8 dispatch)
EP_COMM = ("bf16", "fp8", "deepep")
COMM_NOTE = {"bf16": "", "fp8": "; FP8 dispatch, bf16 combine, one copy per expert",
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


def alltoall_s(m: Model, hw, tokens, tp, ep, eff_link: float, *, imbalance=1.0, up_bw=None, span=None,
               comm: str = "bf16"):
    """Dispatch + combine time of one MoE layer (s) for a rank whose attention group holds `tokens` tokens; 0 where
    ep = 1 (tensor parallelism alone never dispatches tokens). span: the placement of the tp x ep chips. comm: how
    the tokens travel (EP_COMM, module docstring)."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    payload = ep_dispatch_bytes(m, tokens, tp)
    payload = payload * np.where(ep > 1, np.asarray(imbalance, float), 1.0)   # the busiest rank receives more
    p = tp * ep
    if comm == "bf16":
        t = 2 * coll.all_to_all(payload, p, hw, eff_link, up_bw=up_bw, span=span)
    else:
        out_scale = scaleout_copies_share(m, p, span, hw) if comm == "deepep" else 1.0
        disp = coll.all_to_all(payload * FP8_DISPATCH_BYTES / ACT_BYTES, p, hw, eff_link, up_bw=up_bw, span=span,
                               out_scale=out_scale)
        comb = coll.all_to_all(payload, p, hw, eff_link, up_bw=up_bw, span=span, out_scale=out_scale)
        t = disp + comb
    return np.where(ep > 1, t, 0.0)


def moe_layer_compute_s(ops: dict, n_layers: int):
    """Per-occurrence time of the non-communication work of one MoE layer (what a second micro-batch overlaps),
    from a pass's ops (forward.PassCost.ops)."""
    t = 0.0
    for name in ("attn_proj", "act_quant", "norms", "router", "topk", "moe_quant", "moe_permute", "experts",
                 "moe_down_quant", "moe_unpermute", "shared_experts"):
        if name in ops:
            t = t + ops[name].time_s
    att = 0.0
    for name in ("attention", "attention_local"):
        if name in ops:
            att = att + ops[name].total_s
    return t + att / n_layers
