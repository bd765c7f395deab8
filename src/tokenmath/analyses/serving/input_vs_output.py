"""What an input token and an output token cost to serve, across context lengths, and why output costs more.

Prefill multiplies each weight by all B x L prompt tokens at once (compute-bound, near peak FLOP/s); decode
fetches every weight for only B tokens per step (bandwidth-bound). So an output token carries far more chip time.
A cached input token skips its prefill: its cost is keeping its KV bytes in HBM until it is reused (a share of the
chip's price in proportion to the HBM it occupies), not recomputing it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.validators import MAX_BATCH, finite, int_arg, pos_float
from tokenmath.engine.economics import (decode_cost_per_mtok, hbm_holding_cost_per_mtok, prefill_cost_per_mtok,
                                        usd_per_s)
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.analyses.setup import Setup, setup

DEFAULT_CONTEXTS = (256, 1024, 4096, 16384, 65536, 131072)


@dataclass(frozen=True)
class Prices:
    setup: Setup
    rows: list[dict]      # one per context length: input, output and cached-input cost per Mtok
    cache_ttl_s: float    # how long a cached prompt's KV stays in HBM, s

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "cache_ttl_s": self.cache_ttl_s,
                "price_usd_per_chip_hour": su.hardware.price_usd_per_hour, "rows": self.rows}


def prices(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, contexts=None, output_len=256,
           batch=None, cache_ttl_s=300.0, weight_dtype=None, kv_dtype=None, efficiency=None) -> Prices:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency)
    output_len = int_arg(output_len, "output_len")
    ttl = pos_float(cache_ttl_s, "cache_ttl_s")
    ctx = np.array([int_arg(c, "contexts") for c in (contexts or DEFAULT_CONTEXTS)], float)
    probe = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, 1, ctx, output_len, su.reserve)
    bmax = np.asarray(probe.max_batch, float)
    B = np.minimum(bmax, int_arg(batch, "batch", 1, MAX_BATCH)) if batch is not None else bmax
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, np.maximum(B, 1), ctx, output_len,
                     su.reserve)
    chips = su.chips
    rate = su.usd_per_chip_s
    unit = "$/Mtok" if rate is not None else "chip-s/Mtok"
    # unpriced chips: the same formulas at $1 per chip-second give chip-seconds per Mtok
    usd_s = usd_per_s(chips, su.hardware.price_usd_per_hour) if rate is not None else float(chips)
    per_in = prefill_cost_per_mtok(usd_s, np.asarray(sv.ttft_s), np.maximum(B, 1), ctx)
    per_out = decode_cost_per_mtok(usd_s, np.asarray(sv.decode_step_s), np.maximum(B, 1))
    kvb = kv_bytes_per_token(su.model, su.precision.kv.bytes)
    cached = hbm_holding_cost_per_mtok(kvb, ttl, rate if rate is not None else 1.0, su.hardware.memory_bytes)
    rows = []
    for i, c in enumerate(ctx):
        ok = bool(B[i] >= 1 and np.asarray(sv.fits)[i])
        fmt = (lambda v: f"${v:.4g}/Mtok") if rate is not None else (lambda v: f"{v:.4g} chip-s/Mtok")
        rows.append({"input_len": int(c), "output_len": output_len, "batch": int(B[i]), "fits": ok,
                     "cost_per_mtok_input": finite(per_in[i]) if ok else None,
                     "cost_per_mtok_output": finite(per_out[i]) if ok else None,
                     "output_input_ratio": finite(per_out[i] / per_in[i]) if ok else None,
                     "cost_per_mtok_cached_input": finite(cached) if ok else None,
                     "unit": unit, "bottleneck_prefill": str(np.asarray(sv.prefill.bottleneck)[i]),
                     "bottleneck_decode": str(np.asarray(sv.decode.bottleneck)[i]),
                     "input_label": fmt(per_in[i]), "output_label": fmt(per_out[i]), "cached_label": fmt(cached)})
    return Prices(setup=su, rows=rows, cache_ttl_s=ttl)
