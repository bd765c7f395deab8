"""The physics calibration set (issue 16): bounded residuals on the sourced kernel model, re-timed without re-running
the engine (engine/static_batch.retimed) exactly as the engine would run with them set; and the matrix-vector path
of chips without a separate matrix engine (Apple: llama.cpp's mul_mv below 9 tokens)."""
from dataclasses import replace

import numpy as np
import pytest

from tokenmath.analyses.serving.infer import infer
from tokenmath.engine import kernels as K
from tokenmath.engine.static_batch import retimed
from tokenmath.specs.efficiency import PEAK, kernel_default_for
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kernels import kernel_model
from tokenmath.specs.serving_engines import get_engine

CASES = [
    ("llama-3.1-70b", "h100-sxm", dict(chips=8, batch=64, input_len=2048, output_len=256), "vllm"),       # serial CPU
    ("llama-3.1-70b", "h100-sxm", dict(chips=8, batch=64, input_len=2048, output_len=256), "sglang"),     # overlapped
    ("deepseek-v3", "h200", dict(chips=8, ep=8, batch=256, input_len=1000, output_len=1000), "tensorrt-llm"),
    ("llama-2-7b", "a100-80gb", dict(chips=1, batch=1, input_len=512, output_len=128), None),             # no engine
    ("llama-3.1-70b", "h100-sxm", dict(chips=8, tp=4, pp=2, batch=64, input_len=2048, output_len=256), "vllm"),
    ("llama-3.1-8b", "h100-sxm", dict(chips=1, batch=8, input_len=20000, output_len=200), "vllm"),         # chunked
]


def _eff(hw, engine, cpu=0.0, per_seq=0.0, **km):
    base = kernel_default_for(hw)
    eng = None if engine is None else replace(get_engine(engine), step_cpu_s=cpu, step_cpu_per_seq_s=per_seq)
    return replace(base, kernels=replace(base.kernels, **km), engine=eng)


@pytest.mark.parametrize("model,hw,kw,engine", CASES)
def test_retimed_equals_a_full_engine_run(model, hw, kw, engine):
    r0 = infer(model, hw, efficiency=_eff(hw, engine), **kw)
    # at the neutral values: the run itself
    t, s = retimed(r0.batch_cost, r0.model.n_layers, r0.layout.pp)
    assert float(t) == pytest.approx(r0.ttft_s, rel=1e-12) and float(s) == pytest.approx(r0.decode_step_s, rel=1e-12)
    # at fitted-like values: the engine re-run with the residuals set
    cpu, per_seq = (1e-3, 2e-5) if engine else (0.0, 0.0)
    gap = 10e-6
    eff = replace(_eff(hw, engine, cpu, per_seq, compute_scale=0.7, bw_scale=0.8), layer_overhead_s=gap)
    r1 = infer(model, hw, efficiency=eff, **kw)
    t, s = retimed(r0.batch_cost, r0.model.n_layers, r0.layout.pp, 0.7, 0.8, gap, cpu, per_seq)
    assert float(t) == pytest.approx(r1.ttft_s, rel=1e-12) and float(s) == pytest.approx(r1.decode_step_s, rel=1e-12)
    # arrays broadcast: a grid of scales in one call, each point the scalar answer
    t, s = retimed(r0.batch_cost, r0.model.n_layers, r0.layout.pp, np.array([0.7, 1.0]), 0.8, gap, cpu, per_seq)
    assert s.shape == (2,) and s[0] == pytest.approx(r1.decode_step_s, rel=1e-12) and s[1] <= s[0]


def test_residual_scales_slow_the_step_and_never_beat_the_pure_roofline():
    kw = dict(chips=8, batch=64, input_len=2048, output_len=256)
    peak = infer("llama-3.1-70b", "h100-sxm", efficiency=PEAK, **kw)
    steps = [infer("llama-3.1-70b", "h100-sxm", efficiency=_eff("h100-sxm", "vllm", bw_scale=b), **kw).decode_step_s
             for b in (1.0, 0.8, 0.6, 0.4)]
    assert steps == sorted(steps) and steps[-1] > steps[0]         # less bandwidth is never faster
    assert min(steps) >= peak.decode_step_s


def test_apple_batch1_matmul_runs_as_matrix_vector_without_tile_padding():
    km = kernel_model(get_hardware("apple-m2-ultra"))
    assert km.gemv_max_m == 8                                       # llama.cpp's ne11_mm_min
    shapes = ((4096.0, 4096.0),)
    # M = 1..8: the useful rows only, so the large-GEMM fraction itself (generic class 0.47, no wave quantization)
    assert K.gemm_fraction(km, "bf16", 1, shapes) == pytest.approx(km.gemm["bf16"])
    assert K.gemm_fraction(km, "bf16", 8, shapes) == pytest.approx(km.gemm["bf16"])
    # M = 9: the matrix-matrix kernel pads 9 rows to a 64-row tile: 9/64 of the fraction
    assert K.gemm_fraction(km, "bf16", 9, shapes) == pytest.approx(km.gemm["bf16"] * 9 / 64)
    # NVIDIA keeps its tensor-core tiles (no matrix-vector path in its class)
    assert kernel_model(get_hardware("h100-sxm")).gemv_max_m == 0


def test_apple_batch1_decode_is_bandwidth_bound():
    """Llama 2 7B int4 on an M2 Ultra, batch 1: weights 3.47e9 B stream at 800 GB/s x 0.80 = 640 GB/s -> 5.4 ms
    per token (+ KV reads and kernels' fixed times); the compute side is 2 x 6.7e9 FLOPs / (27.2e12 x 0.47) = 1.0 ms,
    so no op is compute-bound. Before the matrix-vector path the 64-row padding made the compute side 64 x 1.0 ms,
    far slower than the 10.6 ms per token llama.cpp measures (94.3 tok/s, data/measurements.toml)."""
    r = infer("llama-2-7b", "apple-m2-ultra", efficiency=kernel_default_for("apple-m2-ultra"), batch=1,
              input_len=512, output_len=128, weight_dtype="int4", kv_dtype="bf16")
    assert r.decode.memory_bound_s > r.decode.compute_bound_s
    assert 4e-3 < r.decode_step_s < 10.6e-3
