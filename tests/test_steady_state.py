"""The closed-form steady state of a closed loop against the simulator (issue 17, part 2), and infer under load
(part 3)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import tokenmath
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.step_cost import chunk_geometry
from tokenmath.analyses.serving.speculative import speculation
from tokenmath.analyses.serving.simulation.workload import parse_lengths
from tokenmath.analyses.serving.steady_state import prompt_totals, steady_state
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

CHAT = ("uniform:512-1536", "uniform:128-384")
GRID = [  # dense and MoE, one chip and eight, three schedulers
    ("llama-3.1-8b", "h100-sxm", 1, "vllm"),
    ("llama-3.1-8b", "h100-sxm", 1, "sglang"),
    ("llama-3.1-70b", "h100-sxm", 8, "vllm"),
    ("llama-3.1-70b", "h100-sxm", 8, "tensorrt-llm"),
    ("mixtral-8x7b", "h100-sxm", 2, "vllm"),
    ("qwen3-30b-a3b", "h100-sxm", 1, "sglang"),
    ("deepseek-v3", "h200", 8, "vllm"),            # MLA, MoE, ep = 8 attention groups (the busiest group's tokens)
]


def sim_steady(model, hw, chips, engine, c, inp, out):
    r = tokenmath.simulate(model, hw, chips=chips, engine=engine, concurrency=c, requests=max(30 * c, 1200),
                           input_len=inp, output_len=out, seed=1)
    return r.steady


@pytest.mark.parametrize("model,hw,chips,engine", GRID)
@pytest.mark.parametrize("c", [1, 16, 128])
def test_closed_form_agrees_with_the_simulator(model, hw, chips, engine, c):
    """Chat-like lengths (users desynchronize): throughput, time per output token and TTFT within 5%."""
    p = steady_state(model, hw, chips=chips, engine=engine, concurrency=c, input_len=CHAT[0],
                     output_len=CHAT[1]).points[0]
    s = sim_steady(model, hw, chips, engine, c, *CHAT)
    assert s["output_tokens_per_s"] == pytest.approx(p.output_tokens_per_s, rel=0.05)
    assert s["tpot_mean_s"] == pytest.approx(p.tpot_s, rel=0.05)
    assert s["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=0.05)


@pytest.mark.parametrize("model,hw,chips,engine,spec", [
    ("llama-3.1-70b", "h100-sxm", 8, "vllm", ("llama-3.2-1b", 4, 0.7)),       # the draft pair
    ("llama-3.1-8b", "h100-sxm", 1, "sglang", ("llama-3.2-1b", 3, 0.8)),      # prefill-first, not mixed
    ("llama-3.1-70b", "h100-sxm", 8, "tensorrt-llm", ("llama-3.2-1b", 2, 0.5)),
    ("mixtral-8x7b", "h100-sxm", 2, "vllm", (None, None, None, 1)),           # MoE with an MTP-style head
])
@pytest.mark.parametrize("c", [1, 16, 128])
def test_closed_form_agrees_with_the_simulator_with_speculation(model, hw, chips, engine, spec, c):
    """Speculative decoding: each decode verifies k + 1 tokens and gains E a step, in both (within 5%)."""
    sp = speculation(*spec)
    p = steady_state(model, hw, chips=chips, engine=engine, concurrency=c, input_len=CHAT[0], output_len=CHAT[1],
                     speculation=sp).points[0]
    s = tokenmath.simulate(model, hw, chips=chips, engine=engine, concurrency=c, requests=max(30 * c, 1200),
                           input_len=CHAT[0], output_len=CHAT[1], seed=1, speculation=sp).steady
    assert s["output_tokens_per_s"] == pytest.approx(p.output_tokens_per_s, rel=0.05)
    assert s["tpot_mean_s"] == pytest.approx(p.tpot_s, rel=0.05)
    assert s["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=0.05)


@pytest.mark.parametrize("model,hw,chips,engine,c", [
    ("llama-3.1-8b", "h100-sxm", 1, "vllm", 64),       # prompts queue for the token budget (Kingman backlog)
    ("llama-3.1-70b", "h100-sxm", 8, "vllm", 256),     # every step full: budget-bound
    ("llama-3.1-8b", "h100-sxm", 1, "sglang", 256),    # KV-bound: retractions
])
def test_prefill_heavy_throughput_agrees(model, hw, chips, engine, c):
    """Long prompts, short outputs: throughput within 5% (TTFT there within ~15%: the backlog is approximate)."""
    inp, out = "uniform:3000-5000", "uniform:16-112"
    p = steady_state(model, hw, chips=chips, engine=engine, concurrency=c, input_len=inp, output_len=out).points[0]
    s = sim_steady(model, hw, chips, engine, c, inp, out)
    assert s["output_tokens_per_s"] == pytest.approx(p.output_tokens_per_s, rel=0.05)
    assert s["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=0.15)


def test_one_user_by_hand():
    """C = 1, 1,024 in / 256 out: TTFT is the prompt's prefill step; each decode step attends 1,024 + 128 keys on
    average (the step is linear in keys, so the mean step is the step at the mean); one request per
    TTFT + 255 steps."""
    su = setup("llama-3.1-8b", "h100-sxm", engine="vllm")
    cost = make_replica(su).cost(1280, 8192)
    prefill, _ = cost.direct(0, 0, 1024, 1, *chunk_geometry(0, 1024))
    step, _ = cost.direct(1, 1024 + 128)
    p = steady_state(concurrency=1, input_len=1024, output_len=256).points[0]
    assert p.running == 1 and p.queued == 0 and p.limit == "users"
    assert p.tpot_s == pytest.approx(step, rel=0.005)
    assert p.ttft_s == pytest.approx(prefill, rel=0.005)
    assert p.output_tokens_per_s == pytest.approx(256 / (prefill + 255 * step), rel=0.005)


def test_limits_and_queue():
    """Past vLLM's 1,024 running sequences (per scheduler) the rest of the users queue; the sequences that run
    are capped by memory too (KV), whichever is smaller."""
    pts = steady_state(concurrency=[512, 1024, 3000], input_len=256, output_len=64).points
    assert pts[0].limit == "users" and pts[2].limit == "max_running" and pts[2].running == 1024
    assert pts[2].queued == 3000 - 1024 and pts[2].ttft_s > pts[1].ttft_s
    kv = steady_state(concurrency=600, input_len=4000, output_len=2000).points[0]
    assert kv.limit == "kv" and kv.running < 600
    with pytest.raises(InputError):
        steady_state(concurrency=0)


def test_throughput_rises_and_interactivity_falls_with_concurrency():
    pts = steady_state("llama-3.1-70b", "h100-sxm", chips=8, concurrency=[1, 4, 16, 64, 256]).points
    tput = [p.output_tokens_per_s_per_chip for p in pts]
    user = [p.output_tokens_per_s_per_user for p in pts]
    assert tput == sorted(tput) and user == sorted(user, reverse=True)


def test_infer_under_load_reports_one_requests_ttft():
    """The issue's complaint: a static batch's TTFT is the whole batch's prefill; at concurrency 64 one request
    waits for its own prefill step among the others' decodes."""
    static = tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=64, engine="vllm")
    load = tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, concurrency=64, engine="vllm")
    assert load.load.mode == "closed" and load.ttft_s == load.load.ttft_s
    assert static.ttft_s > 5 * load.ttft_s
    assert load.decode_step_s == pytest.approx(load.load.tpot_s)
    d = load.to_dict()
    assert d["load"]["concurrency"] == 64 and d["batch"] == 64
    opn = tokenmath.infer("llama-3.1-8b", "h100-sxm", arrival_rate=4.0)
    assert opn.load.mode == "open" and opn.load.queue_grows is False
    assert opn.load.output_tokens_per_s == pytest.approx(4.0 * 256, rel=0.1)
    with pytest.raises(InputError):
        tokenmath.infer("llama-3.1-8b", "h100-sxm", concurrency=4, arrival_rate=1.0)


def test_cli_infer_and_simulate(tmp_path):
    run = CliRunner().invoke
    r = run(cli, ["infer", "--concurrency", "32", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["load"]["mode"] == "closed"
    r = run(cli, ["infer", "--arrival-rate", "2"])
    assert r.exit_code == 0 and "under load" in r.output
    r = run(cli, ["simulate", "--requests", "300", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["model"] == "llama-3.1-8b" and d["workload"]["concurrency"] == 64
    r = run(cli, ["simulate", "--requests", "200", "--explain"])
    assert r.exit_code == 0 and "What bounded the steps" in r.output
    png = tmp_path / "sim.png"
    r = run(cli, ["simulate", "--requests", "200", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    for bad in (["--input-len", "uniform:9-3"], ["--engine", "nope"], ["--arrival-rate", "-1"],
                ["--trace", str(tmp_path / "none.csv")], ["--concurrency", "2", "--arrival-rate", "1"]):
        r = run(cli, ["simulate", *bad, "--json"])
        assert r.exit_code == 2, (bad, r.output)
        assert "Traceback" not in r.output


def test_prompt_totals_are_whole_tokens_that_keep_the_mean():
    """64 equally likely totals: uniform 512-1,536 (1,025 values) at one prompt: the midpoints of 64 bins of 1,025 / 64
    = 16.016 values, 512 + (k + 1/2) x 16.016 - 1/2 rounded: 520, 536, ..., 1,528, mean 1,024; a fixed length: m x
    the length; four prompts: the normal law of the sum, mean 4 x 1,024; lognormal: its mean within rounding."""
    u = parse_lengths("uniform:512-1536", "input_len")
    x = prompt_totals(u, 1)
    assert len(x) == 64 and list(x[:2]) == [520, 536] and x[-1] == 1528 and x.mean() == 1024
    assert list(prompt_totals(parse_lengths(1024, "input_len"), 3)) == [3072]
    assert prompt_totals(u, 4).mean() == pytest.approx(4096, abs=1) and np.all(prompt_totals(u, 4) % 1 == 0)
    ln = parse_lengths("lognormal:1024,0.6", "input_len")
    assert prompt_totals(ln, 1).mean() == pytest.approx(ln.moments()[0], abs=0.5)


def test_ttft_at_one_user_is_the_mean_prefill_step_over_the_prompts():
    """One user (vLLM, Llama 3.1 8B, one H100, prompts uniform 512-1,536): each first token is its request's own
    prefill step of I tokens, so TTFT = the mean of step(I) over the 1,025 lengths. The default kernel model pads
    GEMM rows to tiles of 128, so that mean is ~6.7% above step(E[I]) = step(1,024) (8 whole tiles): the closed
    form averages over the prompts (prompt_totals), not at the mean prompt (Jensen's gap)."""
    su = setup("llama-3.1-8b", "h100-sxm", engine="vllm")
    cost = make_replica(su, None).cost(2000, 8192)
    exact = np.mean([cost.step_s(0, 0, i, 1, *chunk_geometry(0, i)) for i in range(512, 1537)])
    assert exact > 1.03 * cost.step_s(0, 0, 1024, 1, *chunk_geometry(0, 1024))
    p = steady_state("llama-3.1-8b", "h100-sxm", engine="vllm", concurrency=1, input_len=CHAT[0],
                     output_len=CHAT[1]).points[0]
    assert p.ttft_s == pytest.approx(exact, rel=0.005)


def test_the_admission_law_leaves_out_only_what_a_double_cannot_add():
    """_poisson keeps the m whose P(m) is within 1e-18 of the mode's: at 4,000 admissions a step m = 0..3,400 held
    P < 1e-30 and made the closed form quadratic in the admissions (an agents search with two-token turns took 72 s,
    past the web's 60 s deadline; issue 40). The law it keeps is the whole law to a double's precision."""
    import math

    import numpy as np

    from tokenmath.analyses.serving.steady_state import _poisson
    m, p = _poisson(4000.0, 1e9)
    assert m[0] > 3000 and m.size < 1300
    full = np.arange(int(m[-1]) + 1)
    logp = full * math.log(4000.0) - 4000.0 - np.array([math.lgamma(k + 1) for k in full])
    whole = np.exp(logp) / np.exp(logp).sum()
    assert abs(float(np.sum(whole[m] * m)) - float(np.sum(p * m))) < 1e-9 * 4000
    assert float(whole[: m[0]].sum()) < 1e-15
    m, p = _poisson(3.0, 1e9)          # small rates keep m = 0
    assert m[0] == 0 and abs(p.sum() - 1) < 1e-12
