"""4-bit float weights on a chip without a 4-bit path (Hopper, Ampere) run W4A16 at the bf16 peak, dequantizing each
weight tile inside the GEMM: their large-GEMM fraction is the class's gemm_w4a16, sourced on Hopper at 0.49
(github.com/triton-lang/triton pull 6833, bf16 x mxfp4 in triton_kernels: 28% -> 37% -> 49% of peak), not the bf16
GEMM's 0.73. gpt-oss-120b at max load on H200 (TensorRT-LLM perf overview, 6,868 output tok/s) was predicted 2x too
fast with the bf16 fraction."""
from __future__ import annotations

import pytest

from tokenmath.engine.kernels import op_rates
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kernels import class_model, fraction_key, kernel_model


@pytest.mark.parametrize("asked, resolved, key", [
    ("mxfp4", "bf16", "w4a16"), ("fp4", "bf16", "w4a16"),      # no 4-bit path: dequantized in a bf16 GEMM
    ("fp4", "fp4", "fp4"), ("mxfp4", "fp8", "fp8"),           # Blackwell: native W4A4 / W4A8 (MXFP8 activations)
    ("int4", "int8", "int8"), ("bf16", "bf16", "bf16"), ("fp8", "fp8", "fp8")])
def test_only_4bit_float_weights_that_fell_back_to_16_bits_take_the_w4a16_fraction(asked, resolved, key):
    assert fraction_key(asked, resolved) == key


def test_hopper_w4a16_is_sourced_and_slower_than_its_bf16_gemm_while_other_classes_say_they_assume():
    hop = class_model("nvidia-hopper")
    assert hop.gemm["w4a16"] == 0.49 and "triton-lang/triton pull 6833" in hop.provenance["gemm_w4a16"]
    assert hop.gemm["w4a16"] < hop.gemm["bf16"] == 0.73
    amp = class_model("nvidia-ampere")
    assert amp.provenance["gemm_w4a16"].startswith("assumed")


def test_mxfp4_experts_on_h200_run_at_the_w4a16_rate_and_on_b200_at_the_fp8_rate():
    h200, b200 = get_hardware("h200"), get_hardware("b200")
    shapes = ((5760, 2880), (2880, 2880))
    km = kernel_model(h200)
    pk, _, _ = op_rates(km, h200, "experts", "prefill", "gemm", key="mxfp4", M=65536.0, shapes=shapes)
    pk16, _, _ = op_rates(km, h200, "experts", "prefill", "gemm", key="bf16", M=65536.0, shapes=shapes)
    # same bf16 peak (989 TFLOP/s), fractions 0.49 vs 0.73: the rate falls by 0.49 / 0.73
    assert pk / pk16 == pytest.approx(0.49 / 0.73, rel=1e-9)
    kb = kernel_model(b200)
    pb, _, _ = op_rates(kb, b200, "experts", "prefill", "gemm", key="mxfp4", M=65536.0, shapes=shapes)
    pb8, _, _ = op_rates(kb, b200, "experts", "prefill", "gemm", key="fp8", M=65536.0, shapes=shapes)
    assert pb == pytest.approx(pb8, rel=1e-12)


def test_gpt_oss_at_max_load_on_h200_stays_within_the_pure_roofline():
    from tokenmath.analyses.ask import infer, split
    dep, wl, _ = split("gpt-oss-120b", "h200", chips=1, engine="tensorrt-llm", batch=512, input_len=1000,
                       output_len=1000)
    r = infer(dep, wl)
    dep16, _, _ = split("gpt-oss-120b", "h200", chips=1, engine="tensorrt-llm", batch=512, input_len=1000,
                        output_len=1000, efficiency="peak")
    peak = infer(dep16, wl)
    assert r.decode_step_s >= peak.decode_step_s and r.ttft_s >= peak.ttft_s      # nothing beats the pure roofline
