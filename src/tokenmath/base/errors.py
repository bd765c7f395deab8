"""One error type for every bad input: it names the field, says what was wrong and what would be valid."""
from __future__ import annotations

from collections.abc import Iterable


class InputError(ValueError):
    """Bad user input. `field` is the option, file key or argument at fault; `valid` lists what would work."""

    def __init__(self, field: str, problem: str, valid: str | None = None):
        self.field = field
        self.problem = problem
        self.valid = valid
        msg = f"{field}: {problem}"
        if valid:
            msg += f" ({valid})"
        super().__init__(msg)

    def to_dict(self) -> dict:
        return {"error": {"field": self.field, "problem": self.problem, "valid": self.valid}}


def show(v, limit: int = 60) -> str:
    """A bad value as a message may print it: huge integers by their size, long text cut short."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 200:
        return f"an integer of about {int(v.bit_length() * 0.30103)} digits"
    try:
        r = repr(v)
    except ValueError:
        return f"a {type(v).__name__}"
    return r if len(r) <= limit else r[: limit - 3] + "..."


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Closest names to a typo, best first (difflib ratio, case-insensitive)."""
    choices = list(choices)
    lower = {c.lower(): c for c in choices}
    import difflib      # only for a typo: ~1 ms of every start otherwise
    hits = difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.4)
    # also catch prefix/substring matches that difflib ranks low (e.g. "llama-3.1" -> "llama-3.1-8b")
    for c in choices:
        if len(hits) >= n:
            break
        if name.lower() in c.lower() and c.lower() not in hits:
            hits.append(c.lower())
    return [lower[h] for h in hits]


def unknown_name(field: str, name: str, choices: Iterable[str]) -> InputError:
    choices = sorted(choices)
    near = closest(name, choices)
    hint = f"did you mean {', '.join(near)}?" if near else f"valid: {', '.join(choices[:12])}{', ...' if len(choices) > 12 else ''}"
    return InputError(field, f"unknown name {name!r}", hint)
