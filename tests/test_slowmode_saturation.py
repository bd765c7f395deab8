"""Issue 15 item 6: slowmode reports where the cost-vs-budget curve actually flattens: the smallest latency budget
beyond which the cheapest cost falls by less than 1% (read off every (layout, batch) point, not the budgets listed).

Before the fix it reported the first listed budget whose cost was within 1% of the cheapest listed: with
`--budget-ms 20,200` DeepSeek-V3 on H200 said "beyond ~200 ms waiting buys nothing" while the point chosen at 200 ms
steps in 54.6 ms, and the default budgets said ~50 ms for Llama 3.1 70B whose cheapest point steps in 44.3 ms.
"""
import re

import pytest

from tokenmath.analyses.serving.slowmode import slowmode

FLAT = 1.01     # "flat": within 1% of the cheapest cost at any budget


def _cost(s):
    r = s.rows[0]
    return r["cost_per_mtok_output_request_usd"] if r["feasible"] else float("inf")


@pytest.mark.parametrize("mid,hw,per_request", [("deepseek-v3", "h200", False), ("llama-3.1-70b", "h100-sxm", False),
                                                ("llama-3.1-8b", "h100-sxm", True)])
def test_saturation_is_where_the_curve_flattens(mid, hw, per_request):
    s = slowmode(mid, hw, budgets_s=[0.02, 0.2] if not per_request else [5.0, 50.0], per_request=per_request)
    sat = s.saturation_budget_s
    # the cheapest cost at any budget (a budget no point exceeds)
    floor = _cost(slowmode(mid, hw, budgets_s=[1e6], per_request=per_request))
    # at the saturation budget the cost is within 1% of that floor ...
    assert _cost(slowmode(mid, hw, budgets_s=[sat], per_request=per_request)) <= floor * FLAT * (1 + 1e-12)
    # ... and any tighter budget is more than 1% dearer: it is the smallest such budget
    assert _cost(slowmode(mid, hw, budgets_s=[sat * (1 - 1e-9)], per_request=per_request)) > floor * FLAT
    # the listed budgets do not move it
    assert slowmode(mid, hw, per_request=per_request).saturation_budget_s == pytest.approx(sat, rel=1e-12)
    # it is never beyond the latency of the point chosen at a looser budget
    loose = s.rows[-1]
    lat = loose["ttft_s"] + 256 * loose["decode_step_s"] if per_request else loose["decode_step_s"]
    assert sat <= lat * (1 + 1e-12)


def test_deepseek_budget_200ms_saturates_below_the_chosen_step():
    s = slowmode("deepseek-v3", "h200", budgets_s=[0.02, 0.2])
    chosen = s.rows[1]
    assert chosen["feasible"] and chosen["decode_step_s"] < 0.2
    assert s.saturation_budget_s <= chosen["decode_step_s"]      # was 0.2 s, above the 54.6 ms step it chose
    d = s.to_dict()
    assert d["saturation"]["decode_step_s"] == pytest.approx(s.saturation_budget_s)
    # the why names what actually stops the cost falling at that point
    sat = d["saturation"]
    assert ("largest batch memory holds" in d["why"]) == sat["memory_limited"]
    assert sat["memory_limited"] or sat["bottleneck"] in d["why"]


def test_slowmode_prices_the_fastest_point_and_what_waiting_saves_against_it():
    from tokenmath.analyses.serving.slowmode import slowmode
    s = slowmode("llama-3.1-70b", "h100-sxm", max_chips=8)
    f = s.to_dict()["fastest"]
    rows = [r for r in s.rows if r["feasible"]]
    # nothing is faster than the fastest point, and no feasible budget's answer is cheaper than saturation's
    assert all(r["decode_step_s"] >= f["latency_s"] * (1 - 1e-12) for r in rows)
    # Llama 3.1 70B on 8 x H100: the fastest point is batch 1 on tp 8 (12.7 ms, $86/Mtok whole request); waiting
    # until saturation costs ~$1.44: 98% less
    assert f["batch"] == 1 and f["layout"].startswith("tp=8")
    assert f["saturation_saves"] == pytest.approx(1 - s.saturation["cost_per_mtok_output_request_usd"] / f["cost"])
    assert f["saturation_saves"] > 0.95
    # an infeasible budget names the fastest point with its price
    reason = next(r for r in s.rows if not r["feasible"])["reason"]
    price = re.search(r"batch 1, \$([0-9.]+)/Mtok \(whole request\)", reason)
    assert price and float(price.group(1)) == pytest.approx(f["cost"], rel=5e-3)     # as printed: 4 figures
