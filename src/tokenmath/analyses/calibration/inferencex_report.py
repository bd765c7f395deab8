"""The score of tokenmath's serving model on every shipped InferenceX run (inferencex_predict.py): medians of
|predicted - measured| / measured throughput per GPU, and of predicted / measured, by chip, engine, engine version,
model family and technique; the same held out by source, vendor, engine version and model; the worst 20 runs, each
with the term that dominates its predicted step; the runs that differ only in MTP, measured against predicted
speedup (inferencex_mtp.py); and every run that could not be predicted, with the reason.

Held out: nothing is fitted to these runs. The serving commands' constants (data/calibration.toml) were fitted on
data/measurements.toml, which holds no InferenceX run, so every group below is scored by a model that never saw it;
the leave-one-group-out refit of `tokenmath validate`'s measurements section (heldout.py) has nothing to refit
here. Basis "kernel" scores the sourced kernel model with no fitted constant at all.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tokenmath.analyses.calibration.inferencex import Run, self_consistency, techniques, vendor
from tokenmath.analyses.calibration.inferencex_mtp import mtp_pairs, mtp_summary
from tokenmath.analyses.calibration.inferencex_predict import RunPrediction

WORST = 20
# what capped the users a predicted replica (or decode worker) runs at once (RunPrediction.limit)
LIMITS = {"users": "none (every user runs)", "max_running": "the engine's max running", "kv": "KV memory (users queue)"}
CONSISTENT = (0.5, 2.0)      # published throughput / what its own latencies imply, outside: the row contradicts itself
# model family: the architecture the published model runs (catalog id -> family label)
FAMILIES = {"deepseek-v3": "deepseek-v3 (MoE, MLA)", "gpt-oss-120b": "gpt-oss (MoE, GQA, sliding window)"}
# the groupings the predicted-vs-measured chart draws, one panel each (issue 35: per chip, engine, engine generation,
# model family and technique)
CHART = ("chip", "engine", "engine version", "model family", "technique")


def _source(r: Run) -> str:
    x = r.row
    return f"{x['source_repo']}@{x['source_commit'][:7]}:{x['source_file'].rsplit('/', 1)[-1]}"


GROUPINGS: dict[str, Callable[[Run], tuple[str, ...]]] = {
    "chip": lambda r: (r.row["hardware"],),
    "engine": lambda r: (r.row["framework"],),
    "engine version": lambda r: (r.generation,),
    "model family": lambda r: (FAMILIES.get(r.model_id or "", r.row["model"]),),
    "technique": techniques,                 # a run is in every technique it used
    "sequence lengths": lambda r: (f"{r.row['isl']}/{r.row['osl']}",),
}
HELD_OUT: dict[str, Callable[[Run], tuple[str, ...]]] = {
    "source": lambda r: (_source(r),),
    "vendor": lambda r: (vendor(r),),
    "engine version": lambda r: (r.generation,),
    "model": lambda r: (r.row["model"],),
}


def stats(preds: list[RunPrediction]) -> dict:
    """rows, predicted, median |error| and median ratio of throughput per GPU (and of tok/s per user)."""
    ok = [p for p in preds if p.ratio is not None]
    r = np.array([p.ratio for p in ok], float)
    u = np.array([p.user_ratio for p in ok if p.user_ratio is not None], float)
    med = lambda a: float(np.median(a)) if a.size else None      # noqa: E731
    return {"rows": len(preds), "predicted": len(ok), "median_ape": med(np.abs(r - 1)), "median_ratio": med(r),
            "median_ape_per_user": med(np.abs(u - 1)), "median_ratio_per_user": med(u)}


def grouped(preds: list[RunPrediction], key: Callable[[Run], tuple[str, ...]], of_run: bool = True) -> dict[str, dict]:
    """stats per group; key(run) names a run's groups (of_run False: key(prediction))."""
    groups: dict[str, list] = {}
    for p in preds:
        for g in key(p.run if of_run else p):
            groups.setdefault(g, []).append(p)
    return {g: stats(ps) for g, ps in sorted(groups.items())}


def consistent(run: Run) -> bool:
    c = self_consistency(run)
    return c is None or CONSISTENT[0] <= c <= CONSISTENT[1]


def spread(p: RunPrediction) -> float:
    """How far off a prediction is, either way: max(ratio, 1 / ratio)."""
    return max(p.ratio, 1.0 / p.ratio)


def worst(preds: list[RunPrediction], n: int = WORST) -> list[RunPrediction]:
    ok = [p for p in preds if p.ratio is not None]
    return sorted(ok, key=lambda p: (-spread(p), p.run.index))[:n]


def skipped(preds: list[RunPrediction]) -> dict[str, list[str]]:
    """Reason -> the runs it kept from being predicted."""
    out: dict[str, list[str]] = {}
    for p in preds:
        if p.skipped:
            out.setdefault(p.skipped, []).append(p.run.label)
    return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def profiles(preds: list[RunPrediction]) -> dict[str, dict]:
    """Per published engine: the tokenmath engine profile its runs were predicted with (id, name, the version its
    defaults were read at) and the engine versions the runs published."""
    from tokenmath.specs.serving_engines import get_engine
    out: dict[str, dict] = {}
    for p in preds:
        r = p.run
        d = out.setdefault(r.engine, {"profile": r.profile, "published": set()})
        v = r.engine_version
        d["published"].add(v if v != "unknown" else f"unknown (runs of {r.row['date'][:7]})")
    for d in out.values():
        e = get_engine(d["profile"])
        d.update(name=e.name, version=e.version, published=sorted(d["published"]))
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class InferenceXReport:
    preds: tuple[RunPrediction, ...]
    basis: str = "calibrated"

    def summary(self) -> dict:
        P = list(self.preds)
        terms: dict[str, int] = {}
        for p in P:
            if p.term:
                terms[f"{p.phase}: {p.term}"] = terms.get(f"{p.phase}: {p.term}", 0) + 1
        groups = {k: grouped(P, f) for k, f in GROUPINGS.items()}
        groups["running users capped by"] = grouped([p for p in P if p.limit], lambda p: (LIMITS[p.limit],),
                                                    of_run=False)
        return {"all": stats(P), "groups": groups,
                "held_out": {k: grouped(P, f) for k, f in HELD_OUT.items()},
                "dominant_terms": dict(sorted(terms.items(), key=lambda kv: -kv[1])),
                "engine_profiles": profiles(P),
                "mtp_on_and_off": mtp_summary(mtp_pairs(P)),
                "self_contradictory": [p.run.label for p in P if not consistent(p.run)],
                "skipped": {k: len(v) for k, v in skipped(P).items()}}

    def chart_points(self) -> dict:
        """For the predicted-vs-measured chart: per CHART grouping, group label -> (measured, predicted) throughput
        per GPU of its predicted runs (a run in every technique it used), largest groups first."""
        out = {}
        for g in CHART:
            pts: dict[str, list] = {}
            for p in self.preds:
                if p.tput_per_gpu is None:
                    continue
                for label in GROUPINGS[g](p.run):
                    pts.setdefault(label, []).append((p.measured, p.tput_per_gpu))
            out[g] = dict(sorted(pts.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        return out

    def to_dict(self) -> dict:
        P = list(self.preds)
        return {"title": "InferenceX runs, not fitted", "source": "data/inferencex_runs.csv.gz",
                "efficiency": self.basis,
                "held_out_note": ("no constant is fitted on these runs: data/calibration.toml was fitted on "
                                  "data/measurements.toml, which holds no InferenceX run, so every group is held "
                                  "out as scored (a leave-one-group-out refit has nothing to refit)"),
                "metric": "throughput per GPU (input + output tokens/s, InferenceX's tput_per_gpu); per user: "
                          "output tokens/s per user (median interactivity)",
                "summary": self.summary(),
                "worst": [{**p.to_dict(), "self_consistent": consistent(p.run)} for p in worst(P)],
                "mtp_pairs": mtp_pairs(P),
                "skipped": skipped(P), "rows": [p.to_dict() for p in P]}


def inferencex_report(basis: str = "calibrated", runs=None) -> InferenceXReport:
    """Every shipped InferenceX run (or `runs`) predicted and scored at efficiency `basis`
    (inferencex_predict.BASES)."""
    from tokenmath.analyses.calibration.inferencex import load_runs
    from tokenmath.analyses.calibration.inferencex_predict import predict_runs
    runs = load_runs() if runs is None else runs
    return InferenceXReport(tuple(predict_runs(runs, basis)), basis)
