"""The fit of a CalibrationModel's declared parameters on measurement rows: a grid search minimising the median
|log(predicted / measured)| per group of rows (parameters.py says which rows share a value and how a value enters).

Within one block of parameters (same rows, same scopes) the search is joint over the product of their grids. With
several blocks for one kind of row, all of them are first searched jointly on all rows (up to JOINT_MAX grid points),
then fitted in turn per group, each holding the others at their current values, for ROUNDS rounds (one suffices
when there is one block per kind of row, as in the flat set). Scopes are fitted general first ("all") then specific, and a row
takes its most specific fitted group, else the parameter's start value.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.analyses.calibration.parameters import (MIN_ROWS, MIN_SOURCES, CalibrationModel, FittedParameter,
                                                       blocks)
from tokenmath.analyses.calibration.predict import RowPrediction

ROUNDS = 3
JOINT_MAX = 50_000     # largest grid product searched jointly over all of one kind's parameters


@dataclass(frozen=True)
class FittedValue:
    param: FittedParameter
    scope: str
    group: str
    value: float
    rows: int
    sources: int
    median_abs_log_error: float    # in-sample, at the fitted point
    # the rows whose prediction takes this value (no more specific group holds one for them) and their sources: a
    # family value searched on 40 rows may decide only the 13 of one source that no engine group answers for
    decides_rows: int = 0
    decides_sources: int = 0

    @property
    def edge(self) -> str | None:
        return self.param.edge(self.value)

    def to_dict(self) -> dict:
        d = {"name": self.param.name, "scope": self.scope, "group": self.group, "value": self.value,
             "bounds": list(self.param.bounds), "unit": self.param.unit, "rows": self.rows, "sources": self.sources,
             "median_abs_log_error": self.median_abs_log_error, "decides_rows": self.decides_rows,
             "decides_sources": self.decides_sources, "provenance": "fitted", "at_edge": self.edge}
        if self.edge:
            d["physics_missing"] = (f"{self.param.name} sits at its {self.edge} bound "
                                    f"{self.param.bounds[0 if self.edge == 'lower' else 1]:g}: the fit wants to go "
                                    f"beyond what is physically possible, so an effect the model lacks is absorbed")
        return d


@dataclass
class Fit:
    model: CalibrationModel
    values: dict                  # (param name, group) -> FittedValue

    def fitted_for(self, p: FittedParameter, pred: RowPrediction) -> "FittedValue | None":
        """The fitted value a row takes for parameter p: its most specific fitted group's (None: p's start)."""
        for scope in p.scopes:
            fv = self.values.get((p.name, pred.labels.key(scope)))
            if fv is not None:
                return fv
        return None

    def value_for(self, p: FittedParameter, pred: RowPrediction) -> float:
        fv = self.fitted_for(p, pred)
        return p.start if fv is None else fv.value

    def values_for(self, pred: RowPrediction) -> dict:
        return {p.enters if p.enters != "efficiency" else p.name: self.value_for(p, pred)
                for p in self.model.params if p.applies == pred.kind}

    def predict(self, pred: RowPrediction) -> float | None:
        if not pred.usable:
            return None
        return float(np.asarray(pred.evaluate(self.values_for(pred))))

    def table(self) -> list[dict]:
        return [fv.to_dict() for fv in self.values.values()]

    def at_edges(self) -> list[FittedValue]:
        return [fv for fv in self.values.values() if fv.edge]


def _mesh(block: tuple[FittedParameter, ...]) -> dict:
    """The block's grid product as broadcastable arrays, keyed by the term each parameter enters as."""
    axes = np.meshgrid(*[np.array(p.grid, float) for p in block], indexing="ij")
    return {p.enters if p.enters != "efficiency" else p.name: a for p, a in zip(block, axes)}


def _evaluate_block(pred: RowPrediction, block, others: dict, cache: dict) -> np.ndarray:
    key = (pred.id, tuple(p.name for p in block), tuple(sorted(others.items())))
    if key not in cache:
        mesh = _mesh(block)
        slow = [p for p in block if p.enters == "efficiency"]
        if not slow:
            out = pred.evaluate({**others, **mesh})
        else:            # the engine re-runs per value: evaluate point by point
            shape = next(iter(mesh.values())).shape
            out = np.empty(shape)
            for idx in np.ndindex(shape):
                out[idx] = float(np.asarray(pred.evaluate({**others, **{k: float(a[idx]) for k, a in mesh.items()}})))
        cache[key] = np.broadcast_to(np.asarray(out, float), next(iter(mesh.values())).shape)
    return cache[key]


def _search(preds, block, fit: Fit, cache: dict) -> tuple[tuple, float]:
    """Index into the block's grid product minimising the median |log(pred / measured)| over `preds`."""
    G = []
    for pr in preds:
        vals = fit.values_for(pr)
        others = {k: v for k, v in vals.items() if k not in _mesh(block)}
        G.append(_evaluate_block(pr, block, others, cache))
    G = np.stack(G)
    meas = np.array([pr.measured for pr in preds]).reshape((-1,) + (1,) * (G.ndim - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.median(np.abs(np.log(G / meas)), axis=0)
    if not np.isfinite(err).any():
        return (), float("nan")
    best = np.nanmin(np.where(np.isfinite(err), err, np.nan))
    # ties (a parameter the rows do not constrain): the point nearest the start values, so an unconstrained
    # parameter keeps its documented default instead of landing on a bound
    dist = sum(((a - p.start) / (p.bounds[1] - p.bounds[0])) ** 2
               for p, a in zip(block, np.meshgrid(*[np.array(q.grid, float) for q in block], indexing="ij")))
    idx = np.unravel_index(np.argmin(np.where(err <= best + 1e-12, dist, np.inf)), err.shape)
    return idx, float(err[idx])


def fit(preds: list[RowPrediction], model: CalibrationModel, cache: dict | None = None) -> Fit:
    """Fit the model's parameters on the usable, scored rows of `preds` (cache: shared between fits of one model)."""
    cache = {} if cache is None else cache
    result = Fit(model, {})
    rows = [p for p in preds if p.usable and p.labels.scored]
    blks = blocks(model.params)
    for applies in ("inference", "training"):
        # several blocks for one kind of row: start from their joint all-rows optimum (coordinate descent from the
        # start values can stall where one block absorbs what another describes)
        mine = [p for p in rows if p.kind == applies]
        joint = tuple(q for b in blks if b[0].applies == applies for q in b)
        if (mine and len({b[0].block for b in blks if b[0].applies == applies}) > 1
                and all("all" in q.scopes for q in joint) and np.prod([len(q.grid) for q in joint]) <= JOINT_MAX):
            idx, err = _search(mine, joint, result, cache)
            n_src = len({p.source_key for p in mine})
            for i, prm in zip(idx, joint):
                result.values[(prm.name, "_all")] = FittedValue(prm, "all", "_all", float(prm.grid[i]), len(mine),
                                                                n_src, err)
    for _ in range(ROUNDS if len(blks) > 1 else 1):
        for block in blks:
            applies, scopes = block[0].block
            mine = [p for p in rows if p.kind == applies]
            for scope in reversed(scopes):                     # general first
                groups: dict = {}
                for p in mine:
                    if p.labels.key(scope) is not None:
                        groups.setdefault(p.labels.key(scope), []).append(p)
                for g, sel in sorted(groups.items()):
                    n_src = len({p.source_key for p in sel})
                    if scope != "all" and (len(sel) < MIN_ROWS or n_src < MIN_SOURCES):
                        continue
                    idx, err = _search(sel, block, result, cache)
                    if not idx:
                        continue
                    for i, prm in zip(idx, block):
                        result.values[(prm.name, g)] = FittedValue(prm, scope, g, float(prm.grid[i]), len(sel), n_src,
                                                                   err)
    return _with_decided(result, rows)


def _with_decided(result: Fit, rows: list[RowPrediction]) -> Fit:
    """The fit with each value's decides_rows / decides_sources: the rows that take it and their sources."""
    took: dict = {}
    for p in rows:
        for prm in result.model.params:
            fv = result.fitted_for(prm, p) if prm.applies == p.kind else None
            if fv is not None:
                took.setdefault((prm.name, fv.group), []).append(p.source_key)
    for key, fv in result.values.items():
        srcs = took.get(key, [])
        result.values[key] = replace(fv, decides_rows=len(srcs), decides_sources=len(set(srcs)))
    return result
