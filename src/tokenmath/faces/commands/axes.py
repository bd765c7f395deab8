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


def numbers(kind):
    """A callback: "1,8,32" -> [1, 8, 32] of `kind` (int or float), each finite and > 0."""
    def parse(ctx, param, value):
        if value is None:
            return None
        try:
            out = [kind(v) for v in str(value).split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a comma-separated list of "
                                     f"{'whole numbers' if kind is int else 'numbers'}") from None
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
