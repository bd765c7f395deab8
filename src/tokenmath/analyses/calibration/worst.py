"""The measurements predicted furthest off when their source is held out, each with the term of the model that
explains it: what dominates the prediction (predict.row_term: the phase and its bottleneck) and the fitted
residuals the row takes that sit on a bound of their physical range (a bound reached means the fit wanted to go
further: physics is missing there, parameters.py). The leave-one-source-out prediction is the one ranked: the
figure a user gets for a setup no shipped source measured."""
from __future__ import annotations

WORST_N = 20


def edges_for(fit, pred) -> list[str]:
    """The fitted values row `pred` takes that sit on a bound, as 'name group value (lower|upper bound)'."""
    out = []
    for prm in fit.model.params:
        if prm.applies != pred.kind:
            continue
        fv = fit.fitted_for(prm, pred)
        if fv is not None and fv.edge:
            out.append(f"{prm.name} {fv.group} {fv.value:g} ({fv.edge} bound)")
    return out


def worst(v, n: int = WORST_N) -> list[dict]:
    """The n scored rows of Validation `v` with the largest leave-one-source-out |error|, largest first.
    ratio: predicted / measured of the row's metric; optimistic: the prediction is faster than the measurement
    (more throughput, or less time)."""
    from tokenmath.analyses.calibration.heldout import ape
    held = v.heldout["loso"]
    rows = []
    for p in v.preds:
        pred = held.get(p.id)
        if not (p.usable and p.labels.scored) or pred is None:
            continue
        rows.append({"id": p.id, "regime": p.labels.regime, "hardware": p.row["hardware"], "model": p.row["model"],
                     "engine": p.labels.engine, "metric": p.row["metric"], "measured": p.measured,
                     "predicted_loso": pred, "ratio": pred / p.measured, "ape": ape(pred, p.measured),
                     "optimistic": p.faster_than(pred, p.measured), "term": p.term,
                     "at_bound": edges_for(v.fit, p), "source": p.row.get("source")})
    rows.sort(key=lambda d: -d["ape"])
    return rows[:n]
