"""Humane units at the edges only (inside, everything is SI)."""
from __future__ import annotations

import math


def _si(x: float, unit: str, steps) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:
        return f"0 {unit}"
    for scale, prefix in steps:
        if scale and abs(x) >= scale:
            v = x / scale
            return f"{v:,.3g} {prefix}{unit}" if abs(v) < 1000 else f"{v:,.0f} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def bytes_(x: float) -> str:
    return _si(x, "B", [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (0, "")])


def flops(x: float) -> str:
    return _si(x, "FLOP", [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (0, "")])


def rate(x: float, unit: str) -> str:
    return _si(x, unit, [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (0, "")])


def seconds(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x >= 1:
        return f"{x:,.3g} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.3g} us"


def count(x: float) -> str:
    return _si(x, "", [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"), (0, "")]).strip()


def usd(x: float | None) -> str:
    if x is None:
        return "n/a (no price)"
    return f"${x:,.4g}" if x < 1000 else f"${x:,.0f}"
