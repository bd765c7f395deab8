"""The rack boundary made explicit for a MoE model: does an expert layer fit in one scale-up domain, what does its
all-to-all cost inside vs across domains, how large an expert layer a domain can host, and TP vs EP vs PP side by
side on the same chips.

1. Fit: weights (experts + the rest) + the KV of `batch` sequences of `context` tokens against the usable HBM of one
   domain (domain chips x HBM x (1 - reserve)); then the engine's memory per chip for the layouts of one domain
   (tp x ep = domain; attention data-parallel over the ep groups), since replicated attention weights cost more
   than the napkin sum.
2. All-to-all: in decode each EP rank (tp = 1, attention data-parallel) holds batch / ep sequences, so it dispatches
   T x top-k x d_model activations (bf16) and combines the same back, per MoE layer:
       t = 2 x all_to_all(T x k x d_model x 2 B, ep)          (payload: engine/expert_parallel.ep_dispatch_bytes)
   inside one domain (ep = domain), spread over every chip asked for (or two domains), and the same ep ranks split
   over two domains (the invariant: never faster than inside). The ranks sit on chips as mapping/placement.py lays
   them (contiguous from a domain boundary); the slowest rank sets the time.
3. Largest expert layer a domain hosts at this batch and context: per chip, usable - non-expert weights / tp - KV -
   activations is left for experts, which split over all domain chips:
       max expert params = max over tp of (that budget x domain chips / bytes per expert param)
4. TP, EP, PP (and their mixes across domains) on the same chips and batch, in one vectorized engine call: per-token
   latency (decode step), throughput per chip, communication share of the step, KV and memory held per chip.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg
from tokenmath.engine import collectives as coll
from tokenmath.engine.expert_parallel import ep_dispatch_bytes, imbalance_factor
from tokenmath.engine.memory import fixed_bytes, kv_context, kv_per_chip, memory_per_chip, room_beside, usable_bytes
from tokenmath.mapping.candidates import admissible, divisors, layouts_for, tp_ok
from tokenmath.mapping.layout import Layout
from tokenmath.mapping.placement import span
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.kv_cache import kv_bytes_per_sequence
from tokenmath.specs.model_catalog import model_ids, get_model
from tokenmath.specs.params import count_params
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, check_ep_comm, check_ep_imbalance, fmt_layout, system_setup
from tokenmath.analyses.serving.grid import evaluate, links_for, point


@dataclass(frozen=True)
class MoeReport:
    setup: Setup
    chips: int
    batch: int
    context: int
    input_len: int
    output_len: int
    fit: dict                         # 1. fit inside one domain (bytes)
    all_to_all: dict                  # 2. inside vs across domains (s, bytes)
    capacity: dict                    # 3. largest expert layer a domain hosts (params)
    rows: list[dict]                  # 4. TP vs EP vs PP, one grid point each
    options: dict[str, float | bool]  # ep_imbalance, ep_overlap
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        su = self.setup
        return {"model": su.model.id, "system": su.hardware.describe(), "chips": self.chips, "batch": self.batch,
                "context": self.context, "input_len": self.input_len, "output_len": self.output_len,
                "weight_dtype": su.precision.weight.name, "expert_dtype": su.precision.expert.name,
                "kv_dtype": su.precision.kv.name, "engine": su.engine_dict,
                "fits_in_one_domain": self.fit["fits_in_one_domain"], "fit": self.fit, "all_to_all": self.all_to_all,
                "max_expert_params_per_domain": self.capacity["max_expert_params"], "capacity": self.capacity,
                "layouts": self.rows, **self.options, "notes": list(self.notes), **what_if_dict(su.hardware)}


def _largest(cands, ok) -> int:
    best = 1
    for c in cands:
        if ok(c):
            best = max(best, c)
    return best


def candidate_layouts(m, n: int, d: int) -> list[tuple[str, tuple[int, int, int, int]]]:
    """TP, EP, PP and their mixes across domains on n chips (each tuple multiplies to n)."""
    divs = divisors(n)
    out = []
    tp = _largest(divs, lambda t: tp_ok(m, t))
    out.append(("TP", (tp, 1, 1, n // tp)))
    ep = _largest(divs, lambda e: m.n_experts % e == 0)
    out.append(("EP (DP attention)", (1, 1, ep, n // ep)))
    # wide EP: every chip an expert rank even where the experts do not divide evenly (DeepSeek-V3's 256 over 72 or
    # 144 ranks: EPLB's redundant experts fill the remainder, as DeepSeek's decode EP144 and LMSYS's EP72 run)
    wide = _largest(divs, lambda e: e <= m.n_experts and admissible(m, ep=e))
    if wide > ep:
        out.append(("wide EP (redundant experts)", (1, 1, wide, n // wide)))
    pp = _largest(divs, lambda p: p <= m.n_layers)
    out.append(("PP", (1, pp, 1, n // pp)))
    t8 = _largest([t for t in divs if t <= min(8, d)], lambda t: tp_ok(m, t))
    e8 = _largest(divisors(n // t8), lambda e: m.n_experts % e == 0)
    out.append(("TP x EP", (t8, 1, e8, n // (t8 * e8))))
    if n > d:
        td = _largest([t for t in divisors(d) if n % t == 0], lambda t: tp_ok(m, t))
        p = _largest(divisors(n // td), lambda q: q <= m.n_layers)
        out.append(("TP in domain x PP across", (td, p, 1, n // (td * p))))
        ed = _largest([e for e in divisors(d) if n % e == 0], lambda e: m.n_experts % e == 0)
        p = _largest(divisors(n // ed), lambda q: q <= m.n_layers)
        out.append(("EP in domain x PP across", (1, p, ed, n // (ed * p))))
    seen, rows = set(), []
    for name, t in out:
        if t not in seen:
            seen.add(t)
            rows.append((name, t))
    return rows


def moe(model, system, *, chips=None, batch=None, context=4096, output_len=256, weight_dtype=None, kv_dtype=None,
        ep_imbalance=1.0, ep_overlap=False, efficiency: Efficiency | None = None, reserve=None,
        engine=None, ep_comm="bf16", **knobs) -> MoeReport:
    """Expert layers against the scale-up domain of `system` for `batch` sequences of `context` tokens.
    engine: a serving engine's id or file, "none" or None (the engine-free step; see analyses.setup): its memory
    fraction, KV blocks and running-sequence cap apply to every per-chip figure."""
    imb = check_ep_imbalance(ep_imbalance)
    ep_comm = check_ep_comm(ep_comm)
    su, n = system_setup(model, system, chips, weight_dtype, kv_dtype, efficiency, reserve, engine, **knobs)
    m, hw, prec, eff = su.model, su.hardware, su.precision, su.efficiency
    if not m.is_moe:
        moes = [i for i in model_ids() if get_model(i).is_moe]
        raise InputError("model", f"{m.id} is dense: it has no expert layers", f"a MoE model, e.g. {', '.join(moes[:6])}")
    context = int_arg(context, "context", 2)
    output_len = int_arg(output_len, "output_len")
    if output_len >= context:
        raise InputError("output_len", f"{output_len:,} generated tokens leave no prompt in a context of {context:,}",
                         "an output length below --context")
    input_len = context - output_len
    batch = int_arg(batch if batch is not None else 16 * n, "batch", 1, 10_000_000)
    d = hw.scaleup_domain
    P = count_params(m)
    # the napkin: HBM x (1 - reserve) per chip, x the domain, even with an engine (engine=None on purpose): it has no
    # layout, so no weights per chip for an engine's free-memory fraction; the engine's figure is step 1's per-chip one
    usable = float(usable_bytes(hw.memory_bytes, su.reserve, engine=None))
    eb, wb, kb = prec.expert.bytes, prec.weight.bytes, prec.kv.bytes
    kv_seq = float(kv_bytes_per_sequence(m, context, kb))
    expert_w = P.experts_total * eb
    other_w = P.non_expert * wb
    kv_tot = batch * kv_seq
    need = expert_w + other_w + kv_tot
    dom_usable = d * usable

    # ---- 1. fit inside one domain: napkin, then the engine's memory per chip for the domain's layouts ----
    dom_lays = layouts_for(m, d)
    if not dom_lays:
        raise InputError("system", f"no layout of one {d}-chip domain suits {m.id}",
                         f"a system whose domain size divides the {m.n_heads} heads or {m.n_experts} experts")
    lay = Layout(*(np.array([t[i] for t in dom_lays]) for i in range(4)))
    mem = memory_per_chip(m, hw.memory_bytes, lay, wb, eb, kb, float(batch), float(context),
                          min(math.ceil(batch / d), 64) * input_len, su.reserve, engine=su.engine)
    tot = np.asarray(mem.total, float)
    bi = int(np.argmin(tot if su.engine is None else tot - mem.usable))
    if su.engine is not None:
        usable = float(np.broadcast_to(mem.usable, tot.shape)[bi])   # the engine's memory fraction on that layout
    fit = {"fits_in_one_domain": bool(tot[bi] <= usable), "napkin_fits": bool(need <= dom_usable),
           "domain_size": d, "domain_usable_bytes": dom_usable, "expert_weights_bytes": expert_w,
           "other_weights_bytes": other_w, "kv_bytes": kv_tot, "kv_bytes_per_sequence": kv_seq,
           "need_bytes": need, "domains_needed": math.ceil(need / dom_usable),
           "domain_layout": fmt_layout(*dom_lays[bi]), "memory_per_chip_bytes": float(tot[bi]),
           "memory_usable_per_chip_bytes": usable,
           "memory_breakdown_bytes": {"weights": float(np.asarray(mem.weights)[bi]), "kv_cache": float(np.asarray(mem.kv)[bi]),
                                      "activations": float(np.asarray(mem.activations)[bi])}}

    # ---- 2. the all-to-all of one MoE layer, inside vs across domains ----
    k, dm = m.experts_per_token, m.d_model
    links = links_for(hw)

    def skew(p) -> float:
        """The busiest of p EP ranks' routed tokens / the mean under the --ep-imbalance option."""
        return float(imbalance_factor(m, p, imb)) if isinstance(imb, str) else float(imb)

    def a2a(p, h, group_span):
        T = math.ceil(batch / p)
        payload = ep_dispatch_bytes(m, T) * skew(p)
        bw = None if links is None else h.group_bw("all_to_all", min(group_span, h.scaleup_domain))
        where = span(p, p, h.scaleup_domain)          # p ranks laid from a domain boundary
        return float(2 * coll.all_to_all(payload, p, h, eff.link_bw, up_bw=bw, span=where)), T, payload

    if m.n_experts % d:
        notes_a2a = [f"{m.n_experts} experts do not split evenly over {d} ranks; the all-to-all figures are as if they "
                     "did (e.g. with redundant experts, as DeepSeek's EPLB does)"]
    else:
        notes_a2a = []
    inside, T_in, pay_in = a2a(d, hw, d)
    p_out = n if n > d else 2 * d
    across, T_out, pay_out = a2a(p_out, hw, p_out) if hw.scaleout_bw else (None, math.ceil(batch / p_out), None)
    # the same d ranks, half in each of two domains: placed like d ranks on domains of ceil(d / 2) chips
    half = max(1, -(-d // 2))
    split = float(2 * coll.all_to_all(pay_in, d, hw, eff.link_bw, span=span(d, d, half),
                                      up_bw=None if links is None else hw.group_bw("all_to_all", half))) \
        if hw.scaleout_bw and d > 1 else None
    L = P.n_moe_layers
    a2a_d = {"moe_layers": L, "top_k": k, "d_model": dm, "ep_imbalance": skew(d),
             "inside": {"ep": d, "tokens_per_rank": T_in, "payload_bytes_per_rank": pay_in, "per_layer_s": inside,
                        "per_decode_step_s": inside * L},
             "across": None if across is None else {"ep": p_out, "domains": int(span(p_out, p_out, d).domains),
                                                    "tokens_per_rank": T_out,
                                                    "payload_bytes_per_rank": pay_out, "per_layer_s": across,
                                                    "per_decode_step_s": across * L},
             "same_ranks_split_over_two_domains": None if split is None else {"ep": d, "per_layer_s": split,
                                                                               "per_decode_step_s": split * L}}

    # ---- 3. largest expert layer one domain hosts at this batch and context ----
    best = (0.0, None)
    for t in divisors(d):
        if not tp_ok(m, t):
            continue
        lt = Layout(t, 1, d // t, 1)
        eng = su.engine
        kv = float(kv_per_chip(m, lt, kb, batch, kv_context(context, eng)))
        # the non-expert weights (expert bytes 0) and one step's activations; the experts fill the room beside them
        other = float(fixed_bytes(m, lt, wb, 0.0, hw.memory_bytes, eng))
        room = float(room_beside(hw.memory_bytes, su.reserve, other, kv, eng))
        cap = max(room, 0.0) * d / eb
        if cap > best[0]:
            best = (cap, fmt_layout(t, 1, d // t, 1))
    capacity = {"max_expert_params": best[0], "max_expert_params_per_moe_layer": best[0] / max(L, 1),
                "model_expert_params": P.experts_total, "ratio_to_model": best[0] / P.experts_total,
                "layout": best[1], "expert_dtype": prec.expert.name}

    # ---- 4. TP vs EP vs PP on the same chips, one engine call ----
    cands = candidate_layouts(m, n, d)
    g = evaluate(su, [t for _, t in cands], [batch], input_len, output_len, ep_imbalance=imb,
                 ep_overlap=bool(ep_overlap), links=links, ep_comm=ep_comm)
    price = hw.price_usd_per_hour
    rows = []
    for i, (name, t) in enumerate(cands):
        p = point(g, i, 0, price)
        p["name"] = name
        p["fits"] = bool(g.fits[i, 0])
        rows.append(p)
    notes = [su.engine_note, *notes_a2a]
    if batch % n:
        notes.append(f"batch {batch} does not split evenly over {n} chips; the busiest group sets the pace")
    if not any(r["fits"] for r in rows):
        notes.append(_why_none_fits(g, su, n, batch, context))
    return MoeReport(setup=su, chips=n, batch=batch, context=context, input_len=input_len, output_len=output_len,
                     fit=fit, all_to_all=a2a_d, capacity=capacity, rows=rows,
                     options={"ep_imbalance": imb, "ep_overlap": bool(ep_overlap), "ep_comm": ep_comm},
                     notes=tuple(notes))


def _why_none_fits(g, su, n: int, batch: int, context: int) -> str:
    """The binding constraint when no candidate layout runs the batch: HBM, or the serving engine's cap on running
    sequences (memory holds the batch, the scheduler does not run it at once), with the nearest change that fits."""
    eng = su.engine
    mem_ok = np.asarray(g.memory_per_chip[:, 0] <= su.hardware.memory_bytes)
    if eng is not None and mem_ok.any():
        cap = eng.limits_for(su.hardware.memory_bytes)[0]
        most = int(np.max(np.where(mem_ok, g.max_batch[:, 0], 0)))
        return (f"memory holds batch {batch:,} on {n} chips, but {eng.name} runs at most {cap:,} sequences per "
                f"scheduler ({most:,} on the best layout): raise --max-running, or --batch {most:,} fits")
    return f"no layout of {n} chips holds batch {batch:,} at {context:,} tokens in HBM: lower --batch or add chips"
