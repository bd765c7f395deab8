"""This machine's budget on a serving question's work: refused before it runs when its estimated peak memory is over
a share of the memory this machine has free, or its estimated time over a stated bound (issue 40).

Why here, in the analyses, and not in the command line: the questions are asked through analyses/ask.py from the CLI,
Python and the web alike, and a Python caller on a laptop is taken down by `tokenmath.pareto("deepseek-v3", "h200",
chips=4096)` as surely as the CLI is (before: over 14 GB in its first minute, killed). The web server holds its
requests to its own, smaller limits first (faces/web/budget.py), over the same estimate (analyses/serving/work.py).

The limits:
- memory: MEMORY_SHARE of MemAvailable (/proc/meminfo, base.meminfo) at the time of asking, or
  FIXED_MEMORY_BYTES where the machine does not say;
- time: TIME_LIMIT_S (10 minutes) of estimated work.

The opt-in, one switch: `--no-budget` on the command line (pareto, plan, fleet, price, slowmode, simulate), which runs
the question inside `unbounded()`; in Python, `with tokenmath.analyses.serving.work_budget.unbounded(): ...` or the
question's keyword `budget=False` (tokenmath.pareto(..., budget=False)). The estimate over-counts rather than under
(work.py's figures are the upper ones measured), so a refused question may well have fitted: the message says so.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from collections.abc import Iterator

from tokenmath.analyses.serving.work import Work, weigh
from tokenmath.base.errors import InputError

MEMORY_SHARE = 0.5              # of MemAvailable a question may plan to take
FIXED_MEMORY_BYTES = 4e9        # where the machine does not say what it has free
TIME_LIMIT_S = 600.0            # 10 minutes of estimated work

_UNBOUNDED = contextvars.ContextVar("tokenmath_unbounded", default=False)


@contextmanager
def unbounded() -> Iterator[None]:
    """Run the questions asked inside without this machine's budget (the CLI's --no-budget)."""
    token = _UNBOUNDED.set(True)
    try:
        yield
    finally:
        _UNBOUNDED.reset(token)


def memory_limit() -> tuple[float, str]:
    """(bytes a question may plan to take, where that figure comes from)."""
    from tokenmath.base.meminfo import meminfo
    free = meminfo().get("MemAvailable")
    if not free:
        return FIXED_MEMORY_BYTES, f"a fixed {FIXED_MEMORY_BYTES / 1e9:g} GB (this machine does not say what it has free)"
    return MEMORY_SHARE * free, f"{MEMORY_SHARE:.0%} of the {free / 1e9:.1f} GB this machine has free"


def over(w: Work) -> str | None:
    """Why the work is over this machine's budget, or None."""
    limit, source = memory_limit()
    if w.peak_bytes > limit:
        return (f"about {w.peak_bytes / 1e9:,.1f} GB at its peak and {w.seconds / 60:,.1f} minutes, over the "
                f"{limit / 1e9:,.1f} GB a question may take ({source})")
    if w.seconds > TIME_LIMIT_S:
        return (f"about {w.seconds / 60:,.1f} minutes and {w.peak_bytes / 1e9:,.1f} GB at its peak, over the "
                f"{TIME_LIMIT_S / 60:g} minutes a question may run")
    return None


def check(question: str, dep, wl, own: dict) -> dict:
    """Refuse (InputError naming the field, the estimate, the limit and the cheaper question) a question whose
    estimated work is over this machine's budget; `own` without the `budget` keyword (False: no budget) back."""
    own = dict(own)
    wanted = own.pop("budget", True)
    if wanted is False or _UNBOUNDED.get():
        return own
    w = weigh(question, dep, wl, **own)
    why = None if w is None else over(w)
    if why:
        raise InputError(w.field, f"{w.what}: estimated {why}",
                         f"{w.cheaper}; or --no-budget to run it anyway (Python: budget=False), the estimate "
                         "errs high")
    return own
