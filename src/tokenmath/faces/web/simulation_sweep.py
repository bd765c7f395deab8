"""/api/simulate_sweep: the simulator (analyses.serving.simulation.simulate) run at several concurrencies (closed
loop) or arrival rates (open loop), one simulation per value with the same replica, workload and seed; each point
carries the simulation's own figures: output tokens/s per chip, TTFT and inter-token latency p50/p99, goodput.
No physics here: every figure is a field of one simulation's result."""
from __future__ import annotations

import threading
from collections import OrderedDict

from tokenmath.base.errors import InputError
from tokenmath.faces.web.blank_chips import sequence_of, with_fewest_chips
from tokenmath.faces.web.overrides import chip, what_if
from tokenmath.faces.web.params import Param
from tokenmath.faces.web.serving_fields import knobs, layout

MAX_SWEEP_POINTS = 16
# every point is one simulation; the sweep as a whole serves at most as many requests as one /api/simulate may
# (endpoints.MAX_SIM_REQUESTS: about a second of the server's time)
MAX_SWEEP_REQUESTS = 20_000
# the concurrencies InferenceMAX-style curves use (analyses.serving.by_concurrency.DEFAULT_CONCURRENCY, 1..512)
SWEEP_PARAMS = (
    Param("concurrencies", "intlist", None, "closed loop: the users (concurrency) of each point, e.g. 1,4,16,64 "
          "(default 1,2,4,...,512)", 1, 1_000_000),
    Param("arrival_rates", "floatlist", None, "open loop: the requests per second of each point, e.g. 1,2,4,8 "
          "(instead of concurrencies)", 1e-6, 1e7),
    Param("burstiness", "float", 1.0, "open loop: gamma shape of the gaps (1 = Poisson)", 1e-3, 1e3),
    Param("requests", "int", 1000, "requests of each point (the sweep serves at most "
          f"{MAX_SWEEP_REQUESTS:,} in all: fewer per point beyond)", 1, MAX_SWEEP_REQUESTS),
)
# the fields of one simulation that a point of the sweep keeps (SimulationResult.to_dict() keys)
KEPT = ("output_tokens_per_s", "output_tokens_per_s_per_chip", "requests_per_s", "goodput_rps", "slo_attainment",
        "queue_grows", "queue_max", "preemptions", "kv_peak_fraction", "duration_s")
LATENCIES = ("ttft_s", "itl_s", "tpot_s", "e2e_s")
# points kept by their request (a new typed load adds one point to a sweep whose other points are already known: one
# simulation to run instead of eleven); the same request always simulates the same figures (a fixed seed)
POINT_CACHE = 2048
_points: OrderedDict[tuple, dict] = OrderedDict()
_lock = threading.Lock()


def sweep_axis(a: dict) -> tuple[str, tuple]:
    """("concurrency", values) or ("arrival_rate", values), sorted and without repeats; concurrencies by default."""
    from tokenmath.analyses.serving.by_concurrency import DEFAULT_CONCURRENCY
    if a["concurrencies"] is not None and a["arrival_rates"] is not None:
        raise InputError("arrival_rates", "is given with concurrencies", "one of concurrencies (closed loop) and "
                         "arrival_rates (open loop)")
    over, values = (("arrival_rate", a["arrival_rates"]) if a["arrival_rates"] is not None
                    else ("concurrency", a["concurrencies"] or DEFAULT_CONCURRENCY))
    values = tuple(sorted(set(values)))
    if len(values) > MAX_SWEEP_POINTS:
        raise InputError("arrival_rates" if over == "arrival_rate" else "concurrencies", f"has {len(values)} values",
                         f"at most {MAX_SWEEP_POINTS} points in one sweep")
    return over, values


def simulate_sweep_response(model, a: dict) -> dict:
    """One simulation per value of the sweep's axis; the points in the axis' order."""
    from tokenmath.analyses.serving.simulation.simulate import simulate
    over, values = sweep_axis(a)
    per_point = min(a["requests"], MAX_SWEEP_REQUESTS // len(values))
    m, hw = model(a["model"]), chip(a)
    a = with_fewest_chips(m, a, sequence_of(a) * (a["turns"] or 1))     # a session's last turn: every turn's tokens
    lay = layout(a)
    same = tuple(sorted((k, repr(x)) for k, x in a.items() if k not in ("concurrencies", "arrival_rates", "requests")))
    points, head = [], None
    for v in values:
        key = (same, over, v, per_point)
        with _lock:
            got = _points.get(key)
            if got is not None:
                _points.move_to_end(key)
        if got is None:
            load = {"concurrency": v} if over == "concurrency" else {"arrival_rate": v, "burstiness": a["burstiness"]}
            r = simulate(m, hw, **lay, engine=a["engine"], **load, requests=per_point, input_len=a["input_len"],
                         output_len=a["output_len"], ttft_ms=a["ttft_ms"], itl_ms=a["itl_ms"], seed=a["seed"],
                         weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], turns=a["turns"],
                         tool_gap_s=a["tool_gap_s"], **knobs(a))
            d = r.to_dict()
            p = {over: v, **{k: d[k] for k in KEPT}}
            for k in LATENCIES:
                p[k] = {q: d[k][q] for q in ("p50", "p99", "mean")}
            got = ({k: d[k] for k in ("model", "hardware", "chips", "tp", "pp", "ep", "dp", "engine", "policy",
                                      "slo")}, p)
            with _lock:
                _points[key] = got
                while len(_points) > POINT_CACHE:
                    _points.popitem(last=False)
        head = head or got[0]
        points.append(got[1])
    notes = []
    if per_point < a["requests"]:
        notes.append(f"{per_point:,} requests per point (asked {a['requests']:,}): a sweep of {len(values)} points "
                     f"serves at most {MAX_SWEEP_REQUESTS:,} requests in all")
    out = {k: head[k] for k in ("model", "hardware", "chips", "tp", "pp", "ep", "dp", "engine", "policy")}
    out.update(over=over, requests_per_point=per_point, slo=head["slo"], points=points, notes=notes)
    out.update(what_if(a))
    return out
