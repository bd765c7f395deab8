"""One question, one answer under continuous batching: for the same deployment and workload, infer --concurrency,
simulate, plan's continuously batched point, fleet's continuous sizing and price's continuous cost agree within 5%
(the serving-economics issue's consistency target). They share one steady state (analyses/serving/steady_state.py)
and one search (by_concurrency.cheapest_continuous); the simulator is checked against the steady state."""
from __future__ import annotations

import pytest

from tokenmath.analyses.ask import ask, split

pytestmark = pytest.mark.slow        # a plan, a fleet, a price and a 1,500-request simulation: ~15 s


@pytest.fixture(scope="module")
def llama70b():
    dep, wl, _ = split("llama-3.1-70b", "hgx-h100", chips=8, min_tokens_per_s_per_user=20.0)
    return ask("plan", dep, wl).to_dict()["best_by_concurrency"]


def test_infer_at_plans_continuous_point_gives_its_throughput(llama70b):
    p = llama70b
    dep, wl, _ = split("llama-3.1-70b", "h100-sxm", chips=p["chips"], tp=p["tp"], pp=p["pp"], ep=p["ep"],
                       dp=p["dp"], concurrency=p["concurrency"])
    load = ask("infer", dep, wl).load
    assert load.output_tokens_per_s == pytest.approx(p["output_tokens_per_s"], rel=0.05)


def test_simulate_agrees_with_infer_under_the_same_load(llama70b):
    p = llama70b
    kw = dict(chips=p["chips"], tp=p["tp"], pp=p["pp"], ep=p["ep"], dp=p["dp"], concurrency=p["concurrency"])
    dep, wl, _ = split("llama-3.1-70b", "h100-sxm", **kw)
    closed = ask("infer", dep, wl).load.output_tokens_per_s
    sim = ask("simulate", dep, wl, requests=1500).output_tokens_per_s
    assert sim == pytest.approx(closed, rel=0.05)


def test_fleet_and_price_cost_the_same_continuous_point_as_plan_within_5_percent(llama70b):
    dep, wl, _ = split("llama-3.1-70b", "h100-sxm", min_tokens_per_s_per_user=20.0)
    f = ask("fleet", dep, wl, demand=1e5, max_chips=8).to_dict()["continuously_batched"]
    p = ask("price", dep, wl, max_chips=8).to_dict()["continuously_batched"]
    assert f["cost_per_mtok_output_request_usd"] == pytest.approx(p["cost_per_mtok_output_request_usd"], rel=1e-9)
    # plan also searches pipeline-parallel layouts (fleet and price do not): it may only be cheaper
    plan_cost = llama70b["cost_per_mtok_output_request_usd"]
    assert plan_cost <= f["cost_per_mtok_output_request_usd"] * (1 + 1e-9)
    assert f["cost_per_mtok_output_request_usd"] == pytest.approx(plan_cost, rel=0.05)
