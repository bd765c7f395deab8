"""Progress lines for anything that takes more than a couple of seconds (measure, verify, large sweeps, ...).

Presentation lives here, in faces: an analysis only accepts a callback `progress(message)` and calls it before each
slow step. Lines go to stderr, so stdout stays clean for --json and tables, each with the seconds since the command
started. They are off with --quiet and when stderr is not a terminal (a log or a pipe gets no chatter), unless
TOKENMATH_PROGRESS=1 asks for them there too (tests, CI logs).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable


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
