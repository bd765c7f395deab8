"""Every published measurement predicted three ways, plus as a function of the fitted parameters:
- pure roofline: 100% of every peak, no overhead (specs.efficiency.PEAK), the bound no prediction may beat;
- roofline defaults: the kernel-microbenchmark ceilings (specs.efficiency.DEFAULT), nothing fitted;
- `evaluate(values)`: the row's metric at given values of a CalibrationModel's parameters (arrays broadcast for the
  terms re-timed without re-running the engine), which the fit searches and the held-out predictions use.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tokenmath.analyses.calibration.labels import Labels, labels_of, load_of
from tokenmath.analyses.calibration.parameters import FLAT_MODEL, LINK_EFF, TRAIN_BW, CalibrationModel
from tokenmath.base.errors import InputError
from tokenmath.engine.roofline import retime
from tokenmath.specs.catalog import shipped
from tokenmath.specs.efficiency import DEFAULT, PEAK, Efficiency

THROUGHPUT = {"output_tokens_per_s", "output_tokens_per_s_per_user", "decode_tokens_per_s", "prefill_tokens_per_s",
              "total_tokens_per_s", "tokens_per_s", "tokens_per_s_per_chip", "tflops_per_chip", "mfu"}
# the value a term takes when a model does not fit it: the pure roofline's
NEUTRAL = {"flops": 1.0, "memory_bw": 1.0, "layer_overhead_s": 0.0, "step_s": 0.0}
# ... and the physics set's: the kernel model as sourced, no gap, no CPU work
KERNEL_NEUTRAL = {"kernel_flops": 1.0, "kernel_bw": 1.0, "layer_overhead_s": 0.0, "step_cpu_s": 0.0,
                  "step_cpu_per_seq_s": 0.0}


@dataclass
class RowPrediction:
    row: dict
    kind: str                       # inference | training
    labels: Labels
    source_key: str
    measured: float
    predicted_default: float | None = None
    predicted_peak: float | None = None    # the pure roofline: 100% of every peak, no overhead
    evaluate: Callable[[dict], np.ndarray] | None = None   # fitted-parameter values -> predicted metric
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    term: str | None = None         # what dominates the predicted metric: "<phase>: <bottleneck>" (row_term)

    @property
    def id(self) -> str:
        return self.row["id"]

    @property
    def usable(self) -> bool:
        return self.evaluate is not None and self.skipped is None

    @property
    def throughput(self) -> bool:
        return self.row["metric"] in THROUGHPUT

    def faster_than(self, value: float, bound: float | None) -> bool:
        """Whether `value` of this row's metric is faster than `bound` (throughput above it, time below it)."""
        if bound is None or value is None:
            return False
        return value > bound * (1 + 1e-9) if self.throughput else value < bound * (1 - 1e-9)

    @property
    def beats_roofline(self) -> bool:
        """The MEASUREMENT beats the pure roofline: the data (or the model of its configuration) is wrong."""
        if self.predicted_peak is None:
            return False
        tol = 1e-4
        return (self.measured > self.predicted_peak * (1 + tol) if self.throughput
                else self.measured < self.predicted_peak * (1 - tol))


def source_key(row) -> str:
    s = str(row.get("source", ""))
    return s.split(" ")[0].split("#")[0][:80]


# metrics set by one phase alone; the others (throughput and latency of whole requests) by the longer of the two
PREFILL_METRICS = ("ttft_s", "prefill_tokens_per_s")
DECODE_METRICS = ("output_tokens_per_s_per_user", "decode_tokens_per_s", "decode_step_s", "decode_total_s")


def row_term(r, row) -> str:
    """The term of the model that dominates a row's prediction, from the engine's result `r` at the row's batch:
    the phase the metric reads (prefill for TTFT and prefill rates, decode for step times and per-user speed, else
    the phase taking more of a request's time: the batch's prefill vs output_len decode steps) and that phase's
    bottleneck (compute, memory, communication, overhead: engine/pass_cost.BOTTLENECKS, the decode step's including
    the serving engine's own time)."""
    m = row["metric"]
    pre, dec = float(np.max(r.ttft_s)), float(np.max(r.decode_step_s)) * max(int(r.output_len), 1)
    phase = "prefill" if m in PREFILL_METRICS or (m not in DECODE_METRICS and pre > dec) else "decode"
    # the decode step's label with a serving engine's own time counted (None without an engine: the pass's)
    name = r.prefill.bottleneck if phase == "prefill" else (r.decode_bottleneck or r.decode.bottleneck)
    return f"{phase}: {str(np.asarray(name).reshape(-1)[0])}"


def metric_function(r, row) -> Callable:
    """(ttft, decode step) -> the row's inference metric, for a result `r` with batch, input_len, output_len, chips.
    ttft is the static batch's (all B prompts), the step its decode step; rows measured at a concurrency go through
    `closed_loop_function`; rows at max load (continuous batching) stretch the prefill by attention_dp_stretch."""
    if row.get("load") == "concurrency":
        return closed_loop_function(r, row)
    if row.get("load") == "max":        # served by continuous batching: prompts prefilled whole on one group
        stretch = attention_dp_stretch(r)
        f = _static_metric(r, row)
        return lambda t, s: f(t * stretch, s)
    return _static_metric(r, row)


def attention_dp_stretch(r) -> float:
    """Factor on a continuously batched cycle's prefill time under attention data-parallel over ep groups: each
    prompt is prefilled whole on one group and the EP all-to-all makes every group wait for the busiest, so the
    data-parallel ops of the prefill (all but the experts' side, step_geometry.EXPERT_SIDE_OPS) take
    busiest_prefill_factor(prompts admitted per step = B / output_len per replica, ep) x their balanced time, as the
    simulator's steps price them (step_cost.py). 1 without attention data-parallel."""
    from tokenmath.analyses.serving.simulation.step_geometry import EXPERT_SIDE_OPS, busiest_prefill_factor
    lay = r.layout
    a = int(lay.ep)
    if a <= 1 or int(lay.pp) > 1:
        return 1.0
    ops = r.batch_cost.prefill.ops
    total = sum(float(np.sum(op.total_s)) for op in ops.values())
    dp_side = sum(float(np.sum(op.total_s)) for k, op in ops.items() if k not in EXPERT_SIDE_OPS)
    f = busiest_prefill_factor(r.batch / int(lay.dp) / max(r.output_len, 1), a)
    return 1.0 + (f - 1.0) * (dp_side / total if total > 0 else 0.0)


def _static_metric(r, row) -> Callable:
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


def closed_loop_function(r, row) -> Callable:
    """The metric of a closed loop of N users (each sends its next request when one completes) from the static
    batch of the B sequences the engine runs (B = N when they fit, else the largest batch that does; the others
    queue). Over one cycle the B running requests are prefilled once each and decode Lo tokens, so the cycle lasts
    what the static batch takes, ttft + Lo x step, whether prefills run as steps of their own or as chunks mixed
    into decode steps (the same work; under attention data-parallel the prefill is stretched by attention_dp_stretch,
    each prompt whole on one group); by Little's law (requests in the system = throughput x time in it):
      output tokens/s = B Lo / cycle;  time between one request's tokens (ITL) = cycle / Lo;
      end-to-end = N cycle / B;  TTFT = its own prompt's prefill (ttft / B) + the step that carries it
      (step) + the queue wait (N / B - 1) cycle.
    The same quantities the simulator reports at a steady state (analyses/serving/steady_state.py agrees with it
    within 2%); written on the static batch so the fitted terms re-time it like every other row."""
    B, Lo = r.batch, r.output_len
    N = max(int(row.get("concurrency", row.get("batch", B)) or B), B)
    scale = row.get("value_per_chips", r.chips) / r.chips
    m = row["metric"]
    stretch = attention_dp_stretch(r)
    cycle = lambda t, s: t * stretch + Lo * s       # noqa: E731
    table = {
        "output_tokens_per_s": lambda t, s: B * Lo / cycle(t, s) * scale,
        "total_tokens_per_s": lambda t, s: B * (r.input_len + Lo) / cycle(t, s) * scale,
        "output_tokens_per_s_per_user": lambda t, s: Lo / cycle(t, s),
        "decode_step_s": lambda t, s: cycle(t, s) / Lo,
        "ttft_s": lambda t, s: t * stretch / B + s + (N / B - 1) * cycle(t, s),
        "e2e_latency_s": lambda t, s: N * cycle(t, s) / B,
    }
    if m not in table:
        raise InputError("metric", f"unknown metric {m!r} for a row measured at a concurrency", ", ".join(table))
    return table[m]


class _InferenceEvaluator:
    """A row's metric as a function of fitted values. Terms in NEUTRAL re-time the engine's pass (arrays broadcast);
    parameters entering through the efficiency re-run the engine once per value (cached)."""

    def __init__(self, row: dict, kw: dict, model: CalibrationModel, base_result):
        from tokenmath.analyses.serving.infer import infer
        self._infer = lambda eff: infer(row["model"], row["hardware"], efficiency=eff, **kw)
        self.row, self.model = row, model
        self.slow = [p for p in model.params if p.applies == "inference" and p.enters == "efficiency"]
        self.base = model.base(row)
        self.cache = {(): base_result} if not self.slow else {}
        self.f = metric_function(base_result, row)
        self.layers = base_result.model.n_layers

    def result(self, values: dict):
        key = tuple(float(values.get(p.name, p.start)) for p in self.slow)
        if key not in self.cache:
            eff = self.base
            for p, v in zip(self.slow, key):
                eff = p.set(eff, v)
            self.cache[key] = self._infer(eff)
        return self.cache[key]

    def __call__(self, values: dict) -> np.ndarray:
        r = self.result(values)
        if self.model.kernel_retimed:       # the physics set: re-time the kernel-model batch as the engine would
            from tokenmath.engine.static_batch import retimed
            v = {k: np.asarray(values.get(k, d), float) for k, d in KERNEL_NEUTRAL.items()}
            ttft, step = retimed(r.batch_cost, self.layers, r.layout.pp, v["kernel_flops"], v["kernel_bw"],
                                 v["layer_overhead_s"], v["step_cpu_s"], v["step_cpu_per_seq_s"])
            return np.asarray(self.f(ttft, step), float)
        term = {k: np.asarray(values.get(k, v), float) for k, v in NEUTRAL.items()}
        ov = term["layer_overhead_s"] * self.layers
        fill = r.ttft_s / float(np.asarray(r.prefill.time_s))        # (M + pp - 1) / pp pipeline fill
        if self.model.retimed:
            fe, be = term["flops"], term["memory_bw"]
            ttft = fill * (retime(r.prefill, fe, be) + ov)
            step = retime(r.decode, fe, be) + r.pp_p2p_s + ov + term["step_s"]
        else:
            ttft = r.ttft_s + fill * ov
            step = r.decode_step_s + ov + term["step_s"]
        return np.asarray(self.f(ttft, step), float)


def predict_inference(row: dict, model: CalibrationModel = FLAT_MODEL) -> RowPrediction:
    from tokenmath.analyses.serving.infer import infer
    p = RowPrediction(row, "inference", labels_of(row, "inference"), source_key(row), float(row["value"]))
    if row.get("batch") == "unstated":
        p.skipped = "batch not published"
        return p
    kw = dict(chips=row.get("chips"), tp=row.get("tp"), pp=row.get("pp"), ep=row.get("ep"), dp=row.get("dp"),
              batch=row.get("batch", 1), input_len=max(int(row.get("input_len", 1)), 1),
              output_len=max(int(row.get("output_len", 1)), 1), weight_dtype=row.get("weight_dtype"),
              kv_dtype=row.get("kv_dtype"), ep_comm=row.get("ep_comm", "bf16"),
              ep_overlap=bool(row.get("ep_overlap", False)), ep_imbalance=row.get("ep_imbalance"))
    if row.get("attention_sharding"):    # the published layout (e.g. Pope et al.'s batch-sharded attention)
        kw["attention_sharding"] = row["attention_sharding"]
    try:
        base = infer(row["model"], row["hardware"], efficiency=model.base(row), **kw)
        if not base.fits and load_of(row) == "concurrency":
            # an engine runs at most the batch that fits; the other requests queue
            most = infer(row["model"], row["hardware"], efficiency=model.base(row), **{**kw, "batch": "max"})
            if most.fits and most.batch < int(kw["batch"]):
                p.notes.append(f"concurrency {kw['batch']} does not fit: predicted at the largest batch that "
                               f"fits, {most.batch}; the other requests queue")
                kw["batch"], base = most.batch, most
        if not base.fits:
            p.skipped = "does not fit in tokenmath's memory model at this batch: " + "; ".join(base.advice[:1])
            return p
        kw["batch"] = int(base.batch)        # the bound and the defaults at the batch the model runs
        dflt = infer(row["model"], row["hardware"], efficiency=DEFAULT, **kw)
        peak = infer(row["model"], row["hardware"], efficiency=PEAK, **kw)
        if not (dflt.fits and peak.fits):
            # a serving engine's memory accounting admitted a batch the engine-free 10% reserve does not: the bound
            # is a time, so price it without the reserve (memory does not enter a step's time)
            p.notes.append("pure roofline and defaults priced without the 10% memory reserve (engine's batch)")
            dflt = infer(row["model"], row["hardware"], efficiency=DEFAULT, reserve=0.0, **kw)
            peak = infer(row["model"], row["hardware"], efficiency=PEAK, reserve=0.0, **kw)
            if not (dflt.fits and peak.fits):
                p.skipped = f"the batch {base.batch} the engine profile admits does not fit without it"
                return p
        p.evaluate = _InferenceEvaluator(row, kw, model, base)
    except InputError as e:
        p.skipped = f"not expressible: {e}"
        return p
    p.term = row_term(base, row)
    f = metric_function(peak, row)
    p.predicted_peak = float(f(peak.ttft_s, peak.decode_step_s))
    p.predicted_default = float(f(dflt.ttft_s, dflt.decode_step_s))
    if row.get("batch") == "max" or p.notes:
        p.notes.append(f"batch predicted: {base.batch}")
    return p


def predict_training(row: dict, model: CalibrationModel = FLAT_MODEL) -> RowPrediction:
    from tokenmath.analyses.training.train import train
    from tokenmath.analyses.training.validate_runs import tflops_key
    p = RowPrediction(row, "training", labels_of(row, "training"), source_key(row), float(row["value"]))
    grid = next((q.grid for q in model.params if q.enters == "train_flops"), ())
    seq = int(row["seq_len"])
    kw = dict(chips=row["chips"], tp=row.get("tp"), pp=row.get("pp"), dp=row.get("dp"), ep=row.get("ep"),
              cp=row.get("cp"), seq_len=seq, global_batch_tokens=int(row["global_batch_seqs"]) * seq,
              recompute=row.get("recompute") if row.get("recompute") in ("none", "selective", "full") else "selective",
              dtype=row.get("dtype", "bf16"), tokens=row.get("tokens"))
    try:
        d = train(row["model"], row["hardware"], efficiency=DEFAULT, **kw).to_dict()
        pk = train(row["model"], row["hardware"], efficiency=PEAK, **kw).to_dict()
        at = [train(row["model"], row["hardware"], efficiency=Efficiency(float(f), TRAIN_BW, LINK_EFF, "grid"),
                    **kw).to_dict() for f in grid]
    except InputError as e:
        p.skipped = f"not expressible: {e}"
        return p
    if not d["fits"]:
        p.skipped = "does not fit in tokenmath's training memory model: " + "; ".join(d.get("advice", [])[:1])
        return p
    m = row["metric"]
    key = {"tflops_per_chip": tflops_key(row), "mfu": "mfu",
           "tokens_per_s": "tokens_per_s", "gpu_hours": "chip_hours"}.get(m)
    if m != "tokens_per_s_per_chip" and not key:
        p.skipped = f"metric {m!r} not predicted"
        return p

    def pick(x):
        return x["tokens_per_s"] / x["chips"] if m == "tokens_per_s_per_chip" else x[key]
    p.predicted_default, p.predicted_peak = pick(d), pick(pk)
    parts = d.get("breakdown_s") or {}
    if parts:       # the largest share of the predicted step (compute, tp_comm, pp_bubble, dp_comm_exposed, ...)
        p.term = "training step: " + max((k for k in parts if k != "dp_comm_total"), key=lambda k: parts[k])
    xs, ys = np.array(grid, float), np.array([pick(x) for x in at], float)
    if len(xs):
        p.evaluate = lambda values: np.interp(np.asarray(values.get("train_flops", 1.0), float), xs, ys)
    return p


def predict_all(rows: dict | None = None, model: CalibrationModel = FLAT_MODEL) -> list[RowPrediction]:
    data = shipped("measurements.toml") if rows is None else rows
    out = [predict_inference(r, model) for r in data.get("inference", [])]
    out += [predict_training(r, model) for r in data.get("training", [])]
    return out
