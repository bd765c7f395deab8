"""JSON bytes of a response: numpy values to Python ones, NaN/inf to null, compact separators."""
from __future__ import annotations

import json
import math
from types import MappingProxyType

import numpy as np


def clean(o):
    """JSON-safe copy: numpy scalars/arrays to Python, tuples to lists, NaN/inf to None."""
    if isinstance(o, (dict, MappingProxyType)):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return clean(o.tolist())
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return f if math.isfinite(f) else None
    if o is None or isinstance(o, str):
        return o
    return str(o)


def _to_json(o):
    """json.dumps' `default`: the non-JSON types an analysis' dict may hold."""
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, MappingProxyType):
        return dict(o)
    return str(o)


def dumps(obj) -> bytes:
    """JSON bytes; NaN/inf become null (the fast path first: analyses' dicts are usually clean already)."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"), default=_to_json).encode("utf-8")
    except (ValueError, TypeError):
        return json.dumps(clean(obj), allow_nan=False, separators=(",", ":")).encode("utf-8")
