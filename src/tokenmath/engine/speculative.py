"""Speculative decoding ("batching in time"): a cheap draft proposes k tokens, the target checks all of them in one
pass, and every verification step yields at least one token. Vectorized over batch and context like the rest of the
engine; every FLOP and byte comes from forward.forward_pass (one engine).

Step model (stated so it can be checked):
- expected tokens per verification step with a per-token acceptance rate a and k drafted tokens
      E = (1 - a^(k+1)) / (1 - a)        (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via
                                          Speculative Decoding", ICML, eq. 1; E = k + 1 at a = 1)
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
from tokenmath.mapping.layout import Layout
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model

# DeepSeek-V3 Technical Report (arXiv:2412.19437), section 5.4.3: "the acceptance rate of the second token
# prediction ranges between 85% and 90% across various generation topics" (1 MTP module, 1.8x TPS). The midpoint:
MTP_ACCEPTANCE = 0.875
MTP_ACCEPTANCE_SOURCE = ("DeepSeek-V3 Technical Report (arXiv:2412.19437) sec. 5.4.3: second-token acceptance "
                         "85-90%; midpoint 0.875")


def expected_tokens(acceptance, k):
    """E = (1 - a^(k+1)) / (1 - a): tokens a verification step yields on average (k + 1 at a = 1). Arrays broadcast."""
    a = np.asarray(acceptance, float)
    k = np.asarray(k, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a >= 1.0, k + 1.0, e)


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


def speculative_step(m: Model, draft: Model, hw: Hardware, lay: Layout, prec: Precision, draft_prec: Precision,
                     eff: Efficiency, seqs, input_len, output_len, k: int, acceptance: float, *, mtp: bool = False,
                     **opts) -> SpeculativeStep:
    """The step of `seqs` sequences per attention group at the mean context of the generation.
    opts: forward_pass's keywords for the target (ep_imbalance, ep_overlap, links, stage_seqs); the MTP head shares
    them (it is laid like the target), a separate dense draft uses none of the expert-parallel ones."""
    cf, cs = decode_context(input_len, output_len, m.sliding_window)
    n = float(k) + 1.0
    tri = k * (k + 1) / 2.0          # the i-th of the k + 1 queries also attends to the i drafted tokens before it

    def target(tokens, extra):
        return forward_pass(m, hw, lay, prec, eff, phase="decode", seqs=seqs, new_tokens=tokens,
                            pairs_full=tokens * cf + extra, pairs_sliding=tokens * cs + extra,
                            kv_read_full=cf - 1, kv_read_sliding=cs - 1, **opts)
    plain = target(1.0, 0.0)
    verify = plain if k == 0 else target(n, tri)
    dcf, dcs = decode_context(input_len, output_len, draft.sliding_window)
    dopts = opts if mtp else {k_: v for k_, v in opts.items() if k_ == "links"}
    dpass = forward_pass(draft, hw, draft_layout(lay, mtp), draft_prec, eff, phase="decode", seqs=seqs, new_tokens=1,
                         pairs_full=dcf, pairs_sliding=dcs, kv_read_full=dcf - 1, kv_read_sliding=dcs - 1, **dopts)
    return SpeculativeStep(k=int(k), acceptance=float(acceptance), tokens_per_step=expected_tokens(acceptance, k),
                           draft=dpass, verify=verify, plain=plain,
                           draft_s=k * (dpass.time_s + dpass.overhead_s),
                           verify_s=verify.time_s + verify.overhead_s, plain_s=plain.time_s + plain.overhead_s)
