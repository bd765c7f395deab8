"""Slow mode: the cheapest cost reachable for a latency budget, across batch sizes and chip counts.

Relaxing the latency budget lets more sequences share each weight fetch, so cost falls, until the batch reaches
what memory holds (KV of every sequence) or compute saturates. Past that budget waiting buys nothing: the weights
must still be fetched once per step, and only more concurrent sequences (not more patience) amortize them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base import units as u
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.analyses.serving.grid import up_to

DEFAULT_BUDGETS_MS = (2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000)
WHY_SATURATION = ("beyond the saturation budget the cheapest point already runs the largest batch memory allows (or "
                  "compute saturates): each step still fetches all weights once, and only more concurrent sequences, "
                  "not more waiting, amortize that fetch")


@dataclass(frozen=True)
class SlowMode:
    setup: Setup
    rows: list[dict]                    # one per budget: the cheapest feasible point, or why none is
    saturation_budget_s: float | None   # the budget beyond which waiting buys nothing
    per_request: bool                   # budgets per request (TTFT + all decode steps), else per output token

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "per_request": self.per_request,
                "rows": self.rows, "saturation_budget_s": self.saturation_budget_s, "why": WHY_SATURATION}


def slowmode(model, hardware, *, budgets_s=None, per_request: bool = False, max_chips=None, input_len=1024,
             output_len=256, weight_dtype=None, kv_dtype=None, efficiency=None) -> SlowMode:
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    budgets = np.array([pos_float(b, "budget") for b in (budgets_s or [b / 1e3 for b in DEFAULT_BUDGETS_MS])])
    if per_request and budgets_s is None:
        budgets = budgets * output_len
    top = int_arg(max_chips if max_chips is not None else su.hardware.scaleup_domain, "max_chips", 1, MAX_SEARCH_CHIPS)
    g = up_to(su, top, input_len, output_len)
    latency = g.ttft_s + output_len * g.step_s if per_request else g.step_s
    price = su.hardware.price_usd_per_hour
    cost = g.usd_per_mtok_output(price) if price is not None else g.chip_s_per_mtok_output()
    ok = np.asarray(g.fits)
    rows, best_costs = [], []
    for b in budgets:
        feas = ok & (latency <= b)
        if not feas.any():
            fastest = np.nanmin(np.where(ok, latency, np.nan))
            rows.append({"budget_s": float(b), "feasible": False,
                         "reason": f"the fastest layout reaches {u.seconds(float(fastest))} "
                                   f"{'per request' if per_request else 'per token'}; allow more chips or relax the budget",
                         "fastest_reachable_s": finite(fastest)})
            best_costs.append(np.nan)
            continue
        c = np.where(feas, cost, np.inf)
        li, bi = np.unravel_index(np.argmin(c), c.shape)
        t = g.layouts[li]
        bt = int(g.batch[li, bi])
        rows.append({"budget_s": float(b), "feasible": True, "chips": int(g.chips[li, 0]), "layout": fmt_layout(*t),
                     "tp": t[0], "pp": t[1], "ep": t[2], "dp": t[3], "batch": bt,
                     "decode_step_s": finite(g.step_s[li, bi]), "ttft_s": finite(g.ttft_s[li, bi]),
                     "cost_per_mtok_output_usd": finite(cost[li, bi]) if price is not None else None,
                     "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
                     "memory_limited": bool(bt >= int(g.max_batch[li, bi])),
                     "cost_label": (f"${float(cost[li, bi]):.4g}/Mtok" if price is not None
                                    else f"{float(cost[li, bi]):.4g} chip-s/Mtok")})
        best_costs.append(float(cost[li, bi]))
    bc = np.array(best_costs)
    sat = None
    fin = np.isfinite(bc)
    if fin.any():
        floor = np.nanmin(bc)
        hit = np.nonzero(fin & (bc <= floor * 1.01))[0]
        sat = float(budgets[hit[0]]) if hit.size else None
    return SlowMode(setup=su, rows=rows, saturation_budget_s=sat, per_request=per_request)
