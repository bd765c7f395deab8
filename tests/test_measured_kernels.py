"""A machine's own measured kernel model (issue 16, item 4): the [kernels] section `tokenmath measure` writes
(specs.kernels_measured.measured_model), read by the engine in place of tile and wave quantization
(engine/kernels.measured_share), and used by default by infer --hardware FILE (specs.efficiency.default_for).

Hand-computed values from a synthetic curve, the invariants (never faster than PEAK, vectorized == scalar, a file
without the section unchanged), and named errors for bad section values."""
import math

import numpy as np
import pytest

from tokenmath.analyses.serving.infer import infer
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine import kernels as K
from tokenmath.engine.static_batch import serve_batch
from tokenmath.local.hardware_file import to_toml
from tokenmath.local.model_configs import model_from_config
from tokenmath.specs.efficiency import PEAK, calibrated, default_for, physics_calibrated
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kernels import by_chip, class_model, kernel_model, resolve

# 20 GB/s and 100 GFLOP/s (fp32): the measured triad and square matmul, written into the file as they are
CURVE = {"how": "measured", "date": "2026-01-01", "src": "synthetic", "stream_gbs": 20.0, "gemm_peak_tflops": 0.1,
         "gemm_dtype": "fp32", "per_call_s": 2e-6, "rows": [1, 4], "weight_elements": [2 ** 20, 2 ** 22],
         "efficiency": [[0.5, 0.8], [0.25, 0.4]]}
REC = {"name": "synthetic CPU", "kind": "cpu", "memory_gb": 16, "memory_bw_tbs": 0.02, "tflops": {"fp32": 0.1},
       "scaleup_domain": 1, "kernels": CURVE}
# 1 layer, d = 1024, 8 heads of 128 (MHA), gated FFN 2816, vocab 32000, untied
CFG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 1024, "intermediate_size": 2816,
       "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
       "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "float32"}


def _file(tmp_path, rec=None, name="hw.toml"):
    p = tmp_path / name
    p.write_text(to_toml(rec or REC))
    return str(p)


def _share(u_and_w):
    """FLOP-weighted harmonic mean: sum(w) / sum(w / u)."""
    return sum(w for _, w in u_and_w) / sum(w / u for u, w in u_and_w)


# ---- the curve, by hand -----------------------------------------------------------------------------------------
def test_file_section_becomes_the_machines_kernel_model(tmp_path):
    hw = get_hardware(_file(tmp_path))
    km = hw.kernels
    assert km is not None and kernel_model(hw) is km and resolve(by_chip(), hw) is km
    assert km.stream_bw == 1.0                           # 20 GB/s triad / memory_bw 0.02 TB/s
    assert km.gemm_fraction("fp32") == 1.0               # 0.1 TFLOP/s square matmul / tflops.fp32 0.1
    assert km.gemm_fixed_s == km.small_kernel_fixed_s == km.attn_decode_fixed_s == 2e-6
    assert km.curve_rows == (1, 4) and km.curve_efficiency == ((0.5, 0.8), (0.25, 0.4))
    assert "measured" in km.source and km.provenance["stream_bw"].startswith("measured")
    # memory_bw_tbs = 0.04 (e.g. the datasheet's) with the same 20 GB/s triad: streams at half of it
    half = get_hardware(_file(tmp_path, {**REC, "memory_bw_tbs": 0.04}, "half.toml")).kernels
    assert half.stream_bw == pytest.approx(0.5) and half.attn_decode_bw == pytest.approx(0.5)


def test_measured_share_interpolates_in_log_rows_and_log_shape(tmp_path):
    km = get_hardware(_file(tmp_path)).kernels
    one = ((1024, 1024),)                                   # 2^20 elements: the first column
    assert K.measured_share(km, 1, one) == pytest.approx(0.5)
    assert K.measured_share(km, 2, one) == pytest.approx(0.375)    # log2 2 = 1 of [0, 2]: (0.5 + 0.25) / 2
    assert K.measured_share(km, 4, one) == pytest.approx(0.25)
    assert K.measured_share(km, 64, one) == pytest.approx(0.25)    # held beyond the last row
    assert K.measured_share(km, 1, ((2048, 1024),)) == pytest.approx(0.65)   # 2^21: halfway, (0.5 + 0.8) / 2
    assert K.measured_share(km, 1, ((8192, 8192),)) == pytest.approx(0.8)    # held beyond the largest shape
    assert K.measured_share(km, 1, ((64, 64),)) == pytest.approx(0.5)        # and below the smallest
    # two shapes: FLOP-weighted harmonic mean, 2^20 at 0.5 and 2^22 at 0.8: 5 / (2 + 5) = 0.714
    assert K.measured_share(km, 1, ((1024, 1024), (4096, 1024))) == pytest.approx(5 / 7)
    # vectorized: M and the shapes broadcast (a sweep over batch and tp)
    M = np.array([1, 2, 4])[:, None]
    tp = np.array([1, 2])[None, :]
    vec = K.measured_share(km, M, ((4096 / tp, 1024),))
    assert vec.shape == (3, 2)
    assert vec[1, 1] == pytest.approx(float(K.measured_share(km, 2, ((2048, 1024),))))
    assert class_model("generic").curve_rows == () and K.measured_share(class_model("generic"), 4, one) == 1.0


def test_gemm_time_hand_computed(tmp_path):
    km = get_hardware(_file(tmp_path)).kernels
    # 4 rows x 1024 x 1024, fp32 weights and activations: e(4, 2^20) = 0.25
    flops = 2 * 4 * 1024 * 1024                                  # 8,388,608
    nbytes = 4 * 1024 * 1024 + 4 * (4 * 1024 + 4 * 1024)         # 4,227,072
    t = 2e-6 + max(flops / (1e11 * 0.25), nbytes / (20e9 * 0.25))   # 2 us + max(0.336 ms, 0.845 ms)
    assert t == pytest.approx(8.474e-4, rel=1e-3)
    got = K.gemm_time(km, 4, 1024, 1024, 1e11, 20e9, "fp32", w_bytes=4.0, a_bytes=4.0)
    assert float(got) == pytest.approx(t, rel=1e-12)
    # compute-bound: 4096 rows would take FLOPs / (peak x e) (e held at 0.25)
    big = K.gemm_time(km, 4096, 1024, 1024, 1e11, 20e9, "fp32", w_bytes=4.0, a_bytes=4.0)
    assert float(big) == pytest.approx(2e-6 + 2 * 4096 * 1024 * 1024 / (1e11 * 0.25), rel=1e-12)


def test_decode_step_by_hand_with_the_measured_curve(tmp_path):
    """infer --hardware FILE, no efficiency given: the file's kernel model. At batch 2 (T = 2 tokens): the GEMM ops
    by hand from the curve; every other op at the measured triad with its per-call times; the step their sum."""
    hw_path = _file(tmp_path)
    m = model_from_config(CFG, "one-layer")
    r = infer(m, hw_path, batch=2, input_len=16, output_len=1, weight_dtype="fp32", kv_dtype="fp32")
    ops, t0, P, BW = r.decode.ops, 2e-6, 1e11, 20e9
    # e at M = 2: halfway in log2 rows, per column: 2^20 -> 0.375, 2^22 -> 0.6; a shape of x elements takes
    # w = (log2 x - 20) / 2 of the second column
    def e2(n, k):
        w = min(max((math.log2(n * k) - 20) / 2, 0.0), 1.0)
        return 0.375 * (1 - w) + 0.6 * w
    # attn_proj: qkv (3072 x 1024, 3 x 2^20: w = 0.792, e = 0.553) and o (1024 x 1024, e = 0.375)
    e_attn = _share([(e2(3072, 1024), 3072 * 1024), (e2(1024, 1024), 1024 * 1024)])
    assert e_attn == pytest.approx(0.4945, rel=1e-3)
    W = 4 * 1024 * 1024                                          # q, k, v, o: 4 d^2 weights
    f, b = 2 * W * 2, 4 * W + 2 * (2 * 1024 + 4 * 1024) * 2     # fp32 weights; activations bf16 in and out
    t_attn = 2 * t0 + max(f / (P * e_attn), b / (BW * e_attn))   # 4 us + max(0.34 ms, 1.70 ms)
    assert float(ops["attn_proj"].time_s) == pytest.approx(t_attn, rel=1e-9)
    # ffn: gate_up (5632 x 1024) and down (1024 x 2816)
    e_ffn = _share([(e2(5632, 1024), 5632 * 1024), (e2(1024, 2816), 1024 * 2816)])
    Wf = 3 * 1024 * 2816
    f, b = 2 * Wf * 2, 4 * Wf + 2 * (2 * 1024 + 2 * 2816) * 2
    t_ffn = 2 * t0 + t0 + max(f / (P * e_ffn), b / (BW * e_ffn))   # 2 GEMMs + the activation kernel
    assert float(ops["ffn"].time_s) == pytest.approx(t_ffn, rel=1e-9)
    # lm_head: 32000 x 1024 (31.25 x 2^20 elements: beyond the last column, e = 0.6)
    Wl = 32000 * 1024
    f, b = 2 * Wl * 2, 4 * Wl + 2 * (1024 + 32000) * 2
    t_lm = t0 + max(f / (P * 0.6), b / (BW * 0.6))
    assert float(ops["lm_head"].time_s) == pytest.approx(t_lm, rel=1e-9)
    # the other ops: t0 x kernels + max(FLOPs / P, bytes / BW) at stream 1.0 (decode attention: the triad too)
    rest = 0.0
    for name, kernels in (("embed", 1), ("attention", 3), ("norms", 2)):
        op = ops[name]
        t = kernels * t0 + max(float(op.flops) / P, float(op.bytes) / BW)
        assert float(op.time_s) == pytest.approx(t, rel=1e-9), name
        rest += op.count * t
    assert set(ops) == {"embed", "attn_proj", "attention", "norms", "ffn", "lm_head"}
    step = t_attn + t_ffn + t_lm + rest                       # 1 layer, no per-layer overhead from the file
    assert float(r.decode_step_s) == pytest.approx(step, rel=1e-9)
    # 15.7 ms: lm_head's 131 MB at 0.6 x 20 GB/s 10.9 ms, ffn's 34.6 MB 3.0 ms, attn_proj's 16.8 MB 1.7 ms
    assert (t_lm, t_ffn, t_attn, step) == pytest.approx((0.01092, 0.00298, 0.00170, 0.01567), rel=0.01)


def test_peak_and_the_flat_default_bound_it(tmp_path):
    su = setup(model_from_config(CFG, "one-layer"), _file(tmp_path), weight_dtype="fp32", kv_dtype="fp32")
    assert su.efficiency.kernels is su.hardware.kernels                # the default, with no option
    batch = np.array([1, 2, 3, 4, 16, 64, 256, 1000])[:, None]
    ctx = np.array([1, 100, 2000])[None, :]
    kern = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, batch, ctx, 16, su.reserve)
    peak = serve_batch(su.model, su.hardware, su.layout, su.precision, PEAK, batch, ctx, 16, su.reserve)
    assert np.all(kern.decode_step_s >= peak.decode_step_s * (1 - 1e-12))
    assert np.all(kern.ttft_s >= peak.ttft_s * (1 - 1e-12))
    for i, b in enumerate(batch[:, 0]):                                # vectorized == scalar
        for j, c in enumerate(ctx[0]):
            one = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, int(b), int(c), 16,
                              su.reserve)
            assert float(one.decode_step_s) == pytest.approx(float(kern.decode_step_s[i, j]), rel=1e-12)


def test_a_file_without_the_section_behaves_as_before(tmp_path):
    rec = {k: v for k, v in REC.items() if k != "kernels"}
    hw = get_hardware(_file(tmp_path, rec))
    assert hw.kernels is None
    assert default_for(hw) == physics_calibrated(hw)    # the calibrated default of any chip without a measured curve
    assert kernel_model(hw).kernel_class == "generic"
    m = model_from_config(CFG, "one-layer")
    a = infer(m, hw, batch=4, input_len=64, output_len=8, weight_dtype="fp32")
    b = infer(m, hw, batch=4, input_len=64, output_len=8, weight_dtype="fp32", efficiency=physics_calibrated(hw))
    assert float(a.decode_step_s) == float(b.decode_step_s)


# ---- bad section values: InputError naming the field ---------------------------------------------------------------
@pytest.mark.parametrize("change,field", [
    ({"stream_gbs": 25.0}, "hardware.kernels.stream_gbs"),            # faster than the file's memory_bw (20 GB/s)
    ({"stream_gbs": "fast"}, "hardware.kernels.stream_gbs"),
    ({"gemm_peak_tflops": 0.2}, "hardware.kernels.gemm_peak_tflops"),  # above tflops.fp32
    ({"gemm_dtype": "bf16"}, "hardware.kernels.gemm_dtype"),           # no bf16 figure in the file
    ({"per_call_s": -1e-6}, "hardware.kernels.per_call_s"),
    ({"per_call_s": 0.5}, "hardware.kernels.per_call_s"),
    ({"rows": [4, 1]}, "hardware.kernels.rows"),
    ({"rows": [1, 2.5]}, "hardware.kernels.rows"),
    ({"weight_elements": []}, "hardware.kernels.weight_elements"),
    ({"efficiency": [[0.5, 0.8]]}, "hardware.kernels.efficiency"),      # one row for two row counts
    ({"efficiency": [[0.5, 1.2], [0.25, 0.4]]}, "hardware.kernels.efficiency[0][1]"),   # above the roofline
    ({"efficiency": [[0.5, 0.8], [0.0, 0.4]]}, "hardware.kernels.efficiency[1][0]"),
    ({"speedup": 2}, "hardware.kernels.speedup"),
])
def test_bad_section_values_name_the_field(tmp_path, change, field):
    with pytest.raises(InputError) as e:
        get_hardware(_file(tmp_path, {**REC, "kernels": {**CURVE, **change}}))
    assert e.value.field == field
    with pytest.raises(InputError) as e:
        get_hardware(_file(tmp_path, {**REC, "kernels": 3}))
    assert e.value.field == "hardware.kernels"
