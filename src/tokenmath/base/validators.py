"""Input validation shared by every layer: whole numbers and positive floats in a range, and NaN/inf kept out of
answers. Each check raises the one InputError (field, problem, valid values)."""
from __future__ import annotations

import math

from tokenmath.base.errors import InputError, show

MAX_TOKENS = 100_000_000
MAX_BATCH = 10_000_000_000  # concurrent sequences; beyond this it is a typo


def int_arg(v, field: str, lo: int = 1, hi: int = MAX_TOKENS) -> int:
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a whole number", f"an integer from {lo} to {hi:,}")
    try:
        f = float(v)
    except OverflowError:           # an int past any double (400 digits): out of range, not a crash
        raise InputError(field, f"{show(v)} is out of range", f"an integer from {lo} to {hi:,}") from None
    except (TypeError, ValueError):
        raise InputError(field, f"{show(v)} is not a whole number", f"an integer from {lo} to {hi:,}") from None
    if math.isinf(f):
        raise InputError(field, f"{show(v)} is out of range", f"an integer from {lo} to {hi:,}")
    if math.isnan(f) or f != int(f):
        raise InputError(field, f"{show(v)} is not a whole number", f"an integer from {lo} to {hi:,}")
    if not lo <= f <= hi:
        raise InputError(field, f"{int(f):,} is out of range", f"an integer from {lo} to {hi:,}")
    return int(f)


def pos_float(v, field: str, lo: float = 0.0, hi: float = 1e30) -> float:
    try:
        f = float(v)
    except OverflowError:
        raise InputError(field, f"{show(v)} is out of range", f"a number greater than {lo:g} and at most {hi:g}") from None
    except (TypeError, ValueError):
        raise InputError(field, f"{show(v)} is not a number", f"a number greater than {lo:g}") from None
    if not math.isfinite(f) or not lo < f <= hi:
        raise InputError(field, f"{show(v)} is out of range", f"a number greater than {lo:g} and at most {hi:g}")
    return f


def finite(x):
    """float, or None for NaN/inf (JSON never carries a NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def known_keys(rec: dict, known, field: str) -> None:
    """Refuse a record key outside `known`, naming it and the closest valid keys (a typo in a user file)."""
    from tokenmath.base.errors import closest
    for k in rec:
        if k not in known:
            near = closest(k, known)
            raise InputError(f"{field}.{k}", "unknown key",
                             f"did you mean {', '.join(near)}?" if near else f"valid keys: {', '.join(known)}")
