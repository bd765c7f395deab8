"""Held-out validation on published throughput-vs-interactivity curves (data/interactivity_points.toml: InferenceX
comparison pages). Nothing here is fitted to those rows: each is predicted from tokenmath's own serving model.

For a row (model, chip, precision, lengths, target interactivity x* in tok/s/user):
- every layout of 1, 2, 4 and 8 chips of one node that `pareto` enumerates (mapping.candidates.layouts_for, no
  pipeline, no data-parallel replicas: a dp replica's curve is the one-replica curve at C / dp, so the envelope is
  the same) is traced through the closed-loop steady state (steady_state.closed_loop, the row's engine profile,
  default vLLM) at concurrency 1, 2, 4, ..., until its interactivity falls below the lowest target asked of it or
  its running requests stop growing (the KV cache or the scheduler caps them; more users only queue);
- along each layout's curve, throughput per chip at x* is interpolated linearly in (log x, log y) between the two
  concurrencies that bracket x*; below the curve's last interactivity the curve's last throughput stands (the layout
  reaches x* and more at that throughput); above its first (concurrency 1) the layout cannot reach x*;
- for models whose published sweeps ran disaggregated prefill / decode deployments (DISAGGREGATED_SWEEPS:
  DeepSeek-R1), each decode layout's decode-only steps at batches 1, 2, 4, ... join the envelope with the prefill
  chips their prompts need (disaggregated_curves; plan_disaggregated.output_per_chip), KV transfer left out;
- the prediction is the envelope (the best layout) and "unreachable" when no layout reaches x*;
- output tokens/s per chip convert to the row's definition: "output" as is; "total" (input + output, InferenceX's
  tput_per_gpu) x (I + O) / O, every request counted whole in both phases (1k/1k: x 2; 8k/1k: x 9).
The ratio predicted / measured and its medians by vendor, MoE/dense and engine say where the model is optimistic
(> 1) or pessimistic (< 1). The same envelope at the pure roofline (specs.efficiency.PEAK, the engine's CPU time at 0)
bounds every prediction from above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg, known_keys, pos_float
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.mapping.candidates import layouts_for
from tokenmath.analyses.setup import setup
from tokenmath.analyses.calibration.labels import is_moe, vendor_of
from tokenmath.analyses.serving.by_concurrency import layout_replica
from tokenmath.analyses.serving.simulation.workload import parse_lengths
from tokenmath.analyses.serving.steady_state import DEFAULT_ENGINE, closed_loop

DATA = "interactivity_points.toml"
REQUIRED = ("id", "url", "quote", "date", "model", "hardware", "precision", "input_len", "output_len",
            "interactivity", "throughput_per_gpu", "throughput_definition")
OPTIONAL = ("model_as_published", "weight_dtype", "kv_dtype", "concurrency", "engine", "notes")
DEFINITIONS = ("total", "output")       # input + output tokens/s per GPU, or output tokens/s per GPU
CHIP_COUNTS = (1, 2, 4, 8)              # one node's power-of-two groups: the layouts serving sweeps run
MAX_CONCURRENCY = 4096
# efficiency of the prediction: "calibrated" (what the serving commands use: data/calibration.toml, fitted on
# data/measurements.toml, never on these rows), "kernel" (specs.efficiency.DEFAULT, the sourced kernel model, nothing
# fitted), "pure" (PEAK: 100% of every peak, the engine's CPU time at 0: the bound)
BASES = ("calibrated", "kernel", "pure")


def load_points(table: dict | None = None) -> list[dict]:
    """The rows of `table` ({"point": [...]}, default the shipped file), each checked: every REQUIRED field present
    (url and quote non-empty: a row without its source is refused), no unknown key, numbers in range, ids unique."""
    from tokenmath.specs.catalog import shipped_rows
    rows = shipped_rows(table, DATA, "point", "a list of published points")
    seen, out = set(), []
    for i, r in enumerate(rows):
        f = f"point[{r.get('id', i)}]"
        known_keys(r, REQUIRED + OPTIONAL, f)
        for k in REQUIRED:
            if k not in r or (isinstance(r[k], str) and not r[k].strip()):
                raise InputError(f"{f}.{k}", "missing or empty", "every point carries its url, the exact quote and "
                                 "the configuration it was measured in")
        if r["id"] in seen:
            raise InputError(f"{f}.id", "duplicate id", "unique ids")
        seen.add(r["id"])
        if r["throughput_definition"] not in DEFINITIONS:
            raise InputError(f"{f}.throughput_definition", f"{r['throughput_definition']!r}", ", ".join(DEFINITIONS))
        d = dict(r)
        d["input_len"] = int_arg(r["input_len"], f"{f}.input_len")
        d["output_len"] = int_arg(r["output_len"], f"{f}.output_len", 2)
        d["interactivity"] = pos_float(r["interactivity"], f"{f}.interactivity", 0.0, 1e6)
        d["throughput_per_gpu"] = pos_float(r["throughput_per_gpu"], f"{f}.throughput_per_gpu", 0.0, 1e9)
        if "concurrency" in r:
            d["concurrency"] = int_arg(r["concurrency"], f"{f}.concurrency", 1, 10_000_000)
        out.append(d)
    return out


def output_share(definition: str, input_len: int, output_len: int) -> float:
    """Output tokens per counted token: 1 for "output", O / (I + O) for "total" (every request whole in both phases:
    a request contributes I prompt tokens and O generated ones)."""
    if definition == "output":
        return 1.0
    if definition == "total":
        return output_len / (input_len + output_len)
    raise InputError("throughput_definition", f"{definition!r}", ", ".join(DEFINITIONS))


def interpolate(xs, ys, x: float) -> float | None:
    """Throughput at interactivity x along one curve (points in order of rising concurrency: xs tok/s/user,
    ys tok/s/chip), linear in (log x, log y) between the bracketing points (the best where the curve crosses x more
    than once); x below the last point: the last y (the curve reaches x and more there); x above every point: None."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if xs.size == 0 or x > xs.max():
        return None
    best = float(ys[-1]) if x <= xs[-1] else None
    lx, ly, t = np.log(xs), np.log(ys), math.log(x)
    for i in range(xs.size - 1):
        a, b = lx[i], lx[i + 1]
        if min(a, b) <= t <= max(a, b):
            w = 0.0 if a == b else (t - a) / (b - a)
            v = float(np.exp(ly[i] + w * (ly[i + 1] - ly[i])))
            best = v if best is None else max(best, v)
    return best             # x <= max(xs) and x > xs[-1]: some segment crosses x, so best is set


@dataclass(frozen=True)
class Curve:
    layout: str
    chips: int
    concurrency: tuple[int, ...]
    per_user: tuple[float, ...]        # output tok/s per user (1 / TPOT)
    per_chip: tuple[float, ...]        # output tok/s per chip


def envelope(curves, x: float) -> tuple[float | None, str | None]:
    """(best throughput per chip at interactivity x over the curves, its layout); (None, None): unreachable."""
    best, lay = None, None
    for c in curves:
        v = interpolate(c.per_user, c.per_chip, x)
        if v is not None and (best is None or v > best):
            best, lay = v, c.layout
    return best, lay


def _pure_engine(su):
    """The pure roofline's engine: the same scheduler and memory limits, no CPU time per step."""
    e = su.efficiency.engine
    return replace(e, step_cpu_s=0.0, step_cpu_per_seq_s=0.0)


def _setup_at(model: str, hardware: str, weight_dtype, kv_dtype, engine: str, basis: str):
    """The setup of a row at efficiency `basis` (BASES): the pure roofline's engine keeps its scheduler and memory
    limits but spends no CPU time."""
    if basis not in BASES:
        raise InputError("basis", f"{basis!r}", ", ".join(BASES))
    kw = {"efficiency": PEAK} if basis == "pure" else ({"efficiency": DEFAULT} if basis == "kernel" else {})
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine, **kw)
    if basis == "pure":
        su = replace(su, efficiency=replace(su.efficiency, engine=_pure_engine(su)))
    return su


@lru_cache(maxsize=64)
def curves(model: str, hardware: str, weight_dtype, kv_dtype, input_len: int, output_len: int, engine: str,
           basis: str, lowest: float) -> tuple[tuple[Curve, ...], tuple[str, ...]]:
    """(curves, notes): every layout of CHIP_COUNTS chips traced until its interactivity is below `lowest` or its
    running requests stop growing, at the efficiency `basis` (BASES). Cached for the run (rows of one page share a
    chip's curves)."""
    su0 = _setup_at(model, hardware, weight_dtype, kv_dtype, engine, basis)
    inp, out = parse_lengths(input_len, "input_len"), parse_lengths(output_len, "output_len")
    found, skipped = [], []
    for n in CHIP_COUNTS:
        for t in layouts_for(su0.model, n, allow_pp=False, max_tp=su0.hardware.scaleup_domain):
            tp, pp, ep, dp = (int(v) for v in t[:4])
            if dp > 1 or pp > 1:
                continue
            # the same replica and step tables as by_concurrency.trace builds for a sweep up to MAX_CONCURRENCY
            name, rep, cost, problem = layout_replica(su0, t[:4], inp, out, MAX_CONCURRENCY)
            if problem:
                raise InputError("layout", f"{name}: {problem}", "a layout the simulator's replica models")
            if rep is None:
                skipped.append(name)
                continue
            cs, xs, ys = [], [], []
            c = 1
            while c <= MAX_CONCURRENCY:
                p = closed_loop(rep, cost, c, inp, out)
                x, y = p.output_tokens_per_s_per_user, p.output_tokens_per_s_per_chip
                if not (math.isfinite(x) and math.isfinite(y)) or x <= 0 or y <= 0:
                    break
                cs.append(c)
                xs.append(x)
                ys.append(y)
                if x < lowest or p.queued > 0:        # below every target, or saturated: more users only queue
                    break
                c *= 2
            if cs:
                found.append(Curve(name, tp * pp * ep * dp, tuple(cs), tuple(xs), tuple(ys)))
    notes = (f"{len(skipped)} layouts hold no {inp.max + out.max:,}-token request ({', '.join(skipped[:3])}"
             f"{', ...' if len(skipped) > 3 else ''})",) if skipped else ()
    return tuple(found), notes


# models whose published sweeps include disaggregated prefill / decode deployments: InferenceX's multi-node
# DeepSeek-R1 recipes (github.com/SemiAnalysisAI/InferenceX, benchmarks/multi_node/dsr1_fp8_mi300x_sglang-disagg.sh,
# dsr1_fp8_mi325x_sglang-disagg.sh, dsr1_fp8_mi355x_sglang-disagg.sh, and srt-slurm-recipes/dsr1/sglang/
# {b200,gb200,gb300,h100,h200}-{fp8,fp4}/{1k1k,8k1k}/disagg in the repository's history); gpt-oss has one GB200 recipe
# (gptoss_fp4_gb200_dynamo-trt.sh) and no GB200 row here; Llama 3.3 70B none
DISAGGREGATED_SWEEPS = ("deepseek-v3",)
PROMPT_BATCHES = (1, 2, 4, 8, 16, 32, 64)


@lru_cache(maxsize=64)
def disaggregated_curves(model: str, hardware: str, weight_dtype, kv_dtype, input_len: int, output_len: int,
                         engine: str, basis: str, lowest: float) -> tuple[Curve, ...]:
    """Curves of disaggregated deployments: for each decode layout of CHIP_COUNTS chips, its decode-only steps at
    batches 1, 2, 4, ... (no prefill in them: the static batch's decode step at the mean context) with the prefill
    chips their prompts need at the best prompt tokens/s per chip of any layout and prompt batch
    (plan_disaggregated.output_per_chip); each traced until below `lowest` tok/s/user or the batch no longer fits."""
    from tokenmath.analyses.serving.grid import evaluate
    from tokenmath.analyses.serving.plan_disaggregated import output_per_chip
    su = _setup_at(model, hardware, weight_dtype, kv_dtype, engine, basis)
    lays = [tuple(int(v) for v in t[:4]) for n in CHIP_COUNTS
            for t in layouts_for(su.model, n, allow_pp=False, max_tp=su.hardware.scaleup_domain)
            if int(t[1]) == 1 and int(t[3]) == 1]
    if not lays:
        return ()
    pg = evaluate(su, lays, np.array(PROMPT_BATCHES, float), input_len, 1)
    pre = np.where(pg.fits, pg.batch * input_len / pg.ttft_s / pg.chips, 0.0)
    p_best = float(np.max(pre))
    if p_best <= 0:
        return ()
    batches = 2.0 ** np.arange(0, int(math.log2(MAX_CONCURRENCY)) + 1)
    g = evaluate(su, lays, batches, input_len, output_len)
    out = []
    for i, t in enumerate(lays):
        cs, xs, ys = [], [], []
        for j, b in enumerate(batches):
            if not g.fits[i, j] or b > g.max_batch[i, j]:
                break
            x = float(g.tokens_per_s_per_user[i, j])
            cs.append(int(b))
            xs.append(x)
            ys.append(float(output_per_chip(b / g.step_s[i, j] / g.chips[i, 0], p_best, input_len, output_len)))
            if x < lowest:
                break
        if cs:
            tp, pp, ep, dp = t
            out.append(Curve(f"disaggregated, decode tp={tp} ep={ep}", tp * ep, tuple(cs), tuple(xs), tuple(ys)))
    return tuple(out)


@dataclass(frozen=True)
class PointPrediction:
    row: dict
    engine: str
    moe: bool
    vendor: str
    measured: float              # throughput per GPU, the row's definition
    predicted: float | None      # the envelope at the row's interactivity, same definition (None: unreachable)
    pure_roofline: float | None  # the same envelope at 100% of every peak, no engine CPU time
    layout: str | None           # the best layout at the target
    notes: tuple[str, ...]

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured

    def to_dict(self) -> dict:
        r = self.row
        return {"id": r["id"], "model": r["model"], "hardware": r["hardware"], "precision": r["precision"],
                "input_len": r["input_len"], "output_len": r["output_len"], "interactivity": r["interactivity"],
                "throughput_definition": r["throughput_definition"], "concurrency": r.get("concurrency"),
                "engine": self.engine, "engine_stated": "engine" in r, "moe": self.moe, "vendor": self.vendor,
                "measured": self.measured, "predicted": self.predicted, "pure_roofline": self.pure_roofline,
                "ratio": self.ratio, "reachable": self.predicted is not None, "layout": self.layout,
                "url": r["url"], "notes": list(self.notes)}


def _medians(preds, key) -> dict:
    groups: dict = {}
    for p in preds:
        groups.setdefault(key(p), []).append(p)
    out = {}
    for g, ps in groups.items():
        ratios = [p.ratio for p in ps if p.ratio is not None]
        out[g] = {"rows": len(ps), "reachable": len(ratios),
                  "median_ratio": float(np.median(ratios)) if ratios else None,
                  "median_ape": float(np.median([abs(r - 1) for r in ratios])) if ratios else None}
    return out


@dataclass(frozen=True)
class InteractivityValidation:
    points: tuple[PointPrediction, ...]
    basis: str = "calibrated"

    def summary(self) -> dict:
        P = self.points
        return {"rows": len(P), "unreachable": sum(p.predicted is None for p in P),
                "does_not_fit": [p.row["id"] for p in P if any(n.startswith("does not fit") for n in p.notes)],
                "faster_than_pure_roofline": [p.row["id"] for p in P if p.predicted is not None and
                                              p.pure_roofline is not None and p.predicted > p.pure_roofline * 1.000001],
                # the published curve is above the envelope's pure roofline: its sweep ran what this model leaves
                # out (pools of more than 8 chips, MTP speculative decoding), or the row's reading is wrong
                "measured_beats_pure_roofline": [p.row["id"] for p in P if p.pure_roofline is not None
                                                 and p.measured > p.pure_roofline],
                "all": _medians(P, lambda p: "all")["all"],
                "vendor": _medians(P, lambda p: p.vendor),
                "moe": _medians(P, lambda p: "moe" if p.moe else "dense"),
                "engine": _medians(P, lambda p: p.engine if "engine" in p.row else f"{p.engine} profile (not stated)")}

    def to_dict(self) -> dict:
        return {"title": "interactivity curves, not fitted", "source": f"data/{DATA}", "efficiency": self.basis,
                "method": "envelope over layouts of 1, 2, 4, 8 chips of the closed-loop steady state at the row's "
                          "interactivity (log-log interpolation along each layout's curve), in the row's throughput "
                          "definition", "summary": self.summary(), "rows": [p.to_dict() for p in self.points]}


def predict_point(row: dict, lowest: float | None = None, with_roofline: bool = True,
                  basis: str = "calibrated") -> PointPrediction:
    """One row's prediction at efficiency `basis` (BASES); lowest: the lowest interactivity asked of the same
    curves, so rows share them."""
    eng = str(row.get("engine") or DEFAULT_ENGINE)
    I, O = row["input_len"], row["output_len"]
    share = output_share(row["throughput_definition"], I, O)
    key = (row["model"], row["hardware"], row.get("weight_dtype"), row.get("kv_dtype"), I, O, eng)
    low = row["interactivity"] if lowest is None else lowest
    got, notes = curves(*key, basis, low)
    disagg = row["model"] in DISAGGREGATED_SWEEPS
    if disagg:        # the published sweep ran disaggregated deployments too: they join the envelope
        got = got + disaggregated_curves(*key, basis, low)
    y, lay = envelope(got, row["interactivity"])
    pk = None
    if with_roofline:
        pk_curves, _ = curves(*key, "pure", low)
        if disagg:
            pk_curves = pk_curves + disaggregated_curves(*key, "pure", low)
        pk, _ = envelope(pk_curves, row["interactivity"])
    conv = lambda v: None if v is None else v / share      # noqa: E731  output tok/s per chip -> the row's unit
    n = list(notes)
    if not got:
        n.append("does not fit: no layout of 1-8 chips holds the model and one request (the published point used "
                 "more chips)")
    elif y is None:
        n.append("unreachable: no layout of 1-8 chips reaches this interactivity")
    return PointPrediction(row, eng, is_moe(row["model"]), vendor_of(row["hardware"]), row["throughput_per_gpu"],
                           conv(y), conv(pk), lay, tuple(n))


def validate_interactivity(table: dict | None = None, with_roofline: bool = True,
                           basis: str = "calibrated") -> InteractivityValidation:
    """Every published point predicted, held out (nothing fitted to them), at efficiency `basis` (BASES)."""
    rows = load_points(table)
    lowest: dict = {}
    for r in rows:     # one trace per (model, chip, dtypes, lengths, engine), as deep as its lowest target
        k = (r["model"], r["hardware"], r.get("weight_dtype"), r.get("kv_dtype"), r["input_len"], r["output_len"],
             str(r.get("engine") or DEFAULT_ENGINE))
        lowest[k] = min(lowest.get(k, math.inf), r["interactivity"])
    out = []
    for r in rows:
        k = (r["model"], r["hardware"], r.get("weight_dtype"), r.get("kv_dtype"), r["input_len"], r["output_len"],
             str(r.get("engine") or DEFAULT_ENGINE))
        out.append(predict_point(r, lowest[k], with_roofline, basis))
    return InteractivityValidation(tuple(out), basis)
