"""engine/kernels.py's tile-boundary helpers by hand (padded_rows, fills_tiles, quantization_state,
compute_inflation), and the invariant they bound: the decode step's cost per token rises with batch only where a
GEMM's padded rows, split-K slices or waves step up, by at most its padded / unpadded compute ratio
(docs/tile_quantization.md; the checker is tests/tile_steps.py)."""
from dataclasses import replace

import numpy as np
import pytest

import tile_steps
from tokenmath.analyses.setup import setup
from tokenmath.engine import kernels as K
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.kernels import class_model, kernel_model

HOP = kernel_model("h100-sxm")      # 132 SMs; 64 rows up to 64 tokens, else 128-row tiles; 64/96/128/160 columns
GENERIC = class_model("generic")    # no compute-unit count: tile quantization only, no waves


def test_padded_rows_by_hand():
    # DeepGEMM's heuristic: 64-row tiles up to 64 rows, else 128-row tiles, the last one padded
    #   1 -> 64, 64 -> 64, 65 -> 128, 128 -> 128, 129 -> 2 x 128 = 256, 300 -> 3 x 128 = 384
    M = np.array([1, 64, 65, 128, 129, 300])
    assert list(K.padded_rows(HOP, M)) == [64, 64, 128, 128, 256, 384]
    assert list(K.fills_tiles(HOP, M)) == [False, True, False, True, False, False]
    # the matrix-vector path (Apple class: llama.cpp mul_mv up to 8 rows) computes only the rows it has
    apple = class_model("apple")
    assert apple.gemv_max_m == 8
    assert list(K.padded_rows(apple, [5, 8, 9])) == [5, 8, 64]
    assert list(K.fills_tiles(apple, [5, 9])) == [True, False]


def test_quantization_state_by_hand():
    # Llama 3.1 70B's qkv projection at tp 8: N = (64 + 2 x 8) x 128 / 8 = 1,280, K = 8,192 on 132 SMs;
    # split-K slices = clip(floor(132 / tiles), 1, 8,192 / 256 = 32), waves = ceil(tiles x slices / 132)
    #   128 rows: tiles 1 x ceil(1280 / tn): 20, 14, 10, 8 -> slices 6, 9, 13, 16 -> 1 wave each
    #   129 rows (256 padded): 40, 28, 20, 16 tiles -> slices 3, 4, 6, 8 -> 1 wave each
    qkv = ((1280, 8192),)
    assert list(K.quantization_state(HOP, 128, qkv)) == [128, 6, 1, 128, 9, 1, 128, 13, 1, 128, 16, 1]
    assert list(K.quantization_state(HOP, 129, qkv)) == [256, 3, 1, 256, 4, 1, 256, 6, 1, 256, 8, 1]
    # 65 to 128 rows share one state (one 128-row tile): the same compute time
    s = K.quantization_state(HOP, np.array([65.0, 100.0, 128.0]), qkv)
    assert s.shape == (3, 12) and np.all(s == s[0])
    # a grouped GEMM over 7.2 expected experts of N = 2,816, 2.22 rows each (64 padded): tiles = ceil(2816 / tn) x 7.2
    #   tn 64: 44 x 7.2 = 316.8 -> 1 slice, 3 waves; 96: 30 x 7.2 = 216 -> 2 waves; 128: 22 x 7.2 = 158.4 -> 2;
    #   160: 18 x 7.2 = 129.6 -> floor(132 / 129.6) = 1 slice, 1 wave
    g = K.quantization_state(HOP, 2.22, ((2816, 4096),), groups=7.2)
    assert list(g) == [64, 1, 3, 64, 1, 2, 64, 1, 2, 64, 1, 1]
    # the matrix-vector path has no tiles: all zeros (its time is linear in the rows)
    assert not np.any(K.quantization_state(class_model("apple"), 4, qkv))


def test_compute_inflation_by_hand():
    # generic class (no SM count, no depth factor): 100 rows pad to 128; N = 1,000 in the best-filling columns:
    # 64 -> 1,024, 96 -> 1,056, 128 -> 1,024, 160 -> 1,120, so 1,024; time per useful FLOP vs a whole-tile GEMM:
    #   (128 / 100) x (1,024 / 1,000) = 1.31072
    one = ((1000, 4096),)
    assert float(K.compute_inflation(GENERIC, "bf16", 100, one)) == pytest.approx(1.31072, rel=1e-12)
    # grouped (MoE): times 1 / grouped factor read at the padded rows: 128 -> 0.85 (held below 256 tokens);
    # 300 rows -> 384 padded -> 0.85 + (0.95 - 0.85) x log2(384 / 256) = 0.908496
    assert float(K.compute_inflation(GENERIC, "bf16", 100, one, grouped=True)) == pytest.approx(1.31072 / 0.85)
    gf = 0.85 + 0.10 * np.log2(1.5)
    assert float(K.compute_inflation(GENERIC, "bf16", 300, one, grouped=True)) == pytest.approx(
        (384 / 300) * (1024 / 1000) / gf, rel=1e-12)
    # whole tiles and full waves: exactly 1 (no depth factor in bf16); the fp8 depth factor at K = 4,096 is 0.947
    assert float(K.compute_inflation(replace(HOP, compute_units=0), "bf16", 256, ((1024, 4096),))) == 1.0
    assert float(K.compute_inflation(replace(HOP, compute_units=0), "fp8", 256, ((1024, 4096),))) == pytest.approx(
        1 / 0.947, rel=1e-12)


def test_checker_flags_a_rise_inside_a_tile_and_an_unbounded_one():
    # Mistral 7B on one A100 at context 2,048, batch 1..160: the per-token cost rises at tile steps only: at 129 and,
    # at a bandwidth residual of x0.9, at 65 where the matmuls leave the 64-row tile (at the shipped x0.8 they stay
    # memory-bound there)
    su = setup("mistral-7b", "a100-80gb")
    B = np.arange(1.0, 161.0)
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, B, 2048, 1, su.reserve)
    c = np.asarray(sv.decode_step_s) / B
    state, infl = tile_steps.quanta(su.model, su.hardware, su.layout, su.precision, su.efficiency, sv)
    assert list(B[tile_steps.rises(c) + 1]) == ([65, 129] if su.efficiency.kernels.bw_scale >= 0.9 else [129])
    assert list(tile_steps.violations(c, state, infl)) == []
    mid = c.copy()
    mid[99] = c[98] * 1.001   # batch 100: inside the 65..128 tile, a rise the padding cannot explain
    assert list(tile_steps.violations(mid, state, infl)) == [98]
    # batch 129: past the tile the cost per token may rise by the largest padded / unpadded compute ratio of its
    # GEMMs, 256 / 129 = 1.984 here (one wave before and after on 108 SMs); it rises 1.247 x (1.286 x at a bandwidth
    # residual of x0.9); 2.2 x would be a defect
    assert float(np.max(infl[:, 128] / infl[:, 127])) == pytest.approx(256 / 129, rel=1e-12)
    assert c[128] / c[127] == pytest.approx(1.286 if su.efficiency.kernels.bw_scale >= 0.9 else 1.247, abs=1e-3)
    big = c.copy()
    big[128] = c[127] * 2.2
    assert list(tile_steps.violations(big, state, infl)) == [127]
