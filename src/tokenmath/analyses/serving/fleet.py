"""Fleet sizing: chips, scale-up domains, megawatts and dollars a year to serve a demand in tokens per second.

Each replica runs the cheapest layout and batch (one scale-up domain's chip counts) that meets the per-user speed
target; replicas = ceil(demand / replica throughput). Power is whole nodes at their system power rating where the
systems catalog sources one for the chip (specs/systems.node_power: nodes = ceil(chips / node chips), MW = nodes x
node kW x PUE: a DGX H100 draws 10.2 kW for 8 GPUs, not 8 x 700 W), else chip TDP x chips x PUE; `power` says which.
That replica is a static batch, its speed the decode alone and its TTFT (ttft_s) the prefill of its whole batch;
with an engine, `continuously_batched` sizes the same demand with replicas that batch continuously (the engine's
closed-loop steady state), whose users' speed counts the prompts admitted among their decodes: more replicas for the
same per-user target. A static TTFT past MLPerf's 2 s server limit is said in `static_ttft_note`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.engine.economics import megawatts, request_cost_per_mtok, usd_per_s, usd_per_year
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.specs.overrides import what_if_dict
from tokenmath.specs.systems import NodePower, node_power
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.analyses.serving.grid import (COST_KEYS, attention_arg, fewest_whole, meeting_speed, point,
                                           static_ttft_note, up_to)
from tokenmath.mapping.layout import ATTENTION_SHARDING
from tokenmath.analyses.serving.speculative import resolve_draft, speculation_notes
from tokenmath.analyses.serving.by_concurrency import cheapest_continuous, continuous_fields
from tokenmath.analyses.serving.plan_disaggregated import disaggregate, instance_pools
from tokenmath.engine.prefix_cache import hit_rate
from tokenmath.analyses.serving.simulation.simulate import TTFT_TARGET_S


@dataclass(frozen=True)
class Fleet:
    setup: Setup
    result: dict    # the JSON answer: replica, replicas, chips, domains, MW, $ per year

    def to_dict(self):
        return {**self.result, **what_if_dict(self.setup.hardware)}


def fleet(model, hardware, *, demand, min_tokens_per_s_per_user=20.0, input_len=1024, output_len=256,
          max_chips=None, pue=1.0, weight_dtype=None, kv_dtype=None, efficiency=None, engine=None,
          speculation=None, attention_sharding="heads", prefix_hit=None, decode_chips=None, prefill_chips=None,
          **knobs) -> Fleet:
    """speculation: a speculative.Speculation (--draft/--mtp): every replica decodes with it.
    attention_sharding: heads, batch, dp or "any" (searched; mapping/candidates.layouts_for).
    prefix_hit: the cached share of every prompt: the disaggregated prefill pool computes only the rest (the static and
    continuously batched sizings have no cache, and say so). decode_chips / prefill_chips: the disaggregated
    instances' sizes, as a deployment states them (DeepSeek's day-6 system: decode 144 GPUs, prefill 32), every
    layout of exactly that many chips searched (wide EP across nodes); both or neither."""
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    dr = resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype)
    hit = hit_rate(prefix_hit)
    instances = _instances(decode_chips, prefill_chips)
    if dr is not None and (hit or instances):
        raise InputError("prefix_hit" if hit else "decode_chips", "applies to the disaggregated sizing, which is "
                         "modelled without speculative decoding", "leave out --draft / --mtp, or this option")
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
    li, bi = fewest_whole(g.output_tokens_per_s, g.chips, meets, demand, per_chip)
    t = g.layouts[li]
    rep_chips = int(g.chips[li, 0])
    rep_tput = float(g.output_tokens_per_s[li, bi])
    pw = _Power(node_power(hw), hw.tdp_w, pue)
    size = _sizing(demand, rep_chips, rep_tput, hw, pw)
    costs = g.costs_per_mtok(hw.price_usd_per_hour)
    cont = _continuous(su, g, per_chip, demand, target, input_len, output_len, dr, pw) if su.engine is not None else None
    ttft = finite(g.ttft_s[li, bi])
    batch = int(g.batch[li, bi])
    res = {"model": su.model.id, "hardware": hw.id, "engine": su.engine_dict,
           "weight_dtype": su.precision.weight.name, "kv_dtype": su.precision.kv.name,
           "notes": [su.engine_note, *speculation_notes(dr)],
           **({} if dr is None else {"speculation": dr.to_dict()}),
           "demand_output_tokens_per_s": demand,
           "min_tokens_per_s_per_user": target, "input_len": input_len, "output_len": output_len,
           "input_tokens_per_s": demand * input_len / output_len,
           "layout": fmt_layout(*t), "tp": t[0], "pp": t[1], "ep": t[2], "dp": t[3], "batch": batch,
           **({"attention_sharding": ATTENTION_SHARDING[t[4]]} if len(t) > 4 else {}),
           "replica_chips": rep_chips, "replica_output_tokens_per_s": rep_tput,
           "tokens_per_s_per_user": finite(g.tokens_per_s_per_user[li, bi]),
           # the static replica's TTFT: the prefill of its whole batch (infer's and plan's static-batch convention)
           "ttft_s": ttft,
           "static_ttft_note": static_ttft_note(ttft, batch, "the continuously batched sizing below is what a "
                                                "server meets" if cont is not None else
                                                "batching continuously (a serving engine) or prefill on chips of its "
                                                "own (the disaggregated sizing) keeps the first token within it"),
           **size, "pue": pue, "power": pw.basis(hw),
           **{k: None if costs is None else finite(costs[k][li, bi]) for k in COST_KEYS},
           "continuously_batched": cont,
           "disaggregated": (None if dr is not None else
                             _disaggregated(su, g, point(g, li, bi, hw.price_usd_per_hour), demand, target,
                                            input_len, output_len, pw, hit, instances))}
    if hit:
        res["notes"].append(f"prefix caching: {hit:g} of every prompt cached, applied to the disaggregated prefill pool "
                            "(its prefill computes the rest); the static and continuously batched sizings have no cache")
    return Fleet(setup=su, result=res)


@dataclass(frozen=True)
class _Power:
    """How a fleet's chips become megawatts: whole nodes at the system's sourced power rating (node), else the
    chips' TDP (tdp_w; None: no power figure at all), times the PUE."""
    node: NodePower | None
    tdp_w: float | None
    pue: float

    def of(self, chips: int) -> dict:
        """{"megawatts", "nodes"} of `chips` chips (nodes: whole nodes of node.chips the power counts, None when
        it counts chips)."""
        if self.node is not None:
            nodes = math.ceil(chips / self.node.chips)
            return {"megawatts": finite(megawatts(nodes, self.node.watts, self.pue)), "nodes": nodes}
        mw = megawatts(chips, self.tdp_w, self.pue) if self.tdp_w else None
        return {"megawatts": finite(mw) if mw is not None else None, "nodes": None}

    def basis(self, hw) -> dict:
        """What the megawatts count, with its source, for the answer."""
        if self.node is not None:
            return {"basis": "node", **self.node.to_dict(), "pue": self.pue,
                    "formula": "MW = nodes x node_kw x PUE / 1000, nodes = ceil(chips / node_chips)"}
        if self.tdp_w:
            moved = any(o.field == "tdp_w" for o in getattr(hw, "what_if", ()))
            return {"basis": "chip", "chip_tdp_w": self.tdp_w, "pue": self.pue,
                    "formula": "MW = chips x chip_tdp_w x PUE / 1e6",
                    "why": ("chip TDP only: a what-if set the chip's TDP, and the catalog's whole-node power is for "
                            "the catalog chip" if moved else
                            f"chip TDP only: no whole-node power is sourced for {hw.id} in the systems catalog, so "
                            "the nodes' CPUs, NICs, switches and fans are left out")}
        return {"basis": None, "why": f"{hw.id} has no TDP in the catalog: no megawatts"}


def _sizing(demand: float, replica_chips: int, replica_tput: float, hw, pw: _Power) -> dict:
    """Replicas, chips, scale-up domains, MW and $ a year for `demand` output tokens/s from replicas of
    `replica_chips` chips serving `replica_tput` each; the fleet's $ per Mtok over the demand (its last replica's
    idle headroom included): _of_chips."""
    replicas = math.ceil(demand / replica_tput)
    return {"replicas": replicas, **_of_chips(replicas * replica_chips, demand, hw, pw)}


def _of_chips(chips: int, demand: float, hw, pw: _Power) -> dict:
    """Chips, scale-up domains, MW (and the nodes it counts), $ a year and $ per Mtok over the demand of a fleet of
    `chips` chips."""
    priced = hw.price_usd_per_hour is not None
    usd_year = usd_per_year(chips, hw.price_usd_per_hour) if priced else None
    per_mtok = request_cost_per_mtok(usd_per_s(chips, hw.price_usd_per_hour), demand) if priced else None
    return {"chips": chips, "domain_size": hw.scaleup_domain,
            "domains": math.ceil(chips / hw.scaleup_domain), **pw.of(chips),
            "usd_per_year": finite(usd_year) if usd_year is not None else None,
            "fleet_cost_per_mtok_output_usd": finite(per_mtok) if per_mtok is not None else None}


def _continuous(su: Setup, g, per_chip, demand, target, input_len, output_len, draft, pw) -> dict | None:
    """The fleet when each replica batches continuously (by_concurrency.cheapest_continuous over the layouts with
    the most static throughput per chip at the target); None when no traced point meets the target."""
    c = cheapest_continuous(su, g, -per_chip, target, input_len, output_len, draft)
    if c is None:
        return None
    return {**continuous_fields(c), "replica_chips": c["chips"], "replica_output_tokens_per_s": c["output_tokens_per_s"],
            **_sizing(demand, c["chips"], c["output_tokens_per_s"], su.hardware, pw),
            "cost_per_mtok_output_request_usd": c["cost_per_mtok_output_request_usd"]}


def _instances(decode_chips, prefill_chips) -> tuple[int, int] | None:
    """(decode, prefill) instance sizes in chips, or None: both given or neither."""
    if decode_chips is None and prefill_chips is None:
        return None
    if decode_chips is None or prefill_chips is None:
        raise InputError("decode_chips" if decode_chips is None else "prefill_chips", "given without the other",
                         "both --decode-chips and --prefill-chips (e.g. DeepSeek's 144 and 32), or neither")
    return (int_arg(decode_chips, "decode_chips", 1, MAX_SEARCH_CHIPS),
            int_arg(prefill_chips, "prefill_chips", 1, MAX_SEARCH_CHIPS))


def _disaggregated(su: Setup, g, colocated: dict, demand, target, input_len, output_len, pw, hit=0.0,
                   instances=None) -> dict:
    """The fleet with prefill on chips of its own (plan_disaggregated.disaggregate: the decode instance with the most
    decode-only output per chip at the speed target, the prefill instance with the most prompt tokens/s per chip
    whose batch's prefill stays within TTFT_TARGET_S), in whole instances: decode instances = ceil(demand / one
    instance's output tokens/s), prefill instances = ceil(demand x input / output / one instance's prompt tokens/s).
    The KV each request carries between the pools is reported, not priced (plan --disaggregated)."""
    def chips_of(p: dict) -> int:
        return int(p["tp"] * p["pp"] * p["ep"] * p["dp"])
    if instances is not None:
        d = instance_pools(su, instances[0], instances[1], input_len, output_len, target, TTFT_TARGET_S, colocated,
                           prefix_hit=hit)
    else:
        d = disaggregate(su, chips_of(colocated), g.layouts, g, g.batch, input_len, output_len, TTFT_TARGET_S, target,
                         {}, colocated, prefix_hit=hit, demand=demand)
    dec, pre = d["decode"], d["prefill"]
    dec_chips, pre_chips = chips_of(dec), chips_of(pre)
    dec_n = math.ceil(demand / dec["decode_output_tokens_per_s"])
    pre_n = math.ceil(demand * input_len / output_len / (pre["prompt_tokens_per_s_per_chip"] * pre_chips))
    size = _of_chips(dec_n * dec_chips + pre_n * pre_chips, demand, su.hardware, pw)
    return {"decode": {k: dec[k] for k in ("layout", "tp", "pp", "ep", "dp", "batch", "decode_step_s")}
            | {"tokens_per_s_per_user": dec["output_tokens_per_s_per_user"], "instance_chips": dec_chips,
               "instance_output_tokens_per_s": dec["decode_output_tokens_per_s"], "instances": dec_n,
               "chips": dec_n * dec_chips},
            "prefill": {k: pre[k] for k in ("layout", "tp", "pp", "ep", "dp", "batch", "ttft_s")}
            | {"instance_chips": pre_chips, "instance_prompt_tokens_per_s": pre["prompt_tokens_per_s_per_chip"]
               * pre_chips, "instances": pre_n, "chips": pre_n * pre_chips},
            **size, "kv_bytes_per_request": d["kv_bytes_per_request"],
            "kv_transfer_bytes_per_s": d["kv_bytes_per_request"] * demand / output_len}
