"""Speculative decoding ("batching in time"): a cheap draft proposes k tokens, the target checks all of them in one
pass, and every verification step yields at least one token. Vectorized over batch and context like the rest of the
engine; every FLOP and byte comes from forward.forward_pass (one engine).

Step model (stated so it can be checked):
- expected tokens per verification step: the k drafts form a chain (position i is reached only if 1..i-1 were
  accepted), so with a_i the chance position i is accepted once reached
      E = 1 + sum_{i=1..k} prod_{j<=i} a_j
  A separate draft: one rate a at every position, E = (1 - a^(k+1)) / (1 - a) (Leviathan, Kalman & Matias 2023,
  "Fast Inference from Transformers via Speculative Decoding", ICML, eq. 1; E = k + 1 at a = 1). The MTP head run
  k times on its own output (DeepSeek-V3 ships one module): the rate falls with the position, as measured
  (mtp_acceptances below);
- one verification step = k draft decode steps + one target pass over k + 1 tokens per sequence (the k drafts and
  the bonus token): every weight is read once for (k + 1) x seqs tokens, the KV cache once per sequence, and the
  i-th of the k + 1 queries attends to the context plus i earlier drafted tokens;
- the draft: a separate model (any catalog model or config.json) laid on the target's tensor-parallel group, one
  copy per attention group (ep x dp), or the target's own MTP head (DeepSeek-V3 style: one transformer block of the
  target's shape plus the shared embedding and output head, laid out exactly like the target), run k times;
- each pass pays the fixed per-layer time (Efficiency.layer_overhead_s) of its own layers, as static_batch does;
  the serving engine's launch and CPU terms are left out on both sides of the comparison (graphs replay a decode
  step, and per-step CPU time is 0 until fitted: specs/serving_engines.py);
- the baseline is the plain decode step computed the same way (k = 0), so the comparison is like for like.
Invariants (tests/test_speculative.py): acceptance 0 never beats no speculation (E = 1 while the step only grows);
once the step is compute-bound the verification pass costs about (k + 1) x a plain step's FLOPs, so speculation
stops paying.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.engine.attended import decode_context
from tokenmath.engine.forward import PassCost, Precision, forward_pass
from tokenmath.engine.memory import (Memory, fixed_bytes, held_per_sequence_per_chip, kv_bytes_left, kv_capacity,
                                     kv_context, kv_per_chip, running_cap, usable_bytes, weights_per_chip)
from tokenmath.engine.static_batch import BatchCost
from tokenmath.mapping.layout import Layout
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

# DeepSeek-V3 Technical Report (arXiv:2412.19437), section 5.4.3: "the acceptance rate of the second token
# prediction ranges between 85% and 90% across various generation topics" (1 MTP module, 1.8x TPS). The midpoint,
# the MTP head's rate at the first drafted position:
MTP_ACCEPTANCE = 0.875

# The MTP head drafting k > 1 tokens, each from its own previous output ("autoregressive MTP", MTP Eagle): NVIDIA
# TensorRT-LLM tech blog 1, "Pushing Latency Boundaries: Optimizing DeepSeek-R1 Performance on NVIDIA B200 GPUs"
# (github.com/NVIDIA/TensorRT-LLM, docs/source/blogs/tech_blog/blog1_Pushing_Latency_Boundaries_Optimizing_
# DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md, section "MTP" > "Autoregressive MTP Layers", the table's
# "Acceptance Rate" column, which is the mean accepted length, 1.00 without MTP): DeepSeek-R1 FP4 on 8 x B200,
# batch 1, ISL/OSL 1k/2k, strict (top-1) acceptance, MTP 1..5:
MTP_ACCEPTED_LENGTHS = (1.92, 2.58, 2.82, 2.99, 3.01)
MTP_LENGTHS_SOURCE = ("NVIDIA TensorRT-LLM tech blog 1 'Pushing Latency Boundaries: Optimizing DeepSeek-R1 "
                      "Performance on NVIDIA B200 GPUs', table 'Autoregressive MTP Layers': accepted length "
                      "1.92 / 2.58 / 2.82 / 2.99 / 3.01 at MTP 1..5 (DeepSeek-R1 FP4, 8 x B200, batch 1)")


def chain_rates(lengths) -> tuple[float, ...]:
    """Per-position rates a_1..a_n of a draft chain from its mean accepted length A_k measured at k = 1..n.
    In a chain, A_k - A_(k-1) = prod_(j<=k) a_j (the chance that the first k drafts are all accepted; A_0 = 1), so
    a_k = (A_k - A_(k-1)) / (A_(k-1) - A_(k-2)), with A_(-1) = 0 (a_1 = A_1 - 1). Exact: the rates give back every
    measured length."""
    A = (0.0, 1.0) + tuple(float(x) for x in lengths)
    p = [A[i] - A[i - 1] for i in range(1, len(A))]      # p_0 = 1, p_k = prod_(j<=k) a_j
    return tuple(p[i] / p[i - 1] if p[i - 1] > 0 else 0.0 for i in range(1, len(p)))


# NVIDIA's lengths as per-position rates: 0.920, 0.717, 0.364, 0.708, 0.118 (p_k = 0.92, 0.66, 0.24, 0.17, 0.02;
# the table is rounded to 0.01 and measured on 10 requests, hence the uneven 3rd and 4th rates). Each position's
# rate relative to the first (1, 0.780, 0.395, 0.770, 0.128) is what carries over to another first-position rate:
MTP_MEASURED_RATES = chain_rates(MTP_ACCEPTED_LENGTHS)
MTP_POSITION_RATIOS = tuple(a / MTP_MEASURED_RATES[0] for a in MTP_MEASURED_RATES)
MTP_ACCEPTANCE_SOURCE = ("first drafted position: DeepSeek-V3 Technical Report (arXiv:2412.19437) sec. 5.4.3, "
                         "second-token acceptance 85-90%, midpoint 0.875; later positions: that rate x the ratios "
                         "a_i / a_1 of " + MTP_LENGTHS_SOURCE + "; none past the 5th")


def mtp_acceptances(first, k) -> tuple[float, ...]:
    """Per-position rates of the MTP head drafting k tokens: a_i = first x a_i / a_1 of NVIDIA's measured chain
    (MTP_POSITION_RATIOS); at first = 0.92 (NVIDIA's own first position) the measured lengths come back exactly.
    Past the 5th position nothing is published: those drafts are counted as never accepted (the 5th added 0.02
    tokens in NVIDIA's table), so a longer chain can cost more and never earns more than MTP 5."""
    a = float(first)
    n = len(MTP_POSITION_RATIOS)
    return tuple(min(a * MTP_POSITION_RATIOS[i], 1.0) if i < n else 0.0 for i in range(int(k)))


def chain_tokens(rates) -> float:
    """E = 1 + sum_i prod_(j<=i) a_j: the mean tokens a verification step yields when the drafts form a chain with
    per-position rates a_1..a_k (position i counts only if 1..i-1 were accepted; the + 1 is the target's own token).
    k + 1 at most; an extra position never lowers it; 1 when the first rate is 0."""
    e, p = 1.0, 1.0
    for a in rates:
        p *= float(a)
        e += p
    return e


def expected_tokens(acceptance, k):
    """E = (1 - a^(k+1)) / (1 - a): tokens a verification step yields on average when every position is accepted
    at the same rate a (a separate draft; k + 1 at a = 1). Arrays broadcast. The chain_tokens of (a,) * k."""
    a = np.asarray(acceptance, float)
    k = np.asarray(k, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a >= 1.0, k + 1.0, e)


def acceptances(acceptance: float, k: int, mtp: bool) -> tuple[float, ...]:
    """Per-position rates: the MTP head's fall with the position (mtp_acceptances, `acceptance` its first), a
    separate draft's one rate at every position."""
    return mtp_acceptances(acceptance, k) if mtp else (float(acceptance),) * int(k)


def tokens_per_step(acceptance: float, k: int, mtp: bool = False) -> float:
    """The mean tokens one verification step yields: the chain of the MTP head's per-position rates, or Leviathan's
    closed form for a separate draft (one rate throughout)."""
    if mtp:
        return chain_tokens(mtp_acceptances(acceptance, k))
    return float(expected_tokens(acceptance, k))


def mtp_head(m: Model) -> Model:
    """The target's MTP module as a one-layer model: one block of the target's shape (a MoE block where the target
    has MoE layers), with its embedding and output head (shared with the target, read again by the head's pass).
    The projection of [embedding; hidden] (2 d x d, 0.1 B params for DeepSeek-V3) is left out."""
    moe = m.n_moe_layers > 0
    return replace(m, id=f"{m.id}/mtp", name=f"{m.name} MTP head", n_layers=1,
                   first_dense_layers=0 if moe else m.first_dense_layers, moe_layer_step=1,
                   attention_pattern=("full",), ffn_layers=-1)


def draft_layout(lay: Layout, mtp: bool) -> Layout:
    """The MTP head sits on the target's layout; a separate draft on the target's tp group, one per attention
    group (ep x dp copies)."""
    if mtp:
        return lay
    return Layout(tp=lay.tp, pp=1, ep=1, dp=np.asarray(lay.dp) * np.asarray(lay.ep))


@dataclass(frozen=True)
class SpeculativeStep:
    """One verification step per attention group (arrays broadcast over the inputs). Times in s."""
    k: int
    acceptance: float
    tokens_per_step: np.ndarray   # E
    draft: PassCost               # one draft decode pass
    verify: PassCost              # the target's pass over k + 1 tokens per sequence
    plain: PassCost               # the target's plain decode pass (the baseline)
    draft_s: np.ndarray           # k draft passes, with their fixed per-layer time
    verify_s: np.ndarray          # the verification pass, with its fixed per-layer time
    plain_s: np.ndarray           # the plain decode step, with its fixed per-layer time

    @property
    def step_s(self):
        return self.draft_s + self.verify_s

    @property
    def per_token_s(self):
        """Seconds between a sequence's tokens: step / E."""
        return self.step_s / self.tokens_per_step

    @property
    def speedup(self):
        """Plain step / per-token time: > 1 where speculation pays."""
        return self.plain_s / self.per_token_s


def _draft_and_verify(m: Model, draft: Model, hw: Hardware, lay: Layout, prec: Precision, draft_prec: Precision,
                      eff: Efficiency, seqs, input_len, output_len, k: int, mtp: bool, opts: dict):
    """(one draft decode pass, the target's pass over k + 1 tokens per sequence, the plain target pass builder)."""
    cf, cs = decode_context(input_len, output_len, m.sliding_window)
    n = float(k) + 1.0
    tri = k * (k + 1) / 2.0          # the i-th of the k + 1 queries also attends to the i drafted tokens before it

    def target(tokens, extra):
        return forward_pass(m, hw, lay, prec, eff, phase="decode", seqs=seqs, new_tokens=tokens,
                            pairs_full=tokens * cf + extra, pairs_sliding=tokens * cs + extra,
                            kv_read_full=cf - 1, kv_read_sliding=cs - 1, **opts)
    verify = target(n, tri) if k > 0 else None
    dcf, dcs = decode_context(input_len, output_len, draft.sliding_window)
    dopts = opts if mtp else {k_: v for k_, v in opts.items() if k_ == "links"}
    dpass = forward_pass(draft, hw, draft_layout(lay, mtp), draft_prec, eff, phase="decode", seqs=seqs, new_tokens=1,
                         pairs_full=dcf, pairs_sliding=dcs, kv_read_full=dcf - 1, kv_read_sliding=dcs - 1, **dopts)
    return dpass, verify, target


def speculative_step(m: Model, draft: Model, hw: Hardware, lay: Layout, prec: Precision, draft_prec: Precision,
                     eff: Efficiency, seqs, input_len, output_len, k: int, acceptance: float, *, mtp: bool = False,
                     **opts) -> SpeculativeStep:
    """The step of `seqs` sequences per attention group at the mean context of the generation.
    opts: forward_pass's keywords for the target (ep_imbalance, ep_overlap, links, stage_seqs); the MTP head shares
    them (it is laid like the target), a separate dense draft uses none of the expert-parallel ones."""
    dpass, verify, target = _draft_and_verify(m, draft, hw, lay, prec, draft_prec, eff, seqs, input_len, output_len,
                                              k, mtp, opts)
    plain = target(1.0, 0.0)
    verify = plain if verify is None else verify
    return SpeculativeStep(k=int(k), acceptance=float(acceptance), tokens_per_step=tokens_per_step(acceptance, k, mtp),
                           draft=dpass, verify=verify, plain=plain,
                           draft_s=k * (dpass.time_s + dpass.overhead_s),
                           verify_s=verify.time_s + verify.overhead_s, plain_s=plain.time_s + plain.overhead_s)


@dataclass(frozen=True)
class SpeculativeDecode:
    """A served batch's decode with speculation (arrays of the BatchCost's shape). Times in s."""
    tokens_per_step: float      # E
    per_token_s: np.ndarray     # seconds between a sequence's tokens: (host + k drafts + verify) / E
    step_s: np.ndarray          # one verification step, host time included
    host_s: np.ndarray          # the plain step's time beyond its pass (PP hand-offs, engine launch/CPU): paid per step
    verify: PassCost


def speculative_decode(sv: BatchCost, m: Model, draft: Model, hw: Hardware, lay: Layout, prec: Precision,
                       draft_prec: Precision, eff: Efficiency, input_len, output_len, k: int, acceptance: float, *,
                       mtp: bool = False, **opts) -> SpeculativeDecode:
    """Speculation on a batch already served by static_batch.serve_batch (its sequences per group, its MoE stage
    tokens and its plain decode pass are reused, not recomputed). What the plain step spends beyond its pass and
    fixed per-layer time (pipeline hand-offs, the serving engine's launch and CPU terms) is paid once per
    verification step: per token = (host + k x draft + verify) / E.
    opts: forward_pass's keywords as given to serve_batch (ep_imbalance, ep_overlap, ep_comm, links)."""
    opts = dict(opts)
    if np.any(np.asarray(lay.ep) > 1):
        opts["stage_seqs"] = sv.stage_seqs
    s = sv.seqs_per_microbatch
    dpass, verify, _ = _draft_and_verify(m, draft, hw, lay, prec, draft_prec, eff, s, input_len, output_len, k, mtp,
                                         opts)
    host = np.maximum(sv.decode_step_s - (sv.decode.time_s + sv.decode.overhead_s), 0.0)
    step = host + k * (dpass.time_s + dpass.overhead_s) + verify.time_s + verify.overhead_s
    e = tokens_per_step(acceptance, k, mtp)
    shape = np.shape(sv.decode_step_s)
    return SpeculativeDecode(tokens_per_step=e, per_token_s=np.broadcast_to(step / e, shape),
                             step_s=np.broadcast_to(step, shape), host_s=np.broadcast_to(host, shape), verify=verify)


# DeepSeek-V3 MTP module (arXiv:2412.19437 sec. 2.2): h' = M [RMSNorm(h); RMSNorm(Emb(t))], M a d x 2d projection
MTP_PROJECTION_PARAMS_PER_D2 = 2


def draft_weights_per_chip(draft: Model, m: Model, lay: Layout, draft_prec: Precision, mtp: bool):
    """Weight bytes per chip the draft adds. A separate draft: all its weights on its tp group. The MTP head: its
    block and its d x 2d projection, laid like the target; the embedding and output head are the target's own
    (shared, DeepSeek-V3 sec. 2.2), so not held twice. DeepSeek-V3: 11.5 B block + 0.1 B projection (the Hugging
    Face checkpoint's 14 B MTP module also stores copies of the 0.93 B embedding and 0.93 B head)."""
    w = weights_per_chip(draft, draft_layout(lay, mtp), draft_prec.weight.bytes, draft_prec.expert.bytes)
    if not mtp:
        return w
    P = count_params(draft)
    tp, pp = np.asarray(lay.tp, float), np.asarray(lay.pp, float)
    shared = (P.embedding + P.lm_head) * draft_prec.weight.bytes / tp / pp
    proj = MTP_PROJECTION_PARAMS_PER_D2 * m.d_model ** 2 * draft_prec.weight.bytes / tp / pp
    return w - shared + proj


def draft_memory(draft: Model, m: Model, lay: Layout, draft_prec: Precision, batch, context, mtp: bool,
                 engine=None):
    """(weight bytes per chip, cache bytes per chip of `batch` sequences) the draft adds beside the target."""
    dl = draft_layout(lay, mtp)
    return (draft_weights_per_chip(draft, m, lay, draft_prec, mtp),
            kv_per_chip(draft, dl, draft_prec.kv.bytes, batch, kv_context(context, engine)))


def memory_with_draft(mem: Memory, draft: Model, m: Model, hw_memory_bytes: float, lay: Layout, prec: Precision,
                      draft_prec: Precision, batch, context, reserve: float, mtp: bool, engine=None) -> Memory:
    """The target's memory per chip (engine.memory.memory_per_chip) with the draft's weights and cache added; the
    usable bytes recomputed, since an engine's free-memory fraction is taken of what the weights leave."""
    dw, dkv = draft_memory(draft, m, lay, draft_prec, batch, context, mtp, engine)
    fixed = fixed_bytes(m, lay, prec.weight.bytes, prec.expert.bytes, hw_memory_bytes, engine, extra=dw)
    usable = usable_bytes(hw_memory_bytes, reserve, fixed, engine)
    return Memory(weights=mem.weights + dw, kv=mem.kv + dkv, activations=mem.activations, usable=usable)


def max_batch_with_draft(m: Model, draft: Model, hw_memory_bytes: float, lay: Layout, prec: Precision,
                         draft_prec: Precision, context, reserve: float, mtp: bool, engine=None):
    """engine.memory.max_batch with the draft's weights added to the fixed bytes and its cache to each sequence's
    (exact: memory is linear in sequences per group)."""
    dl = draft_layout(lay, mtp)
    groups = np.asarray(lay.dp, float) * np.asarray(lay.ep, float)
    ctx = kv_context(context, engine)
    # the draft's layout has ep x dp copies of the tp group: per chip it holds ceil(batch / (ep dp)) sequences too
    per_seq = (held_per_sequence_per_chip(m, lay, prec.kv.bytes, ctx)
               + held_per_sequence_per_chip(draft, dl, draft_prec.kv.bytes, ctx))
    fixed = fixed_bytes(m, lay, prec.weight.bytes, prec.expert.bytes, hw_memory_bytes, engine,
                        extra=draft_weights_per_chip(draft, m, lay, draft_prec, mtp))
    # ranks 1: the group's floor is not multiplied by attn_ranks here (max_batch does so under batch / dp
    # attention; the replica's kv_capacity_tokens counts a separate draft's cache tp times per rank instead); kept as
    # it was, so that outputs do not move
    return kv_capacity(kv_bytes_left(hw_memory_bytes, reserve, fixed, engine), per_seq, 1.0, groups,
                       running_cap(hw_memory_bytes, engine))
