"""Options that take lists (comma-separated), shared by scenarios, pareto and plan."""
import math

import click


def names(ctx, param, value):
    """"a,b,c" -> ["a", "b", "c"]."""
    if value is None:
        return None
    out = [v.strip() for v in str(value).split(",") if v.strip()]
    if not out:
        raise click.BadParameter(f"{value!r} names nothing (comma-separated names)")
    return out


MAX_VALUES = 1000       # values in one list option (analyses/serving/scenarios.py MAX_AXIS)


def numbers(kind, lo=None, hi=None):
    """A callback: "1,8,32" -> [1, 8, 32] of `kind` (int or float), each checked as a declared field is
    (specs/question/fields.py: no nan, inf, 400 digits or non-ASCII digits), > 0 and within [lo, hi] (ints: 1 to
    1,000,000 unless given)."""
    from tokenmath.base.errors import InputError
    from tokenmath.specs.question.fields import Field, as_float, as_int

    def parse(ctx, param, value):
        if value is None:
            return None
        raw = [v for v in str(value).split(",") if v.strip()]
        if len(raw) > MAX_VALUES:
            raise click.BadParameter(f"{len(raw):,} values; at most {MAX_VALUES:,}")
        f = Field(param.name if param is not None else "value", "int" if kind is int else "float",
                  lo=1 if kind is int and lo is None else lo, hi=1_000_000 if kind is int and hi is None else hi)
        try:
            out = [as_int(v, f) if kind is int else as_float(v, f) for v in raw]
        except InputError as e:
            raise click.BadParameter(f"{e.problem} ({e.valid}; comma-separated)") from None
        if not out or any(not (v > 0 and math.isfinite(v)) for v in out):
            raise click.BadParameter("every value must be a finite number greater than 0")
        return out
    return parse


def _concurrency(ctx, param, value):
    if value is not None and str(value).strip().lower() == "none":
        return ()
    return numbers(int)(ctx, param, value)


def concurrency_option(f):
    """--concurrency LIST|none: the closed-loop steady state at these concurrencies (by_concurrency in --json)."""
    return click.option("--concurrency", callback=_concurrency, metavar="LIST|none",
                        help="Concurrencies (closed-loop users) for the by-concurrency curves: the engine's steady "
                             "state at each (default 1,2,4,...,512; none: leave them out).")(f)
