"""Measured accuracy: predict every published measurement in data/measurements.toml and report the distance.

Each row is predicted
- by the pure roofline (100% of every peak, no overhead): the bound no prediction may beat (counted; must be 0);
- at the roofline defaults (kernel microbenchmark ceilings, specs/efficiency.py), nothing fitted;
- by a CalibrationModel (parameters.py: a declared list of named, bounded parameters) fitted on the other rows, held
  out four ways (heldout.py: leave one source / regime / vendor / MoE-or-dense out).
Errors are medians of |predicted - measured| / measured per regime, MoE/dense, vendor and engine (labels.py).
Rows whose measurement beats the pure roofline are flagged: the data or the model of its configuration is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.analyses.calibration.fit import Fit
from tokenmath.analyses.calibration.heldout import (SCHEMES, all_held_out, ape, counts, faster_than_pure_roofline,
                                                    medians)
from tokenmath.analyses.calibration.parameters import FLAT_MODEL, TRAIN_BW, CalibrationModel, physics_model
from tokenmath.analyses.calibration.predict import THROUGHPUT, RowPrediction, metric_function, predict_all
from tokenmath.analyses.calibration.worst import WORST_N, worst

__all__ = ["THROUGHPUT", "Validation", "metric_function", "validate", "validate_flat", "write_calibration"]

FLAG = ("the measurement beats the pure roofline bound: the row's configuration as recorded (dtype, batch, "
        "speculative decoding, per-chip scaling) or tokenmath's model of it is wrong; read the row's notes")


@dataclass(frozen=True)
class Validation:
    model: CalibrationModel
    preds: tuple[RowPrediction, ...]
    fit: Fit                                   # on every scored row: what --write-calibration ships
    heldout: dict                              # scheme -> {row id: held-out prediction}

    def rows(self) -> list[dict]:
        out = []
        for p in self.preds:
            r = p.row
            d = {"id": r["id"], "kind": p.kind, "regime": p.labels.regime, "phase": r.get("regime", p.kind),
                 **{k: v for k, v in p.labels.to_dict().items() if k != "regime"}, "model": r["model"],
                 "hardware": r["hardware"], "metric": r["metric"], "measured": p.measured, "source": r.get("source")}
            if p.notes:
                d["notes"] = list(p.notes)
            if p.skipped:
                d["skipped"] = p.skipped
                out.append(d)
                continue
            if not p.labels.scored:
                d["not_scored"] = "input_len/output_len are caps of a variable-length dataset (lengths_are_caps)"
            d["predicted_pure_roofline"] = p.predicted_peak
            d["ape_pure_roofline"] = ape(p.predicted_peak, p.measured)
            d["predicted_roofline"] = p.predicted_default
            d["ape_roofline"] = ape(p.predicted_default, p.measured)
            d["beats_pure_roofline"] = p.beats_roofline
            if p.beats_roofline:
                d["flag"] = FLAG
            d["predicted_calibrated"] = self.fit.predict(p)
            d["predicted_heldout"] = {s: v.get(p.id) for s, v in self.heldout.items()}
            d["ape_heldout"] = {s: ape(v.get(p.id), p.measured) for s, v in self.heldout.items()}
            d["predicted_calibrated_heldout"] = d["predicted_heldout"]["loso"]     # the leave-one-source-out figure
            d["ape_calibrated_heldout"] = d["ape_heldout"]["loso"]
            out.append(d)
        return out

    def summary(self) -> dict:
        P = list(self.preds)
        med = {"pure_roofline": medians(P, lambda p: p.predicted_peak),
               "roofline_defaults": medians(P, lambda p: p.predicted_default),
               "in_sample": medians(P, self.fit.predict)}
        for s, v in self.heldout.items():
            med[s] = medians(P, lambda p, v=v: v.get(p.id))
        faster = faster_than_pure_roofline(P, {"in_sample": {p.id: self.fit.predict(p) for p in P if p.usable},
                                               **self.heldout})
        return {"model": self.model.name, "description": self.model.description,
                "rows": {"total": len(P), "predicted": sum(p.usable for p in P),
                         "scored": sum(p.usable and p.labels.scored for p in P),
                         "skipped": sum(p.skipped is not None for p in P)},
                "schemes": {s: f"leave one {what} out" for s, (what, _) in SCHEMES.items()},
                "median_ape": med,
                "faster_than_pure_roofline": {"count": len(faster), "rows": faster},
                "measured_beats_pure_roofline": [p.id for p in P if p.usable and p.beats_roofline],
                "training": self._training_points(),
                "at_edge": [fv.to_dict() for fv in self.fit.at_edges()]}

    def _training_points(self) -> dict:
        """How far training utilisation lands, in points of peak (MFU, or TFLOP/s per chip over the dense peak)."""
        from tokenmath.specs.hardware import get_hardware
        pts = {"roofline_defaults": [], "loso": []}
        for p in self.preds:
            m = p.row["metric"]
            if p.kind != "training" or not p.usable or m not in ("mfu", "tflops_per_chip"):
                continue
            scale = 100.0 if m == "mfu" else 100.0 / (get_hardware(p.row["hardware"]).peak_flops("bf16") / 1e12)
            pts["roofline_defaults"].append(abs(p.predicted_default - p.measured) * scale)
            if p.id in self.heldout["loso"]:
                pts["loso"].append(abs(self.heldout["loso"][p.id] - p.measured) * scale)
        return {f"median_utilisation_points_off_{k}": float(np.median(v)) for k, v in pts.items() if v}

    def parameters(self) -> list[dict]:
        return self.fit.table()

    def calibration_table(self) -> dict:
        """Per hardware family (and "_all", "training") the flat efficiencies, as specs.efficiency.calibrated reads
        them from data/calibration.toml; empty for a model without the flat parameters."""
        out: dict = {}
        for fv in self.fit.values.values():
            if fv.param.enters == "train_flops":
                out["training"] = {"flops": fv.value, "memory_bw": TRAIN_BW, "layer_overhead_s": 0.0}
            elif fv.param.enters in ("flops", "memory_bw", "layer_overhead_s"):
                out.setdefault(fv.group, {})[fv.param.enters] = fv.value
        return {k: v for k, v in out.items() if len(v) == 3}

    def counts(self) -> dict:
        return counts(list(self.preds))

    def worst(self, n: int = WORST_N) -> list[dict]:
        """The n rows furthest off held out by source, each with the term that explains it (worst.py)."""
        return worst(self, n)

    def to_dict(self) -> dict:
        return {"summary": self.summary(), "parameters": self.parameters(), "calibration": self.calibration_table(),
                "declared": [p.to_dict() for p in self.model.params], "counts": self.counts(), "rows": self.rows(),
                "worst": self.worst()}


def validate(rows=None, model: CalibrationModel | None = None) -> Validation:
    """rows: a measurements table ({"inference": [...], "training": [...]}), default the shipped one. model: default
    the physics set (parameters.physics_model), the one the serving commands ship with."""
    model = physics_model() if model is None else model
    preds = predict_all(rows, model)
    f, held = all_held_out(preds, model)
    return Validation(model, tuple(preds), f, held)


def validate_flat(rows=None) -> Validation:
    """The same validation for the flat per-family set the tool shipped before issue 16 (the comparison)."""
    return validate(rows, FLAT_MODEL)


def _records(v: Validation, table: str) -> list[str]:
    lines = []
    for d in v.parameters():
        lines.append(f"[[{table}]]")
        lines += [f'name = "{d["name"]}"', f'scope = "{d["scope"]}"', f'group = "{d["group"]}"',
                  f"value = {d['value']!r}", f"bounds = [{d['bounds'][0]!r}, {d['bounds'][1]!r}]",
                  f'unit = "{d["unit"]}"', f"rows = {d['rows']}", f"sources = {d['sources']}",
                  'provenance = "fitted"', f'at_edge = "{d["at_edge"] or "no"}"', ""]
    return lines


def _heldout(v: Validation, table: str) -> list[str]:
    med = v.summary()["median_ape"]
    lines = []
    for scheme in SCHEMES:
        lines.append(f"[{table}.{scheme}]")
        lines += [f'"{g}" = {x["median_ape"]:.4f}' for g, x in med[scheme]["regime"].items()
                  if x["median_ape"] is not None]
        lines.append("")
    return lines


def write_calibration(v: Validation, path, flat: Validation | None = None) -> str:
    """The fitted values as TOML with their provenance (what rows, when, the held-out error), written whole or not
    at all (tokenmath.base.files.write_atomic); its first line names `tokenmath validate` (a file tokenmath wrote).
    v: the shipped set (physics); flat: the flat per-family set, kept for specs.efficiency.calibrated.
    Schema: `[family."X"]` flops / memory_bw / layer_overhead_s of the flat set, one `[[parameter]]` per flat
    fitted value, one `[[physics]]` per physics fitted value (read by specs.efficiency.physics_calibrated), each
    with its bounds and whether it sits at an edge; `[heldout.<scheme>]` (the shipped set) and
    `[heldout_flat.<scheme>]` median |error| per regime."""
    import datetime
    flat = v if flat is None and v.model.name == "flat" else flat
    s = v.summary()
    med = s["median_ape"]
    lines = ["# Efficiencies fitted on data/measurements.toml by `tokenmath validate --write-calibration`.",
             f"# Shipped set {v.model.name!r}: {v.model.description}.",
             "# Grid search minimising the median |log(predicted / measured)| per group of rows",
             "# (analyses/calibration/parameters.py declares each parameter: bounds, grid, scope).",
             "# A group with < 6 rows from < 2 sources takes the next scope's value (last: the all-rows fit).",
             "# Held-out error: leave-one-source-out (heldout_median_ape); [heldout.*] per regime, four ways.",
             f'model = "{v.model.name}"',
             f"rows = {s['rows']['scored']}",
             f"fitted = \"{datetime.date.today().isoformat()}\"",
             f"heldout_median_ape = {med['loso']['all']['median_ape']:.4f}",
             f"roofline_median_ape = {med['roofline_defaults']['all']['median_ape']:.4f}"]
    if flat is not None and flat is not v:
        lines.append(f"flat_heldout_median_ape = {flat.summary()['median_ape']['loso']['all']['median_ape']:.4f}")
    lines.append("")
    if flat is not None:
        for fam, rec in flat.calibration_table().items():
            lines.append(f'[family."{fam}"]')
            lines += [f"{k} = {val!r}" for k, val in rec.items()]
            lines.append("")
        lines += _records(flat, "parameter")
    if v is not flat:
        lines += _records(v, "physics")
    lines += _heldout(v, "heldout")
    if flat is not None and flat is not v:
        lines += _heldout(flat, "heldout_flat")
    from tokenmath.base.files import write_atomic
    return write_atomic(path, "\n".join(lines), "write_calibration", suffixes=(".toml",))
