"""What a longer context costs: KV bytes, the batch/context trade in memory, and KV reads against weight reads.

The context where the KV read per decode step equals the weight read is where long-context price tiers begin to
make sense: past it, every extra token of context costs about as much as the model itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.memory import max_batch
from tokenmath.engine.static_batch import serve
from tokenmath.base.errors import InputError
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token, kv_values_per_token_per_layer
from tokenmath.base import units as u
from tokenmath.analyses.setup import Setup, setup
from tokenmath.base.validators import MAX_BATCH, finite, int_arg


@dataclass
class Context:
    setup: Setup
    batch: int
    context: int
    kv_bytes_per_token: float
    max_batch_at_context: int
    max_context_at_batch: int | None
    crossover_context: int | None
    curve: list[dict]

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "batch": self.batch,
                "context": self.context, "kv_bytes_per_token": self.kv_bytes_per_token,
                "kv_bytes_per_sequence_at_context": finite(kv_bytes_per_sequence(su.model, self.context, su.precision.kv.bytes)),
                "max_batch_at_context": self.max_batch_at_context, "max_context_at_batch": self.max_context_at_batch,
                "crossover_context": self.crossover_context, "curve": self.curve}

    def explain(self):
        su = self.setup
        m = su.model
        how = (f"MLA latent (kv_lora {m.kv_lora_rank} + rope {m.qk_rope_head_dim})" if m.is_mla
               else f"2 x {m.kv_heads} KV heads x {m.hd}")
        L = [f"Context costs for {m.name} on {su.chips} x {su.hardware.id} ({su.precision.kv.name} KV)"]
        L.append(f"  KV per token = {how} = {kv_values_per_token_per_layer(m)} values x {m.n_layers} layers x "
                 f"{su.precision.kv.bytes:g} B = {u.bytes_(self.kv_bytes_per_token)}"
                 + (f"; {m.n_sliding_layers} sliding layers stop growing at {m.sliding_window} tokens" if m.n_sliding_layers else ""))
        mc = (f"at most {self.max_context_at_batch:,} tokens of context" if self.max_context_at_batch
              else "any context (every layer's KV is capped by its window)")
        L.append(f"  at {self.context:,} tokens: at most {self.max_batch_at_context} sequences fit; at batch {self.batch}: {mc}")
        if self.crossover_context:
            L.append(f"  KV read per decode step equals the weight read at ~{self.crossover_context:,} tokens of context "
                     f"(batch {self.batch}): beyond it, context, not model size, drives the cost"
                 + (" (beyond what fits at this batch)" if self.max_context_at_batch and self.crossover_context > self.max_context_at_batch else ""))
        else:
            L.append(f"  KV reads stay below weight reads at batch {self.batch} over the range evaluated")
        return "\n".join(L)


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
    sv = serve(m, hw, lay, pr, su.efficiency, batch, curve_ctx, 1, su.reserve)
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
    return Context(su, batch, ctx, kv_bytes_per_token(m, pr.kv.bytes), int(mb(ctx)), max_ctx, crossover, curve)
