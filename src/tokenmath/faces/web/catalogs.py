"""The catalogs as JSON bytes (GET /api/models, GET /api/hardware), built once per process."""
from __future__ import annotations

from functools import cache

from tokenmath.base.errors import InputError
from tokenmath.faces.web.payload import dumps


@cache
def models_json() -> bytes:
    """Every catalog model: id, name, parameter counts, KV bytes per token in bf16, largest context, source."""
    from tokenmath.specs.kv_cache import kv_bytes_per_token
    from tokenmath.specs.model_catalog import get_model, model_ids
    from tokenmath.specs.params import count_params
    rows = []
    for mid in model_ids():
        m = get_model(mid)
        p = count_params(m)
        rows.append({"id": mid, "name": m.name, "params_total": p.total, "params_active": p.active,
                     "summary": m.describe(), "is_moe": m.is_moe, "max_context": m.max_context,
                     "native_dtype": m.native_dtype, "kv_bytes_per_token_bf16": kv_bytes_per_token(m, 2.0),
                     "source": m.source})
    return dumps({"models": rows})


@cache
def hardware_json() -> bytes:
    """Every catalog chip: memory (bytes), bandwidth (B/s), peak FLOP/s per dtype, bf16 ridge point (FLOP/byte,
    None where the chip has no bf16 peak), interconnects (B/s), TDP (W), price ($ per hour) and sources."""
    from tokenmath.specs.hardware import get_hardware, hardware_ids
    rows = []
    for hid in hardware_ids():
        h = get_hardware(hid)
        try:
            ridge = h.ridge_point
        except InputError:
            ridge = None
        rows.append({"id": hid, "name": h.name, "vendor": h.vendor, "kind": h.kind, "memory_bytes": h.memory_bytes,
                     "memory_bw": h.memory_bw, "flops": dict(h.flops), "ridge_point_bf16": ridge,
                     "scaleup_domain": h.scaleup_domain, "scaleup_bw": h.scaleup_bw, "scaleout_bw": h.scaleout_bw,
                     "tdp_w": h.tdp_w, "price_usd_per_hour": h.price_usd_per_hour, "price_date": h.price_date, "price_market": h.price_market,
                     "sources": dict(h.sources)})
    return dumps({"hardware": rows})
