"""Candidate serving layouts on a number of chips, checked against the model's shape (heads, KV heads, experts).

Enumeration is a few dozen tuples (cheap Python); their evaluation is one vectorized engine call.
"""
from __future__ import annotations

import numpy as np

from tokenmath.mapping.layout import Layout, admissible, tp_ok
from tokenmath.specs.model import Model

MAX_SEARCH_CHIPS = 4096     # the most chips a layout search walks (serving plans, over-training's serving cost)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts_for(m: Model, chips: int, *, allow_pp: bool = False, max_tp: int | None = None) -> list[tuple[int, int, int, int]]:
    """Every (tp, pp, ep, dp) with tp x pp x ep x dp = chips that the model admits."""
    out = []
    for tp in divisors(chips):
        if not tp_ok(m, tp) or (max_tp and tp > max_tp):
            continue
        rest = chips // tp
        for ep in divisors(rest):
            if not admissible(m, ep=ep):
                continue
            rest2 = rest // ep
            for pp in (divisors(rest2) if allow_pp else [1]):
                if pp > m.n_layers:
                    continue
                out.append((tp, pp, ep, rest2 // pp))
    return out


def as_layout(rows: list[tuple[int, int, int, int]], shape_tail: int = 1) -> Layout:
    """Stack layouts as column arrays of shape (n, 1, ...) so they broadcast against a batch axis."""
    a = np.asarray(rows, dtype=np.int64).reshape(len(rows), 4, *([1] * shape_tail))
    return Layout(a[:, 0], a[:, 1], a[:, 2], a[:, 3])
