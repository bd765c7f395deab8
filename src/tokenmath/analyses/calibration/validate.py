"""Measured accuracy: predict every published measurement in data/measurements.toml and report the distance.

Two models are reported side by side:
- roofline: the engine at its documented default efficiencies (kernel microbenchmark ceilings);
- calibrated: achievable FLOP and bandwidth fractions plus a fixed overhead per layer per pass (kernel launches,
  synchronisation), fitted per hardware family on the published rows. Held-out error comes from
  leave-one-source-out cross-validation: every row is predicted by a fit that never saw its source.
Rows whose measurement beats the pure roofline (100% of every peak) are flagged: the data or the model is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.catalog import shipped
from tokenmath.specs.families import FAMILIES, family
from tokenmath.specs.efficiency import DEFAULT, Efficiency
from tokenmath.engine.roofline import retime
from tokenmath.base.errors import InputError

# calibration grid: achievable fractions and a fixed cost per layer per forward pass
FLOPS_GRID = np.array([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
BW_GRID = np.array([0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
OVERHEAD_GRID = np.array([0.0, 5e-6, 10e-6, 20e-6, 40e-6, 80e-6, 160e-6])
LINK_EFF = 0.8   # link efficiency is not fitted (NCCL bus bandwidth, see efficiency.py)
TRAIN_BW = 0.8   # training is compute-bound: only the FLOP fraction is fitted on training rows

THROUGHPUT = {"output_tokens_per_s", "output_tokens_per_s_per_user", "decode_tokens_per_s", "prefill_tokens_per_s", "total_tokens_per_s",
              "tokens_per_s", "tokens_per_s_per_chip", "tflops_per_chip", "mfu"}


@dataclass
class RowPrediction:
    row: dict
    kind: str                    # inference | training
    regime: str
    family: str
    source_key: str
    measured: float
    predicted_default: float | None
    predicted_peak: float | None  # the pure roofline: 100% of every peak, no overhead
    grid: np.ndarray | None       # predictions over (flops, bw, overhead) for calibration (inference rows)
    skipped: str | None = None

    @property
    def beats_roofline(self) -> bool:
        if self.predicted_peak is None:
            return False
        if self.row["metric"] in THROUGHPUT:
            return self.measured > self.predicted_peak * 1.0001
        return self.measured < self.predicted_peak * 0.9999


def _source_key(row) -> str:
    s = str(row.get("source", ""))
    return s.split(" ")[0].split("#")[0][:80]


def _metric(r, row) -> tuple:
    """(function of (ttft, step) -> metric value) for an inference row."""
    B, Li, Lo = r.batch, r.input_len, r.output_len
    scale = row.get("value_per_chips", r.chips) / r.chips
    m = row["metric"]
    table = {
        "output_tokens_per_s": lambda t, s: B * Lo / (t + Lo * s) * scale,
        "output_tokens_per_s_per_user": lambda t, s: 1 / s,
        "decode_tokens_per_s": lambda t, s: B / s * scale,
        "decode_step_s": lambda t, s: s,
        "decode_total_s": lambda t, s: Lo * s,
        "ttft_s": lambda t, s: t,
        "e2e_latency_s": lambda t, s: t + Lo * s,
        "prefill_tokens_per_s": lambda t, s: B * Li / t * scale,
        "total_tokens_per_s": lambda t, s: B * (Li + Lo) / (t + Lo * s) * scale,
    }
    if m not in table:
        raise InputError("metric", f"unknown inference metric {m!r}", ", ".join(table))
    return table[m]


def _predict_inference(row) -> RowPrediction:
    from tokenmath.analyses.serving.infer import infer
    fam = family(row["hardware"])
    base = RowPrediction(row, "inference", row.get("regime", ""), fam, _source_key(row), float(row["value"]),
                         None, None, None)
    if row.get("batch") == "unstated":
        base.skipped = "batch not published"
        return base
    kw = dict(chips=row.get("chips"), tp=row.get("tp"), pp=row.get("pp"), ep=row.get("ep"), dp=row.get("dp"),
              batch=row.get("batch", 1), input_len=max(int(row.get("input_len", 1)), 1),
              output_len=max(int(row.get("output_len", 1)), 1), weight_dtype=row.get("weight_dtype"),
              kv_dtype=row.get("kv_dtype"))
    try:
        peak = infer(row["model"], row["hardware"], efficiency=Efficiency(1.0, 1.0, LINK_EFF, "peak + NCCL link"), **kw)
        dflt = infer(row["model"], row["hardware"], efficiency=DEFAULT, **kw)
    except InputError as e:
        base.skipped = f"not expressible: {e}"
        return base
    if not peak.fits:
        base.skipped = "does not fit in tokenmath's memory model at this batch: " + "; ".join(peak.advice[:1])
        return base
    f = _metric(peak, row)
    strict = infer(row["model"], row["hardware"], efficiency=Efficiency(1.0, 1.0, 1.0, "peak"), **kw)
    base.predicted_peak = float(f(strict.ttft_s, strict.decode_step_s))
    base.predicted_default = float(f(dflt.ttft_s, dflt.decode_step_s))
    # every (flops, bw, overhead) point from the same passes, re-timed
    fe = FLOPS_GRID[:, None, None]
    be = BW_GRID[None, :, None]
    ov = OVERHEAD_GRID[None, None, :] * peak.model.n_layers
    fill = peak.ttft_s / float(np.asarray(peak.prefill.time_s))       # (M + pp - 1) / pp pipeline fill
    ttft = fill * (retime(peak.prefill, fe, be) + ov)
    step = retime(peak.decode, fe, be) + peak.pp_p2p_s + ov
    base.grid = np.asarray(f(ttft, step), float)
    return base


def _predict_training(row) -> RowPrediction:
    from tokenmath.analyses.training.train import train
    fam = family(row["hardware"])
    base = RowPrediction(row, "training", "training", fam, _source_key(row), float(row["value"]), None, None, None)
    seq = int(row["seq_len"])
    kw = dict(chips=row["chips"], tp=row.get("tp"), pp=row.get("pp"), dp=row.get("dp"), ep=row.get("ep"),
              cp=row.get("cp"), seq_len=seq, global_batch_tokens=int(row["global_batch_seqs"]) * seq,
              recompute=row.get("recompute") if row.get("recompute") in ("none", "selective", "full") else "selective",
              dtype=row.get("dtype", "bf16"), tokens=row.get("tokens"))
    try:
        d = train(row["model"], row["hardware"], efficiency=DEFAULT, **kw).to_dict()
        pk = train(row["model"], row["hardware"], efficiency=Efficiency(1.0, 1.0, 1.0, "peak"), **kw).to_dict()
        grid = [train(row["model"], row["hardware"], efficiency=Efficiency(float(f), TRAIN_BW, LINK_EFF, "grid"),
                      **kw).to_dict() for f in FLOPS_GRID]
    except InputError as e:
        base.skipped = f"not expressible: {e}"
        return base
    if not d["fits"]:
        base.skipped = "does not fit in tokenmath's training memory model: " + "; ".join(d.get("advice", [])[:1])
        return base
    m = row["metric"]
    hw_basis = "includes recomputation" in str(row.get("notes", "")).lower() or "hardware" in str(row.get("notes", "")).lower()
    key = {"tflops_per_chip": "hardware_tflops_per_chip" if hw_basis else "tflops_per_chip", "mfu": "mfu",
           "tokens_per_s": "tokens_per_s", "gpu_hours": "chip_hours"}.get(m)

    def pick(x):
        return x["tokens_per_s"] / x["chips"] if m == "tokens_per_s_per_chip" else x[key]
    if m != "tokens_per_s_per_chip" and not key:
        base.skipped = f"metric {m!r} not predicted"
        return base
    base.predicted_default, base.predicted_peak = pick(d), pick(pk)
    base.grid = np.array([pick(x) for x in grid], float)     # over FLOPS_GRID (training fits the FLOP fraction only)
    return base


def predict_all(rows=None) -> list[RowPrediction]:
    data = shipped("measurements.toml") if rows is None else rows
    out = [_predict_inference(r) for r in data.get("inference", [])]
    out += [_predict_training(r) for r in data.get("training", [])]
    return out


def _ape(pred, meas):
    return abs(pred - meas) / meas


def _fit(preds: list[RowPrediction]) -> tuple[int, int, int]:
    """Grid point minimising the median |log(pred / measured)| over these rows."""
    G = np.stack([p.grid for p in preds])                       # (rows, F, W, O)
    meas = np.array([p.measured for p in preds])[:, None, None, None]
    err = np.median(np.abs(np.log(G / meas)), axis=0)
    return np.unravel_index(np.nanargmin(err), err.shape)


def fit_calibration(preds: list[RowPrediction], min_rows: int = 6) -> dict:
    """Per hardware family (falling back to all rows when a family has few): flops, bw, per-layer overhead.
    Training rows get their own entry ("training"): the FLOP fraction that best predicts published runs."""
    cal = {}
    tr = [p for p in preds if p.grid is not None and p.kind == "training"]
    if tr:
        G = np.stack([p.grid for p in tr])
        meas = np.array([p.measured for p in tr])[:, None]
        cal["training"] = int(np.nanargmin(np.median(np.abs(np.log(G / meas)), axis=0)))
    usable = [p for p in preds if p.grid is not None and p.kind == "inference"]
    if not usable:
        return cal
    cal["_all"] = _fit(usable)
    for fam in {p.family for p in usable}:
        rows = [p for p in usable if p.family == fam]
        if len(rows) >= min_rows and len({p.source_key for p in rows}) >= 2:
            cal[fam] = _fit(rows)
    return cal


def _apply(cal, p: RowPrediction) -> float | None:
    if p.kind == "training":
        return float(p.grid[cal["training"]]) if "training" in cal else None
    if "_all" not in cal:
        return None
    i, j, k = cal.get(p.family, cal["_all"])
    return float(p.grid[i, j, k])


@dataclass
class Validation:
    preds: list[RowPrediction]
    held_out: dict          # row id -> calibrated held-out prediction
    calibration: dict

    def rows(self) -> list[dict]:
        out = []
        for p in self.preds:
            r = p.row
            d = {"id": r["id"], "kind": p.kind, "regime": p.regime, "family": p.family, "model": r["model"],
                 "hardware": r["hardware"], "metric": r["metric"], "measured": p.measured, "source": r.get("source")}
            if p.skipped:
                d["skipped"] = p.skipped
            else:
                d["predicted_roofline"] = p.predicted_default
                d["ape_roofline"] = _ape(p.predicted_default, p.measured)
                d["pure_roofline_bound"] = p.predicted_peak
                d["beats_pure_roofline"] = p.beats_roofline
                if p.beats_roofline:
                    d["flag"] = ("the measurement beats the pure roofline bound: the row's configuration as recorded "
                                 "(dtype, batch, speculative decoding, per-chip scaling) or tokenmath's model of it is "
                                 "wrong; read the row's notes")
                if r["id"] in self.held_out:
                    d["predicted_calibrated_heldout"] = self.held_out[r["id"]]
                    d["ape_calibrated_heldout"] = _ape(self.held_out[r["id"]], p.measured)
            out.append(d)
        return out

    def summary(self) -> dict:
        rows = self.rows()
        groups = {"decode": lambda d: d["kind"] == "inference" and d["regime"] == "decode",
                  "prefill": lambda d: d["kind"] == "inference" and d["regime"] == "prefill",
                  "mixed": lambda d: d["kind"] == "inference" and d["regime"] == "mixed",
                  "moe": lambda d: d["kind"] == "inference" and _is_moe(d["model"]),
                  "training": lambda d: d["kind"] == "training",
                  "all": lambda d: True}
        out = {}
        for g, sel in groups.items():
            sc = [d for d in rows if sel(d) and "ape_roofline" in d]
            cal = [d["ape_calibrated_heldout"] for d in sc if "ape_calibrated_heldout" in d]
            out[g] = {"rows": len(sc),
                      "median_ape_roofline": float(np.median([d["ape_roofline"] for d in sc])) if sc else None,
                      "median_ape_calibrated_heldout": float(np.median(cal)) if cal else None,
                      "beats_pure_roofline": sum(d["beats_pure_roofline"] for d in sc)}
        # training: how far the utilisation lands, in points of peak, for rows that state it (MFU, or TFLOP/s per chip
        # over the chip's dense peak)
        from tokenmath.specs.hardware import get_hardware
        pts_r, pts_c = [], []
        for d in rows:
            if d["kind"] != "training" or "predicted_roofline" not in d or d["metric"] not in ("mfu", "tflops_per_chip"):
                continue
            scale = 100.0 if d["metric"] == "mfu" else 100.0 / (get_hardware(d["hardware"]).peak_flops("bf16") / 1e12)
            pts_r.append(abs(d["predicted_roofline"] - d["measured"]) * scale)
            if "predicted_calibrated_heldout" in d:
                pts_c.append(abs(d["predicted_calibrated_heldout"] - d["measured"]) * scale)
        if pts_r:
            out["training"]["median_utilisation_points_off_roofline"] = float(np.median(pts_r))
        if pts_c:
            out["training"]["median_utilisation_points_off_calibrated_heldout"] = float(np.median(pts_c))
        out["skipped"] = sum("skipped" in d for d in rows)
        return out

    def calibration_table(self) -> dict:
        out = {}
        for fam, idx in self.calibration.items():
            if fam == "training":
                out[fam] = {"flops": float(FLOPS_GRID[idx]), "memory_bw": TRAIN_BW, "layer_overhead_s": 0.0}
            else:
                i, j, k = idx
                out[fam] = {"flops": float(FLOPS_GRID[i]), "memory_bw": float(BW_GRID[j]),
                            "layer_overhead_s": float(OVERHEAD_GRID[k])}
        return out


def _is_moe(mid: str) -> bool:
    from tokenmath.specs.model_catalog import get_model
    try:
        return get_model(mid).is_moe
    except InputError:
        return False


def validate(rows=None) -> Validation:
    preds = predict_all(rows)
    usable = [p for p in preds if p.grid is not None]
    held = {}
    for src in {p.source_key for p in usable}:
        train_rows = [p for p in usable if p.source_key != src]
        if not train_rows:
            continue
        cal = fit_calibration(train_rows)
        for p in usable:
            if p.source_key == src:
                v = _apply(cal, p)
                if v is not None:
                    held[p.row["id"]] = v
    return Validation(preds, held, fit_calibration(usable))


def write_calibration(v: Validation, path) -> str:
    """The fitted table as TOML with its provenance (what rows, when, the held-out error)."""
    import datetime
    s = v.summary()
    lines = ["# Efficiencies fitted on data/measurements.toml by `tokenmath validate --write-calibration`.",
             "# Grid search minimising the median |log(predicted / measured)| per hardware family (families with",
             "# >= 6 rows from >= 2 sources; others use the all-rows fit). Held-out error: leave-one-source-out.",
             f"rows = {s['all']['rows']}",
             f"fitted = \"{datetime.date.today().isoformat()}\"",
             f"heldout_median_ape = {s['all']['median_ape_calibrated_heldout']:.4f}",
             f"roofline_median_ape = {s['all']['median_ape_roofline']:.4f}", ""]
    for fam, rec in v.calibration_table().items():
        lines.append(f'[family."{fam}"]')
        lines += [f"{k} = {val!r}" for k, val in rec.items()]
        lines.append("")
    from pathlib import Path
    Path(path).write_text("\n".join(lines))
    return str(path)
