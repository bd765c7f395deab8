"""What a longer context costs: KV bytes, the batch/context trade in memory, and KV reads against weight reads.

The context where the KV read per decode step equals the weight read is where long-context price tiers begin to
make sense: past it, every extra token of context costs about as much as the model itself. The KV a step reads grows
linearly with context (piecewise, where sliding windows stop growing), so that context is solved in closed form
(specs/kv_cache.context_holding) from one engine evaluation of the KV and weight bytes per step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_BATCH, finite, int_arg
from tokenmath.engine.memory import max_batch
from tokenmath.engine.static_batch import serve_batch
from tokenmath.engine.forward import decode_context
from tokenmath.specs.kv_cache import context_holding, kv_bytes_per_sequence, kv_bytes_per_token
from tokenmath.analyses.setup import Setup, setup


@dataclass(frozen=True)
class Context:
    setup: Setup
    batch: int
    context: int
    kv_bytes_per_token: float
    max_batch_at_context: int
    max_context_at_batch: int | None    # None: any context fits (every layer's KV is capped by its window)
    crossover_context: int | None       # tokens where the KV read per decode step equals the weight read
    curve: list[dict]
    notes: tuple[str, ...] = ()

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "engine": su.engine_dict,
                "batch": self.batch,
                "context": self.context, "kv_bytes_per_token": self.kv_bytes_per_token,
                "kv_bytes_per_sequence_at_context": finite(kv_bytes_per_sequence(su.model, self.context, su.precision.kv.bytes)),
                "max_batch_at_context": self.max_batch_at_context, "max_context_at_batch": self.max_context_at_batch,
                "crossover_context": self.crossover_context, "curve": self.curve, "notes": list(self.notes)}


def context(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, batch=1, context=8192,
            weight_dtype=None, kv_dtype=None, efficiency=None, engine=None) -> Context:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine)
    batch = int_arg(batch, "batch", 1, MAX_BATCH)
    ctx = int_arg(context, "context")
    m, hw, lay, pr = su.model, su.hardware, su.layout, su.precision
    mb = lambda c: max_batch(m, hw.memory_bytes, lay, pr.weight.bytes, pr.expert.bytes, pr.kv.bytes, c, su.reserve, engine=su.engine)  # noqa: E731
    grid = np.unique(np.round(np.geomspace(1, 1e8, 2000)))
    fits_b = mb(grid) >= batch
    if not fits_b.any():
        raise InputError("batch", f"batch {batch} fits at no context on {su.chips} x {hw.id}",
                         f"at most {int(mb(1))} sequences of 1 token fit; add chips or use a smaller dtype")
    max_ctx = int(grid[np.nonzero(fits_b)[0][-1]])
    if max_ctx >= 1e8:
        max_ctx = None  # windowed KV stops growing: any context fits
    curve_ctx = np.unique(np.round(np.geomspace(128, max(max_ctx or m.max_context or 131072, 256), 48)))
    sv = serve_batch(m, hw, lay, pr, su.efficiency, batch, curve_ctx, 1, su.reserve)
    step = np.asarray(sv.decode_step_s)
    kvb = np.broadcast_to(np.asarray(sv.decode.kv_bytes, float), step.shape)
    wb = np.broadcast_to(np.asarray(sv.decode.weight_bytes, float), step.shape)
    fits = np.broadcast_to(np.asarray(sv.fits), step.shape)
    bw = hw.memory_bw * su.efficiency.memory_bw
    crossover = _crossover(m, pr.kv.bytes, float(curve_ctx[-1]), float(kvb[-1]), float(wb[-1]))
    curve = [{"context": int(c), "decode_step_s": finite(step[i]), "kv_share": finite(kvb[i] / bw / step[i]),
              "weight_share": finite(wb[i] / bw / step[i]), "fits": bool(fits[i])}
             for i, c in enumerate(curve_ctx)]
    return Context(setup=su, batch=batch, context=ctx, kv_bytes_per_token=kv_bytes_per_token(m, pr.kv.bytes),
                   max_batch_at_context=int(mb(ctx)), max_context_at_batch=max_ctx, crossover_context=crossover,
                   curve=curve, notes=_notes(su, ctx, max_ctx, crossover, float(curve_ctx[-1])))


def _crossover(m, kv_dtype_bytes: float, c0: float, kv0: float, w0: float) -> int | None:
    """The context c where a decode step reads as many KV bytes as weight bytes, in closed form. The engine's step at
    context c0 read kv0 KV bytes and w0 weight bytes per chip; KV bytes per step are proportional to what one sequence
    holds at the tokens the step attends (decode_context: c + 1), weight bytes do not depend on c. So
    kv(c) = kv0 x seq(c + 1) / seq(c0 + 1), and kv(c) = w0 solves by inverting seq (piecewise linear)."""
    if kv0 <= 0:
        return None
    read0 = float(decode_context(c0, 1, m.sliding_window)[0])           # tokens attended in a full layer at c0
    target = float(kv_bytes_per_sequence(m, read0, kv_dtype_bytes)) * w0 / kv0
    tokens = context_holding(m, target, kv_dtype_bytes)
    return None if tokens is None else max(0, round(tokens - (read0 - c0)))


def _notes(su: Setup, ctx: int, max_ctx: int | None, crossover: int | None, curve_end: float) -> tuple[str, ...]:
    m = su.model
    notes = [su.engine_note, *su.hardware.caveats]
    pos = m.max_context
    if pos:
        beyond = [(f"context {ctx:,}", ctx)] + ([("max_context_at_batch", max_ctx)] if max_ctx else []) + \
                 ([(f"the crossover at {crossover:,} tokens", crossover)] if crossover else []) + \
                 [(f"the curve (up to {int(curve_end):,} tokens)", curve_end)]
        far = [name for name, v in beyond if v > pos]
        if far:
            notes.append(f"{', '.join(far)} {'lies' if len(far) == 1 else 'lie'} beyond the model's "
                         f"max_position_embeddings {pos:,}: it was not trained to attend that far; the figures there "
                         "are memory and bandwidth only")
    return tuple(notes)
