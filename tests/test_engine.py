"""Engine physics: hand-computed small cases, published figures, invariants."""
import numpy as np
import pytest

import tokenmath as tm
from tokenmath.specs.efficiency import PEAK
from tokenmath.engine import collectives as coll
from tokenmath.engine.forward import decode_context, prefill_pairs
from tokenmath.specs.hardware import from_record, get_hardware
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params

TINY = Model(id="tiny", name="tiny", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=128)
# 1 TFLOP/s bf16, 1 GB/s memory: every op of a batch-1 decode is memory-bound
SLOW = from_record("slow", {"memory_gb": 1, "memory_bw_tbs": 0.001, "tflops": {"bf16": 1}})


def test_tiny_params_by_hand():
    # attention 4 x 64 x 64 = 16,384; FFN 3 x 64 x 128 = 24,576; 2 norms 128 -> 41,088 per layer, x 2 = 82,176;
    # embedding 6,400 + lm_head 6,400 + final norm 64
    assert count_params(TINY).total == 82_176 + 6_400 + 6_400 + 64 == 95_040


def test_tiny_decode_step_by_hand():
    r = tm.infer(TINY, SLOW, batch=1, input_len=9, output_len=1, efficiency=PEAK)
    # one decode step at context 10 (9 cached + itself), batch 1, bytes / 1e9 B/s:
    # embed         64 x (2 + 2)                                   =    256 B
    # attn_proj     16,384 x 2 + (2x64 + 4x16x2 + 2x4x16) x 2      = 33,536 B  x 2 layers
    # attention     KV 2x4x16x2 = 256 B/token x (9 read + 1 written) + q,o 2 x 64 x 2 = 2,816 B  x 2
    # norms         6 x 64 x 2                                     =    768 B  x 2
    # ffn           24,576 x 2 + (2x64 + 2x128) x 2                = 49,920 B  x 2
    # lm_head       6,400 x 2 + (64 + 100) x 2                     = 13,128 B
    total_bytes = 256 + 2 * (33_536 + 2_816 + 768 + 49_920) + 13_128
    assert total_bytes == 187_464
    assert r.decode_step_s == pytest.approx(total_bytes / 1e9, rel=1e-12)
    assert r.decode.bottleneck == "memory"
    # at 100% of peak and all ops memory-bound, the prediction is exactly the pure roofline
    assert r.decode_step_s == pytest.approx(r.decode_floor_s, rel=1e-12)
    assert r.weights_bytes == 95_040 * 2


def test_llama70b_worked_example_floor():
    # README's worked example: Llama 3.1 70B bf16 on 8 x H100 SXM at batch 1
    # weights 70.55e9 x 2 B = 141.1 GB; aggregate bandwidth 8 x 3.35 TB/s = 26.8 TB/s -> 5.27 ms per token floor
    r = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, input_len=1024, output_len=256)
    floor = 70_553_706_496 * 2 / (8 * 3.35e12)
    assert floor == pytest.approx(5.265e-3, rel=1e-3)
    assert r.decode_step_s > floor
    assert r.decode_floor_s == pytest.approx(floor, rel=0.05)  # KV and activations add a little
    # decode: memory-bound (the weights, each kernel's fixed time inside its op) above the fitted gap of
    # 80 layers x a few us and the 160 all-reduces (~1.56 ms); prefill of 1,024 tokens: compute
    assert r.decode.bottleneck == "memory" and r.prefill.bottleneck == "compute"
    assert r.decode.overhead_s < float(r.decode.memory_bound_s)


def test_kv_bytes_published_shapes():
    # Llama 3.1 70B: 2 x 8 KV heads x 128 x 80 layers x 2 B = 327,680 B/token
    assert kv_bytes_per_token(get_model("llama-3.1-70b"), 2) == 327_680
    # DeepSeek-V3 MLA: (512 + 64) x 61 x 2 B = 70,272 B/token
    assert kv_bytes_per_token(get_model("deepseek-v3"), 2) == 70_272
    # Mistral 7B: every layer slides over 4096 tokens, so KV stops growing there
    m = get_model("mistral-7b")
    assert kv_bytes_per_sequence(m, 8192, 2) == kv_bytes_per_sequence(m, 4096, 2) == 4096 * 2 * 8 * 128 * 32 * 2


def test_kv_linear_in_context_and_capped_by_window():
    m = get_model("gpt-oss-120b")
    c = np.array([100, 1000, 2000, 4000])
    kv = kv_bytes_per_sequence(m, c, 2)
    full_part = 18 * 2 * 8 * 64 * 2
    # beyond the 128-token window only the 18 full layers grow: slope = 18 layers x 2 x 8 x 64 x 2 B
    assert np.allclose(np.diff(kv[1:]) / np.diff(c[1:]), full_part)


def test_moe_distinct_experts():
    r1 = tm.infer("mixtral-8x7b", "h100-sxm", chips=2, batch=1, input_len=128, output_len=8, efficiency=PEAK)
    big = tm.infer("mixtral-8x7b", "h100-sxm", chips=2, batch=256, input_len=128, output_len=8, efficiency=PEAK)
    p = count_params(get_model("mixtral-8x7b"))
    # batch 1: 8 x (1 - (1 - 2/8)^1) = 2 experts read per layer; batch 256: all 8
    per_chip_expert = p.expert * 2 / 2  # bf16, split over tp=2
    assert float(r1.decode.ops["experts"].bytes) == pytest.approx(2 * per_chip_expert, rel=0.01)
    assert float(big.decode.ops["experts"].bytes) > 7.99 * per_chip_expert


def test_decode_context_means():
    # context grows 11..20 over 10 steps: mean 15.5; window 12 -> mean of min(c,12) = (11 + 12 x 9)/10 = 11.9
    full, local = decode_context(10, 10, 12)
    assert float(full) == 15.5 and float(local) == pytest.approx(11.9)
    f, s = prefill_pairs(10, 4)
    assert float(f) == 55 and float(s) == 1 + 2 + 3 + 4 * 7


def test_collective_by_hand():
    h = get_hardware("h100-sxm")
    # ring all-reduce of 1 MB over 8 GPUs: 2 x 7/8 x 1e6 / 450e9 + 6 us + 2 us x (sqrt 8 - 1)
    expect = 2 * 7 / 8 * 1e6 / 450e9 + 6e-6 + 2e-6 * (8 ** 0.5 - 1)
    assert float(coll.all_reduce(1e6, 8, h)) == pytest.approx(expect)
    assert float(coll.all_reduce(1e6, 1, h)) == 0.0
    # 16 GPUs span two HGX nodes: the cross-node phase moves 2 x 1/2 x (1 MB / 8) over 50 GB/s
    span = 2 * 7 / 8 * 1e6 / 450e9 + 2 * 0.5 * (1e6 / 8) / 50e9 + 6e-6 + 2e-6 * 3 + 40e-6
    assert float(coll.all_reduce(1e6, 16, h)) == pytest.approx(span)
    assert float(coll.all_reduce(1e6, 16, h)) > float(coll.all_reduce(1e6, 8, h))


# ---- invariants ---------------------------------------------------------------------------------------------
CASES = [("llama-3.1-8b", "h100-sxm", 1), ("llama-3.1-70b", "h200", 4), ("mixtral-8x7b", "a100-80gb", 2),
         ("deepseek-v3", "b200", 8), ("gpt-oss-120b", "h100-sxm", 1), ("gemma-3-27b", "mi300x", 1),
         ("qwen3-30b-a3b", "rtx-4090", 4)]


@pytest.mark.parametrize("mid,hid,chips", CASES)
def test_more_bandwidth_is_never_slower(mid, hid, chips):
    hw = get_hardware(hid)
    fast = hw.replace(memory_bw=hw.memory_bw * 2)
    a = tm.infer(mid, hw, chips=chips, batch=8, input_len=512, output_len=64)
    b = tm.infer(mid, fast, chips=chips, batch=8, input_len=512, output_len=64)
    if a.fits:
        assert b.decode_step_s <= a.decode_step_s and b.ttft_s <= a.ttft_s


@pytest.mark.parametrize("mid,hid,chips", CASES)
def test_cost_per_token_never_rises_with_batch_while_it_fits(mid, hid, chips):
    # every batch that splits evenly over the attention groups (dp x ep) up to the largest that fits, one call
    from tokenmath.analyses.setup import setup
    from tokenmath.engine.static_batch import serve_batch
    from tokenmath.specs.efficiency import calibrated
    import tile_steps
    su = setup(mid, hid, chips=chips)
    bmax = tm.infer(mid, hid, chips=chips, batch="max", input_len=512, output_len=64).batch
    unit = int(su.layout.dp) * int(su.layout.ep) * int(su.layout.pp)
    B = unit * np.arange(1.0, bmax // unit + 1)
    # the flat per-family fit: exactly non-increasing
    flat = serve_batch(su.model, su.hardware, su.layout, su.precision, calibrated(su.hardware), B, 512, 64,
                       su.reserve)
    assert np.all(flat.fits)
    c = np.asarray(flat.decode_step_s) / B
    assert np.all(np.diff(c) <= 1e-9 * c[:-1])
    # the default shape-aware kernel model: non-increasing except just past a GEMM's tile, split-K or wave step,
    # and there by at most its padded / unpadded compute ratio (tests/tile_steps.py, docs/tile_quantization.md)
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, B, 512, 64, su.reserve)
    assert np.all(sv.fits)
    c = np.asarray(sv.decode_step_s) / B
    state, inflation = tile_steps.quanta(su.model, su.hardware, su.layout, su.precision, su.efficiency, sv)
    assert list(B[tile_steps.violations(c, state, inflation) + 1]) == []
    assert c[-1] < c[0]


@pytest.mark.parametrize("mid,hid,chips", CASES)
def test_nothing_beats_the_pure_roofline(mid, hid, chips):
    for b in (1, 16, 128):
        r = tm.infer(mid, hid, chips=chips, batch=b, input_len=1024, output_len=128)
        if r.fits:
            assert r.decode_step_s >= r.decode_floor_s * (1 - 1e-12)
            pk = tm.infer(mid, hid, chips=chips, batch=b, input_len=1024, output_len=128, efficiency=PEAK)
            assert r.decode_step_s >= pk.decode_step_s >= pk.decode_floor_s * (1 - 1e-12)


def test_batch_max_fits_and_one_more_does_not():
    r = tm.infer("llama-3.1-8b", "rtx-4090", chips=1, batch="max", input_len=4096, output_len=1024)
    assert r.fits and r.batch > 1
    over = tm.infer("llama-3.1-8b", "rtx-4090", chips=1, batch=r.batch + 1, input_len=4096, output_len=1024)
    assert not over.fits and over.decode_step_s is None and over.advice


def test_too_big_model_says_what_it_would_take():
    r = tm.infer("llama-3.1-405b", "h100-sxm", chips=8, batch=1)
    d = r.to_dict()
    assert d["fits"] is False and d["decode_step_s"] is None and d["output_tokens_per_s"] is None
    assert any("fp8" in a or "int4" in a for a in d["advice"]) and any("x h100-sxm" in a for a in d["advice"])


def test_experts_over_ranks_that_do_not_divide_them():
    """256 experts over 72 EP ranks (DeepSeek-V3 on an NVL72): ceil(256/72) = 4 experts on the fullest rank, so each
    chip holds and reads 4/256 = 1/64 of the routed experts, not 1/72; 8 ranks hold 32 each (= 1/8, unchanged)."""
    from tokenmath.engine.memory import weights_per_chip
    from tokenmath.mapping.layout import Layout
    m = get_model("deepseek-v3")
    p = count_params(m)
    assert float(Layout(1, 1, 72, 1).expert_share(m)) == 4 / 256
    assert float(Layout(1, 1, 8, 1).expert_share(m)) == 1 / 8
    w72 = float(weights_per_chip(m, Layout(1, 1, 72, 1), 1.0, 1.0))
    assert w72 == pytest.approx(p.non_expert + p.experts_total / 64)
    r = tm.infer("deepseek-v3", "gb200-nvl72", chips=72, ep=72, batch=72 * 64, input_len=1024, output_len=128)
    assert r.fits and r.decode.ops["experts"].count == 58
