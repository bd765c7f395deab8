"""Bytes per stored value for weights, KV cache and activations, and the peak-FLOP/s key each dtype runs at.

Block-quantized formats carry a scale per group of values; the overhead is part of the bytes that must be read:
- int4 / fp4 weights (GPTQ/AWQ-style int4, group 128, one fp16 scale per group): 0.5 + 2/128 bytes per value.
- mxfp4 (OCP Microscaling spec v1.0, block 32, one 8-bit E8M0 scale): 0.5 + 1/32 bytes per value.
- nvfp4 (NVIDIA Blackwell NVFP4, block 16, one FP8 E4M3 scale): 0.5 + 1/16 bytes per value.
- fp8 with 128x128 block scales (DeepSeek-V3 checkpoint, one fp32 scale per 16384 values): ~1.0002.
- int8 per-channel scales: negligible (one scale per row).
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.base.errors import InputError


@dataclass(frozen=True)
class DType:
    """A number format: bytes per value (with its scales) and the compute path its matmuls take."""
    name: str
    bytes: float          # bytes per value including quantization scales
    compute: str          # key into Hardware.flops used for matmuls on this dtype


# compute key: the tensor-core rate the weights are multiplied at. int4 checkpoints (GPTQ, AWQ, llama.cpp Q4_0) never
# run at the chip's printed int4 rate: llama.cpp's MMQ kernels quantize activations to int8 (W4A8, int8 rate; its
# RTX 4090 Q4_0 prefill of 14.8k tokens/s would beat a bf16-rate roofline), Marlin-style kernels dequantize to 16-bit
# (W4A16, bf16 rate). The int8 rate is used: the faster of the two, so the pure roofline stays a bound. fp8 (W8A8 in
# vLLM/TensorRT-LLM on Hopper+), int8 (SmoothQuant W8A8) and fp4 (NVFP4/MXFP4 on Blackwell, W4A4) run at their own
# rate where the chip has it (Hardware.peak_flops falls back).
# mxfp4 (the gpt-oss checkpoints) is not multiplied at the fp4 rate by the engines that serve it: on chips with
# microscaling tensor cores (Blackwell) the activations are MXFP8 (W4A8, the fp8 rate), elsewhere bf16 (W4A16) --
# TensorRT-LLM's gpt-oss deployment guide, "MoE Backend Support Matrix" (B200/GB200/B300/GB300: activation MXFP8,
# weights MXFP4; H200: activation BF16, weights MXFP4), https://nvidia.github.io/TensorRT-LLM/deployment-guide/
# deployment-guide-for-gpt-oss-on-trtllm.html; vLLM's FlashInfer MXFP4+MXFP8 MoE kernels for SM100
# (github.com/vllm-project/vllm/issues/35528). The compute key "mxfp4" resolves this in specs.hardware.
DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", 4.0, "fp32"),
    "bf16": DType("bf16", 2.0, "bf16"),
    "fp16": DType("fp16", 2.0, "bf16"),
    "fp8": DType("fp8", 1.0 + 4.0 / (128 * 128), "fp8"),
    "int8": DType("int8", 1.0, "int8"),
    "int4": DType("int4", 0.5 + 2.0 / 128, "int8"),
    "fp4": DType("fp4", 0.5 + 1.0 / 32, "fp4"),      # W4A4 with block-32 scales (NVFP4/MXFP4-class kernels)
    "mxfp4": DType("mxfp4", 0.5 + 1.0 / 32, "mxfp4"),
    "nvfp4": DType("nvfp4", 0.5 + 1.0 / 16, "fp4"),
}
ALIASES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "e4m3": "fp8", "float8": "fp8"}

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4", "fp32")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp32")


def get_dtype(name: str, field: str = "dtype", allowed: tuple[str, ...] = tuple(DTYPES)) -> DType:
    key = ALIASES.get(str(name).lower(), str(name).lower())
    if key not in allowed:
        raise InputError(field, f"unsupported dtype {name!r}", f"valid: {', '.join(allowed)}")
    return DTYPES[key]
