"""The declaration of one input (Field) and its validation (coerce): numbers in range, booleans, choices with the
closest names for a typo, lists. Bad input raises the one InputError naming the field, the problem and what would
be valid. The question types (deployment.py, workload.py) and the web page's endpoint parameters are made of these."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tokenmath.base.errors import InputError, closest, show

MAX_INT_DIGITS = 4000              # a JSON integer longer than this is read as a float (inf): out of range anyway
MAX_SET_CHARS = 400                # what-if overrides as text: a few FIELD=VALUE pairs; beyond it, not a what-if
MAX_SET_PAIRS = 64


@dataclass(frozen=True)
class Field:
    """One input, declared once: its name (the Python keyword, the JSON key; the option is --name-with-dashes), kind,
    default (used when absent or blank), help text, for numbers the inclusive range [lo, hi] in `unit`, and the
    questions (commands) that use it. The CLI's options, the web page's parameters and the JSON schema are generated
    from these declarations (faces/commands/question_options.py, faces/web/, question/schema.py), and `coerce`
    validates a value once, at the boundary."""
    name: str
    kind: str                      # model | hardware | int | float | batch | bool | choice | range | hwlist | intlist
                                   # | floatlist | overrides (FIELD=VALUE pairs, as the CLI's --set)
                                   # | length (tokens, or "uniform:LO-HI" / "lognormal:MEDIAN,SIGMA")
    default: Any = None
    help: str = ""
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""                 # SI or humane unit of a number ("tokens", "requests/s", "$/h"); "" for none
    questions: tuple[str, ...] = ()   # the commands that use it ("" none declared: an endpoint's own parameter)
    why_not: str = ""              # what a question that does not use it says (its notes), when the user set it
    flag: str = ""                 # the CLI option when not --name-with-dashes (e.g. --overlap-ep)
    short: str = ""                # a one-letter CLI alias (-m, -H, -b)

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def describe(self) -> dict:
        d = {"name": self.name, "type": self.kind, "default": self.default, "help": self.help}
        if self.unit:
            d["unit"] = self.unit
        if self.choices:
            d["choices"] = list(self.choices)
        if self.lo is not None:
            d["min"] = self.lo
        if self.hi is not None:
            d["max"] = self.hi
        return d


def blank(v) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "")


def _number(v) -> int | float:
    """A JSON number, or an ASCII string ("1_000" and surrounding spaces allowed) read as an int when it is one and as
    a float otherwise (so 400 digits stay an exact int, never an OverflowError); TypeError/ValueError else."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if not isinstance(v, str):
        raise TypeError(type(v).__name__)
    s = v.strip().replace("_", "")
    if not s.isascii():         # int() and float() read Arabic-Indic, fullwidth, ... digits: not a number a person typed here
        raise ValueError(v)
    body = s[1:] if s[:1] in "+-" else s
    if body.isdigit() and body.isascii() and len(body) <= MAX_INT_DIGITS:
        return int(s)
    return float(s)


def _in_range(f: int | float, lo, hi) -> bool:
    """lo <= f <= hi, exactly, for ints of any size and finite floats."""
    return (lo is None or f >= lo) and (hi is None or f <= hi)


def as_int(v, p: Field) -> int:
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


def as_float(v, p: Field) -> float:
    valid = ("a number" + (f" from {p.lo:g}" if p.lo is not None else "") + (f" to {p.hi:g}" if p.hi is not None else "")
             if p.lo is not None or p.hi is not None else "a finite number")
    if isinstance(v, bool):
        raise InputError(p.name, f"{v!r} is not a number", valid)
    try:
        f = _number(v)
    except (TypeError, ValueError):
        raise InputError(p.name, f"{show(v)} is not a number", valid) from None
    if isinstance(f, int) and not -1e308 < f < 1e308:   # beyond any double: float(f) would overflow
        raise InputError(p.name, f"{show(f)} is out of range", valid)
    f = float(f)
    if math.isnan(f):
        raise InputError(p.name, f"{show(v)} is not a number", valid)
    if not math.isfinite(f) or not _in_range(f, p.lo, p.hi):
        raise InputError(p.name, f"{show(v)} is out of range", valid)
    return f


def _as_bool(v, p: Field) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise InputError(p.name, f"{show(v)} is not true or false", "true or false (1 or 0)")


def as_list(v, p: Field) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v]
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    raise InputError(p.name, f"{show(v)} is not a list", "comma-separated values")


def _as_choice(v, p: Field) -> str:
    s = str(v).strip().lower()
    if p.name == "engine" and "@" in s and s.partition("@")[0] in p.choices:
        return s            # a shipped profile at a release (sglang@0.5): its profile checks the release when resolved
    if s not in p.choices:
        near = closest(s, p.choices)
        raise InputError(p.name, f"{show(v)} is not one of the choices",
                         (f"did you mean {', '.join(near)}? " if near else "") + f"one of {', '.join(p.choices)}")
    return s


def _as_range(v, p: Field) -> tuple[float, float]:
    xs = as_list(v, p)
    if len(xs) != 2:
        raise InputError(p.name, f"{show(v)} is not LOW,HIGH", "two numbers, e.g. 0.2,0.6")
    lo, hi = (as_float(x, p) for x in xs)
    if lo > hi:
        raise InputError(p.name, f"LOW {lo:g} exceeds HIGH {hi:g}", "LOW <= HIGH")
    return (lo, hi)


BASIC_KINDS = ("int", "float", "bool", "choice", "range", "text", "batch", "imbalance")


def coerce_basic(p: Field, v):
    """A value of one of BASIC_KINDS from a string (command line, query string) or a JSON/Python value to the type
    an analysis takes; None (or blank) gives the default."""
    if blank(v):
        return p.default
    k = p.kind
    if k == "int":
        return as_int(v, p)
    if k == "float":
        return as_float(v, p)
    if k == "bool":
        return _as_bool(v, p)
    if k == "choice":
        return _as_choice(v, p)
    if k == "range":
        return _as_range(v, p)
    if k == "batch":
        if isinstance(v, str) and v.strip().lower() == "max":
            return "max"
        return as_int(v, p)
    if k == "imbalance":
        return _as_imbalance(v, p)
    if k == "text":
        if not isinstance(v, str):
            raise InputError(p.name, f"{show(v)} is not text", p.help or "a name")
        return v.strip()
    raise AssertionError(k)


def as_overrides(v, p: Field) -> tuple[tuple[str, str], ...]:
    """What-if hardware (the CLI's --set, the web page's `set`): 'memory_bw_tbs=6.7,price=2x', a list of such
    strings (one per --set) or of (field, value) pairs, or a {field: value} dict -> ((field, value text), ...) in the
    order given, each field named canonically (specs.overrides.parse_pairs: an unknown one is refused naming the
    closest, a field given twice is refused). The values are checked against the chip when they are applied
    (specs.overrides.apply, as a hardware file's figures are: analyses/setup.py)."""
    from tokenmath.specs.overrides import parse_pairs
    if isinstance(v, dict):
        v = [f"{k}={x}" for k, x in v.items()]
    elif isinstance(v, str):
        v = [v]
    if not isinstance(v, (list, tuple)):
        raise InputError("set", f"{show(v)} is not FIELD=VALUE text", "e.g. memory_bw_tbs=6.7,price=2")
    pairs = []
    for x in v:
        if isinstance(x, (list, tuple)) and len(x) == 2:
            x = f"{x[0]}={x[1]}"
        x = str(x)
        if len(x) > MAX_SET_CHARS:
            raise InputError("set", f"is {len(x):,} characters", f"at most {MAX_SET_CHARS} (a few FIELD=VALUE pairs)")
        pairs += [y.strip() for y in x.split(",") if y.strip()]
    if len(pairs) > MAX_SET_PAIRS:
        raise InputError("set", f"has {len(pairs)} pairs", f"at most {MAX_SET_PAIRS}")
    return tuple(parse_pairs(pairs).items())


def _as_imbalance(v, p: Field):
    """The busiest expert-parallel rank's routed tokens over the mean: a number >= 1, "routing" or "eplb"."""
    valid = "a number >= 1 (busiest EP rank / mean tokens; 1 = balanced), 'routing' or 'eplb'"
    if isinstance(v, str) and v.strip().lower() in ("routing", "eplb"):
        return v.strip().lower()
    try:
        f = as_float(v, Field(p.name, "float", lo=0.0, hi=1e3))
    except InputError:
        raise InputError(p.name, f"{show(v)} is not an imbalance", valid) from None
    if f < 1.0:
        raise InputError(p.name, f"{f:g} is below 1", valid)
    return f
