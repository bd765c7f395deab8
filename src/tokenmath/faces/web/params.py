"""Endpoint parameters: their declaration (Param) and the coercion of a query-string string or a JSON value into
the type an analysis takes. Bad input raises tokenmath.base.errors.InputError naming the parameter."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from tokenmath.base.errors import InputError, closest, show, unknown_name

PARAMS_MAX_BYTES = 64 * 1024       # a JSON body of parameters
MAX_LIST = 64                      # values of an intlist parameter
MAX_HARDWARE_LIST = 32             # ids of a hwlist parameter
MAX_SET_CHARS = 400                # an overrides parameter: a few FIELD=VALUE pairs; beyond it, not a what-if
MAX_INT_DIGITS = 4000              # a JSON integer longer than this is read as a float (inf): out of range anyway


def _json_int(s: str):
    """json.loads' parse_int: Python refuses to parse integers over 4,300 digits; such a number is out of range."""
    return int(s) if len(s) <= MAX_INT_DIGITS else float(s)


def json_object(body: bytes, field: str = "body") -> dict:
    """A request's JSON body of parameters (empty: {}); InputError(field) for anything but a JSON object."""
    if not body.strip():
        return {}
    try:
        obj = json.loads(body.decode("utf-8"), parse_int=_json_int)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(field, "is not a JSON object", "a JSON object of parameters") from None
    if not isinstance(obj, dict):
        raise InputError(field, "is not a JSON object", "a JSON object of parameters")
    return obj


@dataclass(frozen=True)
class Param:
    """One parameter of an endpoint: its name (the analysis' keyword), kind, default (used when absent or blank),
    help text and, for numbers, the inclusive range [lo, hi] in the parameter's own unit."""
    name: str
    kind: str                      # model | hardware | int | float | batch | bool | choice | range | hwlist | intlist
                                   # | floatlist | overrides (FIELD=VALUE pairs, as the CLI's --set)
                                   # | length (tokens, or "uniform:LO-HI" / "lognormal:MEDIAN,SIGMA")
    default: Any = None
    help: str = ""
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()

    def describe(self) -> dict:
        d = {"name": self.name, "type": self.kind, "default": self.default, "help": self.help}
        if self.choices:
            d["choices"] = list(self.choices)
        if self.lo is not None:
            d["min"] = self.lo
        if self.hi is not None:
            d["max"] = self.hi
        return d


def _blank(v) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "")


def _number(v) -> int | float:
    """A JSON number, or a string ("1_000" and surrounding spaces allowed) read as an int when it is one and as a
    float otherwise (so 400 digits stay an exact int, never an OverflowError); TypeError/ValueError else."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if not isinstance(v, str):
        raise TypeError(type(v).__name__)
    s = v.strip().replace("_", "")
    body = s[1:] if s[:1] in "+-" else s
    if body.isdigit() and body.isascii() and len(body) <= MAX_INT_DIGITS:
        return int(s)
    return float(s)


def _in_range(f: int | float, lo, hi) -> bool:
    """lo <= f <= hi, exactly, for ints of any size and finite floats."""
    return (lo is None or f >= lo) and (hi is None or f <= hi)


def _as_int(v, p: Param) -> int:
    lo = int(p.lo) if p.lo is not None else -(2 ** 62)
    hi = int(p.hi) if p.hi is not None else 2 ** 62
    valid = f"an integer from {lo:,} to {hi:,}"
    if isinstance(v, bool):
        raise InputError(p.name, f"{v!r} is not a whole number", valid)
    try:
        f = _number(v)
    except (TypeError, ValueError):
        raise InputError(p.name, f"{show(v)} is not a whole number", valid) from None
    if isinstance(f, float):
        if math.isinf(f):
            raise InputError(p.name, f"{show(v)} is out of range", valid)
        if math.isnan(f) or f != int(f):
            raise InputError(p.name, f"{show(v)} is not a whole number", valid)
        f = int(f)
    if not _in_range(f, lo, hi):
        raise InputError(p.name, f"{show(f) if abs(f) > 10 ** 30 else format(f, ',')} is out of range", valid)
    return f


def _as_float(v, p: Param) -> float:
    valid = "a number" + (f" from {p.lo:g}" if p.lo is not None else "") + (f" to {p.hi:g}" if p.hi is not None else "")
    if isinstance(v, bool):
        raise InputError(p.name, f"{v!r} is not a number", valid)
    try:
        f = _number(v)
    except (TypeError, ValueError):
        raise InputError(p.name, f"{show(v)} is not a number", valid) from None
    if isinstance(f, int) and not -1e308 < f < 1e308:   # beyond any double: float(f) would overflow
        raise InputError(p.name, f"{show(f)} is out of range", valid)
    f = float(f)
    if not math.isfinite(f) or not _in_range(f, p.lo, p.hi):
        raise InputError(p.name, f"{show(v)} is out of range", valid)
    return f


def _as_bool(v, p: Param) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise InputError(p.name, f"{show(v)} is not true or false", "true or false (1 or 0)")


def _as_list(v, p: Param) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v]
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    raise InputError(p.name, f"{show(v)} is not a list", "comma-separated values")


def _as_choice(v, p: Param) -> str:
    s = str(v).strip().lower()
    if s not in p.choices:
        near = closest(s, p.choices)
        raise InputError(p.name, f"{show(v)} is not one of the choices",
                         (f"did you mean {', '.join(near)}? " if near else "") + f"one of {', '.join(p.choices)}")
    return s


def _as_range(v, p: Param) -> tuple[float, float]:
    xs = _as_list(v, p)
    if len(xs) != 2:
        raise InputError(p.name, f"{show(v)} is not LOW,HIGH", "two numbers, e.g. 0.2,0.6")
    lo, hi = (_as_float(x, p) for x in xs)
    if lo > hi:
        raise InputError(p.name, f"LOW {lo:g} exceeds HIGH {hi:g}", "LOW <= HIGH")
    return (lo, hi)


def coerce(p: Param, v):
    """One parameter from a query-string string or a JSON value to the type the analysis takes (None: absent)."""
    if _blank(v):
        return p.default
    k = p.kind
    if k == "int":
        return _as_int(v, p)
    if k == "float":
        return _as_float(v, p)
    if k == "bool":
        return _as_bool(v, p)
    if k == "batch":
        if isinstance(v, str) and v.strip().lower() == "max":
            return "max"
        return _as_int(v, p)
    if k == "choice":
        return _as_choice(v, p)
    if k == "range":
        return _as_range(v, p)
    if k == "intlist":
        xs = [_as_int(x, p) for x in _as_list(v, p)]
        if not xs or len(xs) > MAX_LIST:
            raise InputError(p.name, f"needs 1 to {MAX_LIST} values", "comma-separated integers, e.g. 1024,8192")
        return tuple(xs)
    if k == "floatlist":
        xs = [_as_float(x, p) for x in _as_list(v, p)]
        if not xs or len(xs) > MAX_LIST:
            raise InputError(p.name, f"needs 1 to {MAX_LIST} values", "comma-separated numbers, e.g. 0.5,1,2")
        return tuple(xs)
    if k == "hardware":
        return hardware_id(v, p.name)
    if k == "hwlist":
        xs = _as_list(v, p)
        if not xs or len(xs) > MAX_HARDWARE_LIST:
            raise InputError(p.name, f"needs 1 to {MAX_HARDWARE_LIST} catalog ids",
                             "comma-separated ids, e.g. h100-sxm,h200")
        return tuple(hardware_id(x, p.name) for x in xs)
    if k == "length":
        return _as_length(v, p)
    if k == "overrides":
        return _as_overrides(v, p)
    if k == "model":
        if not isinstance(v, str):
            raise InputError(p.name, f"{show(v)} is not a name", "a catalog id or an uploaded config's id")
        return v.strip()
    raise AssertionError(k)


def _as_overrides(v, p: Param) -> tuple[tuple[str, str], ...] | None:
    """'memory_bw_tbs=6.7,price=2x' (or a JSON list of such strings) -> ((field, value text), ...) sorted, the field
    names resolved (an unknown one is refused naming the closest); specs.overrides.apply checks the values."""
    from tokenmath.specs.overrides import parse_pairs
    if isinstance(v, list | tuple):
        pairs = [str(x) for x in v]
    elif isinstance(v, str):
        if len(v) > MAX_SET_CHARS:
            raise InputError(p.name, f"is {len(v):,} characters", f"at most {MAX_SET_CHARS} (a few FIELD=VALUE pairs)")
        pairs = [x.strip() for x in v.split(",") if x.strip()]
    else:
        raise InputError(p.name, f"{show(v)} is not FIELD=VALUE text", "e.g. memory_bw_tbs=6.7,price=2")
    if len(pairs) > MAX_LIST:
        raise InputError(p.name, f"has {len(pairs)} pairs", f"at most {MAX_LIST}")
    return tuple(sorted(parse_pairs(pairs).items())) or None


def _as_length(v, p: Param) -> int | str:
    """Token counts of a simulated workload: a whole number in range, or a distribution's spec checked by the
    simulator's own parser (never "fit:FILE": the web API reads no files named by a request)."""
    valid = 'a token count, "uniform:LO-HI" or "lognormal:MEDIAN,SIGMA"'
    if isinstance(v, str) and ":" in v:
        s = v.strip()
        if len(s) > 100:
            raise InputError(p.name, f"{show(s)} is not a length spec", valid)
        if s.split(":", 1)[0].strip().lower() not in ("uniform", "lognormal"):
            raise InputError(p.name, f"{show(s)} is not a length spec (the web API reads no trace files)", valid)
        from tokenmath.analyses.serving.simulation.workload import parse_lengths
        lengths = parse_lengths(s, p.name)
        if p.hi is not None and lengths.kind == "uniform" and lengths.b > p.hi:
            raise InputError(p.name, f"{show(s)} is out of range", valid + f", at most {int(p.hi):,}")
        return s
    return _as_int(v, p)


def hardware_id(v, field: str = "hardware") -> str:
    """A hardware catalog id (never a path: the web API reads no files named by a request)."""
    from tokenmath.specs.hardware import catalog
    if not isinstance(v, str) or not v.strip():
        raise InputError(field, f"{show(v)} is not a name", "a hardware catalog id such as h100-sxm")
    key = v.strip().lower()
    cat = catalog()
    if key not in cat:
        raise unknown_name(field, v.strip(), cat)
    return key
