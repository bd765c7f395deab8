"""What an input token and an output token cost to serve, across context lengths, and why output costs more.

Prefill multiplies each weight by all B x L prompt tokens at once (compute-bound, near peak FLOP/s); decode
fetches every weight for only B tokens per step (bandwidth-bound). So an output token carries far more chip time.
A cached input token skips its prefill: its cost is keeping its KV bytes in HBM until it is reused (a share of the
chip's price in proportion to the HBM it occupies), not recomputing it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.static_batch import serve
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.analyses.setup import Setup, setup
from tokenmath.base.validators import MAX_BATCH, finite, int_arg, pos_float

DEFAULT_CONTEXTS = (256, 1024, 4096, 16384, 65536, 131072)


@dataclass
class Prices:
    setup: Setup
    rows: list[dict]
    cache_ttl_s: float

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "cache_ttl_s": self.cache_ttl_s,
                "price_usd_per_chip_hour": su.hardware.price_usd_per_hour, "rows": self.rows}

    def explain(self):
        su = self.setup
        L = [f"Cost of input vs output tokens: {su.model.name} on {su.chips} x {su.hardware.id}"]
        for r in self.rows:
            if not r["fits"]:
                L.append(f"  context {r['input_len']:>7,}: does not fit at batch 1")
                continue
            L.append(f"  context {r['input_len']:>7,}, batch {r['batch']:>4}: input {r['input_label']}, output {r['output_label']}"
                     f" -> output/input = {r['output_input_ratio']:.1f}x; cached input {r['cached_label']}")
        L.append("  why: prefill runs each weight against B x L tokens (compute-bound); decode fetches every weight "
                 "for B tokens per step (memory-bound), so each output token holds the chip far longer.")
        L.append(f"  cached input = KV bytes per token x TTL {self.cache_ttl_s:g} s x chip $/s / chip HBM bytes "
                 "(the HBM it occupies until reuse), vs recomputing it at the input price")
        return "\n".join(L)


def prices(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, contexts=None, output_len=256,
           batch=None, cache_ttl_s=300.0, weight_dtype=None, kv_dtype=None, efficiency=None) -> Prices:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency)
    output_len = int_arg(output_len, "output_len")
    ttl = pos_float(cache_ttl_s, "cache_ttl_s")
    ctx = np.array([int_arg(c, "contexts") for c in (contexts or DEFAULT_CONTEXTS)], float)
    probe = serve(su.model, su.hardware, su.layout, su.precision, su.efficiency, 1, ctx, output_len, su.reserve)
    bmax = np.asarray(probe.max_batch, float)
    B = np.minimum(bmax, int_arg(batch, "batch", 1, MAX_BATCH)) if batch is not None else bmax
    sv = serve(su.model, su.hardware, su.layout, su.precision, su.efficiency, np.maximum(B, 1), ctx, output_len, su.reserve)
    chips = su.chips
    rate = su.usd_per_chip_s
    unit = "$/Mtok" if rate is not None else "chip-s/Mtok"
    r = rate if rate is not None else 1.0
    per_in = chips * r * np.asarray(sv.ttft_s) / (np.maximum(B, 1) * ctx) * 1e6
    per_out = chips * r * np.asarray(sv.decode_step_s) / np.maximum(B, 1) * 1e6
    kvb = kv_bytes_per_token(su.model, su.precision.kv.bytes)
    cached = kvb * ttl * r / su.hardware.memory_bytes * 1e6
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
    return Prices(su, rows, ttl)
