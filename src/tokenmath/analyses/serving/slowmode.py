"""Slow mode: the cheapest cost reachable for a latency budget, across batch sizes and chip counts.

Relaxing the latency budget lets more sequences share each weight fetch, so cost falls, until the batch reaches
what memory holds (KV of every sequence) or compute saturates. Past that budget waiting buys nothing: the weights
must still be fetched once per step, and only more concurrent sequences (not more patience) amortize them.

The saturation budget is read off every (layout, batch) point, not off the budgets asked for: the smallest latency
within which some point costs at most 1% more than the cheapest point at any latency (beyond it the cheapest cost
falls by less than 1%).

The saving is stated against the tightest budget any point meets (the fastest answer asked for): at each budget and at
saturation, cost_ratio = cost at the tightest budget / cost here (how many times cheaper waiting makes it) and
saving = 1 - cost here / cost at the tightest budget (the share of that cost waiting saves), on the cost the budgets
are ranked by (a whole request per output token, or chip-seconds per Mtok where the chip has no price).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base import units as u
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.serving.grid import COST_KEYS, attention_arg, up_to
from tokenmath.analyses.serving.speculative import Draft, resolve_draft, speculation_notes

DEFAULT_BUDGETS_MS = (2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000)
FLAT = 1.01     # the curve is flat where the cheapest cost is within 1% of the cheapest at any budget


def why_saturation(sat: dict | None) -> str:
    """Why waiting stops paying at the saturation point, from that point's own state."""
    if sat is None:
        return "no point fits: nothing to wait for"
    if sat["memory_limited"]:
        return (f"there the cheapest point already runs the largest batch memory holds ({sat['batch']} sequences' KV): "
                "each step still fetches all weights once, and only more concurrent sequences, not more waiting, "
                "amortize that fetch")
    if sat["bottleneck"] == "compute":
        return (f"there the decode step (batch {sat['batch']}) is compute-bound: a larger batch adds FLOPs in "
                "proportion, so the cost per token stops falling")
    rest = {"memory": "the KV each sequence reads", "communication": "the collectives, which grow with the batch"}
    return (f"there {sat['batch']} sequences already share each weight fetch; the step is {sat['bottleneck']}-bound and "
            f"what remains per token ({rest.get(sat['bottleneck'], 'its own work')}) does not shrink with a larger batch")


@dataclass(frozen=True)
class SlowMode:
    setup: Setup
    rows: list[dict]                    # one per budget: the cheapest feasible point, or why none is
    saturation_budget_s: float | None   # the budget beyond which waiting buys nothing
    per_request: bool                   # budgets per request (TTFT + all decode steps), else per output token
    saturation: dict | None = None      # the point at the saturation budget (layout, batch, step, cost, why it stops)
    saving: dict | None = None          # the reference (tightest budget met) and the saving at saturation (_saving)
    draft: Draft | None = None          # speculative decoding (None: plain decoding)
    notes: tuple[str, ...] = ()         # beyond the engine's and the draft's (analyses/ask.py)
    fastest: dict | None = None         # the fastest point at all (least latency), priced, and what saturation saves

    @property
    def why(self) -> str:
        return why_saturation(self.saturation)

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "engine": su.engine_dict,
                "notes": [su.engine_note, *speculation_notes(self.draft), *self.notes], "per_request": self.per_request,
                **({} if self.draft is None else {"speculation": self.draft.to_dict()}),
                "rows": self.rows, "saturation_budget_s": self.saturation_budget_s, "saturation": self.saturation,
                "saving": self.saving, "fastest": self.fastest, "why": self.why, **what_if_dict(su.hardware)}


def slowmode(model, hardware, *, budgets_s=None, per_request: bool = False, max_chips=None, input_len=1024,
             output_len=256, weight_dtype=None, kv_dtype=None, efficiency=None, engine=None,
             speculation=None, attention_sharding="heads", **knobs) -> SlowMode:
    """speculation: a speculative.Speculation (--draft/--mtp): every point decodes with it. attention_sharding: heads,
    batch, dp or "any" (searched) for every layout (mapping/candidates.layouts_for)."""
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    dr = resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype)
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    budgets = np.array([pos_float(b, "budget") for b in (budgets_s or [b / 1e3 for b in DEFAULT_BUDGETS_MS])])
    if per_request and budgets_s is None:
        budgets = budgets * output_len
    top = int_arg(max_chips if max_chips is not None else su.hardware.scaleup_domain, "max_chips", 1, MAX_SEARCH_CHIPS)
    g = up_to(su, top, input_len, output_len, draft=dr, attention=attention_arg(attention_sharding))
    latency = g.ttft_s + output_len * g.step_s if per_request else g.step_s
    price = su.hardware.price_usd_per_hour
    costs = g.costs_per_mtok(price)     # ranked by the whole request's cost per output token (prefill included)
    cost = costs["cost_per_mtok_output_request_usd"] if costs is not None else g.chip_s_per_mtok_output()
    ok = np.asarray(g.fits)
    fast = _fastest(g, latency, cost, ok, price)
    rows, best_costs = [], []
    for b in budgets:
        feas = ok & (latency <= b)
        if not feas.any():
            fastest = np.nanmin(np.where(ok, latency, np.nan))
            at = f" ({fast['layout']}, batch {fast['batch']}, {fast['cost_label']})" if fast is not None else ""
            rows.append({"budget_s": float(b), "feasible": False,
                         "reason": f"the fastest layout reaches {u.seconds(float(fastest))} "
                                   f"{'per request' if per_request else 'per token'}{at}; allow more chips or relax "
                                   "the budget",
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
                     **{k: None if costs is None else finite(costs[k][li, bi]) for k in COST_KEYS},
                     "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
                     "memory_limited": bool(bt >= int(g.max_batch[li, bi])),
                     "cost_label": (f"${float(cost[li, bi]):.4g}/Mtok (whole request)" if price is not None
                                    else f"{float(cost[li, bi]):.4g} chip-s/Mtok")})
        best_costs.append(float(cost[li, bi]))
    sat = _saturation(g, latency, cost, ok, costs)
    key = "cost_per_mtok_output_request_usd" if price is not None else "chip_s_per_mtok_output"
    saving = _saving(rows, sat, key)
    if fast is not None and sat is not None:
        # what waiting until saturation saves against the fastest point there is (at any budget)
        fast["saturation_saves"] = finite(1.0 - sat[key] / fast["cost"])
    return SlowMode(setup=su, rows=rows, saturation_budget_s=None if sat is None else sat["budget_s"],
                    per_request=per_request, saturation=sat, draft=dr, saving=saving, fastest=fast)


def _fastest(g, latency, cost, ok, price) -> dict | None:
    """The point of least latency among those that fit (any budget), with its cost: what being fastest costs."""
    if not ok.any():
        return None
    li, bi = np.unravel_index(np.nanargmin(np.where(ok, latency, np.nan)), latency.shape)
    c = float(cost[li, bi])
    return {"latency_s": finite(latency[li, bi]), "layout": fmt_layout(*g.layouts[li]), "chips": int(g.chips[li, 0]),
            "batch": int(g.batch[li, bi]), "cost": finite(c),
            "cost_label": f"${c:.4g}/Mtok (whole request)" if price is not None else f"{c:.4g} chip-s/Mtok"}


def _saving(rows: list[dict], sat: dict | None, key: str) -> dict | None:
    """What waiting saves against the tightest budget any point meets, on the cost `key` the budgets are ranked by:
    each feasible row and the saturation point get `saving_vs_tightest` {reference_budget_s, cost_ratio (reference
    cost / cost here), saving (1 - cost here / reference cost)}; returns {reference: that budget and its cost,
    at_saturation: the saving at the saturation point} (None when no budget is met)."""
    met = [r for r in rows if r["feasible"]]
    if not met:
        return None
    ref = min(met, key=lambda r: r["budget_s"])
    c0 = ref[key]

    def vs(c: float) -> dict:
        return {"reference_budget_s": ref["budget_s"], "cost_ratio": finite(c0 / c), "saving": finite(1.0 - c / c0)}
    for r in met:
        r["saving_vs_tightest"] = vs(r[key])
    if sat is not None:
        sat["saving_vs_tightest"] = vs(sat[key])
    return {"reference": {"budget_s": ref["budget_s"], "cost_key": key, "cost": c0, "layout": ref["layout"],
                          "batch": ref["batch"],
                          "what": "the cheapest point within the tightest budget that any point meets"},
            "at_saturation": None if sat is None else sat["saving_vs_tightest"]}


def _saturation(g, latency, cost, ok, costs) -> dict | None:
    """The point at the smallest latency whose cost is within FLAT of the cheapest point at any latency: the
    cheapest cost within a budget (a running minimum over the points' latencies) falls by less than 1% beyond it."""
    c = np.where(ok, cost, np.inf)
    floor = c.min()
    if not np.isfinite(floor):
        return None
    near = ok & (cost <= floor * FLAT)
    li, bi = np.unravel_index(np.argmin(np.where(near, latency, np.inf)), c.shape)
    t = g.layouts[li]
    bt = int(g.batch[li, bi])
    return {"budget_s": float(latency[li, bi]), "layout": fmt_layout(*t), "chips": int(g.chips[li, 0]), "batch": bt,
            "decode_step_s": finite(g.step_s[li, bi]), "ttft_s": finite(g.ttft_s[li, bi]),
            **{k: None if costs is None else finite(costs[k][li, bi]) for k in COST_KEYS},
            "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
            "memory_limited": bool(bt >= int(g.max_batch[li, bi])), "bottleneck": str(g.bottleneck[li, bi]),
            "cost_within_of_cheapest": finite(cost[li, bi] / floor - 1.0)}
