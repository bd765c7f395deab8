"""Fleet sizing: chips, scale-up domains, megawatts and dollars a year to serve a demand in tokens per second.

Each replica runs the cheapest layout and batch (one scale-up domain's chip counts) that meets the per-user speed
target; replicas = ceil(demand / replica throughput). Power is chip TDP x PUE (PUE 1.0 = chips only).
That replica is a static batch, its speed the decode alone; with an engine, `continuously_batched` sizes the same
demand with replicas that batch continuously (the engine's closed-loop steady state), whose users' speed counts the
prompts admitted among their decodes: more replicas for the same per-user target.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.engine.economics import megawatts, request_cost_per_mtok, usd_per_s, usd_per_year
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.analyses.serving.grid import COST_KEYS, attention_arg, meeting_speed, point, up_to
from tokenmath.mapping.layout import ATTENTION_SHARDING
from tokenmath.analyses.serving.speculative import resolve_draft, speculation_notes
from tokenmath.analyses.serving.by_concurrency import cheapest_continuous, continuous_fields
from tokenmath.analyses.serving.plan_disaggregated import disaggregate
from tokenmath.analyses.serving.simulation.simulate import TTFT_TARGET_S


@dataclass(frozen=True)
class Fleet:
    setup: Setup
    result: dict    # the JSON answer: replica, replicas, chips, domains, MW, $ per year

    def to_dict(self):
        return {**self.result, **what_if_dict(self.setup.hardware)}


def fleet(model, hardware, *, demand, min_tokens_per_s_per_user=20.0, input_len=1024, output_len=256,
          max_chips=None, pue=1.0, weight_dtype=None, kv_dtype=None, efficiency=None, engine=None,
          speculation=None, attention_sharding="heads", **knobs) -> Fleet:
    """speculation: a speculative.Speculation (--draft/--mtp): every replica decodes with it.
    attention_sharding: heads, batch, dp or "any" (searched; mapping/candidates.layouts_for)."""
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    dr = resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype)
    demand = pos_float(demand, "demand")
    target = pos_float(min_tokens_per_s_per_user, "min_tokens_per_s_per_user")
    pue = pos_float(pue, "pue", 0.5, 5.0)
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    hw = su.hardware
    top = int_arg(max_chips if max_chips is not None else max(hw.scaleup_domain, 8) if hw.scaleup_domain <= 72 else 64,
                  "max_chips", 1, MAX_SEARCH_CHIPS)
    g = up_to(su, top, input_len, output_len, draft=dr, attention=attention_arg(attention_sharding))
    meets = meeting_speed(g, target, top, hw.id)
    per_chip = np.where(meets, g.output_tokens_per_s_per_chip, -np.inf)
    li, bi = np.unravel_index(np.argmax(per_chip), per_chip.shape)
    t = g.layouts[li]
    rep_chips = int(g.chips[li, 0])
    rep_tput = float(g.output_tokens_per_s[li, bi])
    size = _sizing(demand, rep_chips, rep_tput, hw, pue)
    costs = g.costs_per_mtok(hw.price_usd_per_hour)
    res = {"model": su.model.id, "hardware": hw.id, "engine": su.engine_dict,
           "notes": [su.engine_note, *speculation_notes(dr)],
           **({} if dr is None else {"speculation": dr.to_dict()}),
           "demand_output_tokens_per_s": demand,
           "min_tokens_per_s_per_user": target, "input_len": input_len, "output_len": output_len,
           "input_tokens_per_s": demand * input_len / output_len,
           "layout": fmt_layout(*t), "tp": t[0], "pp": t[1], "ep": t[2], "dp": t[3], "batch": int(g.batch[li, bi]),
           **({"attention_sharding": ATTENTION_SHARDING[t[4]]} if len(t) > 4 else {}),
           "replica_chips": rep_chips, "replica_output_tokens_per_s": rep_tput,
           "tokens_per_s_per_user": finite(g.tokens_per_s_per_user[li, bi]), **size, "pue": pue,
           **{k: None if costs is None else finite(costs[k][li, bi]) for k in COST_KEYS},
           "continuously_batched": (_continuous(su, g, per_chip, demand, target, input_len, output_len, dr, pue)
                                    if su.engine is not None else None),
           "disaggregated": (None if dr is not None else
                             _disaggregated(su, g, point(g, li, bi, hw.price_usd_per_hour), demand, target,
                                            input_len, output_len, pue))}
    return Fleet(setup=su, result=res)


def _sizing(demand: float, replica_chips: int, replica_tput: float, hw, pue: float) -> dict:
    """Replicas, chips, scale-up domains, MW and $ a year for `demand` output tokens/s from replicas of
    `replica_chips` chips serving `replica_tput` each; the fleet's $ per Mtok over the demand (its last replica's
    idle headroom included): _of_chips."""
    replicas = math.ceil(demand / replica_tput)
    return {"replicas": replicas, **_of_chips(replicas * replica_chips, demand, hw, pue)}


def _of_chips(chips: int, demand: float, hw, pue: float) -> dict:
    """Chips, scale-up domains, MW, $ a year and $ per Mtok over the demand of a fleet of `chips` chips."""
    mw = megawatts(chips, hw.tdp_w, pue) if hw.tdp_w else None
    priced = hw.price_usd_per_hour is not None
    usd_year = usd_per_year(chips, hw.price_usd_per_hour) if priced else None
    per_mtok = request_cost_per_mtok(usd_per_s(chips, hw.price_usd_per_hour), demand) if priced else None
    return {"chips": chips, "domain_size": hw.scaleup_domain,
            "domains": math.ceil(chips / hw.scaleup_domain), "megawatts": finite(mw) if mw is not None else None,
            "usd_per_year": finite(usd_year) if usd_year is not None else None,
            "fleet_cost_per_mtok_output_usd": finite(per_mtok) if per_mtok is not None else None}


def _continuous(su: Setup, g, per_chip, demand, target, input_len, output_len, draft, pue) -> dict | None:
    """The fleet when each replica batches continuously (by_concurrency.cheapest_continuous over the layouts with
    the most static throughput per chip at the target); None when no traced point meets the target."""
    c = cheapest_continuous(su, g, -per_chip, target, input_len, output_len, draft)
    if c is None:
        return None
    return {**continuous_fields(c), "replica_chips": c["chips"], "replica_output_tokens_per_s": c["output_tokens_per_s"],
            **_sizing(demand, c["chips"], c["output_tokens_per_s"], su.hardware, pue),
            "cost_per_mtok_output_request_usd": c["cost_per_mtok_output_request_usd"]}


def _disaggregated(su: Setup, g, colocated: dict, demand, target, input_len, output_len, pue) -> dict:
    """The fleet with prefill on chips of its own (plan_disaggregated.disaggregate: the decode instance with the most
    decode-only output per chip at the speed target, the prefill instance with the most prompt tokens/s per chip
    whose batch's prefill stays within TTFT_TARGET_S), in whole instances: decode instances = ceil(demand / one
    instance's output tokens/s), prefill instances = ceil(demand x input / output / one instance's prompt tokens/s).
    The KV each request carries between the pools is reported, not priced (plan --disaggregated)."""
    def chips_of(p: dict) -> int:
        return int(p["tp"] * p["pp"] * p["ep"] * p["dp"])
    d = disaggregate(su, chips_of(colocated), g.layouts, g, g.batch, input_len, output_len, TTFT_TARGET_S, target,
                     {}, colocated)
    dec, pre = d["decode"], d["prefill"]
    dec_chips, pre_chips = chips_of(dec), chips_of(pre)
    dec_n = math.ceil(demand / dec["decode_output_tokens_per_s"])
    pre_n = math.ceil(demand * input_len / output_len / (pre["prompt_tokens_per_s_per_chip"] * pre_chips))
    size = _of_chips(dec_n * dec_chips + pre_n * pre_chips, demand, su.hardware, pue)
    return {"decode": {k: dec[k] for k in ("layout", "tp", "pp", "ep", "dp", "batch", "decode_step_s")}
            | {"tokens_per_s_per_user": dec["output_tokens_per_s_per_user"], "instance_chips": dec_chips,
               "instance_output_tokens_per_s": dec["decode_output_tokens_per_s"], "instances": dec_n,
               "chips": dec_n * dec_chips},
            "prefill": {k: pre[k] for k in ("layout", "tp", "pp", "ep", "dp", "batch", "ttft_s")}
            | {"instance_chips": pre_chips, "instance_prompt_tokens_per_s": pre["prompt_tokens_per_s_per_chip"]
               * pre_chips, "instances": pre_n, "chips": pre_n * pre_chips},
            **size, "kv_bytes_per_request": d["kv_bytes_per_request"],
            "kv_transfer_bytes_per_s": d["kv_bytes_per_request"] * demand / output_len}
