"""The best serving layout on a system: every (TP, EP, PP, DP) layout of N chips x a batch axis, in one engine call.

For a model, a system (hgx-h100, gb200-nvl72, a TPU slice...) and N chips, `plan` evaluates every layout that the
model admits (analyses/layouts.layouts_for with pipeline stages) against a batch axis from 1 to the largest batch
that fits, as one vectorized engine evaluation, and returns:
- best: the cheapest $/Mtok of output (chip-seconds per Mtok when the chip has no price; the same ranking, since
  every layout uses the same N chips) that meets the targets: TTFT <= --ttft-ms and tokens/s per user >=
  --min-tokens-per-s-per-user;
- runner_ups: the best point of each other layout, cheapest first;
- frontier: the throughput (tokens/s per chip) / interactivity (tokens/s per user) Pareto frontier over all points
  that fit (analyses/pareto.frontier_mask). The best point meets the targets and lies on or under the frontier.
Figures follow the static-batch convention of `infer`: TTFT is the prefill of the whole batch of prompts,
throughput per chip counts prefill time (batch x output / (TTFT + output x step) / chips), a user's speed is
1 / decode step. communication_share is the exposed communication share of the decode step (collectives plus
pipeline hand-offs).

Disaggregated serving (--disaggregated): a prefill pool and a decode pool (Splitwise, DistServe, Mooncake). The decode
pool runs the decode-only point with the most output tokens/s per chip meeting the per-user target; it completes
requests at r = batch / step / output_len per second, whose prompts arrive at r x input_len tokens/s. The prefill
pool runs the prefill point with the most prompt tokens/s per chip meeting the TTFT target, and is sized to that
traffic: prefill chips = r x input_len / (prefill tokens/s per chip). The ratio prefill : decode chips follows, with
the KV each request carries from one pool to the other over the scale-out network.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from tokenmath.base import units as u
from tokenmath.specs.efficiency import Efficiency, default_for
from tokenmath.engine.memory import RESERVE_FRACTION, max_batch as engine_max_batch
from tokenmath.engine.static_batch import Serving, serve
from tokenmath.base.errors import InputError
from tokenmath.specs.kv_cache import kv_bytes_per_sequence
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.systems import System, get_system
from tokenmath.analyses.setup import Setup, fmt_layout, resolve_precision
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.mapping.candidates import as_layout, layouts_for
from tokenmath.analyses.serving.pareto import frontier_mask
from tokenmath.analyses.serving.grid import Grid, batch_axis

MAX_CHIPS = 4096


# ---- one vectorized evaluation (serving_grid.evaluate plus the parallelism options and per-chip memory) ----------
@dataclass
class Evaluated:
    grid: Grid
    serving: Serving
    kv_per_chip: np.ndarray          # (L, B) bytes
    memory_per_chip: np.ndarray      # (L, B) bytes
    comm_s: np.ndarray               # (L, B) exposed communication per decode step (collectives + PP hand-offs)
    domains_spanned: np.ndarray      # (L, 1) scale-up domains one replica spans


def links_for(hw) -> System | None:
    """The system when its topology makes a group's bandwidth depend on the group (mesh, torus), else None."""
    return hw if isinstance(hw, System) and hw.topology != "switch" else None


def evaluate_grid(su: Setup, layouts, batches, input_len: int, output_len: int, *, ep_imbalance: float = 1.0,
                  ep_overlap: bool = False) -> Evaluated:
    """serving_grid.evaluate with the parallelism options: a (layouts x batches) grid in one engine call.
    `batches` is a vector shared by all layouts, or an (L, B) array (a batch axis per layout)."""
    lay = as_layout(layouts)
    B = np.asarray(batches, float)
    if B.ndim <= 1:
        B = B.reshape(1, -1)
    sv = serve(su.model, su.hardware, lay, su.precision, su.efficiency, B, input_len, output_len, su.reserve,
               ep_imbalance=ep_imbalance, ep_overlap=ep_overlap, links=links_for(su.hardware))
    step = np.asarray(sv.decode_step_s, float)
    shape = step.shape
    comm = np.broadcast_to(np.asarray(sv.decode.comm_s, float) + np.asarray(sv.pp_p2p_s, float), shape)
    g = Grid(list(layouts), np.broadcast_to(B, shape), np.asarray(lay.chips, float).reshape(-1, 1),
             np.broadcast_to(np.asarray(sv.fits), shape), np.asarray(sv.ttft_s, float), step,
             np.broadcast_to(np.asarray(sv.max_batch), shape), np.broadcast_to(np.asarray(sv.decode.bottleneck), shape),
             comm / step, input_len, output_len)
    span = np.asarray(lay.tp, float) * np.asarray(lay.ep, float) * np.asarray(lay.pp, float)
    return Evaluated(g, sv, np.broadcast_to(np.asarray(sv.memory.kv, float), shape),
                     np.broadcast_to(np.asarray(sv.memory.total, float), shape), comm,
                     np.ceil(span / su.hardware.scaleup_domain).reshape(-1, 1))


def check_options(ep_imbalance, chips=None) -> float:
    imb = pos_float(ep_imbalance, "ep_imbalance", 0.0, 1e3)
    if imb < 1.0:
        raise InputError("ep_imbalance", f"{imb:g} is below 1", "a number >= 1 (busiest EP rank / mean tokens; 1.0 = balanced)")
    return imb


def system_setup(model, system, chips, weight_dtype, kv_dtype, efficiency, reserve) -> tuple[Setup, int]:
    m = get_model(model)
    hw = get_system(system, chips)
    n = hw.chips
    if n > MAX_CHIPS:
        raise InputError("chips", f"{n:,} chips is more than one plan searches", f"at most {MAX_CHIPS:,}")
    reserve = RESERVE_FRACTION if reserve is None else reserve
    return Setup(m, hw, Layout(), resolve_precision(m, weight_dtype, kv_dtype), efficiency or default_for(hw.id), reserve), n


def point(ev: Evaluated, li: int, bi: int, usd_per_chip_s) -> dict:
    g = ev.grid
    t = g.layouts[li]
    cost = g.usd_per_mtok_output(usd_per_chip_s)
    return {"layout": fmt_layout(*t), "tp": int(t[0]), "pp": int(t[1]), "ep": int(t[2]), "dp": int(t[3]),
            "batch": int(g.batch[li, bi]),
            "cost_per_mtok_output_usd": None if cost is None else finite(cost[li, bi]),
            "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
            "ttft_s": finite(g.ttft_s[li, bi]), "decode_step_s": finite(g.step_s[li, bi]),
            "output_tokens_per_s_per_user": finite(g.tokens_per_s_per_user[li, bi]),
            "output_tokens_per_s_per_chip": finite(g.output_tokens_per_s_per_chip[li, bi]),
            "output_tokens_per_s": finite(g.output_tokens_per_s[li, bi]),
            "communication_share": finite(g.comm_share[li, bi]), "communication_s": finite(ev.comm_s[li, bi]),
            "bottleneck": str(g.bottleneck[li, bi]),
            "kv_per_chip_bytes": finite(ev.kv_per_chip[li, bi]), "memory_per_chip_bytes": finite(ev.memory_per_chip[li, bi]),
            "domains_spanned": int(ev.domains_spanned[li, 0])}


def comm_breakdown(su: Setup, p: dict, input_len: int, output_len: int, **opts) -> dict:
    """Per-collective exposed communication of one decode step for a point (s)."""
    lay = Layout(p["tp"], p["pp"], p["ep"], p["dp"])
    sv = serve(su.model, su.hardware, lay, su.precision, su.efficiency, p["batch"], input_len, output_len, su.reserve,
               links=links_for(su.hardware), **opts)
    out = {}
    for op in sv.decode.ops.values():
        c = float(np.asarray(op.count * op.comm_s))
        if c > 0:
            out[op.name] = c
    if float(np.asarray(sv.pp_p2p_s)) > 0:
        out["pp_p2p"] = float(np.asarray(sv.pp_p2p_s))
    return out


# ---- the plan ----------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    setup: Setup
    chips: int
    input_len: int
    output_len: int
    targets: dict
    best: dict
    runner_ups: list
    frontier: list
    points: dict            # x, y arrays of every fitting point (for the plot)
    layouts_evaluated: int
    points_evaluated: int
    points_fitting: int
    search_s: float
    options: dict
    disaggregated: dict | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        hw = self.setup.hardware
        return {"model": self.setup.model.id, "system": hw.describe() if isinstance(hw, System) else {"id": hw.id},
                "chips": self.chips, "input_len": self.input_len, "output_len": self.output_len,
                "weight_dtype": self.setup.precision.weight.name, "kv_dtype": self.setup.precision.kv.name,
                "targets": self.targets, "best": self.best, "runner_ups": self.runner_ups, "frontier": self.frontier,
                "layouts_evaluated": self.layouts_evaluated, "points_evaluated": self.points_evaluated,
                "points_fitting": self.points_fitting, "search_s": self.search_s, **self.options,
                "disaggregated": self.disaggregated, "notes": self.notes}

    def explain(self) -> str:
        return plan_explain(self)


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
         disaggregated=False, efficiency: Efficiency | None = None, reserve=None, runner_ups: int = 5) -> Plan:
    """Cheapest layout and batch meeting the targets on `chips` chips of `system`, with the Pareto frontier."""
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    imb = check_options(ep_imbalance)
    ttft_s, tps_user = _targets(ttft_ms, min_tokens_per_s_per_user)
    su, n = system_setup(model, system, chips, weight_dtype, kv_dtype, efficiency, reserve)
    m, hw, prec = su.model, su.hardware, su.precision
    lays = layouts_for(m, n, allow_pp=True)
    if not lays:
        raise InputError("chips", f"no layout of {n} chips suits {m.id}",
                         f"a chip count with a divisor that divides the {m.n_heads} heads")
    notes = []
    if hw.scaleout_bw is None and n > hw.scaleup_domain:
        inside = [t for t in lays if t[0] * t[1] * t[2] <= hw.scaleup_domain]
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
    bmax_l = np.asarray(engine_max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes,
                                         ctx, su.reserve), float).reshape(-1, 1)
    top = int(bmax_l.max())
    if top < 1:
        raise InputError("chips", f"{m.id} does not fit on {n} x {hw.chip or hw.id} ({hw.id}) at {ctx:,} tokens "
                         "per sequence in any layout", "more chips, a shorter context or a smaller dtype")
    axis = batch_axis(top)
    B = np.concatenate([np.broadcast_to(axis, (len(lays), axis.size)), np.maximum(bmax_l, 1.0)], axis=1)
    opts = dict(ep_imbalance=imb, ep_overlap=bool(ep_overlap))
    ev = evaluate_grid(su, lays, B, input_len, output_len, **opts)
    search_s = time.perf_counter() - t0
    g = ev.grid
    fits = np.asarray(g.fits, bool)
    ok = fits.copy()
    if ttft_s is not None:
        ok &= g.ttft_s <= ttft_s
    if tps_user is not None:
        ok &= g.tokens_per_s_per_user >= tps_user
    if not ok.any():
        _infeasible(g, fits, ttft_s, tps_user, m, hw, n, ctx)
    price = su.usd_per_chip_s
    rank = g.chip_s_per_mtok_output()
    # cheapest first; among equals the more interactive point
    key = np.where(ok, rank, np.inf)
    li, bi = np.unravel_index(np.lexsort((-np.where(ok, g.tokens_per_s_per_user, 0).ravel(), key.ravel()))[0], key.shape)
    best = point(ev, li, bi, price)
    best["communication_breakdown_s"] = comm_breakdown(su, best, input_len, output_len, **opts)
    # runner-ups: the best point of each other layout
    per_layout = np.where(ok, rank, np.inf)
    bj = np.argmin(per_layout, axis=1)
    order = [i for i in np.argsort(per_layout[np.arange(len(lays)), bj]) if i != li
             and np.isfinite(per_layout[i, bj[i]])][:runner_ups]
    runners = [point(ev, i, bj[i], price) for i in order]
    # frontier over every point that fits
    idx = np.argwhere(fits)
    xs, ys = g.tokens_per_s_per_user[fits], g.output_tokens_per_s_per_chip[fits]
    keep = frontier_mask(xs, ys)
    front = sorted((point(ev, i, j, price) for (i, j), k in zip(idx, keep) if k),
                   key=lambda p: -p["output_tokens_per_s_per_user"])
    if price is None:
        notes.append(f"{hw.chip or hw.id} has no price in the catalog: ranked by chip-seconds per million output tokens")
    if best["domains_spanned"] > 1:
        notes.append(f"the best layout spans {best['domains_spanned']} scale-up domains of {hw.scaleup_domain}: "
                     "its cross-domain traffic runs on the scale-out link")
    res = Plan(su, n, input_len, output_len,
               {"ttft_s": ttft_s, "min_tokens_per_s_per_user": tps_user}, best, runners, front,
               {"x": xs, "y": ys}, len(lays), int(B.size), int(fits.sum()), search_s,
               {"ep_imbalance": imb, "ep_overlap": bool(ep_overlap)}, notes=notes)
    if disaggregated:
        res.disaggregated = _disaggregate(su, n, lays, ev, B, input_len, output_len, ttft_s, tps_user, opts,
                                          best)
    return res


def _disaggregate(su: Setup, n: int, lays, ev: Evaluated, B, input_len, output_len, ttft_s, tps_user, opts,
                  colocated: dict) -> dict:
    g = ev.grid
    m, hw, prec = su.model, su.hardware, su.precision
    price = su.usd_per_chip_s
    # decode pool: decode-only throughput (prefill happens elsewhere)
    dec_tps_chip = g.batch / g.step_s / g.chips
    dok = np.array(g.fits, bool)
    if tps_user is not None:
        dok &= g.tokens_per_s_per_user >= tps_user
    if not dok.any():
        raise InputError("min_tokens_per_s_per_user", "no decode layout meets the per-user target", None)
    di, dj = np.unravel_index(np.argmax(np.where(dok, dec_tps_chip, -1.0)), dok.shape)
    dpt = point(ev, di, dj, price)
    dec_tps = float(g.batch[di, dj] / g.step_s[di, dj])          # output tokens/s of one decode instance
    # prefill pool: prompts only (KV of the prompt held), TTFT = prefill of its batch
    pev = evaluate_grid(su, lays, B, input_len, 1, **opts)
    pg = pev.grid
    pre_tps_chip = pg.batch * input_len / pg.ttft_s / pg.chips
    pok = np.array(pg.fits, bool)
    if ttft_s is not None:
        pok &= pg.ttft_s <= ttft_s
    if not pok.any():
        raise InputError("ttft_ms", "no prefill layout meets the TTFT target", None)
    pi, pj = np.unravel_index(np.argmax(np.where(pok, pre_tps_chip, -1.0)), pok.shape)
    t = pg.layouts[pi]
    req_s = dec_tps / output_len
    prompt_tps = req_s * input_len
    p_chip = float(pre_tps_chip[pi, pj])
    prefill_chips = prompt_tps / p_chip
    kv_req = float(kv_bytes_per_sequence(m, input_len, prec.kv.bytes))
    out_bw = hw.scaleout_bw * su.efficiency.link_bw if hw.scaleout_bw else None
    transfer_s = kv_req / (n * out_bw) if out_bw else None
    total = n + prefill_chips
    cost = None if price is None else total * price / dec_tps * 1e6
    return {
        "decode": {**dpt, "decode_output_tokens_per_s": dec_tps,
                   "decode_output_tokens_per_s_per_chip": float(dec_tps_chip[di, dj])},
        "prefill": {"layout": fmt_layout(*t), "tp": int(t[0]), "pp": int(t[1]), "ep": int(t[2]), "dp": int(t[3]),
                    "batch": int(pg.batch[pi, pj]), "ttft_s": finite(pg.ttft_s[pi, pj]),
                    "prompt_tokens_per_s_per_chip": p_chip,
                    "bottleneck": str(np.broadcast_to(np.asarray(pev.serving.prefill.bottleneck), pg.batch.shape)[pi, pj])},
        "requests_per_s_per_decode_instance": req_s, "prompt_tokens_per_s": prompt_tps,
        "decode_chips": n, "prefill_chips": prefill_chips, "prefill_to_decode_chip_ratio": prefill_chips / n,
        "kv_bytes_per_request": kv_req, "kv_transfer_bytes_per_s": req_s * kv_req,
        "kv_transfer_share_of_scaleout": (req_s * kv_req / (n * out_bw)) if out_bw else None,
        "kv_transfer_s": transfer_s,
        "ttft_s": finite(pg.ttft_s[pi, pj] + (transfer_s or 0.0)),
        "cost_per_mtok_output_usd": finite(cost) if cost is not None else None,
        "chip_s_per_mtok_output": total / dec_tps * 1e6,
        "colocated_chip_s_per_mtok_output": colocated["chip_s_per_mtok_output"],
        "colocated_cost_per_mtok_output_usd": colocated["cost_per_mtok_output_usd"],
    }


# ---- text --------------------------------------------------------------------------------------------------------
def _row(p: dict) -> str:
    c = p["cost_per_mtok_output_usd"]
    return (f"{p['layout']:<22} {p['batch']:>6} {u.usd(c) if c is not None else 'n/a':>9} "
            f"{p['output_tokens_per_s_per_user']:>9,.1f} {p['output_tokens_per_s_per_chip']:>9,.0f} "
            f"{u.seconds(p['ttft_s']):>9} {p['communication_share']:>6.0%}  {p['bottleneck']}")


HEAD = f"{'layout':<22} {'batch':>6} {'$/Mtok':>9} {'tok/s/u':>9} {'tok/s/c':>9} {'TTFT':>9} {'comm':>6}  bound"


def plan_text(p: Plan) -> str:
    su = p.setup
    hw = su.hardware
    b = p.best
    L = [f"{su.model.name} on {p.chips} x {hw.chip or hw.id} ({hw.id}: {getattr(hw, 'domains', 1)} domain(s) of "
         f"{hw.scaleup_domain}), {p.input_len:,} in / {p.output_len:,} out"]
    tg = []
    if p.targets["ttft_s"] is not None:
        tg.append(f"TTFT <= {p.targets['ttft_s'] * 1e3:g} ms")
    if p.targets["min_tokens_per_s_per_user"] is not None:
        tg.append(f">= {p.targets['min_tokens_per_s_per_user']:g} tok/s per user")
    L.append(f"searched {p.layouts_evaluated} layouts x batch axis = {p.points_evaluated:,} points in one engine call "
             f"({p.search_s * 1e3:,.0f} ms); {p.points_fitting:,} fit; targets: {', '.join(tg) or 'none'}")
    L.append("")
    L.append("best:        " + HEAD)
    L.append("             " + _row(b))
    br = b.get("communication_breakdown_s") or {}
    if br:
        L.append("  communication per decode step: " + ", ".join(f"{k} {u.seconds(v)}" for k, v in br.items())
                 + f" = {b['communication_share']:.0%} of the {u.seconds(b['decode_step_s'])} step")
    L.append(f"  KV per chip {u.bytes_(b['kv_per_chip_bytes'])}, memory per chip {u.bytes_(b['memory_per_chip_bytes'])}")
    if p.runner_ups:
        L.append("runner-ups:  " + HEAD)
        for r in p.runner_ups:
            L.append("             " + _row(r))
    f = p.frontier
    if f:
        L.append(f"frontier ({len(f)} points, throughput vs interactivity):")
        step = max(1, len(f) // 8)
        for q in f[::step] + ([f[-1]] if (len(f) - 1) % step else []):
            L.append("             " + _row(q))
    d = p.disaggregated
    if d:
        L.append("")
        L.append(disagg_text(d))
    for n_ in p.notes:
        L.append(f"note: {n_}")
    return "\n".join(L)


def disagg_text(d: dict) -> str:
    pr, de = d["prefill"], d["decode"]
    L = ["disaggregated serving (separate prefill and decode pools):"]
    L.append(f"  decode pool: {d['decode_chips']} chips, {de['layout']}, batch {de['batch']}: "
             f"{d['decode']['decode_output_tokens_per_s']:,.0f} output tok/s, {de['output_tokens_per_s_per_user']:,.1f} tok/s "
             f"per user -> {d['requests_per_s_per_decode_instance']:,.2f} requests/s")
    L.append(f"  prompts arrive at {d['prompt_tokens_per_s']:,.0f} tok/s; prefill pool ({pr['layout']}, batch {pr['batch']}) "
             f"does {pr['prompt_tokens_per_s_per_chip']:,.0f} prompt tok/s per chip, TTFT {u.seconds(pr['ttft_s'])}")
    L.append(f"  prefill chips = {d['prompt_tokens_per_s']:,.0f} / {pr['prompt_tokens_per_s_per_chip']:,.0f} = "
             f"{d['prefill_chips']:,.2f} -> prefill : decode = {d['prefill_to_decode_chip_ratio']:.3f} : 1")
    L.append(f"  KV moved per request {u.bytes_(d['kv_bytes_per_request'])}"
             + (f" ({d['kv_transfer_share_of_scaleout']:.1%} of the decode pool's scale-out bandwidth)"
                if d["kv_transfer_share_of_scaleout"] is not None else ""))
    c, cc = d["cost_per_mtok_output_usd"], d["colocated_cost_per_mtok_output_usd"]
    if c is not None and cc is not None:
        L.append(f"  cost {u.usd(c)}/Mtok output (both pools) vs {u.usd(cc)} colocated")
    else:
        L.append(f"  {d['chip_s_per_mtok_output']:,.0f} chip-s/Mtok output (both pools) vs "
                 f"{d['colocated_chip_s_per_mtok_output']:,.0f} colocated")
    return "\n".join(L)


def plan_explain(p: Plan) -> str:
    su = p.setup
    hw = su.hardware
    b = p.best
    L = [plan_text(p), "", "How the best point is derived:"]
    L.append(f"  system: {hw.name}; domain {hw.scaleup_domain} chips at {hw.scaleup_bw / 1e9:,.0f} GB/s per chip "
             f"(one way), scale-out {hw.scaleout_bw / 1e9 if hw.scaleout_bw else float('nan'):,.1f} GB/s per chip; "
             f"latency {hw.scaleup_latency * 1e6:g} us (+{hw.scaleout_latency * 1e6:g} us across domains)")
    L.append(f"  per user: 1 / decode step = 1 / {u.seconds(b['decode_step_s'])} = {b['output_tokens_per_s_per_user']:,.1f} tok/s")
    L.append(f"  per chip: batch x output / (TTFT + output x step) / chips = {b['batch']} x {p.output_len} / "
             f"({u.seconds(b['ttft_s'])} + {p.output_len} x {u.seconds(b['decode_step_s'])}) / {p.chips} = "
             f"{b['output_tokens_per_s_per_chip']:,.1f} tok/s")
    if b["cost_per_mtok_output_usd"] is not None:
        L.append(f"  $/Mtok = ${hw.price_usd_per_hour}/chip-h / 3600 / {b['output_tokens_per_s_per_chip']:,.1f} tok/s/chip x 1e6 "
                 f"= {u.usd(b['cost_per_mtok_output_usd'])}")
    L.append(f"  communication: {b['communication_share']:.1%} of the decode step is exposed communication "
             f"({u.seconds(b['communication_s'])}); the layout spans {b['domains_spanned']} domain(s)")
    L.append("  TP: 2 all-reduces of T x d_model activations per layer over tp; EP: dispatch + combine all-to-all of "
             "T x top-k x d_model per MoE layer over tp x ep; PP: (pp-1) hand-offs per token; DP: independent replicas")
    return "\n".join(L)
