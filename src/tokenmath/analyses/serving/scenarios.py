"""Scenario sweeps: the Cartesian product of models x hardware (chips or systems) x layouts x engines x workloads,
each scenario one simulation (simulation/simulate.py) or one closed-form steady state (steady_state.py), run in
local processes (concurrent.futures.ProcessPoolExecutor) or by any other runner with the same `map`
(local/cluster.py: an existing Dask cluster).

A scenario file (TOML or JSON) holds lists under these keys; a single value stands for a list of one:
    method = "simulate"                            # or "steady": the closed form, closed loops only
    models = ["llama-3.1-8b"]                      # catalog ids
    hardware = ["h100-sxm", "hgx-h200"]            # chip ids, or system ids (that system at the layout's chips)
    layouts = [{chips = 1}, {chips = 2, tp = 2}]   # keys chips, tp, pp, ep, dp; {} is the default layout
    engines = ["vllm", "sglang"]
    workloads = [{concurrency = 16}, {arrival_rate = 4.0, burstiness = 0.5}]
    [defaults]                                     # workload keys every workload takes unless it sets them
    requests = 500
Workload keys: concurrency | arrival_rate (+ burstiness) | trace, requests, input_len, output_len, seed, ttft_ms,
itl_ms (simulate); concurrency, input_len, output_len (steady, which ignores the simulation-only keys).

Rows come back in the product's order (models slowest, workloads fastest) whatever ran them, and the same seeds
give the same numbers on any runner. A scenario that cannot run (a model that does not fit its layout) is a row with
an `error` and the sweep goes on.
"""
from __future__ import annotations

import itertools
import math
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from tokenmath.base.errors import InputError, show, unknown_name
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.specs.catalog import read_user_file
from tokenmath.analyses.serving.simulation.simulate import simulate
from tokenmath.analyses.serving.steady_state import steady_state

METHODS = ("simulate", "steady")
AXES = ("models", "hardware", "layouts", "engines", "workloads")
LAYOUT_KEYS = ("chips", "tp", "pp", "ep", "dp")
WORKLOAD_KEYS = ("concurrency", "arrival_rate", "burstiness", "trace", "requests", "input_len", "output_len",
                 "seed", "ttft_ms", "itl_ms")
STEADY_KEYS = ("concurrency", "input_len", "output_len")
MAX_SCENARIOS = 10_000
MAX_AXIS = 1_000
MAX_WORKERS = 1_024
DEFAULTS = {"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "layouts": [{}], "engines": ["vllm"],
            "workloads": [{"concurrency": 64}]}


@dataclass(frozen=True)
class ScenarioSet:
    """The axes of a sweep (each a list) and what each scenario computes."""
    method: str
    models: tuple[str, ...]
    hardware: tuple[str, ...]
    layouts: tuple[dict, ...]
    engines: tuple[str, ...]
    workloads: tuple[dict, ...]

    def expand(self) -> list[dict]:
        """Every scenario, models slowest and workloads fastest, each a plain dict (what a runner ships)."""
        return [{"index": i, "method": self.method, "model": m, "hardware": h, "layout": dict(lay), "engine": e,
                 "workload": dict(w)}
                for i, (m, h, lay, e, w) in enumerate(itertools.product(self.models, self.hardware, self.layouts,
                                                                        self.engines, self.workloads))]

    @property
    def size(self) -> int:
        return math.prod(len(getattr(self, a)) for a in AXES)

    def to_dict(self) -> dict:
        return {"method": self.method, **{a: list(getattr(self, a)) for a in AXES}}


def _as_list(v, field: str) -> list:
    out = list(v) if isinstance(v, (list, tuple)) else [v]
    if not out:
        raise InputError(field, "is an empty list", "at least one value")
    if len(out) > MAX_AXIS:
        raise InputError(field, f"has {len(out):,} values", f"at most {MAX_AXIS:,}")
    return out


def _names(v, field: str) -> tuple[str, ...]:
    out = _as_list(v, field)
    for x in out:
        if not isinstance(x, str) or not x.strip():
            raise InputError(field, f"{show(x)} is not a name", "catalog ids (strings)")
    return tuple(x.strip() for x in out)


def _table(v, field: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(v, dict):
        raise InputError(field, f"{show(v)} is not a table", "a table of " + ", ".join(keys))
    for k in v:
        if k not in keys:
            raise unknown_name(f"{field}.{k}", str(k), keys)
    return dict(v)


def _layout(v, field: str) -> dict:
    d = _table(v, field, LAYOUT_KEYS)
    return {k: int_arg(d[k], f"{field}.{k}", 1, 1_000_000) for k in LAYOUT_KEYS if k in d}


def _workload(v, field: str, method: str) -> dict:
    d = _table(v, field, WORKLOAD_KEYS)
    given = [k for k in ("concurrency", "arrival_rate", "trace") if d.get(k) is not None]
    if len(given) > 1:
        raise InputError(field, f"gives {' and '.join(given)}", "one of concurrency, arrival_rate and trace")
    if method == "steady":
        for k in ("arrival_rate", "trace"):
            if k in d:
                raise InputError(f"{field}.{k}", "the steady state is a closed loop's",
                                 'method = "simulate" for open loops and traces, or a concurrency')
        extra = [k for k in d if k not in STEADY_KEYS]
        if extra:           # before, dropped silently
            raise InputError(f"{field}.{extra[0]}", "the steady state is a closed form: it serves no count of "
                             "requests, draws no seed, shapes no arrivals and scores no goodput targets",
                             f'method = "simulate" for {extra[0]}, or leave it out')
        d.setdefault("concurrency", DEFAULTS["workloads"][0]["concurrency"])
    for k in ("concurrency", "requests"):
        if k in d:
            d[k] = int_arg(d[k], f"{field}.{k}", 1, 2_000_000)
    if "seed" in d:
        d["seed"] = int_arg(d["seed"], f"{field}.seed", 0, 2 ** 32 - 1)
    for k in ("arrival_rate", "burstiness", "ttft_ms", "itl_ms"):
        if k in d:
            d[k] = pos_float(d[k], f"{field}.{k}", 0.0, 1e9)
    for k in ("input_len", "output_len", "trace"):
        if k in d and (isinstance(d[k], bool) or not isinstance(d[k], (int, str))):
            raise InputError(f"{field}.{k}", f"{show(d[k])} is not a token count, a length spec or a path",
                             "e.g. 1024 or \"uniform:512-1536\" (a trace: a file path)")
    return d


def scenario_set(spec: dict, field: str = "scenarios") -> ScenarioSet:
    """Check a scenario file's dict (see the module's doc): every axis a list, every key known."""
    if not isinstance(spec, dict):
        raise InputError(field, f"{show(spec)} is not a table", "a table with " + ", ".join(AXES))
    for k in spec:
        if k not in (*AXES, "method", "defaults"):
            raise unknown_name(f"{field}.{k}", str(k), (*AXES, "method", "defaults"))
    method = spec.get("method", "simulate")
    if method not in METHODS:
        raise InputError(f"{field}.method", f"{show(method)} is not a method", " or ".join(METHODS))
    defaults = _table(spec.get("defaults", {}), f"{field}.defaults", WORKLOAD_KEYS)
    get = {a: spec.get(a, DEFAULTS[a]) for a in AXES}
    workloads = tuple(_workload({**defaults, **_table(w, f"{field}.workloads[{i}]", WORKLOAD_KEYS)},
                                f"{field}.workloads[{i}]", method)
                      for i, w in enumerate(_as_list(get["workloads"], f"{field}.workloads")))
    s = ScenarioSet(method, _names(get["models"], f"{field}.models"), _names(get["hardware"], f"{field}.hardware"),
                    tuple(_layout(x, f"{field}.layouts[{i}]")
                          for i, x in enumerate(_as_list(get["layouts"], f"{field}.layouts"))),
                    _names(get["engines"], f"{field}.engines"), workloads)
    if s.size > MAX_SCENARIOS:
        raise InputError(field, f"the product holds {s.size:,} scenarios", f"at most {MAX_SCENARIOS:,}")
    return s


def read_scenarios(path, field: str = "file") -> ScenarioSet:
    """A scenario file (.toml or .json) checked into a ScenarioSet."""
    return scenario_set(read_user_file(path, field), field)


def check_names(s: ScenarioSet, fields: dict[str, str] | None = None) -> None:
    """Every model, hardware and engine name known (or a readable file) before anything runs: a typo fails the
    sweep at once, with the field (fields: axis -> the name to report; default "scenarios.<axis>")."""
    from tokenmath.specs.catalog import looks_like_path
    from tokenmath.specs.hardware import catalog as chips_catalog, get_hardware
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.serving_engines import resolve_engine
    from tokenmath.specs.systems import catalog as systems_catalog
    name = lambda axis: (fields or {}).get(axis, f"scenarios.{axis}")      # noqa: E731
    known_hw = set(chips_catalog()) | set(systems_catalog())

    def check(axis, values, fn):
        for v in dict.fromkeys(values):
            try:
                fn(v)
            except InputError as e:
                raise InputError(name(axis), e.problem, e.valid) from None

    def hardware(h):
        if h.lower() in known_hw:
            return
        if not looks_like_path(h):
            raise unknown_name(name("hardware"), h, known_hw)
        get_hardware(h)
    check("models", s.models, get_model)
    check("hardware", s.hardware, hardware)
    check("engines", s.engines, resolve_engine)


# ---- one scenario (runs wherever the runner puts it: plain dicts in, a plain dict out) ---------------------------

def _hardware(name: str, chips):
    """A chip id or file as it is; a system id that is not a chip: the system sized to the layout's chips."""
    from tokenmath.specs.hardware import catalog as chips_catalog
    from tokenmath.specs.systems import catalog as systems_catalog, get_system
    key = name.lower()
    if key not in chips_catalog() and key in systems_catalog():
        return get_system(key, chips)
    return name


def _simulated(r) -> dict:
    pct = lambda p, k: finite(getattr(p, k))      # noqa: E731
    tpot = r.tpot_s.mean
    st = r.steady
    return {"chips": r.chips, **r.layout, "output_tokens_per_s": finite(r.output_tokens_per_s),
            "output_tokens_per_s_per_chip": finite(r.output_tokens_per_s_per_chip),
            "output_tokens_per_s_per_user": finite(1.0 / tpot) if tpot else None,
            "steady_output_tokens_per_s_per_chip": finite(st["output_tokens_per_s"] / r.chips)
            if st.get("output_tokens_per_s") is not None else None,
            "requests_per_s": finite(r.requests_per_s), "goodput_rps": finite(r.goodput_rps),
            "slo_attainment": finite(r.slo_attainment),
            "ttft_p50_s": pct(r.ttft_s, "p50"), "ttft_p99_s": pct(r.ttft_s, "p99"),
            "itl_p50_s": pct(r.itl_s, "p50"), "itl_p99_s": pct(r.itl_s, "p99"), "tpot_mean_s": finite(tpot),
            "e2e_p50_s": pct(r.e2e_s, "p50"), "e2e_p99_s": pct(r.e2e_s, "p99"),
            "preemptions": r.preemptions, "queue_grows": r.queue_grows, "queue_max": r.queue_max,
            "kv_peak_fraction": finite(r.kv_peak_fraction), "duration_s": finite(r.duration_s)}


def _steady(s) -> dict:
    p = s.points[0]
    return {"chips": s.chips, **s.layout, "output_tokens_per_s": finite(p.output_tokens_per_s),
            "output_tokens_per_s_per_chip": finite(p.output_tokens_per_s_per_chip),
            "output_tokens_per_s_per_user": finite(p.output_tokens_per_s_per_user),
            "ttft_mean_s": finite(p.ttft_s), "tpot_mean_s": finite(p.tpot_s), "e2e_mean_s": finite(p.e2e_s),
            "running": finite(p.running), "queued": finite(p.queued), "limit": p.limit, "regime": p.regime}


def run_scenario(sc: dict) -> dict:
    """One scenario's row: the scenario and its figures, or the scenario and its `error` (never an exception: a
    sweep of thousands goes on past one that cannot run)."""
    lay, w = sc["layout"], sc["workload"]
    row = {k: sc[k] for k in ("index", "method", "model", "hardware", "engine")}
    row.update(layout=dict(lay), workload=dict(w))
    try:
        hw = _hardware(sc["hardware"], lay.get("chips"))
        if sc["method"] == "steady":
            got = _steady(steady_state(sc["model"], hw, **lay, engine=sc["engine"], **w))
        else:
            got = _simulated(simulate(sc["model"], hw, **lay, engine=sc["engine"], **w))
        row.update(got, error=None)
    except InputError as e:
        row["error"] = e.to_dict()["error"]
    except Exception as e:  # noqa: BLE001 -- a bug in one scenario is reported in its row, not lost with the sweep
        row["error"] = {"field": None, "problem": f"internal error: {type(e).__name__}: {e}",
                        "valid": "please report this with the scenario"}
    return row


# ---- runners ------------------------------------------------------------------------------------------------------

class LocalProcesses:
    """Scenarios on this machine's cores: a ProcessPoolExecutor (forked while this process runs one thread, so the
    workers start with tokenmath loaded; spawned otherwise), or in this process for one worker or one scenario."""

    def __init__(self, workers: int | None = None):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.workers = cores if workers is None else int_arg(workers, "workers", 1, MAX_WORKERS)
        self.used = 1

    def map(self, fn, items: list) -> list:
        n = min(self.workers, len(items))
        self.used = max(n, 1)
        if n <= 1:
            return [fn(x) for x in items]
        import multiprocessing
        ctx = multiprocessing.get_context("fork" if threading.active_count() == 1
                                          and "fork" in multiprocessing.get_all_start_methods() else "spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            return list(pool.map(fn, items))

    def describe(self) -> dict:
        return {"kind": "processes", "workers": self.used}


@dataclass(frozen=True)
class ScenarioSweep:
    scenarios: ScenarioSet
    rows: tuple[dict, ...]
    runner: dict
    wall_s: float

    def summary(self) -> dict:
        ok = [r for r in self.rows if r["error"] is None]

        def best(key, most=True):
            vals = [r for r in ok if r.get(key) is not None]
            if not vals:
                return None
            r = (max if most else min)(vals, key=lambda r: r[key])
            return {"index": r["index"], "value": r[key]}
        return {"scenarios": len(self.rows), "ok": len(ok), "errors": len(self.rows) - len(ok),
                "runner": self.runner, "wall_s": self.wall_s,
                "best_output_tokens_per_s_per_chip": best("output_tokens_per_s_per_chip"),
                "best_output_tokens_per_s_per_user": best("output_tokens_per_s_per_user"),
                "best_goodput_rps": best("goodput_rps"),
                "lowest_ttft_p99_s": best("ttft_p99_s", most=False)}

    def to_dict(self) -> dict:
        return {"scenarios": self.scenarios.to_dict(), "rows": list(self.rows), "summary": self.summary()}


def run_scenarios(scenarios: ScenarioSet | dict, *, workers: int | None = None, runner=None,
                  fields: dict[str, str] | None = None) -> ScenarioSweep:
    """Every scenario of the product, in order: on `runner` (anything with map(fn, items) -> list in order and
    describe() -> dict, e.g. local.cluster.DaskCluster) or on `workers` local processes (default: every core).
    Names are checked first (check_names; `fields` names the options they came from)."""
    s = scenarios if isinstance(scenarios, ScenarioSet) else scenario_set(scenarios)
    check_names(s, fields)
    runner = runner if runner is not None else LocalProcesses(workers)
    t0 = time.perf_counter()
    rows = runner.map(run_scenario, s.expand())
    return ScenarioSweep(s, tuple(rows), runner.describe(), time.perf_counter() - t0)
