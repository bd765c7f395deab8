"""Resolving a question's inputs once: model, hardware, layout, dtypes, efficiency (with named errors)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.specs.efficiency import Efficiency, default_for
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.forward import Precision
from tokenmath.errors import InputError
from tokenmath.specs.hardware import Hardware, get_hardware
from tokenmath.mapping.layout import Layout, make_layout
from tokenmath.specs.model import Model, get_model

MAX_TOKENS = 100_000_000
MAX_BATCH = 10_000_000_000  # concurrent sequences; beyond this it is a typo


@dataclass(frozen=True)
class Setup:
    model: Model
    hardware: Hardware
    layout: Layout
    precision: Precision
    efficiency: Efficiency
    reserve: float

    @property
    def chips(self) -> int:
        return int(np.asarray(self.layout.chips).max())

    @property
    def usd_per_chip_s(self) -> float | None:
        p = self.hardware.price_usd_per_hour
        return None if p is None else p / 3600.0


def int_arg(v, field: str, lo: int = 1, hi: int = MAX_TOKENS) -> int:
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a whole number", f"an integer from {lo} to {hi:,}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a whole number", f"an integer from {lo} to {hi:,}") from None
    if not math.isfinite(f) or f != int(f):
        raise InputError(field, f"{v!r} is not a whole number", f"an integer from {lo} to {hi:,}")
    if not lo <= f <= hi:
        raise InputError(field, f"{int(f)} is out of range", f"an integer from {lo} to {hi:,}")
    return int(f)


def pos_float(v, field: str, lo: float = 0.0, hi: float = 1e30) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", f"a number greater than {lo:g}") from None
    if not math.isfinite(f) or not lo < f <= hi:
        raise InputError(field, f"{v!r} is out of range", f"a number greater than {lo:g} and at most {hi:g}")
    return f


def resolve_precision(m: Model, weight_dtype: str | None, kv_dtype: str | None) -> Precision:
    from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
    w = get_dtype(weight_dtype or m.native_dtype, "weight_dtype", WEIGHT_DTYPES)
    e = w if weight_dtype or not m.native_expert_dtype else get_dtype(m.native_expert_dtype, "weight_dtype")
    kv = get_dtype(kv_dtype or "bf16", "kv_dtype", KV_DTYPES)
    return Precision(w, e, kv)


def setup(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, weight_dtype=None, kv_dtype=None,
          efficiency: Efficiency | None = None, reserve: float | None = None, scalar_layout: bool = True,
          cp=None) -> Setup:
    m = get_model(model)
    hw = get_hardware(hardware)
    lay = make_layout(m, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, cp=cp)
    if scalar_layout:
        for k in ("tp", "pp", "ep", "dp", "cp"):
            if np.ndim(getattr(lay, k)):
                raise InputError(k, "this question takes one layout; use tokenmath.sweep for many", "a single integer")
    reserve = RESERVE_FRACTION if reserve is None else reserve
    if not 0 <= reserve < 1:
        raise InputError("reserve", f"{reserve!r} is not a fraction of memory", "a number in [0, 1)")
    return Setup(m, hw, lay, resolve_precision(m, weight_dtype, kv_dtype), efficiency or default_for(hw.id), reserve)


def fmt_layout(tp, pp, ep, dp) -> str:
    return f"tp={int(tp)} pp={int(pp)} ep={int(ep)} dp={int(dp)}"


def finite(x):
    """float, or None for NaN/inf (JSON never carries a NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
