"""Attention data-parallel under continuous batching: a prompt is prefilled whole on one attention group, and the EP
all-to-all makes every group wait for the busiest (TensorRT-LLM tech blog 10, "ADP Balance Strategy": DeepSeek-V3 on
8 x GB200, DEP8, average balance ratio 54% with round-robin scheduling). Disaggregated deployments in the held-out
interactivity envelope (analyses/calibration/interactivity.py)."""
import math

import pytest

import tokenmath as tm
from tokenmath.analyses.calibration.interactivity import disaggregated_curves
from tokenmath.analyses.calibration.predict import attention_dp_stretch
from tokenmath.analyses.serving.plan_disaggregated import output_per_chip
from tokenmath.analyses.serving.simulation.step_cost import StepCost
from tokenmath.analyses.serving.simulation.step_geometry import busiest_prefill_factor, chunk_geometry, prefill_holder
from tokenmath.analyses.setup import setup


def test_the_busiest_group_holds_whole_prompts():
    # 3 prompts over 8 groups: one group holds 1 (ceil(3 / 8)); 9 prompts: 2; 16 prompts over 2 replicas of 8
    # groups: 8 each, 1 per group; 0.4 of a prompt (a chunk): all of it on one group; no coupling: the even share
    assert prefill_holder(3, 1, 8) == 1
    assert prefill_holder(9, 1, 8) == 2
    assert prefill_holder(16, 2, 8) == 1
    assert prefill_holder(0.4, 1, 8) == pytest.approx(0.4)
    assert prefill_holder(6, 3, 1) == 2
    assert prefill_holder(0, 1, 8) == 0


def test_busiest_prefill_factor_by_hand():
    # M ~ Poisson(1) prompts per step over 2 groups: E[ceil(M / 2)] = P1 + P2 + 2 (P3 + P4) + 3 (P5 + P6) + 4 (P7 + P8)
    # = 0.367879 + 0.183940 + 2 (0.061313 + 0.015328) + 3 (0.003066 + 0.000511) + 4 (0.000073 + 0.000009) = 0.71616;
    # over the even share E[M] / 2 = 0.5: 1.4323
    p = [math.exp(-1) / math.factorial(k) for k in range(20)]
    assert sum(math.ceil(k / 2) * p[k] for k in range(20)) == pytest.approx(0.71616, abs=1e-5)
    assert busiest_prefill_factor(1.0, 2) == pytest.approx(1.4323, abs=1e-4)
    # rare prompts land alone: the factor tends to the group count; many prompts per step: to 1; one group: 1
    assert busiest_prefill_factor(0.01, 8) == pytest.approx(8 * (1 - math.exp(-0.01)) / 0.01, rel=1e-6)
    assert busiest_prefill_factor(400.0, 8) == pytest.approx(1.0, abs=0.03)
    assert busiest_prefill_factor(3.0, 1) == 1.0


@pytest.fixture(scope="module")
def dsv3():
    su = setup("deepseek-v3", "h200", chips=8, ep=8, engine="vllm")
    return StepCost(su, 20_000)


def _prompts(n, tokens=1024):
    pairs, pairs_sl, read, read_sl = chunk_geometry(0.0, tokens)
    return [n * tokens, n, n * pairs, n * pairs_sl, n * read, n * read_sl]


def test_one_prompt_on_eight_groups_waits_on_its_group(dsv3):
    assert dsv3.coupled == 8 and dsv3.replicas == 1
    one = dsv3.step_s(64, 64 * 2048.0, *_prompts(1))
    eight = dsv3.step_s(64, 64 * 2048.0, *_prompts(8))
    decode = dsv3.step_s(64, 64 * 2048.0)
    even = StepCost.__new__(StepCost)
    even.__dict__.update(dsv3.__dict__, coupled=1, replicas=8)
    # the old even split: the prompt's 1,024 tokens spread as 128 per group
    spread = even.step_s(64, 64 * 2048.0, *_prompts(1))
    assert decode < spread < one
    # eight equal prompts: one per group, exactly the even split
    assert eight == pytest.approx(even.step_s(64, 64 * 2048.0, *_prompts(8)), rel=1e-12)
    # the fast path and the engine called at the step's own shape agree (the experts at the even share)
    assert one == pytest.approx(dsv3.direct(64, 64 * 2048.0, *_prompts(1))[0], rel=0.01)


def test_dense_tensor_parallel_steps_are_unchanged():
    su = setup("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")
    cost = StepCost(su, 10_000)
    assert cost.coupled == 1


def test_static_cycle_stretch():
    # a tensor-parallel layout has no attention data-parallel: 1
    r = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=256, input_len=1024, output_len=1024)
    assert attention_dp_stretch(r) == 1.0
    # DEP8 at 64 sequences, 1,024 out: 1/16 prompt per step, nearly always alone: the data-parallel share of the
    # prefill stretches by close to 8 x; the experts' share does not, so the whole prefill by less
    r = tm.infer("deepseek-v3", "h200", chips=8, ep=8, batch=64, input_len=1024, output_len=1024)
    f = busiest_prefill_factor(64 / 1024, 8)
    assert 7.5 < f < 8.0
    s = attention_dp_stretch(r)
    assert 1.0 < s < f


def test_disaggregated_per_chip_by_hand():
    # decode chips at 100 output tok/s each; 1,000-token prompts per 100 output tokens at 1,000 prompt tok/s per chip:
    # 10 prompt tokens per output token -> 0.01 chip-s of prefill per output token beside 0.01 of decode: 50 tok/s
    assert float(output_per_chip(100.0, 1000.0, 1000, 100)) == pytest.approx(50.0)


def test_disaggregated_curves_pay_for_their_prefill_chips():
    curves = disaggregated_curves("deepseek-v3", "b200", "fp8", None, 1024, 1024, "vllm", "calibrated", 30.0)
    assert curves and all(c.layout.startswith("disaggregated") for c in curves)
    for c in curves:
        # more users per decode instance: slower per user, more output per chip
        assert all(a >= b for a, b in zip(c.per_user, c.per_user[1:]))
        assert all(a <= b for a, b in zip(c.per_chip, c.per_chip[1:]))


def test_infer_under_load_says_when_prompts_wait_on_one_group():
    dep = tm.infer("deepseek-v3", "h200", chips=8, ep=8, concurrency=64, output_len=256)
    assert any("attention data-parallel over ep = 8" in n for n in dep.notes)
    static = tm.infer("deepseek-v3", "h200", chips=8, ep=8, batch=64, output_len=256)
    tp = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, concurrency=64)
    assert not any("attention data-parallel" in n for n in static.notes + tp.notes)
