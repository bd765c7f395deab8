"""tokenmath.simulate: iteration-level simulation of one serving replica over a workload.

The pieces (each its own module): workload.py (who sends what, when), replica.py (the engine profile's limits
and KV over the layout), scheduler.py (the policy that fills each step), step_cost.py (each step's time from the
one engine), loop.py (the core loop), result.py (the metrics). This module wires them and summarizes.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from tokenmath.specs.serving_engines import DEFAULT_ENGINE   # the one default engine (vLLM)
from tokenmath.base.errors import InputError
from tokenmath.base.validators import pos_float
from tokenmath.mapping.layout import attention_name, with_attention
from tokenmath.analyses.setup import setup
from tokenmath.analyses.serving.simulation.loop import run
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.result import (CDF_POINTS, SimulationResult, StepKind, downsample,
                                                          percentiles, quantiles, request_metrics, steady_window,
                                                          tokens_in)
from tokenmath.analyses.serving.simulation.sessions import Sessions, session_summary
from tokenmath.analyses.serving.simulation.state import State
from tokenmath.analyses.serving.simulation.workload import make_workload
from tokenmath.analyses.serving.speculative import resolve_draft
# the default targets of goodput: MLPerf Inference's Llama-2-70B server limits (one home: operating_point.py)
from tokenmath.analyses.serving.operating_point import TPOT_TARGET_S, TTFT_TARGET_S  # noqa: F401

DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_HARDWARE = "h100-sxm"


def simulate(model=DEFAULT_MODEL, hardware=DEFAULT_HARDWARE, *, chips=None, tp=None, pp=None, ep=None, dp=None,
             engine=DEFAULT_ENGINE, concurrency=None, arrival_rate=None, burstiness=1.0, trace=None, requests=1000,
             input_len=1024, output_len=256, ttft_ms=None, itl_ms=None, seed=0, weight_dtype=None, kv_dtype=None,
             efficiency=None, prefix_hit=None, speculation=None, prefix_cache_share=None,
             attention_sharding=None, turns=None, tool_gap_s=None, **knobs) -> SimulationResult:
    """Serve `requests` requests on one replica of `model` on `chips` x `hardware` with `engine`'s scheduler.

    Workload: concurrency (closed loop; 64 when nothing is given), arrival_rate (open loop, req/s; burstiness: the
    gamma shape, 1 = Poisson) or trace (a CSV/JSONL file). input_len, output_len: token counts or length specs
    (workload.LENGTH_HELP). ttft_ms, itl_ms: goodput targets (default MLPerf's 2000 ms and 200 ms per token).
    prefix_hit: the share of every generated prompt that is one prefix shared by all requests (prefix caching).
    prefix_cache_share: a share of the KV cache kept for cached prefixes (a what-if; None or 0: the cache lives in
    the shared pool and idle prefixes are evicted, least recently used first, when running requests need the room).
    speculation: an analyses.serving.speculative.Speculation (--draft/--spec-k/--acceptance or --mtp): every decode
    step verifies k + 1 tokens per sequence after the draft's k steps and yields E tokens per sequence on average
    (the expectation, not per-sequence draws: see state.py and docs/speculative.md); k = 0 is plain decoding.
    attention_sharding: heads (None), batch or dp inside the TP group (mapping/layout.py; docs/attention-sharding.md).
    turns, tool_gap_s: agent sessions (sessions.py): `requests` turns in sessions of `turns`, each prompt the session's
    history (a cached prefix while the prefix cache holds it) plus input_len new tokens, the next turn sent
    tool_gap_s seconds after one completes; an open loop's arrival_rate then counts sessions per second.
    """
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine if engine is not None else DEFAULT_ENGINE, **knobs)
    if attention_sharding is not None:
        su = replace(su, layout=with_attention(su.model, su.layout, attention_sharding))
    ttft_t = TTFT_TARGET_S if ttft_ms is None else pos_float(ttft_ms, "ttft_ms", 0.0, 1e9) / 1e3
    itl_t = TPOT_TARGET_S if itl_ms is None else pos_float(itl_ms, "itl_ms", 0.0, 1e9) / 1e3
    wl = make_workload(concurrency=concurrency, arrival_rate=arrival_rate, burstiness=burstiness, trace=trace,
                       requests=requests, input_len=input_len, output_len=output_len, seed=seed, prefix_hit=prefix_hit,
                       turns=turns, tool_gap_s=tool_gap_s)
    draft = resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype)
    rep = make_replica(su, draft)
    arr, inp, out, grp, shared = wl.materialize()
    share = 0.0 if prefix_cache_share is None or (isinstance(prefix_cache_share, (int, float)) and
                                                  prefix_cache_share == 0) else \
        pos_float(prefix_cache_share, "prefix_cache_share", 0.0, 0.95)
    if share and not (grp >= 0).any() and wl.turns == 1:
        raise InputError("prefix_cache_share", "given without shared prefixes", "--prefix-hit RATE, or a trace with "
                         "prefix_id")
    reserve = int(share * rep.kv_tokens)
    E, ahead = 1, 0
    if rep.draft is not None:
        E, ahead = rep.draft.spec.tokens_per_step, int(rep.draft.spec.k)
    need = inp + out
    most = int(need.max())
    room = rep.kv_tokens - reserve          # what running requests may hold
    if most + rep.block_tokens + ahead > room:
        raise InputError("turns" if wl.turns > 1 else "input_len" if wl.kind != "trace" else "trace",
                         ("a session's last turn" if wl.turns > 1 else "a request")
                         + f" of {most:,} tokens (prompt + output) does not fit in the KV cache of "
                         f"{room:,} tokens" + (" left beside the prefix cache's share" if reserve else ""),
                         ("fewer turns, " if wl.turns > 1 else "") + "shorter requests, more chips or a smaller kv dtype"
                         + (", or a smaller --prefix-cache-share" if reserve else ""))
    n = int(inp.size)
    cost = rep.cost(most, n)
    gaps = wl.gaps()
    sess = None if gaps is None else Sessions(n, wl.turns, wl.tool_gap_s, gaps, None if wl.kind == "closed" else arr)
    st = State(inp, out, grp, shared, rep.kv_tokens, rep.block_tokens, step_tokens=E, ahead=ahead,
               prefix_reserve=reserve, session=None if sess is None else np.arange(n) // wl.turns)
    rec = run(st, rep.policy(), cost, None if sess is not None else arr, wl.concurrency,
              max_turns=200 * n + 1_000_000, phases=wl.phases(), sessions=sess)
    r = _summarize(su, rep, cost, wl, st, rec, inp, out, ttft_t, itl_t)
    if sess is not None:
        r = replace(r, multi_turn=session_summary(wl.turns, wl.tool_gap_s, gaps, *(np.asarray(x, float) for x in (
            st.arrival, st.first, st.end)), inp, shared, st.cached, st.computed))
    elif wl.tool_gap_s:
        r = replace(r, notes=r.notes + ("--tool-gap-s changes nothing here: it is the time between two turns of a "
                                        "session, and --turns 1 sends independent requests",))
    return r


def _summarize(su, rep, cost, wl, st, rec, inp, out, ttft_t, itl_t) -> SimulationResult:
    m, lay = su.model, su.layout
    arrival, first, end = (np.asarray(x, float) for x in (st.arrival, st.first, st.end))
    inp, out = inp.astype(float), out.astype(float)
    ttft, tpot, e2e, met = request_metrics(arrival, first, end, out, ttft_t, itl_t)
    t_start, t_end = float(arrival.min()), float(end.max())
    duration = max(t_end - t_start, 1e-12)
    closed = wl.kind == "closed"
    w0, w1 = steady_window(arrival, end, closed, wl.concurrency, wl.turns)
    steady = {"window_start_s": w0, "window_end_s": w1}
    ser = np.asarray(rec.series, float).reshape(-1, 4)
    times, kv, q, running = ser.T
    inw = (times >= w0) & (times <= w1)
    held = np.diff(np.concatenate((times, times[-1:])))       # how long each recorded state lasted
    if w1 > w0:
        o, i = tokens_in(w0, w1, first, end, inp, out)
        inside = (arrival >= w0) & (arrival <= w1)
        steady.update(output_tokens_per_s=o / (w1 - w0), total_tokens_per_s=(o + i) / (w1 - w0),
                      requests=int(inside.sum()), ttft_mean_s=float(ttft[inside].mean()) if inside.any() else None,
                      ttft_p50_s=float(quantiles(ttft[inside], [0.5])[0]) if inside.any() else None,
                      ttft_p99_s=float(quantiles(ttft[inside], [0.99])[0]) if inside.any() else None,
                      tpot_mean_s=float(np.nanmean(tpot[inside])) if (inside & (out > 1)).any() else None,
                      running_mean=float(np.average(running[inw], weights=held[inw])) if held[inw].sum() > 0 else None)
    gaps, gw = np.asarray(rec.gaps, float), np.asarray(rec.gap_weights, float)
    levels = np.linspace(0.0, 1.0, CDF_POINTS)
    tp_ok = tpot[~np.isnan(tpot)]
    cdf = {"q": levels.tolist(), "ttft_s": quantiles(ttft, levels).tolist(), "e2e_s": quantiles(e2e, levels).tolist(),
           "tpot_s": quantiles(tp_ok, levels).tolist(), "itl_s": quantiles(gaps, levels, gw).tolist()}
    series = downsample(times, {"kv_fraction": kv / rep.kv_tokens, "queue": q, "running": running})
    dt = np.diff(np.concatenate(([t_start], times)))
    notes = []
    if wl.kind == "closed":
        notes.append("closed loop: the users ramp in over one request's lifetime (each first request at a random "
                     "decode step of one cycle, seeded), as clients do, instead of all at t = 0 (loop.py)")
    eng = rep.engine
    if eng.step_cpu_s is None:
        notes.append(f"{eng.name}: per-step CPU time not fitted (no published measurement of this engine "
                         "version in data/measurements.toml): 0 s per step")
    if m.max_context and int((inp + out).max()) > m.max_context:
        notes.append(f"requests up to {int((inp + out).max()):,} tokens exceed the model's context "
                     f"{m.max_context:,}; the figures extrapolate the architecture")
    if m.is_mla:
        notes.append("MLA: a step with prefill chunks runs its GEMMs in the prefill form; decode attention stays "
                     "absorbed")
    if rep.draft is not None:
        sp = rep.draft.spec
        what = f"{sp.k} MTP token(s)" if sp.mtp else f"draft {rep.draft.model.name}, k = {sp.k}"
        notes.append(f"speculative decoding ({what}, acceptance {sp.acceptance:g}): every decode verifies k + 1 "
                     "tokens a step after the draft's k steps and gains E tokens (the expectation, for every "
                     "sequence); the draft's weights and cache are in the KV capacity; its prefill of each prompt "
                     "is left out; an inter-token gap is the time between verification steps")
    grows = None
    if not closed and q.size:
        # the queue when the last request arrived: a replica that keeps up has served nearly all the others
        at_last = q[max(int(np.searchsorted(times, arrival.max(), side="right")) - 1, 0)]
        grows = bool(at_last >= max(10.0, 0.05 * inp.size))
        if grows:
            notes.append(f"the queue grew through the run ({int(at_last):,} waiting when the last request arrived): "
                         "the arrival rate is above what this replica serves")
    return SimulationResult(
        model=m.id, hardware=su.hardware.id, chips=int(lay.chips),
        layout={"tp": int(lay.tp), "pp": int(lay.pp), "ep": int(lay.ep), "dp": int(lay.dp),
                **({"attention_sharding": attention_name(lay)} if lay.attn_by_batch else {})},
        engine=eng.describe(), policy=type(rep.policy()).name, policy_description=type(rep.policy()).describe,
        workload=wl.to_dict(), workload_description=wl.describe(), efficiency_source=su.efficiency.source,
        memory_bw=float(su.hardware.memory_bw),
        budget_tokens=int(rep.budget), max_running=int(rep.max_running), kv_capacity_tokens=int(rep.kv_tokens),
        requests=int(inp.size), duration_s=duration, input_tokens=int(inp.sum()), output_tokens=int(out.sum()),
        output_tokens_per_s=float(out.sum()) / duration, total_tokens_per_s=float(inp.sum() + out.sum()) / duration,
        requests_per_s=inp.size / duration,
        ttft_s=percentiles(ttft), itl_s=percentiles(gaps, gw), tpot_s=percentiles(tp_ok), e2e_s=percentiles(e2e),
        ttft_target_s=ttft_t, itl_target_s=itl_t, goodput_rps=float(met.sum()) / duration,
        slo_attainment=float(met.mean()), steady=steady, preemptions=st.preemptions, queue_grows=grows,
        queue_max=int(q.max()) if q.size else 0,
        queue_mean=float(np.sum(q * dt) / max(float(times[-1] - t_start), 1e-12)) if q.size else 0.0,
        kv_peak_fraction=float(kv.max()) / rep.kv_tokens if kv.size else 0.0,
        series=series, cdf=cdf, steps=tuple(_step_kinds(cost, rec)), notes=tuple(notes),
        speculation=rep.draft.to_dict() if rep.draft is not None else None,
        prefix_cache=st.pc.summary(t_end, rep.kv_tokens) if st.pc is not None else None,
        what_if=tuple(o.to_dict() for o in su.hardware.what_if))


def _step_kinds(cost, rec) -> list[StepKind]:
    """Each kind of step at its mean composition, re-priced by the engine directly (what bounded it)."""
    out = []
    d = rec.decode
    if d[0]:
        n_d, keys = d[2] / d[0], d[3] / d[0]
        out.append(_kind(cost, "decode", d[0], d[1], n_d, keys, 0.0, 0.0, (0.0,) * 4))
    for kind, a in (("mixed", rec.mixed), ("prefill", rec.prefill_only)):
        if a[0]:
            c = a[0]
            out.append(_kind(cost, kind, c, a[1], a[2] / c, a[3] / c, a[4] / c, a[5] / c,
                             tuple(x / c for x in a[6:10])))
    return out


def _kind(cost, kind, steps, seconds, n_d, keys, t_p, l_p, geo) -> StepKind:
    t, p = cost.direct(n_d, keys, t_p, l_p, *geo)
    return StepKind(kind, int(steps), float(seconds), n_d, keys / n_d if n_d else 0.0, t_p, l_p,
                    engine_step_s=t, bottleneck=str(p.bottleneck), compute_bound_s=float(p.compute_bound_s),
                    memory_bound_s=float(p.memory_bound_s), comm_s=float(p.comm_s), overhead_s=float(p.overhead_s),
                    weight_bytes=float(p.weight_bytes), kv_bytes=float(p.kv_bytes),
                    napkin_s=float(p.napkin_floor_s(cost.su.hardware)))
