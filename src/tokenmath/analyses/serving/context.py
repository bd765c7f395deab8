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
from tokenmath.engine.economics import decode_cost_per_mtok, usd_per_s
from tokenmath.engine.memory import max_batch
from tokenmath.engine.static_batch import serve_batch
from tokenmath.engine.forward import decode_context
from tokenmath.specs.kv_cache import (context_holding, kv_bytes_per_sequence, kv_bytes_per_token,
                                      state_bytes_per_sequence)
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, setup


@dataclass(frozen=True)
class Context:
    setup: Setup
    batch: int
    context: int
    kv_bytes_per_token: float
    state_bytes_per_sequence: float     # recurrent layers' fixed state (0 without them), whatever the context
    max_batch_at_context: int
    max_context_at_batch: int | None    # None: any context fits (every layer's KV is capped by its window)
    crossover_context: int | None       # tokens where the KV read per decode step equals the weight read
    curve: list[dict]
    decode_step_s_at_context: float = 0.0    # one decode step of `batch` sequences at `context` tokens
    decode_usd_per_mtok_at_context: float | None = None   # that step's $ per million output tokens (None: no price)
    fits_at_context: bool = True
    notes: tuple[str, ...] = ()

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "engine": su.engine_dict,
                "batch": self.batch,
                "context": self.context, "kv_bytes_per_token": self.kv_bytes_per_token,
                **({"state_bytes_per_sequence": self.state_bytes_per_sequence} if self.state_bytes_per_sequence else {}),
                "kv_bytes_per_sequence_at_context": finite(kv_bytes_per_sequence(su.model, self.context, su.precision.kv.bytes)),
                "max_batch_at_context": self.max_batch_at_context, "max_context_at_batch": self.max_context_at_batch,
                "crossover_context": self.crossover_context,
                "decode_step_s_at_context": finite(self.decode_step_s_at_context),
                "decode_cost_per_mtok_at_context_usd": finite(self.decode_usd_per_mtok_at_context),
                "fits_at_context": self.fits_at_context, "curve": self.curve, "notes": list(self.notes),
                **what_if_dict(su.hardware)}


def context(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, batch=1, context=8192,
            weight_dtype=None, kv_dtype=None, efficiency=None, engine=None, max_running=None, what_if=()) -> Context:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, max_running=max_running, what_if=what_if)
    batch = int_arg(batch, "batch", 1, MAX_BATCH)
    ctx = int_arg(context, "context")
    m, hw, lay, pr = su.model, su.hardware, su.layout, su.precision
    mb = lambda c: max_batch(m, hw.memory_bytes, lay, pr.weight.bytes, pr.expert.bytes, pr.kv.bytes, c, su.reserve, engine=su.engine)  # noqa: E731
    grid = np.unique(np.round(np.geomspace(1, 1e8, 2000)))
    fits_b = mb(grid) >= batch
    if not fits_b.any() and int(mb(1)) < 1:
        raise InputError("chips", f"the weights of {m.id} leave no room for a KV cache on {su.chips} x {hw.id}",
                         "more --chips, a smaller --weight-dtype, or a chip with more memory")
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
    if m.n_linear_layers or m.is_sparse_attention or m.has_full_shapes:   # Gemma 4: kinds shard apart
        crossover = _crossover_scanned(su, batch)
    else:
        crossover = _crossover(m, pr.kv.bytes, float(curve_ctx[-1]), float(kvb[-1]), float(wb[-1]))
    at = serve_batch(m, hw, lay, pr, su.efficiency, batch, np.asarray([float(ctx)]), 1, su.reserve)
    step_at = float(np.ravel(at.decode_step_s)[0])
    usd_s = usd_per_s(su.chips, hw.price_usd_per_hour)
    curve = [{"context": int(c), "decode_step_s": finite(step[i]), "kv_share": finite(kvb[i] / bw / step[i]),
              "weight_share": finite(wb[i] / bw / step[i]), "fits": bool(fits[i])}
             for i, c in enumerate(curve_ctx)]
    return Context(setup=su, batch=batch, context=ctx, kv_bytes_per_token=kv_bytes_per_token(m, pr.kv.bytes),
                   state_bytes_per_sequence=state_bytes_per_sequence(m),
                   max_batch_at_context=int(mb(ctx)), max_context_at_batch=max_ctx, crossover_context=crossover,
                   curve=curve, decode_step_s_at_context=step_at,
                   decode_usd_per_mtok_at_context=None if usd_s is None else float(decode_cost_per_mtok(usd_s, step_at, batch)),
                   fits_at_context=bool(np.ravel(at.fits)[0]), notes=_notes(su, ctx, max_ctx, crossover, float(curve_ctx[-1])))


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


def _crossover_scanned(su: Setup, batch: int) -> int | None:
    """The crossover for models whose cache reads are not proportional to what a sequence holds: a hybrid's
    recurrent state is read whole at any context, and a sparse-attention model reads every index key but only the
    top-k latents. The engine's KV and weight bytes per decode step on a log grid of contexts (one call); KV bytes are
    piecewise linear in the context, so interpolating between the grid points around the crossing is exact within a
    piece."""
    grid = np.unique(np.round(np.geomspace(1, 1e8, 400)))
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, batch, grid, 1, su.reserve)
    kv = np.broadcast_to(np.asarray(sv.decode.kv_bytes, float), grid.shape)
    w = np.broadcast_to(np.asarray(sv.decode.weight_bytes, float), grid.shape)
    over = np.nonzero(kv >= w)[0]
    if not over.size:
        return None
    i = int(over[0])
    if i == 0:
        return int(grid[0])
    f0, f1 = kv[i - 1] - w[i - 1], kv[i] - w[i]
    return round(float(grid[i - 1] + (grid[i] - grid[i - 1]) * -f0 / (f1 - f0)))


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
