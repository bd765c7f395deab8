"""The tensor-core rate a quantized checkpoint is multiplied at is the engines' path, not the storage format's:
MXFP4 weights (gpt-oss) meet MXFP8 activations on Blackwell (W4A8, the fp8 rate) and bf16 on Hopper (W4A16),
per TensorRT-LLM's gpt-oss deployment guide (MoE Backend Support Matrix); W4A4 fp4 keeps the fp4 rate."""
from tokenmath.specs.dtypes import get_dtype
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model_catalog import get_model


def rate(chip, dtype):
    hw = get_hardware(chip)
    return hw.peak_flops(get_dtype(dtype).compute) / 1e12, hw.flops_key(get_dtype(dtype).compute)


def test_mxfp4_runs_at_fp8_on_blackwell_and_bf16_on_hopper():
    assert rate("b200", "mxfp4") == (4500.0, "fp8")        # data/hardware.toml: b200 fp8 = 4500 TFLOP/s dense
    assert rate("h200", "mxfp4") == (989.0, "bf16")          # h200: bf16 = 989 TFLOP/s dense, no fp4 path
    assert rate("b200", "fp4") == (9000.0, "fp4")          # W4A4 (NVFP4 checkpoints) at the fp4 rate
    assert rate("b200", "nvfp4") == (9000.0, "fp4")


def test_mxfp4_bytes_unchanged_and_gpt_oss_experts_are_mxfp4():
    assert get_dtype("mxfp4").bytes == 0.5 + 1 / 32           # OCP MX: 4-bit values + one E8M0 scale per 32
    assert get_model("gpt-oss-120b").native_expert_dtype == "mxfp4"


def test_w4a8_is_slower_than_w4a4_only_where_compute_bound():
    from tokenmath.analyses.serving.infer import infer
    from tokenmath.specs.efficiency import PEAK
    kw = dict(chips=1, input_len=1024, output_len=256, efficiency=PEAK)
    # prefill of 64 x 1024 tokens is compute-bound: the fp8 rate (half the fp4 rate) makes the experts slower
    a = infer("gpt-oss-120b", "b200", batch=64, weight_dtype="mxfp4", **kw)
    b = infer("gpt-oss-120b", "b200", batch=64, weight_dtype="fp4", **kw)
    assert a.ttft_s > b.ttft_s
    # batch-1 decode reads the same bytes (same storage size): the same memory-bound step
    a1 = infer("gpt-oss-120b", "b200", batch=1, weight_dtype="mxfp4", **kw)
    b1 = infer("gpt-oss-120b", "b200", batch=1, weight_dtype="fp4", **kw)
    assert abs(a1.decode_step_s - b1.decode_step_s) / b1.decode_step_s < 0.02
