"""Speculative decoding and multi-token prediction: tokens/s per user and $/Mtok with and without, at given batches.

The step comes from engine/speculative.py (one engine); this module resolves the question (models, layout, dtypes,
the speculation's settings and their defaults), checks memory with the draft's weights and KV added, and turns
seconds into $ through engine/economics.py. Its text is faces/explain_speculative.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_BATCH, finite, int_arg
from tokenmath.engine.economics import decode_cost_per_mtok, usd_per_s
from tokenmath.engine.memory import memory_per_chip
from tokenmath.engine.forward import Precision
from tokenmath.engine.speculative import (MTP_ACCEPTANCE, MTP_ACCEPTANCE_SOURCE, MTP_LENGTHS_SOURCE, acceptances,
                                          memory_with_draft, mtp_head, speculative_step, tokens_per_step)
from tokenmath.specs.model import Model
from tokenmath.analyses.setup import resolve_precision, setup
from tokenmath.specs.model_catalog import get_model

MAX_K = 16


@dataclass(frozen=True)
class Speculation:
    """What the user asked for: a draft model (catalog id or config path) or the target's MTP head, k tokens
    drafted per step, and the acceptance rate with where it comes from. A separate draft's rate holds at every
    position; the MTP head's is its first position's, and later positions fall as NVIDIA measured
    (engine.speculative.mtp_acceptances: a given --acceptance scales them alike)."""
    draft: str | None
    k: int
    acceptance: float
    mtp: bool
    acceptance_source: str

    @property
    def acceptances(self) -> tuple[float, ...]:
        """The rate at each drafted position, 1..k (a chain: position i counts only if 1..i-1 were accepted)."""
        return acceptances(self.acceptance, self.k, self.mtp)

    @property
    def tokens_per_step(self) -> float:
        """E = 1 + sum_i prod_(j<=i) a_j: mean tokens per verification step."""
        return tokens_per_step(self.acceptance, self.k, self.mtp)

    def to_dict(self) -> dict:
        return {"draft": self.draft, "mtp": self.mtp, "k": self.k, "acceptance": self.acceptance,
                "acceptance_by_position": [round(a, 6) for a in self.acceptances],
                "acceptance_source": self.acceptance_source}


def speculation(draft=None, k=None, acceptance=None, mtp=None) -> Speculation | None:
    """Check the options: --draft MODEL --spec-k K --acceptance A, or --mtp K [--acceptance A]; None: neither."""
    if draft is None and mtp is None:
        if k is not None or acceptance is not None:
            raise InputError("spec_k" if k is not None else "acceptance", "given without a draft",
                             "--draft MODEL (a separate draft model) or --mtp K (the model's own MTP heads)")
        return None
    if draft is not None and mtp is not None:
        raise InputError("mtp", "given with --draft", "one of --draft MODEL or --mtp K")
    if mtp is not None:
        k = int_arg(mtp, "mtp", 1, MAX_K)
    else:
        k = int_arg(4 if k is None else k, "spec_k", 1, MAX_K)
    if acceptance is None:       # MTP: DeepSeek's first-position rate, later positions as NVIDIA measured
        if draft is not None:
            raise InputError("acceptance", "missing: a draft model's acceptance depends on the pair and the task, "
                             "and no default is published for it", "a rate in [0, 1], e.g. --acceptance 0.7")
        return Speculation(None, k, MTP_ACCEPTANCE, True, MTP_ACCEPTANCE_SOURCE)
    try:
        a = float(acceptance)
    except (TypeError, ValueError):
        raise InputError("acceptance", f"{acceptance!r} is not a number", "a rate in [0, 1]") from None
    if not 0.0 <= a <= 1.0:
        raise InputError("acceptance", f"{a:g} is out of range", "a rate in [0, 1] (the chance a drafted token is kept)")
    src = ("given (first drafted position; later positions x the ratios a_i / a_1 of "
           f"{MTP_LENGTHS_SOURCE}; none past the 5th)" if mtp is not None else "given")
    return Speculation(None if mtp is not None else str(draft), k, a, mtp is not None, src)


@dataclass(frozen=True)
class Draft:
    """A Speculation resolved against its target: the draft model (or the MTP head as a one-layer model) and its
    dtypes. What grid.evaluate and speculative() hand to engine/speculative.py."""
    spec: Speculation
    model: Model
    precision: Precision

    def to_dict(self) -> dict:
        return {"draft_model": self.model.id, **self.spec.to_dict(),
                "tokens_per_step": finite(self.spec.tokens_per_step)}


def resolve_draft(spec: Speculation | None, m: Model, prec: Precision, weight_dtype=None, kv_dtype=None) -> Draft | None:
    """The draft of `spec` for target `m` in dtypes `prec` (None: no speculation). The MTP head has the target's
    dtypes; a separate draft its own native ones (or the ones asked for) and must share the vocabulary."""
    if spec is None:
        return None
    if not isinstance(spec, Speculation):
        raise InputError("speculation", "missing", "speculation(draft=..., k=..., acceptance=...) or mtp=K")
    if spec.mtp:
        return Draft(spec, mtp_head(m), prec)
    d = get_model(spec.draft)
    if d.vocab_size != m.vocab_size:
        raise InputError("draft", f"{d.id} has a vocabulary of {d.vocab_size:,}, {m.id} of {m.vocab_size:,}",
                         "a draft that shares the target's tokenizer (same vocab_size)")
    return Draft(spec, d, resolve_precision(d, weight_dtype, kv_dtype))


def speculation_notes(draft: Draft | None) -> list[str]:
    """What a grid question (pareto, plan, fleet, slowmode) says when it decodes with speculation."""
    if draft is None:
        return []
    sp = draft.spec
    what = f"{sp.k} MTP token(s)" if sp.mtp else f"draft {draft.model.id}, k = {sp.k}"
    acc = (f"acceptance {', '.join(f'{a:.3g}' for a in sp.acceptances)} by position" if sp.mtp and sp.k > 1
           else f"acceptance {sp.acceptance:g}")
    return [f"speculative decoding ({what}, {acc}): a user's speed and $/Mtok are per token, "
            "(engine host time + k draft steps + the verification pass) / E; the draft's weights and cache are in "
            "memory; its own prefill is left out of TTFT; pipeline-parallel layouts are not searched"]


@dataclass(frozen=True)
class SpeculativeResult:
    """Per batch (arrays): the plain decode and the speculative one. Times in s, costs in $ per Mtok output."""
    model: str
    hardware: str
    draft: str
    spec: Speculation
    layout: str
    chips: int
    input_len: int
    output_len: int
    batch: np.ndarray
    tokens_per_step: float
    plain_step_s: np.ndarray
    draft_s: np.ndarray
    verify_s: np.ndarray
    per_token_s: np.ndarray
    fits: np.ndarray
    verify_bottleneck: tuple[str, ...]
    usd_per_s: float | None
    notes: tuple[str, ...] = ()

    @property
    def step_s(self):
        return self.draft_s + self.verify_s

    @property
    def speedup(self):
        return self.plain_step_s / self.per_token_s

    def cost(self, step_s):
        return None if self.usd_per_s is None else decode_cost_per_mtok(self.usd_per_s, step_s, self.batch)

    def to_dict(self) -> dict:
        def lst(x):
            return None if x is None else [finite(v) for v in np.asarray(x, float)]
        fits = [bool(f) for f in self.fits]

        def fit(x):
            return None if x is None else [v if f else None for v, f in zip(lst(x), fits)]
        return {"model": self.model, "hardware": self.hardware, "draft_model": self.draft, **self.spec.to_dict(),
                "layout": self.layout, "chips": self.chips, "input_len": self.input_len,
                "output_len": self.output_len, "tokens_per_step": finite(self.tokens_per_step),
                "batch": [int(b) for b in self.batch], "fits": fits,
                "plain_step_s": lst(self.plain_step_s), "draft_s": lst(self.draft_s), "verify_s": lst(self.verify_s),
                "step_s": lst(self.step_s), "per_token_s": lst(self.per_token_s), "speedup": lst(self.speedup),
                "output_tokens_per_s_per_user_plain": fit(1.0 / self.plain_step_s),
                "output_tokens_per_s_per_user": fit(1.0 / self.per_token_s),
                "cost_per_mtok_output_usd_plain": fit(self.cost(self.plain_step_s)),
                "cost_per_mtok_output_usd": fit(self.cost(self.per_token_s)),
                "verify_bottleneck": list(self.verify_bottleneck), "notes": list(self.notes)}


def speculative(model, hardware, spec: Speculation, *, batches=(1,), chips=None, tp=None, ep=None, dp=None,
                input_len=1024, output_len=256, weight_dtype=None, kv_dtype=None, efficiency=None, engine=None,
                reserve=None, **knobs) -> SpeculativeResult:
    """The plain and the speculative decode step of `model` on `hardware` at each batch in `batches`.
    knobs: the deployment's (analyses.setup.with_deployment_knobs): its chip's what-if figures and price, and the
    expert-parallel transport every pass runs with."""
    if not isinstance(spec, Speculation):
        raise InputError("speculation", "missing", "speculation(draft=..., k=..., acceptance=...) or mtp=K")
    input_len = int_arg(input_len, "input_len")
    output_len = int_arg(output_len, "output_len")
    bs = np.array([int_arg(b, "batch", 1, MAX_BATCH) for b in np.atleast_1d(batches)], float)
    su = setup(model, hardware, chips=chips, tp=tp, ep=ep, dp=dp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
               efficiency=efficiency, reserve=reserve, engine=engine, **knobs)
    m, hw, lay, prec, eff = su.model, su.hardware, su.layout, su.precision, su.efficiency
    dr = resolve_draft(spec, m, prec, weight_dtype, kv_dtype)
    d, dprec = dr.model, dr.precision
    ep_, dp_ = float(lay.ep), float(lay.dp)
    s = np.ceil(bs / (dp_ * ep_))
    opts = su.transport.kw()
    if ep_ > 1:
        opts["stage_seqs"] = np.minimum(ep_ * s, np.ceil(bs / dp_))
    st = speculative_step(m, d, hw, lay, prec, dprec, eff, s, input_len, output_len, spec.k, spec.acceptance,
                          mtp=spec.mtp, **opts)
    ctx = input_len + output_len
    eng = eff.engine
    mem = memory_per_chip(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, bs, ctx,
                          s * input_len, su.reserve, engine=eng)
    notes = []
    # the draft's weights and cache share the chips with the target
    mem = memory_with_draft(mem, d, m, hw.memory_bytes, lay, prec, dprec, bs, ctx, su.reserve, spec.mtp, eng)
    if spec.mtp:
        notes.append("the MTP head's block, projection and one layer of cache are counted in memory; its embedding "
                     "and output head are the model's own")
    fits = mem.fits & (bs >= 1)
    if spec.mtp and spec.k > 1:
        rates = ", ".join(f"{a:.3g}" for a in spec.acceptances)
        notes.append(f"{spec.k} MTP tokens: one head run {spec.k} times on its own output, accepted at {rates} by "
                     "position (a chain: E = 1 + sum of the running products); the fall with the position is "
                     "NVIDIA's measured one (TensorRT-LLM tech blog 1, DeepSeek-R1 on 8 x B200)"
                     + ("; nothing is credited past the 5th position (none published)" if spec.k > 5 else ""))
    notes.append("engine launch and per-step CPU terms are left out of both the plain and the speculative step")
    vb = np.broadcast_to(np.asarray(st.verify.bottleneck), bs.shape)
    return SpeculativeResult(m.id, hw.id, d.id, spec,
                             f"tp={int(lay.tp)} pp={int(lay.pp)} ep={int(lay.ep)} dp={int(lay.dp)}", su.chips,
                             input_len, output_len, bs, float(st.tokens_per_step),
                             np.broadcast_to(st.plain_s, bs.shape), np.broadcast_to(st.draft_s, bs.shape),
                             np.broadcast_to(st.verify_s, bs.shape), np.broadcast_to(st.per_token_s, bs.shape),
                             np.broadcast_to(fits, bs.shape), tuple(str(x) for x in vb),
                             usd_per_s(su.chips, hw.price_usd_per_hour), tuple(notes))
