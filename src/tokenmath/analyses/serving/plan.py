"""The best serving layout on a system: every (TP, EP, PP, DP) layout of N chips x a batch axis, in one engine call.

For a model, a system (hgx-h100, gb200-nvl72, a TPU slice...) and N chips, `plan` evaluates every layout that the
model admits (mapping/candidates.layouts_for with pipeline stages) against a batch axis from 1 to the largest batch
that fits, as one vectorized engine evaluation, and returns:
- best: the cheapest $/Mtok of output (chip-seconds per Mtok when the chip has no price; the same ranking, since
  every layout uses the same N chips) that meets the targets: TTFT <= --ttft-ms and tokens/s per user >=
  --min-tokens-per-s-per-user;
- runner_ups: the best point of each other layout, cheapest first;
- frontier: the throughput (tokens/s per chip) / interactivity (tokens/s per user) Pareto frontier over all points
  that fit (pareto.frontier_mask). The best point meets the targets and lies on or under the frontier.
Figures follow the static-batch convention of `infer`: TTFT is the prefill of the whole batch of prompts,
throughput per chip counts prefill time (batch x output / (TTFT + output x step) / chips), a user's speed is
1 / decode step. communication_share is the exposed communication share of the decode step (collectives plus
pipeline hand-offs).

Disaggregated serving (--disaggregated): a prefill pool and a decode pool sized to the traffic (plan_disaggregated.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg, pos_float
from tokenmath.engine.memory import max_batch as engine_max_batch
from tokenmath.engine.prefix_cache import hit_rate
from tokenmath.engine.speculative import max_batch_with_draft
from tokenmath.engine.static_batch import serve_batch
from tokenmath.mapping.candidates import SEARCH_ATTENTION, as_layout, layouts_for
from tokenmath.mapping.layout import ATTENTION_SHARDING, Layout, attention_code
from tokenmath.mapping.placement import place
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.model import Model
from tokenmath.specs.systems import System
from tokenmath.analyses.setup import Setup, check_ep_comm, check_ep_imbalance, fmt_layout, system_setup
from tokenmath.analyses.serving.grid import Grid, batch_axis, evaluate, links_for, point, static_ttft_note
from tokenmath.analyses.serving.by_concurrency import (cheapest_continuous, cheapest_meeting, concurrency_axis,
                                                       reaching, targets_test, trace)
from tokenmath.analyses.serving.pareto import flag_frontier, frontier_mask
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.serving.plan_disaggregated import disaggregate
from tokenmath.analyses.serving.speculative import Draft, resolve_draft, speculation_notes


def comm_breakdown(su: Setup, p: dict, input_len: int, output_len: int, **opts) -> dict:
    """Per-collective exposed communication of one decode step for a point (s)."""
    lay = Layout(p["tp"], p["pp"], p["ep"], p["dp"],
                 attn=ATTENTION_SHARDING.index(p.get("attention_sharding", "heads")))
    sv = serve_batch(su.model, su.hardware, lay, su.precision, su.efficiency, p["batch"], input_len, output_len,
                     su.reserve, **opts)
    out = {}
    for op in sv.decode.ops.values():
        c = float(np.asarray(op.count * op.comm_s))
        if c > 0:
            out[op.name] = c
    if float(np.asarray(sv.pp_p2p_s)) > 0:
        out["pp_p2p"] = float(np.asarray(sv.pp_p2p_s))
    return out


@dataclass(frozen=True)
class Plan:
    setup: Setup
    chips: int
    input_len: int
    output_len: int
    targets: dict[str, float | None]    # ttft_s, min_tokens_per_s_per_user (None: no target)
    best: dict
    runner_ups: list[dict]
    frontier: list[dict]
    points: dict[str, np.ndarray]       # x, y arrays of every fitting point (for the plot)
    layouts_evaluated: int
    points_evaluated: int
    points_fitting: int
    search_s: float
    options: dict[str, float | bool]    # ep_imbalance, ep_overlap
    disaggregated: dict | None = None
    notes: tuple[str, ...] = ()
    # the closed-loop steady state of the best layout and the runner-ups' at each concurrency (by_concurrency.py)
    by_concurrency: tuple[dict, ...] = ()
    by_concurrency_notes: tuple[str, ...] = ()
    draft: Draft | None = None          # speculative decoding (None: plain decoding)
    # the cheapest of those steady-state points meeting the targets with its own TTFT (by_concurrency.cheapest_meeting)
    best_by_concurrency: dict | None = None

    def to_dict(self) -> dict:
        hw = self.setup.hardware
        return {"model": self.setup.model.id, "system": hw.describe() if isinstance(hw, System) else {"id": hw.id},
                "chips": self.chips, "input_len": self.input_len, "output_len": self.output_len,
                "weight_dtype": self.setup.precision.weight.name, "kv_dtype": self.setup.precision.kv.name,
                "engine": self.setup.engine_dict,
                "targets": self.targets, "best": self.best, "runner_ups": self.runner_ups, "frontier": self.frontier,
                "layouts_evaluated": self.layouts_evaluated, "points_evaluated": self.points_evaluated,
                "points_fitting": self.points_fitting, "search_s": self.search_s, **self.options,
                "disaggregated": self.disaggregated, "notes": list(self.notes),
                **({} if self.draft is None else {"speculation": self.draft.to_dict()}),
                "by_concurrency": list(self.by_concurrency), "by_concurrency_notes": list(self.by_concurrency_notes),
                "best_by_concurrency": self.best_by_concurrency, **what_if_dict(hw)}


def _targets(ttft_ms, min_tps_user) -> tuple[float | None, float | None]:
    t = None if ttft_ms is None else pos_float(ttft_ms, "ttft_ms") / 1e3
    y = None if min_tps_user is None else pos_float(min_tps_user, "min_tokens_per_s_per_user")
    return t, y


def _infeasible(g: Grid, fits, ttft_s, tps_user, m: Model, hw, chips, ctx):
    """Which target cannot be met, and the best value reachable: an InputError naming that target."""
    if not fits.any():
        raise InputError("chips", f"{m.id} does not fit on {chips} x {hw.chip or hw.id} ({hw.id}) at "
                         f"{ctx:,} tokens per sequence in any layout", "more chips, a shorter context or a smaller dtype")
    ttft = np.where(fits, g.ttft_s, np.inf)
    user = np.where(fits, g.tokens_per_s_per_user, 0.0)
    if ttft_s is not None and ttft.min() > ttft_s:
        li, bi = np.unravel_index(np.argmin(ttft), ttft.shape)
        raise InputError("ttft_ms", f"no layout of {chips} chips prefills a {g.input_len:,}-token prompt within "
                         f"{ttft_s * 1e3:g} ms", f"the fastest reachable TTFT is {ttft.min() * 1e3:,.1f} ms "
                         f"({fmt_layout(*g.layouts[li])}, batch {int(g.batch[li, bi])})")
    if tps_user is not None and user.max() < tps_user:
        li, bi = np.unravel_index(np.argmax(user), user.shape)
        raise InputError("min_tokens_per_s_per_user", f"no layout of {chips} chips reaches {tps_user:g} tokens/s per user",
                         f"the fastest reachable is {user.max():,.1f} tokens/s per user "
                         f"({fmt_layout(*g.layouts[li])}, batch {int(g.batch[li, bi])})")
    both = fits & (g.ttft_s <= ttft_s)
    best_user = np.where(both, g.tokens_per_s_per_user, 0.0).max()
    raise InputError("min_tokens_per_s_per_user", f"{tps_user:g} tokens/s per user is not reachable together with "
                     f"TTFT <= {ttft_s * 1e3:g} ms", f"with that TTFT the fastest reachable is {best_user:,.1f} tokens/s "
                     "per user; relax one of the two targets")


def plan(model, system, *, chips=None, ttft_ms=None, min_tokens_per_s_per_user=None, input_len=1024,
         output_len=256, weight_dtype=None, kv_dtype=None, ep_imbalance=1.0, ep_overlap=False,
         disaggregated=False, efficiency: Efficiency | None = None, reserve=None, runner_ups: int = 5,
         engine=None, concurrency=None, ep_comm="bf16", speculation=None, prefix_hit=None,
         attention_sharding=SEARCH_ATTENTION, **knobs) -> Plan:
    """Cheapest layout and batch meeting the targets on `chips` chips of `system`, with the Pareto frontier; with a
    serving engine, also the best and runner-up layouts' closed-loop steady states at each concurrency (default
    by_concurrency.DEFAULT_CONCURRENCY; () for none). speculation: a speculative.Speculation (--draft/--mtp): every
    point decodes with it, the steady state by concurrency too (tensor/expert/data-parallel layouts only). prefix_hit: the
    cached share of every prompt (engine/prefix_cache.py): TTFT, the TTFT target and the costs count the rest.
    attention_sharding: "any" (search heads, and batch / dp where the head split replicates the KV cache:
    mapping/candidates.layouts_for) or one of heads, batch, dp for every layout. knobs: max_running and
    price_usd_per_hour (analyses.setup.with_deployment_knobs). The EP options hold for the static search and the
    steady states alike (the setup's transport)."""
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    imb = check_ep_imbalance(ep_imbalance)
    ep_comm = check_ep_comm(ep_comm)
    ttft_s, tps_user = _targets(ttft_ms, min_tokens_per_s_per_user)
    su, n = system_setup(model, system, chips, weight_dtype, kv_dtype, efficiency, reserve, engine,
                         ep_comm=ep_comm, ep_overlap=ep_overlap, ep_imbalance=imb, **knobs)
    m, hw, prec = su.model, su.hardware, su.precision
    dr = resolve_draft(speculation, m, prec, weight_dtype, kv_dtype)
    hit = hit_rate(prefix_hit)
    if hit and disaggregated:
        raise InputError("prefix_hit", "given with --disaggregated", "one of the two")
    if dr is not None and disaggregated:
        raise InputError("disaggregated", "speculative decoding is modelled in a colocated replica",
                         "leave --disaggregated out, or --draft/--mtp")
    cs = concurrency_axis(concurrency, su.engine)
    attn = attention_sharding if attention_sharding == SEARCH_ATTENTION else attention_code(attention_sharding)
    lays = layouts_for(m, n, allow_pp=dr is None, attention=attn)
    if not lays:
        raise InputError("chips", f"no layout of {n} chips suits {m.id}",
                         f"a chip count with a divisor that divides the {m.n_heads} heads")
    notes = [su.engine_note, *speculation_notes(dr)]
    if hit:
        notes.append(f"prefix caching: {hit:g} of every prompt is cached: TTFT and the prefill in $/Mtok count the "
                     "rest (the steady state by concurrency has no cache)")
    if hw.scaleout_bw is None and n > hw.scaleup_domain:
        # replicas placed on real chips (mapping/placement.py): a replica of 6 chips on 12 straddles two domains of 8
        alone = np.asarray(place(as_layout(lays), hw.scaleup_domain).replica.domains).ravel() == 1
        inside = [t for t, ok in zip(lays, alone) if ok]
        if not inside:
            raise InputError("system", f"{hw.id} has no scale-out bandwidth and every layout of {m.id} on {n} chips "
                             f"spans more than one domain of {hw.scaleup_domain}",
                             "a system with a scale-out link, or give scaleout_gbs in a hardware file")
        notes.append(f"{hw.id} has no scale-out bandwidth: only layouts whose replicas stay inside one domain were "
                     f"searched ({len(inside)} of {len(lays)})")
        lays = inside
    ctx = input_len + output_len
    t0 = time.perf_counter()
    lay = as_layout(lays)
    if dr is None:
        bmax_l = engine_max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, ctx,
                                  su.reserve, engine=su.engine)
    else:
        bmax_l = max_batch_with_draft(m, dr.model, hw.memory_bytes, lay, prec, dr.precision, ctx, su.reserve,
                                      dr.spec.mtp, su.engine)
    bmax_l = np.asarray(bmax_l, float).reshape(-1, 1)
    top = int(bmax_l.max())
    if top < 1:
        raise InputError("chips", f"{m.id} does not fit on {n} x {hw.chip or hw.id} ({hw.id}) at {ctx:,} tokens "
                         "per sequence in any layout", "more chips, a shorter context or a smaller dtype")
    axis = batch_axis(top)
    B = np.concatenate([np.broadcast_to(axis, (len(lays), axis.size)), np.maximum(bmax_l, 1.0)], axis=1)
    opts = dict(ep_imbalance=imb, ep_overlap=bool(ep_overlap), links=links_for(hw), ep_comm=ep_comm)
    g = evaluate(su, lays, B, input_len, output_len, **opts, draft=dr, prefix_hit=hit)
    search_s = time.perf_counter() - t0
    fits = np.asarray(g.fits, bool)
    ok = fits.copy()
    if ttft_s is not None:
        ok &= g.ttft_s <= ttft_s
    if tps_user is not None:
        ok &= g.tokens_per_s_per_user >= tps_user
    if not ok.any():
        _infeasible(g, fits, ttft_s, tps_user, m, hw, n, ctx)
    price = hw.price_usd_per_hour
    rank = g.chip_s_per_mtok_output()
    # cheapest first; among equals the more interactive point
    key = np.where(ok, rank, np.inf)
    li, bi = np.unravel_index(np.lexsort((-np.where(ok, g.tokens_per_s_per_user, 0).ravel(), key.ravel()))[0], key.shape)
    best = point(g, li, bi, price)
    # with speculation the step is per token over several passes: no one pass's collectives to break down
    best["communication_breakdown_s"] = (comm_breakdown(su, best, input_len, output_len, **opts) if dr is None
                                         else None)
    # runner-ups: the best point of each other layout
    per_layout = np.where(ok, rank, np.inf)
    bj = np.argmin(per_layout, axis=1)
    order = [i for i in np.argsort(per_layout[np.arange(len(lays)), bj]) if i != li
             and np.isfinite(per_layout[i, bj[i]])][:runner_ups]
    runners = [point(g, i, bj[i], price) for i in order]
    # frontier over every point that fits
    idx = np.argwhere(fits)
    xs, ys = g.tokens_per_s_per_user[fits], g.output_tokens_per_s_per_chip[fits]
    keep = frontier_mask(xs, ys)
    front = sorted((point(g, i, j, price) for (i, j), k in zip(idx, keep) if k),
                   key=lambda p: -p["output_tokens_per_s_per_user"])
    if price is None:
        notes.append(f"{hw.chip or hw.id} has no price in the catalog: ranked by chip-seconds per million output tokens")
    if best["domains_spanned"] > 1:
        notes.append(f"the best layout spans {best['domains_spanned']} scale-up domains of {hw.scaleup_domain}: "
                     "its cross-domain traffic runs on the scale-out link")
    disagg = (disaggregate(su, n, lays, g, B, input_len, output_len, ttft_s, tps_user, opts, best)
              if disaggregated else None)
    traced = [tuple(int(v) for v in g.layouts[i]) for i in [li, *order]]
    # each layout with its own attention sharding (the replica's KV and steps follow it) and its own draft
    if concurrency is None:     # the default axis, on until the largest batch that fits: as far as the static search
        cs = reaching(cs, top)
    by_c, c_notes = trace(su, list(dict.fromkeys(traced)), cs, input_len, output_len, draft=dr,
                          meets=targets_test(ttft_s, tps_user))
    long_ttft = static_ttft_note(best["ttft_s"], best["batch"], "--ttft-ms 2000 asks for a servable static batch; "
                                 "batching continuously (By concurrency, with a serving engine) is what a server meets")
    if long_ttft:
        notes.append("best: " + long_ttft)
    return Plan(setup=su, chips=n, input_len=input_len, output_len=output_len,
                targets={"ttft_s": ttft_s, "min_tokens_per_s_per_user": tps_user}, best=best, runner_ups=runners,
                frontier=front, points={"x": xs, "y": ys}, layouts_evaluated=len(lays), points_evaluated=int(B.size),
                points_fitting=int(fits.sum()), search_s=search_s,
                options={"ep_imbalance": imb, "ep_overlap": bool(ep_overlap), "ep_comm": ep_comm,
                         **({} if attn == SEARCH_ATTENTION else {"attention_sharding": ATTENTION_SHARDING[attn]}),
                         **({"prefix_hit": hit} if hit else {})},
                disaggregated=disagg,
                notes=tuple(notes), by_concurrency=tuple(flag_frontier(by_c)), by_concurrency_notes=tuple(c_notes),
                draft=dr, best_by_concurrency=_best_continuous(su, g, by_c, concurrency, input_len, output_len, dr,
                                                               ttft_s, tps_user))


def _best_continuous(su, g, by_c, concurrency, input_len, output_len, dr, ttft_s, tps_user):
    """The cheapest continuously batched point meeting the targets: over every layout the static search admits
    (by_concurrency.cheapest_continuous, the one search fleet and price use) on the default axis, or over the
    traced layouts at the concurrencies asked for."""
    if not by_c:
        return None
    if concurrency is not None:
        return cheapest_meeting(by_c, ttft_s, tps_user, su.hardware.price_usd_per_hour)
    rank = np.where(np.asarray(g.fits, bool), g.chip_s_per_mtok_output(), np.inf)
    return cheapest_continuous(su, g, rank, tps_user, input_len, output_len, draft=dr, ttft_s=ttft_s)
