"""Validation of deduce on the provider table's open-weight endpoints (true active params from the catalog).

Three evidence sets per endpoint: price (input + output list prices), + speed (median output speed of the 1k
workload), + TTFT against prompt length (prefill_evidence.py). SRAM hosts are left out (their speed and prefill are
not HBM-roofline physics). Scored: coverage of the 80% interval of active params, its median width (high / low) and
the median error factor of the median (max(deduced/true, true/deduced)), as validation.py scores.

The prefill scale (Priors.prefill_scale) is chosen on the fit split (2026-05-31) only: `fit_scale` picks, for each
model, the grid value best on the OTHER models' fit rows (leave-one-model-out), and the check split (2026-07-07,
after the cut-off) is scored with the value chosen for its model on the fit split: held out in time and by model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.analyses.inverse import interval_calibration as ic
from tokenmath.analyses.inverse import provider_table as pt
from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.analyses.inverse.prefill_evidence import pairs
from tokenmath.base.errors import InputError

SETS = ("price", "price+speed", "price+speed+ttft")
SCALE_GRID = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
TARGETS = {"coverage_80": 0.80, "median_width": 5.0, "median_error_factor": 1.5}


def truth(rows, kind: str = "active") -> np.ndarray:
    """The catalog's active (or total, kind="total") params of each row, in B."""
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.params import count_params
    cache = {}
    for r in rows:
        if r.catalog_id not in cache:
            c = count_params(get_model(r.catalog_id))
            cache[r.catalog_id] = (c.active / 1e9, c.total / 1e9)
    return np.array([cache[r.catalog_id][0 if kind == "active" else 1] for r in rows])


def rows_with_truth(split: str) -> list:
    return [r for r in pt.load(split) if r.catalog_id and not r.sram]


def kwargs(r, evidence: str) -> dict:
    kw = {"input_price": r.input_price, "output_price": r.output_price}
    if "speed" in evidence and r.output_speed:
        kw["output_speed"] = r.output_speed
    if "ttft" in evidence and len(r.ttft) >= 2:
        kw["ttft_curve"] = r.ttft_points()
    return kw


def contradictory(r) -> list[str]:
    """Why this endpoint's TTFT-vs-prompt evidence is left out in part or in whole (empty: none of it)."""
    if len(r.ttft) < 2:
        return ["fewer than two prompt lengths measured"]
    return list(pairs(r.ttft_points())[1])


def run(rows, evidence: str, priors: Priors, quantity: str = "active_params_b", calibrated: bool = True) -> np.ndarray:
    """(low, median, high) of `quantity` (active_params_b or total_params_b, B) for each row; NaN where deduce refuses
    (the evidence contradicts the priors). calibrated: the interval deduce prints (interval_calibration.py)."""
    return run_both(rows, evidence, priors, calibrated)[quantity]


def run_both(rows, evidence: str, priors: Priors, calibrated: bool = False) -> dict:
    """{quantity: (low, median, high) per row} for active and total params, from one deduction per row."""
    out = {k: np.full((len(rows), 3), np.nan) for k in ic.QUANTITIES}
    for i, r in enumerate(rows):
        try:
            sm = deduce(priors=priors, calibrated=calibrated, **kwargs(r, evidence)).summary
        except InputError:
            continue
        for k in ic.QUANTITIES:
            out[k][i] = sm[k]["low"], sm[k]["median"], sm[k]["high"]
    return out


def score(iv: np.ndarray, true: np.ndarray) -> dict:
    ok = ~np.isnan(iv[:, 1])
    lo, med, hi, t = iv[ok, 0], iv[ok, 1], iv[ok, 2], true[ok]
    return {"rows": int(ok.sum()), "refused": int((~ok).sum()),
            "coverage_80": float(np.mean((lo <= t) & (t <= hi))) if ok.any() else float("nan"),
            "median_width": float(np.median(hi / lo)) if ok.any() else float("nan"),
            "median_error_factor": float(np.median(np.maximum(med / t, t / med))) if ok.any() else float("nan")}


def fit_scale(samples: int = 20_000, grid=SCALE_GRID, rows=None) -> dict:
    """Per model id, the prefill scale that is best (smallest median |log error| of the all-evidence median) on the
    fit split's rows of the other models; plus the one best on all of them ('*')."""
    rows = rows if rows is not None else rows_with_truth("fit")
    true = truth(rows)
    err = np.stack([np.abs(np.log(run(rows, SETS[-1], Priors(samples=samples, prefill_scale=c), calibrated=False)[:, 1]
                                   / true))
                    for c in grid], axis=1)
    ids = np.array([r.catalog_id for r in rows])

    def best(mask):
        return float(grid[int(np.nanargmin(np.nanmedian(err[mask], axis=0)))])
    out = {m: best(ids != m) for m in sorted(set(ids))}
    out["*"] = best(np.ones(len(rows), bool))
    return out


def intervals(rows, samples: int, scales: dict) -> dict:
    """{evidence set: {quantity: the posterior's (low, median, high) per row}}; the TTFT set with each row's model's
    prefill scale (scales: fit_scale's)."""
    pr = Priors(samples=samples)
    out = {e: run_both(rows, e, pr) for e in SETS[:-1]}
    last = {k: np.full((len(rows), 3), np.nan) for k in ic.QUANTITIES}
    for m in sorted({r.catalog_id for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.catalog_id == m]
        sub = run_both([rows[i] for i in idx], SETS[-1], replace(pr, prefill_scale=scales.get(m, scales["*"])))
        for k in ic.QUANTITIES:
            last[k][idx] = sub[k]
    out[SETS[-1]] = last
    return out


def truths(rows) -> dict:
    return {"active_params_b": truth(rows), "total_params_b": truth(rows, "total")}


def vendor(r) -> str:
    """The company behind a provider-table row ("Amazon Bedrock Standard" and "Amazon Bedrock" are one vendor)."""
    return r.provider.split()[0]


def fit_interval(samples: int = 20_000, scales: dict | None = None) -> dict:
    """The interval scale q of each evidence set and quantity on the fit split (interval_calibration.py), and the
    scores of the calibrated intervals held out: each model's rows scaled with the q of the other models' rows, and
    each vendor's with the q of the other vendors'."""
    rows = rows_with_truth("fit")
    scales = scales if scales is not None else fit_scale(samples)
    raw, tr = intervals(rows, samples, scales), truths(rows)
    groups = {"model": np.array([r.catalog_id for r in rows]), "vendor": np.array([vendor(r) for r in rows])}
    out = {"rows": len(rows), "q": {}, "held_out": {g: {} for g in groups}, "posterior": {}}
    for e in SETS:
        for k in ic.QUANTITIES:
            sc = ic.scores(raw[e][k], tr[k])
            out["q"].setdefault(e, {})[k] = ic.quantile(sc)
            out["posterior"].setdefault(e, {})[k] = score(raw[e][k], tr[k])
            for g, ids in groups.items():
                cal = raw[e][k].copy()
                for v in set(ids):
                    cal[ids == v] = ic.scale_rows(raw[e][k][ids == v], ic.quantile(sc[ids != v]))
                out["held_out"][g].setdefault(e, {})[k] = score(cal, tr[k])
    return out


@dataclass(frozen=True)
class TableValidation:
    split: str
    scales: dict
    scores: dict          # {evidence set: score of the interval deduce prints (calibrated)} (active params)
    posterior: dict       # the same, the posterior's own interval
    total: dict           # {evidence set: score of total params, calibrated}
    contradictory: tuple
    rows: int

    def to_dict(self) -> dict:
        return {"split": self.split, "rows": self.rows, "targets": TARGETS, "prefill_scales": self.scales,
                "scores": self.scores, "posterior_scores": self.posterior, "total_params_scores": self.total,
                "contradictory": [list(c) for c in self.contradictory],
                "contradictory_share": len(self.contradictory) / max(self.rows, 1)}


def validate(split: str = "check", samples: int = 20_000, scales: dict | None = None,
             q: dict | None = None) -> TableValidation:
    """Score the three evidence sets on `split`'s open-weight endpoints, as deduce prints them (each set's interval
    scaled by the q shipped, or `q` {set: {quantity: q}}) and as the posterior gives them; the TTFT set uses, for
    each row, the prefill scale chosen without its model on the fit split (fit_scale)."""
    rows = rows_with_truth(split)
    scales = scales if scales is not None else fit_scale(samples)
    raw, tr = intervals(rows, samples, scales), truths(rows)

    def q_of(e, k):
        if q is not None:
            return q[e][k]
        sh = ic.shipped(e, k)
        return sh.q if sh else 1.0
    cal = {e: {k: ic.scale_rows(raw[e][k], q_of(e, k)) for k in ic.QUANTITIES} for e in SETS}
    a = "active_params_b"
    bad = tuple((r.provider, r.model, "; ".join(contradictory(r))) for r in rows if contradictory(r))
    return TableValidation(split, scales, {e: score(cal[e][a], tr[a]) for e in SETS},
                           {e: score(raw[e][a], tr[a]) for e in SETS},
                           {e: score(cal[e]["total_params_b"], tr["total_params_b"]) for e in SETS}, bad, len(rows))


def deduce_table_model(name: str, provider: str | None = None, priors: Priors | None = None,
                       split: str = "fit") -> dict:
    """One provider-table endpoint deduced with each evidence set (SETS), its sources, the flags that ask the
    all-evidence question, the contradictions and (open weights in the catalog) the truth."""
    from tokenmath.analyses.inverse.same_question import as_flags
    r = pt.find(name, provider, split)
    pr = priors or Priors()
    out = {"endpoint": r.to_dict(), "sets": {}, "contradictory": contradictory(r) + (
        ["SRAM-based host: speed and TTFT not HBM-roofline physics, left out"] if r.sram else [])}
    for e in SETS:
        kw = kwargs(r, "price" if r.sram else e)
        try:
            out["sets"][e] = {"kwargs": kw, "summary": deduce(priors=pr, **kw).summary, "error": None}
        except InputError as ex:
            out["sets"][e] = {"kwargs": kw, "summary": None, "error": str(ex)}
    out["flags"] = as_flags(kwargs(r, "price" if r.sram else SETS[-1]))
    out["true_active_params_b"] = float(truth([r])[0]) if r.catalog_id else None
    return out
