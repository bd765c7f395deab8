"""Throughput per chip against interactivity: the frontier over batch sizes and the layouts of one scale-up domain.

Serving benchmarks publish this chart (tokens/s/chip vs tokens/s/user). A point is on the frontier when no other
point is both faster per user and more productive per chip.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS, layouts_for
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.analyses.serving.by_concurrency import concurrency_axis, trace
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.serving.grid import COST_KEYS, Grid, attention_arg, over_batches
from tokenmath.analyses.serving.speculative import Draft, resolve_draft, speculation_notes


def frontier_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Points not dominated in (x up, y up): sort by x descending, keep running maxima of y."""
    order = np.lexsort((-y, -x))
    keep = np.zeros(x.size, bool)
    best = -np.inf
    for i in order:  # one pass over the candidates already sorted; O(n)
        if y[i] > best:
            keep[i] = True
            best = y[i]
    return keep


def flag_frontier(points: list[dict]) -> list[dict]:
    """Each point (output_tokens_per_s_per_user, output_tokens_per_s_per_chip) marked `frontier` when no other
    point of the list beats it on both axes."""
    if points:
        x = np.array([p["output_tokens_per_s_per_user"] or 0.0 for p in points])
        y = np.array([p["output_tokens_per_s_per_chip"] or 0.0 for p in points])
        for p, k in zip(points, frontier_mask(x, y)):
            p["frontier"] = bool(k)
    return points


@dataclass(frozen=True)
class Pareto:
    setup: Setup
    chips: int
    grid: Grid
    points: list[dict]      # every (layout, batch) point that fits
    frontier: list[dict]    # the points no other beats on both axes, most interactive first
    # the closed-loop steady state of each layout at each concurrency (by_concurrency.py), `frontier` flagged
    by_concurrency: list[dict] = field(default_factory=list)
    by_concurrency_notes: list[str] = field(default_factory=list)
    notes: tuple[str, ...] = ()            # beyond the engine's and the draft's (analyses/ask.py)
    draft: Draft | None = None      # speculative decoding (None: plain decoding)

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": self.chips, "engine": su.engine_dict,
                "notes": [su.engine_note, *speculation_notes(self.draft), *self.notes],
                **({} if self.draft is None else {"speculation": self.draft.to_dict()}),
                "input_len": self.grid.input_len, "output_len": self.grid.output_len,
                "frontier": self.frontier, "points_evaluated": len(self.points),
                "layouts": [fmt_layout(*t) for t in self.grid.layouts],
                "by_concurrency": self.by_concurrency, "by_concurrency_notes": self.by_concurrency_notes,
                **what_if_dict(su.hardware)}


def pareto(model, hardware, *, chips=None, input_len=1024, output_len=256, weight_dtype=None, kv_dtype=None,
           efficiency=None, allow_pp: bool = False, engine=None, concurrency=None, speculation=None,
           attention_sharding="heads", **knobs) -> Pareto:
    """The static-batch frontier over batches and layouts; with a serving engine, also each layout's closed-loop
    steady state at each concurrency (default by_concurrency.DEFAULT_CONCURRENCY; () for none).
    speculation: a speculative.Speculation (--draft/--mtp): every point decodes with it, the steady state by
    concurrency too (no PP layouts). attention_sharding: heads, batch or dp for every layout, or "any" (heads, and batch
    and dp where the head split replicates the KV cache: mapping/candidates.layouts_for)."""
    su0 = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency, engine=engine,
                **knobs)
    dr = resolve_draft(speculation, su0.model, su0.precision, weight_dtype, kv_dtype)
    if dr is not None:
        allow_pp = False
    chips = int_arg(chips if chips is not None else su0.hardware.scaleup_domain, "chips", 1, MAX_SEARCH_CHIPS)
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    cs = concurrency_axis(concurrency, su0.engine)
    lays = layouts_for(su0.model, chips, allow_pp=allow_pp, max_tp=su0.hardware.scaleup_domain,
                       attention=attention_arg(attention_sharding))
    if not lays:
        raise InputError("chips", f"no layout of {chips} chips suits {su0.model.id}",
                         f"a chip count with a divisor that divides the {su0.model.n_heads} heads")
    g = over_batches(su0, lays, input_len, output_len, draft=dr)
    if g is None:
        raise InputError("chips", f"{su0.model.id} does not fit on {chips} x {su0.hardware.id} at "
                         f"{input_len + output_len:,} tokens", "more chips, a shorter context or a smaller dtype")
    ok = np.asarray(g.fits)
    x = np.where(ok, g.tokens_per_s_per_user, np.nan)
    y = np.where(ok, g.output_tokens_per_s_per_chip, np.nan)
    costs = g.costs_per_mtok(su0.hardware.price_usd_per_hour)
    pts = []
    idx = np.argwhere(ok)
    for li, bi in idx:
        t = g.layouts[li]
        pts.append({"layout": fmt_layout(*t), "tp": t[0], "pp": t[1], "ep": t[2], "dp": t[3],
                    "batch": int(g.batch[li, bi]), "output_tokens_per_s_per_user": finite(x[li, bi]),
                    "output_tokens_per_s_per_chip": finite(y[li, bi]),
                    "decode_step_s": finite(g.step_s[li, bi]), "ttft_s": finite(g.ttft_s[li, bi]),
                    **{k: None if costs is None else finite(costs[k][li, bi]) for k in COST_KEYS},
                    "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
                    "communication_share": finite(g.comm_share[li, bi]), "bottleneck": str(g.bottleneck[li, bi])})
    xs = np.array([p["output_tokens_per_s_per_user"] for p in pts])
    ys = np.array([p["output_tokens_per_s_per_chip"] for p in pts])
    keep = frontier_mask(xs, ys) if pts else np.zeros(0, bool)
    front = sorted([p for p, k in zip(pts, keep) if k], key=lambda p: -p["output_tokens_per_s_per_user"])
    fitting = [t for t, any_ok in zip(g.layouts, ok.any(axis=1)) if any_ok]
    by_c, notes = trace(su0, fitting, cs, input_len, output_len, draft=dr)
    return Pareto(setup=su0, chips=chips, grid=g, points=pts, frontier=front, by_concurrency=flag_frontier(by_c),
                  by_concurrency_notes=notes, draft=dr)
