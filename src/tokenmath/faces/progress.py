"""Progress lines for anything that takes more than a couple of seconds (measure, verify, large sweeps, ...).

Presentation lives here, in faces: an analysis only accepts a callback `progress(message)` and calls it before each
slow step. Lines go to stderr, so stdout stays clean for --json and tables, each with the seconds since the command
started. They are off with --quiet and when stderr is not a terminal (a log or a pipe gets no chatter), unless
TOKENMATH_PROGRESS=1 asks for them there too (tests, CI logs).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def wanted(quiet: bool) -> bool:
    """Whether progress lines should be shown: not --quiet, and stderr a terminal or TOKENMATH_PROGRESS=1."""
    if quiet or os.environ.get("TOKENMATH_PROGRESS") == "0":
        return False
    if os.environ.get("TOKENMATH_PROGRESS") == "1":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def reporter(quiet: bool) -> Callable[[str], None] | None:
    """A progress(message) callback printing `  [  3.2 s] message` on stderr, or None when progress is off."""
    if not wanted(quiet):
        return None
    import click
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        click.echo(f"  [{time.perf_counter() - t0:5.1f} s] {msg}", err=True)
    return say


@contextmanager
def heartbeat(what: str, quiet: bool = False, after_s: float = 2.0, every_s: float = 10.0) -> Iterator[None]:
    """For a command whose analysis reports no steps (plan, pareto, simulate, scenarios, ...): once it has run
    `after_s` seconds, a line on stderr says what is running, then again every `every_s` seconds until it ends (the
    same lines and rules as reporter: a terminal or TOKENMATH_PROGRESS=1, never with --quiet). Quick commands print
    nothing; stdout is untouched."""
    say = reporter(quiet)
    if say is None:
        yield
        return
    stop = threading.Event()

    def beat():
        if stop.wait(after_s):
            return
        say(f"{what}: working")
        while not stop.wait(every_s):
            say(f"{what}: still working")
    t = threading.Thread(target=beat, name="tokenmath-heartbeat", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(1.0)
