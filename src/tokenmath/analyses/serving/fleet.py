"""Fleet sizing: chips, scale-up domains, megawatts and dollars a year to serve a demand in tokens per second.

Each replica runs the cheapest layout and batch (one scale-up domain's chip counts) that meets the per-user speed
target; replicas = ceil(demand / replica throughput). Power is chip TDP x PUE (PUE 1.0 = chips only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base import units as u
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.analyses.serving.grid import up_to, meeting_speed

HOURS_PER_YEAR = 8760


@dataclass
class Fleet:
    setup: Setup
    result: dict

    def to_dict(self):
        return self.result

    def explain(self):
        r = self.result
        L = [f"Fleet for {r['demand_output_tokens_per_s']:,.3g} output tokens/s of {r['model']} on {r['hardware']} "
             f"(>= {r['min_tokens_per_s_per_user']:g} tok/s per user, {r['input_len']:,} in / {r['output_len']:,} out)"]
        L.append(f"  replica: {r['replica_chips']} chips ({r['layout']}), batch {r['batch']}, "
                 f"{r['replica_output_tokens_per_s']:,.0f} output tok/s, {r['tokens_per_s_per_user']:,.1f} tok/s per user")
        L.append(f"  replicas = ceil({r['demand_output_tokens_per_s']:,.4g} / {r['replica_output_tokens_per_s']:,.0f}) = "
                 f"{r['replicas']:,}; chips = {r['chips']:,}; scale-up domains of {r['domain_size']}: {r['domains']:,}")
        if r["megawatts"] is not None:
            L.append(f"  power = {r['chips']:,} x {self.setup.hardware.tdp_w:g} W x PUE {r['pue']:g} = {r['megawatts']:,.2f} MW")
        if r["usd_per_year"] is not None:
            L.append(f"  cost = {r['chips']:,} chips x ${self.setup.hardware.price_usd_per_hour}/h x {HOURS_PER_YEAR} h = "
                     f"${r['usd_per_year']:,.0f} per year (${r['cost_per_mtok_output_usd']:.4g} per Mtok output)")
        return "\n".join(L)


def fleet(model, hardware, *, demand, min_tokens_per_s_per_user=20.0, input_len=1024, output_len=256,
          max_chips=None, pue=1.0, weight_dtype=None, kv_dtype=None, efficiency=None) -> Fleet:
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    demand = pos_float(demand, "demand")
    target = pos_float(min_tokens_per_s_per_user, "min_tokens_per_s_per_user")
    pue = pos_float(pue, "pue", 0.5, 5.0)
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    hw = su.hardware
    top = int_arg(max_chips if max_chips is not None else max(hw.scaleup_domain, 8) if hw.scaleup_domain <= 72 else 64,
                  "max_chips", 1, 4096)
    g = up_to(su, top, input_len, output_len)
    meets = meeting_speed(g, target, top, hw.id)
    per_chip = np.where(meets, g.output_tokens_per_s_per_chip, -np.inf)
    li, bi = np.unravel_index(np.argmax(per_chip), per_chip.shape)
    t = g.layouts[li]
    rep_chips = int(g.chips[li, 0])
    rep_tput = float(g.output_tokens_per_s[li, bi])
    replicas = math.ceil(demand / rep_tput)
    chips = replicas * rep_chips
    mw = chips * hw.tdp_w * pue / 1e6 if hw.tdp_w else None
    usd_year = chips * hw.price_usd_per_hour * HOURS_PER_YEAR if hw.price_usd_per_hour is not None else None
    res = {"model": su.model.id, "hardware": hw.id, "demand_output_tokens_per_s": demand,
           "min_tokens_per_s_per_user": target, "input_len": input_len, "output_len": output_len,
           "input_tokens_per_s": demand * input_len / output_len,
           "layout": fmt_layout(*t), "tp": t[0], "pp": t[1], "ep": t[2], "dp": t[3], "batch": int(g.batch[li, bi]),
           "replica_chips": rep_chips, "replica_output_tokens_per_s": rep_tput,
           "tokens_per_s_per_user": finite(g.tokens_per_s_per_user[li, bi]), "replicas": replicas, "chips": chips,
           "domain_size": hw.scaleup_domain, "domains": math.ceil(chips / hw.scaleup_domain),
           "pue": pue, "megawatts": finite(mw) if mw is not None else None,
           "usd_per_year": finite(usd_year) if usd_year is not None else None,
           "cost_per_mtok_output_usd": (finite(usd_year / (demand * 3600 * HOURS_PER_YEAR) * 1e6)
                                        if usd_year is not None else None)}
    return Fleet(su, res)


def fleet_text(f: Fleet) -> str:
    return f.explain() + f"\n  ({u.rate(f.result['input_tokens_per_s'], 'tokens/s')} of input prefilled alongside)"
