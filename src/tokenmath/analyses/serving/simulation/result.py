"""What a simulation found: typed, frozen, with to_dict(). Metrics (SI units, seconds):
- TTFT: first token - arrival; TPOT: (last token - first token) / (output - 1), per request; ITL: every gap between
  two tokens of a request (each step's gap weighted by the decodes that waited it, as vLLM's benchmark reports
  ITL); E2E: last token - arrival; each at p50/p90/p99 and the mean.
- goodput (DistServe, Zhong et al. OSDI 2024): completed requests per second whose TTFT and TPOT both meet the
  targets, over the run (first arrival to last completion); attainment = their share of the requests.
- throughput: output (and prompt + output) tokens per second over the run, and per chip; `steady`: the same over
  the steady window (closed loop: from the later of the concurrency-th and the requests/10-th completion until the
  last request is sent; open loop: from the requests/10-th arrival to the last; sessions: until the last session
  starts, steady_window), tokens counted where they were
  generated (a request's output spread evenly between its first and last token), latencies of the requests that
  arrived inside it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenmath.base.validators import finite

QUANTILES = (0.5, 0.9, 0.99)
SERIES_POINTS = 240
CDF_POINTS = 101


@dataclass(frozen=True)
class Percentiles:
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    def to_dict(self) -> dict:
        return {"mean": finite(self.mean), "p50": finite(self.p50), "p90": finite(self.p90), "p99": finite(self.p99)}


def quantiles(x, qs, w=None) -> np.ndarray:
    """Quantiles of x (weighted: the smallest value whose cumulative weight reaches q of the total)."""
    x = np.asarray(x, float)
    if x.size == 0:
        return np.full(len(qs), np.nan)
    if w is None:
        return np.quantile(x, qs, method="inverted_cdf")
    order = np.argsort(x, kind="stable")
    cw = np.cumsum(np.asarray(w, float)[order])
    idx = np.searchsorted(cw, np.asarray(qs) * cw[-1], side="left")
    return x[order][np.minimum(idx, x.size - 1)]


def percentiles(x, w=None) -> Percentiles:
    x = np.asarray(x, float)
    if x.size == 0:
        return Percentiles(None, None, None, None)
    mean = float(np.average(x, weights=w)) if w is not None else float(x.mean())
    return Percentiles(mean, *map(float, quantiles(x, QUANTILES, w)))


@dataclass(frozen=True)
class StepKind:
    """One kind of step (decode-only, mixed, prefill-only): how many, their mean composition, the engine's time at
    that composition and what bounded it (the non-attention ops' bottleneck, with the napkin's bytes)."""
    kind: str
    steps: int
    seconds: float
    decode_seqs: float
    keys_per_decode: float
    prefill_tokens: float
    prefill_chunks: float
    engine_step_s: float | None = None
    bottleneck: str | None = None
    compute_bound_s: float | None = None
    memory_bound_s: float | None = None
    comm_s: float | None = None
    overhead_s: float | None = None
    weight_bytes: float | None = None
    kv_bytes: float | None = None
    napkin_s: float | None = None        # (weights + KV read per chip) / peak bandwidth

    @property
    def mean_step_s(self) -> float:
        return self.seconds / self.steps if self.steps else 0.0

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("kind", "steps")}
        for k in ("seconds", "mean_step_s", "decode_seqs", "keys_per_decode", "prefill_tokens", "prefill_chunks",
                  "engine_step_s", "compute_bound_s", "memory_bound_s", "comm_s", "overhead_s", "weight_bytes",
                  "kv_bytes", "napkin_s"):
            d[k] = finite(getattr(self, k))
        d["bottleneck"] = self.bottleneck
        return d


@dataclass(frozen=True)
class SimulationResult:
    model: str
    hardware: str
    chips: int
    layout: dict
    engine: dict
    policy: str
    policy_description: str
    workload: dict
    workload_description: str
    efficiency_source: str
    memory_bw: float                   # the chip's peak memory bandwidth, B/s
    budget_tokens: int
    max_running: int
    kv_capacity_tokens: int
    requests: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    ttft_s: Percentiles
    itl_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    ttft_target_s: float
    itl_target_s: float
    goodput_rps: float
    slo_attainment: float
    steady: dict
    preemptions: int
    queue_grows: bool | None
    queue_max: int
    queue_mean: float
    kv_peak_fraction: float
    series: dict
    cdf: dict
    steps: tuple[StepKind, ...]
    notes: tuple[str, ...] = field(default=())
    speculation: dict | None = None      # the draft, k, acceptance and E (analyses.serving.speculative.Draft)
    prefix_cache: dict | None = None     # what the prefix cache did (prefix_store.PrefixStore.summary)
    multi_turn: dict | None = None       # what the agent sessions did (sessions.session_summary), turns > 1
    what_if: tuple[dict, ...] = ()       # the chip's what-if overrides (specs/overrides.Override.to_dict), if any

    @property
    def output_tokens_per_s_per_chip(self) -> float:
        return self.output_tokens_per_s / self.chips

    @property
    def total_tokens_per_s_per_chip(self) -> float:
        return self.total_tokens_per_s / self.chips

    def to_dict(self) -> dict:
        d = self._fields_dict()
        if self.speculation is not None:
            d["speculation"] = self.speculation
        if self.prefix_cache is not None:
            d["prefix_cache"] = {k: finite(v) if isinstance(v, float) else v for k, v in self.prefix_cache.items()}
        if self.multi_turn is not None:
            d["multi_turn"] = self.multi_turn
        if self.what_if:
            d["what_if"] = list(self.what_if)
        return d

    def _fields_dict(self) -> dict:
        f = finite
        return {
            "model": self.model, "hardware": self.hardware, "chips": self.chips, **self.layout,
            "engine": self.engine, "policy": self.policy, "policy_description": self.policy_description,
            "workload": self.workload, "workload_description": self.workload_description,
            "efficiency_source": self.efficiency_source, "memory_bw": self.memory_bw, "budget_tokens": self.budget_tokens,
            "max_running": self.max_running, "kv_capacity_tokens": self.kv_capacity_tokens,
            "requests": self.requests, "duration_s": f(self.duration_s), "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens, "output_tokens_per_s": f(self.output_tokens_per_s),
            "output_tokens_per_s_per_chip": f(self.output_tokens_per_s_per_chip),
            "total_tokens_per_s": f(self.total_tokens_per_s),
            "total_tokens_per_s_per_chip": f(self.total_tokens_per_s_per_chip),
            "requests_per_s": f(self.requests_per_s),
            "ttft_s": self.ttft_s.to_dict(), "itl_s": self.itl_s.to_dict(), "tpot_s": self.tpot_s.to_dict(),
            "e2e_s": self.e2e_s.to_dict(),
            "slo": {"ttft_target_s": self.ttft_target_s, "tpot_target_s": self.itl_target_s},
            "goodput_rps": f(self.goodput_rps), "slo_attainment": f(self.slo_attainment),
            "steady": {k: (f(v) if isinstance(v, float) else v) for k, v in self.steady.items()},
            "preemptions": self.preemptions, "queue_grows": self.queue_grows, "queue_max": self.queue_max,
            "queue_mean": f(self.queue_mean),
            "kv_peak_fraction": f(self.kv_peak_fraction),
            "steps": [s.to_dict() for s in self.steps],
            "series": {k: [f(x) for x in v] for k, v in self.series.items()},
            "cdf": {k: [f(x) for x in v] for k, v in self.cdf.items()},
            "notes": list(self.notes),
        }


def downsample(times, cols: dict, points: int = SERIES_POINTS) -> dict:
    """Series cut into `points` equal time bins: the bin's end time and each column's largest value in it."""
    t = np.asarray(times, float)
    if t.size == 0:
        return {"t_s": [], **{k: [] for k in cols}}
    edges = np.linspace(t[0], t[-1], points + 1)[1:]
    idx = np.unique(np.minimum(np.searchsorted(t, edges, side="right"), t.size))
    starts = np.concatenate(([0], idx[:-1]))
    keep = idx > starts
    starts, idx = starts[keep], idx[keep]
    out = {"t_s": t[idx - 1].tolist()}
    for k, v in cols.items():
        out[k] = np.maximum.reduceat(np.asarray(v, float), starts).tolist()
    return out


def request_metrics(arrival, first, end, out, ttft_target: float, tpot_target: float):
    """(ttft, tpot (NaN for single-token outputs), e2e, met-both mask) per request."""
    ttft = first - arrival
    e2e = end - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (end - first) / np.maximum(out - 1, 1), np.nan)
    met = (ttft <= ttft_target) & ~(tpot > tpot_target)
    return ttft, tpot, e2e, met


def steady_window(arrival, end, closed: bool, concurrency: int, turns: int = 1) -> tuple[float, float]:
    """turns: with sessions the window ends when the last session starts (its first turn, request index a multiple of
    turns): from then on, users whose sessions end find none left to start, and the load falls while the last turns
    run (64 users, 4 turns, 10 s mean gaps: a window up to the last turn sent measured 0.90x, this one 1.03x, of the
    closed form's throughput)."""
    n = arrival.size
    tenth = max(n // 10, 1)
    last = float(arrival.max()) if turns == 1 else float(arrival[::turns].max())
    if closed:
        t0 = float(np.sort(end)[min(max(concurrency, tenth), n) - 1])
    else:
        t0 = float(np.sort(arrival)[tenth - 1])
    return t0, last


def tokens_in(t0, t1, first, end, inp, out) -> tuple[float, float]:
    """(output, prompt) tokens generated inside [t0, t1]: the first token at `first`, the rest spread evenly
    until `end`; a prompt counts when its first token comes."""
    span = np.maximum(end - first, 1e-12)
    part = np.clip((np.minimum(end, t1) - np.maximum(first, t0)) / span, 0.0, 1.0)
    first_in = (first >= t0) & (first <= t1)
    return float(np.sum(first_in + (out - 1) * part)), float(np.sum(inp * first_in))
