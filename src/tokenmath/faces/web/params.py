"""Endpoint parameters: their declaration (Param) and the coercion of a query-string string or a JSON value into
the type an analysis takes. Bad input raises tokenmath.base.errors.InputError naming the parameter."""
from __future__ import annotations

import json
import math
from urllib.parse import parse_qsl

from tokenmath.base.errors import InputError, show, unknown_name
from tokenmath.specs.question.fields import (BASIC_KINDS, MAX_INT_DIGITS, Field, as_float, as_int, as_list,
                                             as_overrides, blank, coerce_basic)

Param = Field                      # an endpoint's parameter is a declared Field (specs/question/fields.py)

PARAMS_MAX_BYTES = 64 * 1024       # a JSON body of parameters
MAX_LIST = 64                      # values of an intlist parameter
MAX_HARDWARE_LIST = 32             # ids of a hwlist parameter


def _json_int(s: str):
    """json.loads' parse_int: Python refuses to parse integers over 4,300 digits; such a number is out of range."""
    return int(s) if len(s) <= MAX_INT_DIGITS else float(s)


def _twice(name, where: str) -> InputError:
    return InputError(name if isinstance(name, str) else show(name, 64), f"is given twice{where}",
                      "each parameter once (one of the two would be dropped)")


def _repeated(obj: dict, dups: dict) -> InputError:
    """The error naming a key an object of the body repeats (dups: id of an object -> (its repeated key, the object,
    kept alive so that no id is reused)), as the parameter sent: the key itself at the top, else the top-level
    parameter holding the object."""
    if id(obj) in dups:
        return _twice(dups[id(obj)][0], " in the JSON body")
    for k, v in obj.items():
        stack = [v]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                if id(x) in dups:
                    return InputError(k, f"{show(dups[id(x)][0], 40)} is given twice in it",
                                      "each key once (one of the two would be dropped)")
                stack += x.values()
            elif isinstance(x, list):
                stack += x
    return _twice(next(iter(dups.values()))[0], " in the JSON body")     # in an object a repeated key dropped


def query_params(query: str) -> dict:
    """A query string's parameters (name -> text, blanks kept); InputError for a name given twice (http's parsers
    keep one copy: the other would be silently dropped)."""
    raw: dict = {}
    for k, v in parse_qsl(query, keep_blank_values=True):
        if k in raw:
            raise _twice(k, " in the query string")
        raw[k] = v
    return raw


def merged(query: dict, body: dict) -> dict:
    """A POST's parameters, the query string's and the body's: a name in both is refused (one would be dropped)."""
    both = [k for k in body if k in query]
    if both:
        raise _twice(both[0], " (in the query string and in the body)")
    return {**query, **body}


def json_object(body: bytes, field: str = "body") -> dict:
    """A request's JSON body of parameters (empty: {}); InputError(field) for anything but a JSON object, and naming
    a key the object repeats."""
    if not body.strip():
        return {}
    dups: dict[int, tuple] = {}

    def pairs(kv: list) -> dict:      # json's object_pairs_hook: a repeated key is noted, not read as its last copy
        d = dict(kv)
        if len(d) < len(kv):
            seen: set = set()
            dups[id(d)] = (next(k for k, _ in kv if k in seen or seen.add(k)), d)
        return d
    try:
        obj = json.loads(body.decode("utf-8"), parse_int=_json_int, object_pairs_hook=pairs)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(field, "is not a JSON object", "a JSON object of parameters") from None
    if not isinstance(obj, dict):
        raise InputError(field, "is not a JSON object", "a JSON object of parameters")
    if dups:
        raise _repeated(obj, dups)
    return obj


def coerce(p: Param, v):
    """One parameter from a query-string string or a JSON value to the type the analysis takes (None: absent)."""
    if blank(v):
        return p.default
    k = p.kind
    if k in BASIC_KINDS:
        return coerce_basic(p, v)
    if k == "intlist":
        xs = [as_int(x, p) for x in as_list(v, p)]
        if not xs or len(xs) > MAX_LIST:
            raise InputError(p.name, f"needs 1 to {MAX_LIST} values", "comma-separated integers, e.g. 1024,8192")
        return tuple(xs)
    if k == "floatlist":
        xs = [as_float(x, p) for x in as_list(v, p)]
        if not xs or len(xs) > MAX_LIST:
            raise InputError(p.name, f"needs 1 to {MAX_LIST} values", "comma-separated numbers, e.g. 0.5,1,2")
        return tuple(xs)
    if k == "hardware":
        return hardware_id(v, p.name)
    if k == "hwlist":
        xs = as_list(v, p)
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
    """'memory_bw_tbs=6.7,price=2x' (or a JSON list of such strings) -> ((field, value text), ...) sorted, as the
    Deployment's what_if field reads them (specs/question/fields.as_overrides); specs.overrides.apply checks the
    values."""
    return tuple(sorted(as_overrides(v, p))) or None


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
    return as_int(v, p)


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
