"""Held-out error: every row predicted by a fit that never saw rows like it, four ways -
  loso  leave one source out (a row's publication is unseen),
  loro  leave one regime out (fit without any max-load rows, predict them; likewise each regime),
  lovo  leave one chip vendor out (fit without AMD, predict AMD; ...),
  lomo  leave MoE (or dense) out (fit on dense models only, predict the MoE rows, and the reverse),
and the medians of |predicted - measured| / measured grouped by regime, MoE/dense, vendor and engine.
A group left out takes, for every parameter, its most specific value the remaining rows could fit, else the
parameter's documented start value (e.g. training rows under loro: the kernel-ceiling default).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tokenmath.analyses.calibration.fit import Fit, fit
from tokenmath.analyses.calibration.parameters import CalibrationModel
from tokenmath.analyses.calibration.predict import RowPrediction

SCHEMES: dict[str, tuple[str, Callable[[RowPrediction], str]]] = {
    "loso": ("source", lambda p: p.source_key),
    "loro": ("regime", lambda p: p.labels.regime),
    "lovo": ("vendor", lambda p: p.labels.vendor),
    "lomo": ("MoE or dense", lambda p: "moe" if p.labels.moe else "dense"),
}
GROUPINGS: dict[str, Callable[[RowPrediction], str]] = {
    "regime": lambda p: p.labels.regime,
    "moe": lambda p: "moe" if p.labels.moe else "dense",
    "vendor": lambda p: p.labels.vendor,
    "engine": lambda p: p.labels.engine,
}


def held_out(preds: list[RowPrediction], model: CalibrationModel, scheme: str, cache: dict) -> dict[str, float]:
    """Row id -> prediction by a fit on every other group of the scheme."""
    key = SCHEMES[scheme][1]
    usable = [p for p in preds if p.usable]
    out = {}
    for g in sorted({key(p) for p in usable}):
        f = fit([p for p in usable if key(p) != g], model, cache)
        for p in usable:
            if key(p) == g:
                v = f.predict(p)
                if v is not None and np.isfinite(v):
                    out[p.id] = v
    return out


def all_held_out(preds, model, cache: dict | None = None) -> tuple[Fit, dict[str, dict[str, float]]]:
    """(the fit on every scored row, {scheme: {row id: held-out prediction}})."""
    cache = {} if cache is None else cache
    return fit(preds, model, cache), {s: held_out(preds, model, s, cache) for s in SCHEMES}


def ape(pred: float | None, meas: float) -> float | None:
    return None if pred is None else abs(pred - meas) / meas


def _median(xs) -> dict:
    xs = [x for x in xs if x is not None]
    return {"rows": len(xs), "median_ape": float(np.median(xs)) if xs else None}


def medians(preds: list[RowPrediction], predicted: Callable[[RowPrediction], float | None]) -> dict:
    """{"all": {rows, median_ape}, "regime": {regime: {...}}, "moe": ..., "vendor": ..., "engine": ...} over the
    scored rows that `predicted` gives a value for."""
    sel = [p for p in preds if p.usable and p.labels.scored]
    out = {"all": _median([ape(predicted(p), p.measured) for p in sel])}
    for name, key in GROUPINGS.items():
        out[name] = {g: _median([ape(predicted(p), p.measured) for p in sel if key(p) == g])
                     for g in sorted({key(p) for p in sel})}
    return out


def faster_than_pure_roofline(preds, predictions: dict[str, dict[str, float]]) -> list[dict]:
    """Every prediction (any scheme, the defaults, the fit) faster than the pure roofline of its row: must be none."""
    out = []
    for p in preds:
        if not p.usable:
            continue
        cands = {"roofline_defaults": p.predicted_default, **{s: v.get(p.id) for s, v in predictions.items()}}
        for s, v in cands.items():
            if v is not None and p.faster_than(v, p.predicted_peak):
                out.append({"id": p.id, "prediction": s, "value": v, "pure_roofline": p.predicted_peak,
                            "metric": p.row["metric"]})
    return out


def counts(preds: list[RowPrediction]) -> dict:
    """Rows per regime / vendor / engine / MoE-dense: all rows, and those predicted and scored."""
    out = {}
    for name, key in GROUPINGS.items():
        c: dict = {}
        for p in preds:
            e = c.setdefault(key(p), {"rows": 0, "scored": 0})
            e["rows"] += 1
            e["scored"] += int(p.usable and p.labels.scored)
        out[name] = dict(sorted(c.items()))
    return out
