"""Validation of deduce held out by provider, on open-weight endpoints whose architecture is in the catalog.

The one fitted parameter of deduce is Priors.cost_scale (list price / the closed form's cost at the priors' middles,
calibrate.py). Held out by provider: each provider's rows are deduced with the scale that is best (smallest median
|log error|) on the OTHER providers' rows, so no row is scored with a scale it helped choose. Scored: coverage of the
80% interval of active params, its median width (high / low) and the median error factor of the median
(max(deduced/true, true/deduced)). Targets (issue 22): coverage >= 80%, width <= 5x, error <= 1.5x.

Two sets: every open-weight row with its price evidence (input/output, cached, long-context tier), and the rows that
also carry a measured output speed from a non-SRAM host (data/api_evidence.toml), scored price-only and with speed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.analyses.inverse.calibrate import COST_SCALE_GRID
from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.analyses.inverse.evidence import load
from tokenmath.base.errors import InputError

PRICE_KINDS = ("price", "cached", "long_context")
TARGETS = {"coverage_80": 0.80, "median_width": 5.0, "median_error_factor": 1.5}


@dataclass(frozen=True)
class Score:
    """One validation set: rows scored, coverage of the 80% interval, median width and error factor (held out)."""
    label: str
    rows: int
    providers: int
    coverage_80: float
    median_width: float
    median_error_factor: float
    per_row: tuple = ()

    def meets(self) -> dict:
        return {"coverage_80": self.coverage_80 >= TARGETS["coverage_80"],
                "median_width": self.median_width <= TARGETS["median_width"],
                "median_error_factor": self.median_error_factor <= TARGETS["median_error_factor"]}

    def to_dict(self) -> dict:
        return {"label": self.label, "rows": self.rows, "providers": self.providers, "coverage_80": self.coverage_80,
                "median_width": self.median_width, "median_error_factor": self.median_error_factor,
                "meets_target": self.meets(), "per_row": [dict(r) for r in self.per_row]}


@dataclass(frozen=True)
class Validation:
    scores: tuple
    samples: int
    grid: tuple

    def to_dict(self) -> dict:
        return {"targets": TARGETS, "samples": self.samples, "cost_scale_grid": list(self.grid),
                "scores": [s.to_dict() for s in self.scores]}


def _grid(rows, kinds, samples, grid):
    """Deduced (low, median, high) active params (B) for every row x candidate cost_scale; NaN where refused."""
    out = np.full((3, len(rows), len(grid)), np.nan)
    for j, c in enumerate(grid):
        pr = Priors(samples=samples, cost_scale=float(c))
        for i, r in enumerate(rows):
            try:
                a = deduce(priors=pr, **r.deduce_kwargs(kinds)).summary["active_params_b"]
            except InputError:
                continue
            out[:, i, j] = a["low"], a["median"], a["high"]
    return out


def _truth(rows):
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.params import count_params
    return np.array([count_params(get_model(r.catalog_id)).active / 1e9 for r in rows])


def heldout_scales(rows, samples: int = 20_000, grid=COST_SCALE_GRID, kinds=PRICE_KINDS) -> tuple[dict, np.ndarray]:
    """For every provider of `rows`: the cost_scale of `grid` that is best (smallest median |log error| of the deduced
    active params, evidence `kinds`) on the OTHER providers' rows. Returns ({provider: scale}, the (3, rows, grid)
    array of deduced low / median / high it was chosen from)."""
    lmh = _grid(rows, kinds, samples, grid)
    err = np.abs(np.log(lmh[1] / _truth(rows)[:, None]))
    prov = np.array([r.provider for r in rows])
    scales = {}
    for p in sorted(set(prov)):
        other = prov != p
        e = np.nanmedian(err[other], axis=0) if other.any() else np.nanmedian(err, axis=0)
        scales[p] = float(grid[int(np.nanargmin(e))])
    return scales, lmh


def _score(label, rows, truth, lo, med, hi, scale) -> Score:
    per_row = [(("model", r.model), ("provider", r.provider), ("true_b", float(t)), ("median_b", float(m)),
                ("low_b", float(a)), ("high_b", float(b)), ("cost_scale", float(c)))
               for r, t, a, m, b, c in zip(rows, truth, lo, med, hi, scale) if np.isfinite(m)]
    d = [dict(r) for r in per_row]
    return Score(label, len(d), len({r["provider"] for r in d}),
                 float(np.mean([r["low_b"] <= r["true_b"] <= r["high_b"] for r in d])),
                 float(np.median([r["high_b"] / r["low_b"] for r in d])),
                 float(np.median([max(r["median_b"] / r["true_b"], r["true_b"] / r["median_b"]) for r in d])),
                 tuple(per_row))


def heldout_score(label, rows, kinds, samples: int = 20_000, grid=COST_SCALE_GRID, scales: dict | None = None) -> Score:
    """Score `rows` (ApiEvidence of open-weight catalog models) using evidence `kinds`, held out by provider: each
    provider's rows with the cost_scale chosen without them. `scales` ({provider: scale}, from heldout_scales on a
    larger set) fixes that choice; without it, the scale is chosen among `rows` themselves with `kinds`."""
    truth = _truth(rows)
    if scales is None:
        scales, (lo, med, hi) = heldout_scales(rows, samples, grid, kinds)
        j = [list(grid).index(scales[r.provider]) for r in rows]
        i = np.arange(len(rows))
        lo, med, hi = lo[i, j], med[i, j], hi[i, j]
    else:
        lo, med, hi = (np.full(len(rows), np.nan) for _ in range(3))
        for i, r in enumerate(rows):
            try:
                a = deduce(priors=Priors(samples=samples, cost_scale=scales[r.provider]),
                           **r.deduce_kwargs(kinds)).summary["active_params_b"]
            except InputError:
                continue
            lo[i], med[i], hi[i] = a["low"], a["median"], a["high"]
    return _score(label, rows, truth, lo, med, hi, [scales[r.provider] for r in rows])


def validate(samples: int = 20_000, rows=None, grid=COST_SCALE_GRID) -> Validation:
    """The validation table of docs/deduce.md: all open-weight rows on price evidence; the rows with a usable speed
    price-only and with speed. The speed rows are scored with the cost_scale held out on ALL open-weight rows of the
    other providers (price evidence): chosen among a handful of speed rows, the scale swings 1.26 - 4.0 from one
    held-out provider to the next, and that swing, not the evidence, would dominate their error."""
    rows = rows if rows is not None else load()
    rows = [r for r in rows if r.open_weights and r.catalog_id]
    fast = [r for r in rows if "speed" in r.available()]
    scales, (lo, med, hi) = heldout_scales(rows, samples, grid)
    j = [list(grid).index(scales[r.provider]) for r in rows]
    i = np.arange(len(rows))
    scores = [_score("all open-weight rows, price evidence", rows, _truth(rows), lo[i, j], med[i, j], hi[i, j],
                     [scales[r.provider] for r in rows])]
    if fast:
        scores.append(heldout_score("rows with a measured speed, price evidence only", fast, PRICE_KINDS, samples,
                                    grid, scales))
        scores.append(heldout_score("rows with a measured speed, price + speed", fast, PRICE_KINDS + ("speed",),
                                    samples, grid, scales))
    return Validation(tuple(scores), samples, tuple(float(c) for c in grid))
