"""The simulator's step times: the fast path against the engine called at each step's own shape, and the physics of
a step by hand (issue 17, part 1: step_cost.py)."""
from dataclasses import replace

import numpy as np
import pytest

from tokenmath.analyses.serving.simulation.step_cost import StepCost, chunk_geometry
from tokenmath.analyses.serving.simulation.step_geometry import busiest
from tokenmath.analyses.setup import setup
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.specs.serving_engines import get_engine

# an engine whose per-step costs show: CPU time per step and no graphs (every kernel launched from the CPU)
SLOW = replace(get_engine("vllm"), id="slow", graphs="none", step_cpu_s=0.002)

CASES = [  # model, hardware, chips, extra layout, engine, efficiency
    ("llama-3.1-8b", "h100-sxm", 1, {}, "vllm", None),
    ("llama-3.1-70b", "h100-sxm", 8, {}, "sglang", DEFAULT),          # the shape-aware kernel model
    ("llama-3.1-70b", "h100-sxm", 8, {"pp": 2}, SLOW, None),           # pipeline stages, eager steps + CPU
    ("mixtral-8x7b", "h100-sxm", 2, {}, "vllm", DEFAULT),             # MoE, experts touched by the step's tokens
    ("deepseek-v3", "h200", 8, {}, "vllm", None),                      # MLA, ep = 8 attention groups
    ("gpt-oss-120b", "h100-sxm", 2, {}, "tensorrt-llm", DEFAULT),     # sliding-window layers
    ("llama-3.1-8b", "h100-sxm", 2, {"dp": 2}, "vllm", None),          # two replicas' schedulers
]


def random_step(rng, window, budget=8192):
    n_d = int(rng.integers(0, 700))
    chunks = int(rng.integers(1, 5)) if rng.random() < 0.6 or n_d == 0 else 0
    keys = n_d * float(rng.integers(2, 9000))
    agg = np.zeros(6)
    room = max(budget - n_d, chunks)
    for _ in range(chunks):
        n = int(rng.integers(1, max(2, room // chunks)))
        g = chunk_geometry(float(rng.integers(0, 8000)), n, window)
        agg += (n, 1, *g)
    return n_d, keys, [float(x) for x in agg]


@pytest.mark.parametrize("model,hw,chips,lay,engine,eff", CASES)
def test_fast_path_matches_the_engine_within_one_percent(model, hw, chips, lay, engine, eff):
    su = setup(model, hw, chips=chips, engine=engine, efficiency=eff, **lay)
    cost = StepCost(su, 10_000)
    rng = np.random.default_rng(7)
    errs = []
    for _ in range(120):
        n_d, keys, agg = random_step(rng, cost.window)
        fast = cost.step_s(n_d, keys, *agg)
        direct, _ = cost.direct(n_d, keys, *agg)
        errs.append(abs(fast / direct - 1))
    assert max(errs) < 0.01, max(errs)
    # the simulator's own entry points, with whole tokens (n_d, t_p are ints there)
    n_d, keys, agg = random_step(rng, cost.window)
    agg[0] = int(agg[0])
    first, last = cost.decode_ends(max(n_d, 1), keys + 1, keys + 1 + 40 * max(n_d, 1))
    assert first == pytest.approx(cost.step_s(max(n_d, 1), keys + 1), rel=1e-12)
    assert last == pytest.approx(cost.step_s(max(n_d, 1), keys + 1 + 40 * max(n_d, 1)), rel=1e-12)


def test_decode_step_is_the_static_batch_decode_step():
    """n sequences decoding at the mean context of a static batch: the same step as engine/static_batch.py."""
    su = setup("llama-3.1-8b", "h100-sxm", engine="none")
    cost = StepCost(su, 4096)
    for n, inp, out in ((1, 1024, 256), (64, 2000, 500), (300, 128, 64)):
        sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, n, inp, out, su.reserve)
        keys = n * (inp + (out + 1) / 2)          # engine/forward.decode_context: mean keys attended per step
        assert cost.decode_s(n, keys) == pytest.approx(float(sv.decode_step_s), rel=1e-12)


def test_each_cached_token_read_costs_its_kv_bytes_over_bandwidth():
    """Llama 3.1 8B, bf16 KV: 32 layers x 8 KV heads x 128 x (K and V) x 2 bytes = 131,072 B per token; at the pure
    roofline a decode step reading 64,000 more cached tokens takes 64,000 x 131,072 B / 3.35 TB/s = 2.504 ms more."""
    su = setup("llama-3.1-8b", "h100-sxm", engine="none", efficiency=PEAK)
    assert su.hardware.memory_bw == 3.35e12
    cost = StepCost(su, 4096)
    extra = cost.decode_s(64, 64 * 3000 + 64_000) - cost.decode_s(64, 64 * 3000)
    assert extra == pytest.approx(64_000 * 131_072 / 3.35e12, rel=1e-9)


def test_a_decode_token_in_a_compute_bound_step_costs_its_flops():
    """Mixing 64 decodes (1 key each) into a 4,096-token prefill step, at the pure roofline on an H100:
    - the layers' GEMMs are compute-bound: 64 x 2 x 32 x (41,943,040 + 176,160,768) FLOPs / 989 TFLOP/s = 0.9033 ms;
    - lm_head stays memory-bound (its 1.05 GB of weights are read for 1 row or 65): + 0;
    - norms and residual adds, memory-bound: 64 x 6 x 4,096 x 2 B x 32 layers / 3.35 TB/s = 0.0300 ms;
    - decode attention: KV written 64 x 4,096 B + q/o 64 x 4,096 x 2 x 2 B, per layer x 32 / 3.35 TB/s = 0.0125 ms;
    total 0.9458 ms."""
    su = setup("llama-3.1-8b", "h100-sxm", engine="none", efficiency=PEAK)
    assert su.hardware.peak_flops("bf16") == 989e12
    cost = StepCost(su, 8192)
    pre = chunk_geometry(0, 4096)
    alone = cost.step_s(0, 0, 4096, 1, *pre)
    mixed = cost.step_s(64, 64, 4096, 1, *pre)
    gemm = 64 * 2 * 32 * (41_943_040 + 176_160_768) / 989e12
    norms = 64 * 6 * 4096 * 2 * 32 / 3.35e12
    attn = (64 * 4096 + 64 * 4096 * 4) * 32 / 3.35e12
    assert mixed - alone == pytest.approx(gemm + norms + attn, rel=0.01)
    # a decode-only step of those 64 is memory-bound: it reads every weight, far more than 64 tokens' FLOPs take
    assert cost.decode_s(64, 64) > 5 * gemm


def test_engine_costs_add_to_the_device_step():
    """An eager engine with 2 ms of CPU per step and no overlap: every step is the device's time (at least the
    kernel launches) + 2 ms, so a step never gets faster than the engine-free one."""
    base = StepCost(setup("llama-3.1-8b", "h100-sxm", engine="none"), 4096)
    slow = StepCost(setup("llama-3.1-8b", "h100-sxm", engine=SLOW), 4096)
    for n in (1, 16, 256):
        assert slow.decode_s(n, n * 1500) >= base.decode_s(n, n * 1500) + 0.002 - 1e-12


def test_chunk_geometry_by_hand():
    # 3 tokens after 2 cached: pairs 3 x 2 + (1 + 2 + 3) = 12; a window of 3: positions 3, 4, 5 see 3 keys each = 9
    assert chunk_geometry(2, 3) == (12.0, 12.0, 2, 2)
    assert chunk_geometry(2, 3, 3) == (12.0, 9.0, 2, 2)


def test_the_busiest_group_holds_whole_tokens():
    """DeepSeek-V3 on 8 H200 (ep = 8: 8 attention groups; the default kernel model pads GEMM rows to tiles of 128).
    4,097 decodes put ceil(4,097 / 8) = 513 whole sequences on the busiest group, and the step waits on it: it is
    the 513-row step, one tile more than 4,096 decodes (512 rows, 4 whole tiles), not 1/8 of the way from 512 rows
    to 513 (what a mean share of 512.125 rows interpolated would give). The fast path and the engine calls price
    the same whole rows (step_geometry.busiest), so they agree at the tile edge too."""
    assert busiest(4097, 8) == 513 and busiest(4096, 8) == 512 and busiest(4104, 8) == 513
    assert busiest(37.4, 1) == 37.4            # one pass keeps a mean (the closed form's) as given
    cost = StepCost(setup("deepseek-v3", "h200", chips=8, engine="vllm"), 10_000)
    assert cost.groups == 8
    t = {n: cost.step_s(n, n * 1000.0) for n in (4096, 4097, 4104)}
    for n, s in t.items():
        assert s == pytest.approx(cost.direct(n, n * 1000.0)[0], rel=1e-9)
    # one more decode costs (nearly) all of the 8 more that fill the 513th row of every group: the tile jump
    assert t[4097] - t[4096] > 0.9 * (t[4104] - t[4096]) > 0
