"""What a longer context costs: KV bytes, the batch/context trade in memory, and KV reads against weight reads.

The context where the KV read per decode step equals the weight read is where long-context price tiers begin to
make sense: past it, every extra token of context costs about as much as the model itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_BATCH, finite, int_arg
from tokenmath.engine.memory import max_batch
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token
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

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "batch": self.batch,
                "context": self.context, "kv_bytes_per_token": self.kv_bytes_per_token,
                "kv_bytes_per_sequence_at_context": finite(kv_bytes_per_sequence(su.model, self.context, su.precision.kv.bytes)),
                "max_batch_at_context": self.max_batch_at_context, "max_context_at_batch": self.max_context_at_batch,
                "crossover_context": self.crossover_context, "curve": self.curve}


def context(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, batch=1, context=8192,
            weight_dtype=None, kv_dtype=None, efficiency=None) -> Context:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency)
    batch = int_arg(batch, "batch", 1, MAX_BATCH)
    ctx = int_arg(context, "context")
    m, hw, lay, pr = su.model, su.hardware, su.layout, su.precision
    mb = lambda c: max_batch(m, hw.memory_bytes, lay, pr.weight.bytes, pr.expert.bytes, pr.kv.bytes, c, su.reserve)  # noqa: E731
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
    cross = np.nonzero(kvb >= wb)[0]
    crossover = int(curve_ctx[cross[0]]) if cross.size else None
    if crossover is None and m.n_full_layers:
        # KV per step grows linearly in the full layers: solve kv(c) = weights beyond the grid analytically
        per_tok = (kvb[-1] - kvb[-2]) / (curve_ctx[-1] - curve_ctx[-2]) if len(curve_ctx) > 1 else 0
        if per_tok > 0:
            crossover = int(curve_ctx[-1] + (wb[-1] - kvb[-1]) / per_tok)
    curve = [{"context": int(c), "decode_step_s": finite(step[i]), "kv_share": finite(kvb[i] / bw / step[i]),
              "weight_share": finite(wb[i] / bw / step[i]), "fits": bool(fits[i])}
             for i, c in enumerate(curve_ctx)]
    return Context(setup=su, batch=batch, context=ctx, kv_bytes_per_token=kv_bytes_per_token(m, pr.kv.bytes),
                   max_batch_at_context=int(mb(ctx)), max_context_at_batch=max_ctx, crossover_context=crossover,
                   curve=curve)
