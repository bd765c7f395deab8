"""/api/simulate_sweep (the Simulate tab's load sweep) and the page's one vocabulary in derivations, at the API level
(no browser; the page's controls are in tests/test_web_browser_sweep.py).

The sweep is the simulator run once per concurrency or arrival rate: each point must be exactly the simulation that
/api/simulate gives at that load (same replica, workload, seed and requests), so the web adds no physics."""
from __future__ import annotations

import pytest

from tokenmath.faces.web.simulation_sweep import MAX_SWEEP_POINTS, MAX_SWEEP_REQUESTS

from web_calls import call, refused


def test_each_point_is_the_simulation_at_that_concurrency(api):
    d = call(api, "simulate_sweep", concurrencies="1,16,64", requests=300)
    assert d["over"] == "concurrency" and d["requests_per_point"] == 300
    assert [p["concurrency"] for p in d["points"]] == [1, 16, 64]
    for p in d["points"]:
        s = call(api, "simulate", concurrency=p["concurrency"], requests=300)
        assert p["output_tokens_per_s_per_chip"] == s["output_tokens_per_s_per_chip"]
        for k in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
            assert p[k]["p50"] == s[k]["p50"] and p[k]["p99"] == s[k]["p99"], k
        assert p[k]["p99"] >= p[k]["p50"]
    # one user: a request at a time, so every token gap is the same decode step (p50 = p99) and the replica serves
    # 1 / (TPOT) tokens per second, give or take the prefill steps: 1 / 7.09 ms = 141 tok/s against 139
    one = d["points"][0]
    assert one["itl_s"]["p50"] == pytest.approx(one["itl_s"]["p99"])
    assert one["output_tokens_per_s_per_chip"] == pytest.approx(1 / one["tpot_s"]["mean"], rel=0.05)
    # more users share each weight read: throughput per chip grows (139 -> 1,655 -> 3,638 tok/s on one H100)
    tput = [p["output_tokens_per_s_per_chip"] for p in d["points"]]
    assert tput == sorted(tput) and tput[-1] > 10 * tput[0]


def test_per_chip_divides_by_the_chips_of_the_layout(api):
    d = call(api, "simulate_sweep", concurrencies="8", requests=200, chips=2, tp=2)
    p = d["points"][0]
    assert d["chips"] == 2 and d["tp"] == 2
    assert p["output_tokens_per_s_per_chip"] == pytest.approx(p["output_tokens_per_s"] / 2)


def test_open_loop_sweeps_the_arrival_rate(api):
    d = call(api, "simulate_sweep", arrival_rates="2,8", burstiness=1, requests=1000)
    assert d["over"] == "arrival_rate"
    assert [p["arrival_rate"] for p in d["points"]] == [2.0, 8.0]
    s = call(api, "simulate", arrival_rate=8, requests=1000)
    assert d["points"][1]["ttft_s"]["p99"] == s["ttft_s"]["p99"]
    # below saturation the replica serves what arrives: 8 req/s x 256 output tokens = 2,048 tok/s, less the run's
    # ramp-up and drain (1,975 over 1,000 requests)
    assert d["points"][1]["output_tokens_per_s"] == pytest.approx(8 * 256, rel=0.05)
    assert d["points"][1]["output_tokens_per_s"] < 8 * 256


def test_default_axis_is_the_by_concurrency_curves_and_the_requests_are_capped(api):
    d = call(api, "simulate_sweep", requests=5000)
    assert [p["concurrency"] for p in d["points"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    # 10 points share 20,000 requests: 20,000 // 10 = 2,000 each, and a note says so
    assert d["requests_per_point"] == MAX_SWEEP_REQUESTS // 10 == 2000
    assert any("2,000 requests per point (asked 5,000)" in n for n in d["notes"])


def test_bad_sweeps_are_refused_naming_the_field(api):
    refused(api, "simulate_sweep", "concurrencies", concurrencies="1,abc")
    refused(api, "simulate_sweep", "concurrencies", concurrencies="0")
    refused(api, "simulate_sweep", "arrival_rates", arrival_rates="-1")
    refused(api, "simulate_sweep", "arrival_rates", concurrencies="1", arrival_rates="2")
    many = ",".join(str(i) for i in range(1, MAX_SWEEP_POINTS + 2))
    assert "at most 16 points" in refused(api, "simulate_sweep", "concurrencies", concurrencies=many)


def test_what_if_reaches_every_point(api):
    base = call(api, "simulate_sweep", concurrencies="1", requests=100)["points"][0]
    fast = call(api, "simulate_sweep", concurrencies="1", requests=100, set="memory_bw_tbs=2x")
    assert fast["what_if"][0]["field"] == "memory_bw_tbs"
    # one user is bound by the weight read: twice the bandwidth, a shorter step (not quite half: fixed terms stay)
    assert fast["points"][0]["itl_s"]["p50"] < 0.75 * base["itl_s"]["p50"]


# ---- one vocabulary: derivations name the chip and the model as the page does -------------------------------------

@pytest.mark.parametrize("name, params", [("infer", {}), ("hyperbola", {}), ("pareto", {"chips": 1}),
                                          ("simulate", {"requests": 100}), ("context", {}), ("prices", {}),
                                          ("sensitivity", {}), ("train", {})])
def test_derivations_name_the_chip_and_model_by_their_catalog_names(api, name, params):
    d = call(api, name, **params)
    assert "NVIDIA H100 SXM5 80GB" in d["explain"], d["explain"][:200]
    assert "Llama 3.1 8B" in d["explain"]
    assert "h100-sxm" not in d["explain"] and "llama-3.1-8b" not in d["explain"]
    assert d.get("hardware", d.get("system")) == "h100-sxm" and d["model"] == "llama-3.1-8b"   # the JSON keeps ids


def test_an_id_inside_a_longer_name_or_a_file_name_is_left_alone():
    from tokenmath.faces.names import named
    d = named({"hardware": "h100-sxm", "model": "m", "explain": "on 8 x h100-sxm; h100-sxm-nvl; data/h100-sxm.toml; "
               "h100-sxm's hosts."}, lambda _id: None)
    assert d["explain"] == ("on 8 x NVIDIA H100 SXM5 80GB; h100-sxm-nvl; data/h100-sxm.toml; "
                            "NVIDIA H100 SXM5 80GB's hosts.")


def test_a_kept_point_is_reused_only_for_the_same_request(api):
    """Points are kept by their request: a sweep that shares a load with an earlier one gets the same figures, and a
    different seed or input length simulates again (a different workload: different figures)."""
    a = call(api, "simulate_sweep", concurrencies="1,16", requests=200, input_len="uniform:256-1024")
    b = call(api, "simulate_sweep", concurrencies="16,64", requests=200, input_len="uniform:256-1024")
    assert a["points"][1] == b["points"][0]
    c = call(api, "simulate_sweep", concurrencies="16", requests=200, input_len="uniform:256-1024", seed=7)
    assert c["points"][0]["ttft_s"] != a["points"][1]["ttft_s"]
    d = call(api, "simulate_sweep", concurrencies="16", requests=200, input_len=512)
    assert d["points"][0]["output_tokens_per_s"] != a["points"][1]["output_tokens_per_s"]


def test_a_sweep_of_agent_sessions_is_the_session_simulation_at_each_load(api):
    """turns and tool_gap_s reach every point of the sweep, as /api/simulate takes them (one answer)."""
    kw = dict(requests=200, turns=3, tool_gap_s=1.0)
    d = call(api, "simulate_sweep", concurrencies="4,16", **kw)
    for p in d["points"]:
        s = call(api, "simulate", concurrency=p["concurrency"], **kw)
        assert p["output_tokens_per_s"] == s["output_tokens_per_s"]
        assert p["ttft_s"]["p50"] == s["ttft_s"]["p50"]
    plain = call(api, "simulate_sweep", concurrencies="16", requests=200)
    assert plain["points"][0]["output_tokens_per_s"] != d["points"][1]["output_tokens_per_s"]
