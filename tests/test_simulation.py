"""tokenmath.simulate: the loop, the schedulers, the workloads and the metrics (issue 17, parts 1 and 4)."""
import json

import numpy as np
import pytest

import tokenmath
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.step_cost import chunk_geometry
from tokenmath.analyses.serving.simulation.workload import make_workload, parse_lengths, read_trace
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError

simulate = tokenmath.simulate


def test_one_user_sees_its_prefill_step_then_its_decode_steps():
    """Concurrency 1: each request's TTFT is one prefill step of its 1,000-token prompt, and its 49 more tokens
    come from decode steps attending 1,001 ... 1,049 keys; the next request arrives when it completes."""
    r = simulate("llama-3.1-8b", "h100-sxm", concurrency=1, requests=3, input_len=1000, output_len=50)
    su = setup("llama-3.1-8b", "h100-sxm", engine="vllm")
    cost = make_replica(su).cost(1050, 3)
    ttft, _ = cost.direct(0, 0, 1000, 1, *chunk_geometry(0, 1000))
    decode = sum(cost.direct(1, 1000 + g)[0] for g in range(1, 50))
    assert r.ttft_s.mean == pytest.approx(ttft, rel=1e-9)
    assert r.e2e_s.mean == pytest.approx(ttft + decode, rel=1e-9)
    assert r.tpot_s.mean == pytest.approx(decode / 49, rel=1e-9)
    assert r.duration_s == pytest.approx(3 * (ttft + decode), rel=1e-9)
    assert r.output_tokens_per_s == pytest.approx(150 / r.duration_s)


def test_every_request_completes_and_tokens_are_conserved():
    r = simulate(concurrency=48, requests=800, input_len="uniform:100-3000", output_len="lognormal:200,0.8", seed=3)
    wl = make_workload(concurrency=48, requests=800, input_len="uniform:100-3000", output_len="lognormal:200,0.8",
                       seed=3)
    _, inp, out, _, _ = wl.materialize()
    assert r.requests == 800 and r.output_tokens == int(out.sum()) and r.input_tokens == int(inp.sum())
    assert r.output_tokens_per_s == pytest.approx(out.sum() / r.duration_s)
    assert 0 < r.ttft_s.p50 <= r.ttft_s.p90 <= r.ttft_s.p99
    assert r.e2e_s.p50 >= r.ttft_s.p50
    json.dumps(r.to_dict(), allow_nan=False)           # JSON never carries a NaN


def test_closed_loop_keeps_its_users_running():
    """Little: with room for all of them, the 32 users' requests are always running (no think time)."""
    r = simulate(concurrency=32, requests=1500, input_len="uniform:512-1536", output_len="uniform:128-384", seed=1)
    assert r.steady["running_mean"] == pytest.approx(32, rel=0.03)
    assert r.preemptions == 0


def test_token_budget_and_mixing_by_engine():
    common = dict(concurrency=200, requests=1500, input_len="uniform:2000-6000", output_len="uniform:50-150", seed=2)
    v = simulate(engine="vllm", **common)
    kinds = {s.kind: s for s in v.steps}
    assert "mixed" in kinds                             # vLLM mixes prompt chunks with decodes
    assert kinds["mixed"].prefill_tokens + kinds["mixed"].decode_seqs <= v.budget_tokens + 1e-9
    s = simulate(engine="sglang", **common)
    assert {k.kind for k in s.steps} <= {"decode", "prefill"}     # SGLang never shares a step
    assert all(k.prefill_tokens <= s.budget_tokens for k in s.steps)


def test_kv_exhaustion_preempts_vllm_but_never_tensorrt():
    """256 users of 2,000 + 2,000 tokens need ~770k KV tokens; one H100 holds ~450k. vLLM admits greedily and
    preempts by recompute; TensorRT-LLM reserves prompt + output at admission and never evicts."""
    common = dict(concurrency=256, requests=600, input_len=2000, output_len=2000)
    v = simulate(engine="vllm", **common)
    t = simulate(engine="tensorrt-llm", **common)
    assert v.preemptions > 0 and t.preemptions == 0
    assert v.kv_peak_fraction <= 1.0 and t.kv_peak_fraction <= 1.0
    assert t.steady["running_mean"] <= t.kv_capacity_tokens / 4000 + 1
    assert v.requests == t.requests == 600


def test_open_loop_below_and_above_capacity():
    low = simulate(arrival_rate=5.0, requests=1500, seed=4)
    assert not low.queue_grows
    assert low.output_tokens_per_s == pytest.approx(5.0 * 256, rel=0.08)      # it serves what arrives
    assert low.slo_attainment == 1.0
    high = simulate(arrival_rate=60.0, requests=1500, seed=4)
    assert high.queue_grows and high.queue_max > 100
    # the late arrivals wait seconds in the queue: they miss the 2 s TTFT target, and goodput falls below what
    # the replica completes (DistServe: only requests meeting both targets count)
    assert high.ttft_s.p99 > 2.0 and high.slo_attainment < 0.9
    assert high.goodput_rps == pytest.approx(high.slo_attainment * high.requests_per_s)


def test_arrivals_poisson_and_gamma_bursts():
    for k in (1.0, 0.25):
        wl = make_workload(arrival_rate=10.0, burstiness=k, requests=40_000, seed=5)
        arr = wl.materialize()[0]
        gaps = np.diff(np.concatenate(([0.0], arr)))
        assert gaps.mean() == pytest.approx(0.1, rel=0.03)
        assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(k), rel=0.05)   # CV of Gamma(k)


def test_lengths_specs_and_moments():
    assert parse_lengths(512, "input_len").moments() == (512, 512 ** 2)
    u = parse_lengths("uniform:1-3", "input_len")
    assert u.moments() == pytest.approx((2.0, 14 / 3))
    ln = parse_lengths("lognormal:1000,0.5", "input_len")
    x = ln.sample(np.random.default_rng(0), 200_000)
    assert np.median(x) == pytest.approx(1000, rel=0.01)
    assert x.mean() == pytest.approx(ln.moments()[0], rel=0.01)          # exp(mu + s^2/2) = 1133
    for bad in ("uniform:5-2", "lognormal:100", "gauss:3", "0", "1.5", "uniform:a-b"):
        with pytest.raises(InputError):
            parse_lengths(bad, "input_len")


def test_trace_files(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n0.5,100,10\n0.0,200,20\n1.0,300,5\n")
    t = read_trace(csv)
    assert list(t["arrival_s"]) == [0.0, 0.5, 1.0] and list(t["input_tokens"]) == [200, 100, 300]
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps({"arrival_s": i * 0.2, "input_tokens": 500, "output_tokens": 30})
                            for i in range(40)))
    r = simulate(trace=str(jl))
    assert r.requests == 40 and r.output_tokens == 1200
    fit = parse_lengths(f"fit:{csv}", "input_len")
    assert fit.kind == "lognormal" and fit.a == pytest.approx(np.exp(np.mean(np.log([100, 200, 300]))))
    for body in ("arrival_s,input_tokens\n0,5\n", "arrival_s,input_tokens,output_tokens\n-1,5,5\n",
                 "arrival_s,input_tokens,output_tokens\nnan,5,5\n", "arrival_s,input_tokens,output_tokens\n0,0,5\n",
                 "x\n"):
        bad = tmp_path / "bad.csv"
        bad.write_text(body)
        with pytest.raises(InputError):
            read_trace(bad)
    with pytest.raises(InputError):
        read_trace(tmp_path / "missing.csv")


def test_shared_prefix_is_read_not_recomputed(tmp_path):
    """Requests sharing a 3,900-token system prompt: after the first, each prefills only its last 100 tokens."""
    rows = ["arrival_s,input_tokens,output_tokens,prefix_id,prefix_tokens"]
    rows += [f"{i * 0.05},4000,20,sys,3900" for i in range(60)]
    shared = tmp_path / "shared.csv"
    shared.write_text("\n".join(rows))
    alone = tmp_path / "alone.csv"
    alone.write_text("\n".join(r.rsplit(",", 2)[0] + ",," if i else "arrival_s,input_tokens,output_tokens,prefix_id,"
                               "prefix_tokens" for i, r in enumerate(rows)))
    a, b = simulate(trace=str(shared)), simulate(trace=str(alone))
    assert a.ttft_s.p50 < 0.5 * b.ttft_s.p50


def test_seeded_and_bad_inputs():
    a = simulate(concurrency=8, requests=200, input_len="uniform:100-900", seed=11)
    b = simulate(concurrency=8, requests=200, input_len="uniform:100-900", seed=11)
    c = simulate(concurrency=8, requests=200, input_len="uniform:100-900", seed=12)
    assert a.to_dict() == b.to_dict() and a.duration_s != c.duration_s
    with pytest.raises(InputError):
        simulate(concurrency=4, arrival_rate=2.0)
    with pytest.raises(InputError):
        simulate(engine="none")
    with pytest.raises(InputError):
        simulate(chips=1, input_len=600_000)              # one request larger than one chip's KV cache
    with pytest.raises(InputError):
        simulate(ttft_ms=float("nan"))
    with pytest.raises(InputError):
        simulate(requests=0)


def test_many_requests_are_quick():
    """The loop costs per event, not per step: 20,000 requests (~80,000 decode steps) in well under 10 s."""
    import time
    t = time.process_time()
    r = simulate(requests=20_000, input_len="uniform:512-1536", output_len="uniform:128-384")
    assert time.process_time() - t < 10
    assert sum(s.steps for s in r.steps) > 50_000
