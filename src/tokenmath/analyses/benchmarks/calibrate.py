"""Calibrate to the user's own benchmark runs: each run becomes measurement rows in the format of
data/measurements.toml, predicted by the same code `tokenmath validate` uses (analyses/calibration/predict.py) and fitted
by the same grid search (analyses/calibration/fit.py), on the declared physics residuals (parameters.py), here with one
value for all of the user's rows:
  compute_scale  multiplier on the chip class's compute fractions (0.4-1: never above the microbenchmark ceilings)
  bw_scale       multiplier on its bandwidth fractions (0.4-1)
  step_cpu_s     the serving engine's CPU time per step (specs.serving_engines.STEP_CPU_BOUNDS_S)
(no per-layer gap and no per-sequence CPU time: a handful of runs cannot tell them apart from the three above).

Half of the runs (every other one, in file order) are fitted; the other half are held out and predicted twice, by
tokenmath's default (the shipped calibration, what `tokenmath infer` answers) and by the fit; the medians of
|predicted - measured| / measured are reported for both. A fit whose value sits on a bound of its range is refused:
the runs want a value physics does not allow, so something in the deployment or the model is not what was assumed.

The deployment: the user's --hardware and layout flags; where a file states its accelerator and layout (llm-d
reports' scenario.host) and the flags do not, the file's, mapped to the catalog by stated.py and printed as assumed;
where both do and disagree, the flags win and a note says so.

The workload of a run, from its file: input and output lengths = the file's token totals / completed requests; the
load = the client's max_concurrency when it set one, else all num_prompts at once when the rate is "inf", else the
mean requests in flight by Little's law (request throughput x mean end-to-end latency, from the file's own means).
Rate-limited runs give only latencies (their throughput is the arrival rate, not the hardware's), and so do runs
whose file does not say the client's load (an llm-d report of a harness whose arguments tokenmath does not read).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.analyses.benchmarks.readers import BenchmarkRun
from tokenmath.base.errors import InputError

FITTED = ("compute_scale", "bw_scale", "step_cpu_s")
HELD_AT_ZERO = ("layer_overhead_s", "step_cpu_per_seq_s")
TERM = {"compute_scale": "kernel_flops", "bw_scale": "kernel_bw", "layer_overhead_s": "layer_overhead_s",
        "step_cpu_s": "step_cpu_s", "step_cpu_per_seq_s": "step_cpu_per_seq_s"}
MIN_RUNS = 2
# the metrics fitted: what the GPU's steps set. A client's TTFT also holds the HTTP path, tokenization, a gateway's
# routing and queueing, none of which the engine model contains: it is predicted and reported, never fitted
FIT_METRICS = ("decode_step_s", "output_tokens_per_s")


@dataclass(frozen=True)
class RunSetup:
    """What a run is taken to be: the deployment tokenmath prices and the load, with every assumption said."""
    run: BenchmarkRun
    model: str
    hardware: str
    layout: dict                # chips, tp, pp, ep, dp (None: tokenmath's default)
    engine: str
    concurrency: int
    saturating: bool            # the client kept the server full (inf rate or a concurrency cap)
    assumed: tuple[str, ...]


def model_id_of(hf_id: str | None) -> str | None:
    """The catalog id for a client's model name (a Hugging Face id like meta-llama/Llama-3.2-3B-Instruct), or None."""
    if not hf_id:
        return None
    from tokenmath.specs.model_catalog import model_ids
    ids = set(model_ids())
    base = hf_id.rstrip("/").split("/")[-1].lower()
    for cand in (base, base.removeprefix("meta-")):
        for suffix in ("", "-instruct", "-chat", "-hf", "-it", "-base"):
            c = cand.removesuffix(suffix) if suffix else cand
            if c in ids:
                return c
    return None


def check_given(given: dict) -> dict:
    """The user's deployment options resolved once, before any file is read (a typo is named at its option)."""
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.serving_engines import resolve_engine
    if given.get("model") is not None:
        get_model(given["model"])
    if given.get("hardware") is not None:
        get_hardware(given["hardware"])
    if given.get("engine") is not None:
        resolve_engine(given["engine"])
    return given


def setup_of(run: BenchmarkRun, given: dict) -> RunSetup:
    """The deployment and load of one run. given: the user's --model/--hardware/--chips/--tp/... (None: not given)."""
    assumed = []
    model = given.get("model")
    if model is None:
        model = model_id_of(run.model_id)
        if model is None:
            raise InputError(f"{run.where}.model_id", f"{run.model_id!r} is not in tokenmath's catalog" if run.model_id
                             else "the file does not name the model", "--model with a catalog id or a config.json")
        assumed.append(f"model {model} (the catalog's, for the file's {run.model_id})")
    hw, layout = _hardware_and_layout(run, given, assumed)
    engine = given.get("engine")
    if engine is None:
        engine = "sglang" if run.tool.startswith("sglang") or (run.backend or "").startswith("sglang") else "vllm"
        assumed.append(f"served by {engine} (the client's backend is {run.backend!r}; --engine to say otherwise)")
    assumed.append(f"every request {run.input_len:.0f} tokens in, {run.output_len:.0f} out (the file's means)")
    cap = run.num_prompts or run.completed
    sat = run.load_stated and (run.max_concurrency is not None or run.request_rate is None)
    e2e = run.mean_e2e_s
    if e2e is None and run.mean_ttft_s is not None and run.mean_tpot_s is not None:
        e2e = run.mean_ttft_s + run.mean_tpot_s * max(run.output_len - 1, 0)
    if run.max_concurrency is not None:
        # the client refills its cap as requests finish: a closed loop of that many users (the last few requests
        # drain below it, ignored)
        conc = int(min(run.max_concurrency, cap))
        assumed.append(f"a closed loop of {conc} users (max_concurrency)")
    elif e2e is None:
        raise InputError(f"{run.where}.mean_ttft_ms", "a run without a concurrency cap or latencies says nothing "
                         "of the load", "a run with mean_ttft_ms and mean_tpot_ms, or with max_concurrency")
    else:
        # the mean requests in flight over the run, measured: a burst of `cap` requests drains as they finish,
        # so fewer than `cap` run on average
        little = run.request_throughput * e2e
        conc = max(1, round(min(little, cap)))
        how = ("the file does not say the client's load, so its throughput is not fitted" if not run.load_stated
               else "all sent at once" if run.request_rate is None else
               f"{'evenly spaced' if run.extra.get('arrivals') == 'constant' else 'Poisson'} arrivals at "
               f"{run.request_rate:g} req/s")
        assumed.append(f"{conc} requests in flight on average (Little's law: {run.request_throughput:.2f} req/s x "
                       f"{e2e:.2f} s end to end; {how})")
    return RunSetup(run, str(model), str(hw), layout, str(engine), int(conc), sat, tuple(assumed))


def _hardware_and_layout(run: BenchmarkRun, given: dict, assumed: list) -> tuple[str, dict]:
    """The chip and layout: the user's flags where given (they win over the file, with a note where they disagree),
    else what the file states (llm-d reports' scenario.host), else a refusal naming what is missing."""
    from tokenmath.analyses.benchmarks.stated import hardware_id, layout_of
    dep = run.deployment or {}
    name = dep.get("accelerator")
    stated_hw = hardware_id(name)
    hw = given.get("hardware")
    if hw is None:
        if stated_hw is None:
            what = ("benchmark result files do not name the chips" if not dep.get("accelerators") else
                    f"the file names the accelerator(s) {', '.join(dep['accelerators'])}, which tokenmath cannot map "
                    "to one catalog chip for sure")
            raise InputError("hardware", what, "--hardware (e.g. h100-sxm, l40s) and the layout (--chips, --tp, "
                             "--dp ...)")
        hw = stated_hw
        assumed.append(f"hardware {hw} (the file's accelerator {name})")
    elif stated_hw is not None and stated_hw != _catalog_id(hw):
        assumed.append(f"hardware {hw} (--hardware; the file says {name}, which is {stated_hw}: the flag wins)")
    layout = {k: given.get(k) for k in ("chips", "tp", "pp", "ep", "dp")}
    stated, how = layout_of(dep) if dep else (None, "")
    if all(v is None for v in layout.values()):
        if stated is not None:
            layout = stated
            assumed.append(f"chips {stated['chips']}, tp {stated['tp']}, pp {stated['pp']}, dp {stated['dp']}: {how}")
        else:
            assumed.append("one chip (no --chips/--tp/--dp given" + (f"; not taken from the file: {how})" if dep
                                                                      else ")"))
    elif stated is not None and any(layout[k] is not None and layout[k] != stated[k] for k in layout):
        assumed.append("the layout flags win over the file's (" + ", ".join(f"{k} {v}" for k, v in stated.items()
                                                                          if v is not None) + ")")
    return str(hw), layout


def _catalog_id(hw) -> str | None:
    from tokenmath.specs.hardware import SHORT_NAMES
    return SHORT_NAMES.get(hw.lower(), hw.lower()) if isinstance(hw, str) else None


def rows_of(s: RunSetup) -> list[dict]:
    """The run as measurement rows (data/measurements.toml's format), one per metric it informs."""
    r = s.run
    metrics = {"decode_step_s": r.mean_tpot_s, "ttft_s": r.mean_ttft_s}
    if s.saturating:
        metrics["output_tokens_per_s"] = r.output_tokens_per_s
    base = {"model": s.model, "hardware": s.hardware, **{k: v for k, v in s.layout.items() if v is not None},
            "batch": s.concurrency, "load": "concurrency", "concurrency": s.concurrency,
            "input_len": max(1, round(r.input_len)), "output_len": max(1, round(r.output_len)),
            "engine": s.engine, "date": r.date or "9999-12-31", "source": f"{r.file}#{r.part or r.line}"}
    return [{**base, "id": f"{r.where}:{m}", "metric": m, "value": v} for m, v in metrics.items() if v]


def profile_model():
    """The physics parameter set (calibration/parameters.py), three of its residuals, one value for all rows."""
    from tokenmath.analyses.calibration.parameters import CalibrationModel, physics_params, physics_base
    params = tuple(replace(p, scopes=("all",)) for p in physics_params() if p.name in FITTED)
    return CalibrationModel("profile", params, physics_base, "the user's runs: compute and bandwidth scales and "
                            "the engine's CPU time per step, one value each")


def shipped_terms(hardware, engine: str) -> dict:
    """The retiming terms of tokenmath's default answer (the shipped physics calibration) for a chip and engine."""
    from tokenmath.specs.efficiency import physics_values
    from tokenmath.specs.serving_engines import get_engine
    v = physics_values(hardware, get_engine(engine))
    return {TERM[k]: float(val) for k, (val, _) in v.items()}


def _ape(pred, meas) -> float | None:
    return None if pred is None or not np.isfinite(pred) else abs(pred - meas) / meas


def _median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def calibrate(runs: list[BenchmarkRun], given: dict) -> dict:
    """Fit on half of the runs, report the held-out error before and after, and the profile's values (or the
    reason it is refused)."""
    from tokenmath.analyses.calibration.fit import fit
    from tokenmath.analyses.calibration.predict import predict_inference
    if len(runs) < MIN_RUNS:
        raise InputError("RESULT_FILES", f"{len(runs)} run", f"at least {MIN_RUNS} runs (half are held out)")
    setups = [setup_of(r, given) for r in runs]
    keys = {(s.model, s.hardware, s.engine, tuple(sorted(s.layout.items()))) for s in setups}
    if len(keys) > 1:
        raise InputError("RESULT_FILES", "the runs are of different models, chips, engines or layouts",
                         "one deployment per profile (calibrate each separately)")
    model = profile_model()
    fit_half = {id(s) for s in setups[0::2]}
    preds = {id(s): [predict_inference(row, model) for row in rows_of(s)] for s in setups}
    train = [p for s in setups if id(s) in fit_half for p in preds[id(s)] if p.usable]
    test = [p for s in setups if id(s) not in fit_half for p in preds[id(s)] if p.usable]
    skipped = [{"id": p.id, "why": p.skipped} for ps in preds.values() for p in ps if not p.usable]
    if not train or not test:
        raise InputError("RESULT_FILES", "too few runs tokenmath can price on both halves: "
                         + "; ".join(f"{s['id']}: {s['why']}" for s in skipped[:3]), "runs that fit in memory")
    f = fit([p for p in train if p.row["metric"] in FIT_METRICS], model)
    s0 = setups[0]
    before_terms = shipped_terms(s0.hardware, s0.engine)
    zero = {TERM[k]: 0.0 for k in HELD_AT_ZERO}

    def before(p):
        return float(np.asarray(p.evaluate(before_terms)))

    def after(p):
        return float(np.asarray(p.evaluate({**zero, **f.values_for(p)})))
    rows = []
    for split, ps in (("fit", train), ("held-out", test)):
        for p in ps:
            b, a = before(p), after(p)
            rows.append({"id": p.id, "split": split, "metric": p.row["metric"], "measured": p.measured,
                         "fitted_metric": p.row["metric"] in FIT_METRICS,
                         "default": b, "calibrated": a, "default_error": _ape(b, p.measured),
                         "calibrated_error": _ape(a, p.measured)})
    held_all = [r for r in rows if r["split"] == "held-out"]
    held = [r for r in held_all if r["fitted_metric"]]
    by_metric = {m: {"rows": len(sel), "default": _median(r["default_error"] for r in sel),
                     "calibrated": _median(r["calibrated_error"] for r in sel)}
                 for m in sorted({r["metric"] for r in held_all})
                 for sel in [[r for r in held_all if r["metric"] == m]]}
    values = {fv.param.name: fv.value for fv in f.values.values()}
    edges = [fv.to_dict() for fv in f.at_edges()]
    refused = None
    if edges:
        refused = "; ".join(e["physics_missing"] for e in edges) + (
            ". The runs ask for a value outside what the hardware can do: check --hardware, the layout (--chips, "
            "--tp, --dp), the dtypes and the engine before trusting any calibration of them")
    return {
        "deployment": {"model": s0.model, "hardware": s0.hardware, "engine": s0.engine,
                       **{k: v for k, v in s0.layout.items() if v is not None}},
        "runs": [{"where": s.run.where, "tool": s.run.tool, "split": "fit" if id(s) in fit_half else "held-out",
                  "input_len": round(s.run.input_len), "output_len": round(s.run.output_len),
                  "concurrency": s.concurrency, "request_rate": s.run.to_dict()["request_rate"],
                  "assumed": list(s.assumed)} for s in setups],
        "values": {**values, **{k: 0.0 for k in HELD_AT_ZERO}},
        "parameters": f.table(),
        "default_terms": {k: before_terms[TERM[k]] for k in TERM},
        "heldout": {"rows": len(held), "default_median_ape": _median(r["default_error"] for r in held),
                    "calibrated_median_ape": _median(r["calibrated_error"] for r in held), "by_metric": by_metric},
        "rows": rows, "skipped": skipped, "refused": refused,
    }
