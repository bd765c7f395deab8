"""Candidate serving layouts on a number of chips, checked against the model's shape (heads, KV heads, experts).

Enumeration is a few dozen tuples (cheap Python); their evaluation is one vectorized engine call.
"""
from __future__ import annotations

import numpy as np

from tokenmath.mapping.layout import Layout, admissible, attention_worth_searching, tp_ok
from tokenmath.specs.model import Model

MAX_SEARCH_CHIPS = 4096     # the most chips a layout search walks (serving plans, over-training's serving cost)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


SEARCH_ATTENTION = "any"     # layouts_for(attention=...): heads, and batch / dp where they save something


def layouts_for(m: Model, chips: int, *, allow_pp: bool = False, max_tp: int | None = None,
                attention=0) -> list[tuple[int, ...]]:
    """Every (tp, pp, ep, dp) with tp x pp x ep x dp = chips that the model admits.
    attention: 0 (heads, the 4-tuples as always); 1 (batch) or 2 (dp): the same layouts as 5-tuples ending in that
    code (mapping/layout.ATTENTION_SHARDING); SEARCH_ATTENTION: the heads layouts, and each with tp > 1 whose head
    split replicates the KV cache again as batch and as dp (mapping/layout.attention_worth_searching)."""
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
    if attention == SEARCH_ATTENTION:
        more = [t + (a,) for a in (1, 2) for t in out if attention_worth_searching(m, t[0])]
        return out + more if more else out
    return [t + (int(attention),) for t in out] if attention else out


def as_layout(rows: list[tuple[int, ...]], shape_tail: int = 1) -> Layout:
    """Stack layouts (tp, pp, ep, dp[, attention code]) as column arrays of shape (n, 1, ...) so they broadcast
    against a batch axis; without any fifth element, attention is by heads (the scalar default)."""
    if any(len(r) > 4 for r in rows):
        a = np.asarray([tuple(r) + (0,) * (5 - len(r)) for r in rows], dtype=np.int64)
        a = a.reshape(len(rows), 5, *([1] * shape_tail))
        return Layout(a[:, 0], a[:, 1], a[:, 2], a[:, 3], attn=a[:, 4])
    a = np.asarray(rows, dtype=np.int64).reshape(len(rows), 4, *([1] * shape_tail))
    return Layout(a[:, 0], a[:, 1], a[:, 2], a[:, 3])
