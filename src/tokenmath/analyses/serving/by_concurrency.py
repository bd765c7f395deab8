"""Throughput per chip against tokens/s per user by concurrency, for `pareto` and `plan`: the closed-loop steady
state (steady_state.closed_loop: C users, each sending its next request when the last completes, served by the
engine's scheduler) of each layout at each concurrency, as InferenceMAX-style charts plot it (one curve per
configuration, a point per concurrency).

Next to the static-batch figures of pareto and plan (a whole batch prefilled, then decoded), these are what a
continuously batching server gives: TTFT is one request's (its own step, plus any wait for a slot), a user's speed
is 1 / time per output token, throughput counts the prefill steps that share the GPU with decodes.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg
from tokenmath.engine.economics import chip_s_per_mtok, request_cost_per_mtok, usd_per_s
from tokenmath.mapping.layout import ATTENTION_SHARDING, Layout
from tokenmath.analyses.setup import Setup, fmt_layout
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.workload import parse_lengths
from tokenmath.analyses.serving.steady_state import closed_loop

DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MAX_CONCURRENCY = 1_000_000
MAX_POINTS = 64                     # concurrencies in one call


def concurrency_axis(concurrency, engine) -> tuple[int, ...]:
    """The concurrencies to trace: the ones given (an int or a list), else DEFAULT_CONCURRENCY when there is an
    engine (its scheduler sets the steady state), else none. Empty (False, ()) turns the axis off."""
    if concurrency is None:
        return DEFAULT_CONCURRENCY if engine is not None else ()
    if concurrency is False:
        return ()
    cs = [concurrency] if np.ndim(concurrency) == 0 else list(concurrency)
    if len(cs) > MAX_POINTS:
        raise InputError("concurrency", f"{len(cs)} values", f"at most {MAX_POINTS}")
    cs = sorted({int_arg(c, "concurrency", 1, MAX_CONCURRENCY) for c in cs})
    if cs and engine is None:
        raise InputError("concurrency", "the steady state at a concurrency needs a serving engine's scheduler, and "
                         "none was given", "engine=vllm, sglang, tensorrt-llm, llama.cpp or mlx")
    return tuple(cs)


def reaching(axis: tuple[int, ...], top: int) -> tuple[int, ...]:
    """The default axis carried on in powers of two until it reaches `top` users (the largest batch any layout holds),
    so that a machine that serves thousands of users is traced that far (at most MAX_POINTS concurrencies)."""
    cs = list(axis)
    while cs and cs[-1] < top and len(cs) < MAX_POINTS:
        cs.append(cs[-1] * 2)
    return tuple(cs)


def layout_replica(su: Setup, t, inp, out, max_concurrency: int, draft=None, cached: int = 0):
    """(name, replica, step cost tables, refusal) of layout t = (tp, pp, ep, dp[, attention sharding code]) on setup
    `su`, for closed loops of up to `max_concurrency` users with lengths inp / out (parsed workload lengths):
    replica and tables None when the replica does not model the layout or its KV cache holds no whole request;
    refusal: the problem when the step tables are refused (InputError from the replica's cost), else None.
    cached: tokens cached before every prompt (steady_state.closed_loop's): held and attended too."""
    tp, pp, ep, dp = (int(v) for v in t[:4])
    attn = int(t[4]) if len(t) > 4 else 0
    name = fmt_layout(tp, pp, ep, dp, attn)
    try:
        rep = make_replica(replace(su, layout=Layout(tp, pp, ep, dp, attn=attn)), draft)
    except InputError:
        return name, None, None, None
    if inp.max + out.max + cached + rep.block_tokens > rep.kv_tokens:
        return name, None, None, None
    try:
        cost = rep.cost(int(min(inp.max + out.max + cached, rep.kv_tokens)), max_concurrency + min(rep.budget, 1 << 20))
    except InputError as e:
        return name, None, None, e.problem
    return name, rep, cost, None


def trace(su: Setup, layouts, concurrency: tuple[int, ...], input_len: int, output_len: int,
          draft=None, meets=None) -> tuple[list, list]:
    """(points, notes): every layout (tp, pp, ep, dp[, attention sharding code]) of `layouts` at every concurrency,
    each point a dict with the layout, concurrency, tokens/s per user and per chip, TTFT, TPOT and what limits the
    running requests. A layout whose KV cache cannot hold a request, or that the simulator's replica does not model
    (with a draft: pipeline stages, sparse attention), is left out, with a note. draft: a speculative.Draft (every
    decode verifies k + 1 tokens after the draft's k steps; steady_state.py), None: plain decoding. A fifth element
    (batch / dp attention) prices the replica's KV and steps as the layout shards attention (step_cost.py).
    meets: a test of a point against targets; each layout then gains, flagged `bisected`, the largest concurrency
    between its last axis point that meets them and the next that does not (users are whole: bisection)."""
    if not concurrency:
        return [], []
    inp, out = parse_lengths(input_len, "input_len"), parse_lengths(output_len, "output_len")
    pts, skipped, refused = [], [], []
    for t in layouts:
        tp, pp, ep, dp = (int(v) for v in t[:4])
        attn = int(t[4]) if len(t) > 4 else 0
        name, rep, cost, problem = layout_replica(su, t, inp, out, max(concurrency), draft)
        if problem:
            refused.append(f"{name} ({problem})")
            continue
        if rep is None:
            skipped.append(name)
            continue
        at = lambda c: _point(name, (tp, pp, ep, dp, attn), c, closed_loop(rep, cost, c, inp, out))  # noqa: E731
        mine = [at(c) for c in concurrency]
        pts += mine
        if meets is not None:
            pts += _bisected(mine, at, meets)
    notes = []
    if skipped:
        notes.append(f"by concurrency: {len(skipped)} layout{'s' if len(skipped) > 1 else ''} left out, their KV cache "
                     f"under the engine's memory fraction holds no {inp.max + out.max:,}-token request "
                     f"({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''})")
    if refused:
        notes.append(f"by concurrency: not traced, the simulator's replica does not model {'; '.join(refused[:3])}"
                     + ("; ..." if len(refused) > 3 else ""))
    return pts, notes


def _point(name: str, t: tuple[int, ...], c: int, p) -> dict:
    tp, pp, ep, dp, attn = t
    return {"layout": name, "tp": tp, "pp": pp, "ep": ep, "dp": dp,
            **({"attention_sharding": ATTENTION_SHARDING[attn]} if attn else {}),
            "concurrency": c, "output_tokens_per_s_per_user": finite(p.output_tokens_per_s_per_user),
            "output_tokens_per_s_per_chip": finite(p.output_tokens_per_s_per_chip),
            "output_tokens_per_s": finite(p.output_tokens_per_s), "ttft_s": finite(p.ttft_s),
            "tpot_s": finite(p.tpot_s), "e2e_s": finite(p.e2e_s), "running": finite(p.running),
            "queued": finite(p.queued), "limit": p.limit, "regime": p.regime}


def _bisected(axis_points: list[dict], at, meets) -> list[dict]:
    """[the point at the largest concurrency between the last axis point that meets the targets and the next one,
    which does not], or [] (none meets, all meet, or they are neighbours). A user's speed falls and a request's TTFT
    grows with the users, so the points that meet are the ones below a boundary."""
    ok = [meets(q) for q in axis_points]
    if not any(ok) or all(ok):
        return []
    i = max(j for j, m in enumerate(ok) if m)
    if i + 1 >= len(axis_points):
        return []
    lo, hi, best = axis_points[i]["concurrency"], axis_points[i + 1]["concurrency"], None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        q = at(mid)
        if meets(q):
            lo, best = mid, q
        else:
            hi = mid
    return [] if best is None else [{**best, "bisected": True}]


def targets_test(ttft_s: float | None, min_tokens_per_s_per_user: float | None):
    """The test `trace(meets=...)` and `cheapest_meeting` apply: a point's own TTFT <= ttft_s and its user speed
    (1 / time per output token) >= the target (None: no target; both None: None, nothing to bisect)."""
    if ttft_s is None and min_tokens_per_s_per_user is None:
        return None

    def meets(p: dict) -> bool:
        speed, ttft = p["output_tokens_per_s_per_user"], p["ttft_s"]
        if speed is None or ttft is None:
            return False
        return ((ttft_s is None or ttft <= ttft_s)
                and (min_tokens_per_s_per_user is None or speed >= min_tokens_per_s_per_user))
    return meets


def cheapest_meeting(points: list[dict], ttft_s: float | None, min_tokens_per_s_per_user: float | None,
                     usd_per_chip_hour: float | None) -> dict | None:
    """The steady-state point (of `trace`) with the fewest chip-seconds per million output tokens whose own TTFT is
    at most ttft_s and whose user speed (1 / time per output token) is at least the target (None: no target); among
    equals the more interactive. What a continuously batching server meets, where plan's static batch prefills
    whole batches: its cost counts the prefill steps that share the chips (whole requests per output token). The
    point with `chips`, `chip_s_per_mtok_output` and `cost_per_mtok_output_request_usd` (None unpriced); None when no
    point meets the targets."""
    best, key = None, None
    meets = targets_test(ttft_s, min_tokens_per_s_per_user)
    for p in points:
        speed, tok_s = p["output_tokens_per_s_per_user"], p["output_tokens_per_s"]
        if not tok_s or speed is None or (meets is not None and not meets(p)):
            continue
        chips = p["tp"] * p["pp"] * p["ep"] * p["dp"]
        k = (chip_s_per_mtok(chips, tok_s), -speed)
        if key is None or k < key:
            best, key = {**p, "chips": chips, "chip_s_per_mtok_output": k[0]}, k
    if best is not None:
        best["cost_per_mtok_output_request_usd"] = (
            None if usd_per_chip_hour is None
            else finite(request_cost_per_mtok(usd_per_s(best["chips"], usd_per_chip_hour), best["output_tokens_per_s"])))
    return best


def cheapest_continuous(su: Setup, g, rank, target: float | None, input_len: int, output_len: int, draft=None,
                        layouts: int | None = None, ttft_s: float | None = None) -> dict | None:
    """The continuously batched answer to a static search: the steady-state point with the fewest chip-seconds per
    output token whose users still get `target` tokens/s (the prompts admitted among their decodes included) and
    whose own TTFT stays within ttft_s (None: no target), over every layout of grid `g` (analyses/serving/grid.py)
    that fits (dp replicas folded: one_replica), users on the default axis carried to the largest batch that fits,
    the boundary bisected (cheapest_meeting's point; None when none meets). `rank` ((L, B), inf where a point misses
    the static target) only orders the search; `layouts` caps it (None: all).

    One search over the same layouts whatever the question (plan, fleet, price), so a wider option space never gives
    a costlier answer (tests/test_continuous_search.py). Branch and bound keeps it quick: a layout is traced (its
    step tables cost ~0.05-2 s) only while its bound, continuous_bound, beats the best point found."""
    fits = np.asarray(g.fits, bool)
    ok = [i for i in np.argsort(np.min(rank, axis=1), kind="stable") if fits[i].any()][:layouts]
    if not ok:
        return None
    bound = continuous_bound(g, target, input_len, output_len)
    groups: dict[tuple, float] = {}
    for i in ok:
        t = one_replica([g.layouts[i]])[0]
        groups[t] = max(groups.get(t, 0.0), float(bound[i]))
    cs = reaching(DEFAULT_CONCURRENCY, int(max(g.max_batch[i, 0] for i in ok)))
    price, meets = su.hardware.price_usd_per_hour, targets_test(ttft_s, target)
    best = None
    for t in sorted(groups, key=lambda t: -groups[t]):
        if best is not None and groups[t] < best["output_tokens_per_s"] / best["chips"]:
            break                       # no layout left can beat it: every later bound is lower
        pts, _ = trace(su, [t], cs, input_len, output_len, draft=draft, meets=meets)
        cand = cheapest_meeting(pts + ([best] if best else []), ttft_s, target, price)
        best = cand if cand is not None else best
    return best


def continuous_bound(g, target: float | None, input_len: int, output_len: int) -> np.ndarray:
    """(L,) an upper bound on the output tokens/s per chip any continuously batched steady state of each layout
    reaches at the speed target. Per output token the chips spend at least a decode step's share, step(B) / B, at the
    B sequences running (a step that also carries prompt chunks is no shorter than the decode-only step), plus the
    prompt's prefill over the request's output tokens, at least the static grid's cheapest prefill per prompt,
    min_B TTFT(B) / B (a whole batch prefilled at once: the largest GEMMs), / output_len. B: any batch of the grid
    whose decode step still gives the target; past the largest static batch Bmax (which holds whole input + output
    contexts) a running request holds at least its prompt, so at most (input + output) / input x Bmax run (5% added
    for block rounding), each step no shorter than step(Bmax)."""
    B, step = np.asarray(g.batch, float), np.asarray(g.step_s, float)
    fits = np.asarray(g.fits, bool) & (step > 0)
    chips = np.asarray(g.chips, float).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        prefill = np.min(np.where(fits, np.asarray(g.ttft_s, float) / B, np.inf), axis=1) / output_len
        per_tok = np.where(fits, step / B, np.inf)
        speed_ok = fits if target is None else fits & (1.0 / step >= target)
        last = np.where(fits.any(axis=1), fits.shape[1] - 1 - np.argmax(fits[:, ::-1], axis=1), 0)
        rows = np.arange(len(last))
        most = (input_len + output_len) / input_len * 1.05
        best_tok = np.min(np.where(speed_ok, per_tok, np.inf), axis=1)
        best_tok = np.where(speed_ok[rows, last], np.minimum(best_tok, per_tok[rows, last] / most), best_tok)
        # pipeline stages: the static TTFT is a whole batch's trip through every stage, one stage busy at a time,
        # while a continuously batched pipeline keeps its stages busy with prompt chunks: up to pp x less per prompt
        pp = np.asarray([t[1] for t in g.layouts], float)
        out = 1.0 / (chips * (best_tok + prefill / pp))
    return np.where(np.isfinite(out) & (out > 0), out, 0.0)


def one_replica(layouts) -> list[tuple[int, ...]]:
    """The layouts with their dp replicas folded into one: dp independent replicas (each its own tp x pp x ep chips,
    its own schedulers; an expert-parallel group's attention groups share its all-to-all, the replicas share nothing)
    each serve 1 / dp of the users, so the steady state per chip is the dp = 1 layout's at C / dp users (and tracing
    it bisects to one user per replica, not per dp). Order kept, duplicates dropped."""
    out = []
    for t in layouts:
        t = tuple(int(v) for v in t)
        if t[3] > 1:
            t = (t[0], t[1], t[2], 1, *t[4:])
        if t not in out:
            out.append(t)
    return out


def continuous_fields(c: dict) -> dict:
    """The keys fleet and price report of a continuously batched point (one meaning each): its layout, the users it
    runs (`concurrency`), their speed, a request's own TTFT and the time per output token."""
    keep = ("layout", "tp", "pp", "ep", "dp", "attention_sharding", "concurrency", "ttft_s", "tpot_s")
    return {**{k: c[k] for k in keep if k in c}, "tokens_per_s_per_user": c["output_tokens_per_s_per_user"]}
