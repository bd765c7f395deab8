"""The memory-bound ops a quantized or MoE layer runs besides its matmuls: activation quantization, the MoE token
permute / unpermute and the router's top-k. Bytes per chip per occurrence (one layer); arrays broadcast.

These ops do no tensor-core work; like the table's "norms" op their elementwise arithmetic is not counted as
FLOPs (tokenmath's FLOPs are matmul and attention FLOPs), so each op is timed by its HBM bytes alone.

Activation quantization (QUANT in published kernel breakdowns). A matmul that runs at a rate below 16 bits
(W8A8 fp8 / int8, W4A4 nvfp4 / fp4, W4A8 mxfp4 x MXFP8 on Blackwell: specs/dtypes.py) needs its bf16 input cast to
that format: read T x K bf16 (2 B), write T x K in the low format with its block scales (`activation_bytes`).
The same formula, with a second 1-B write for the transposed copy, is training's FP8 cast-transpose
(engine/train_overheads.py): one home, `quantize_bytes`.
Which quantizes stand alone (and are charged) follows vLLM's documented defaults ("Fusion torch.compile passes",
docs.vllm.ai/en/stable/design/fusions/, Quick Reference table):
- fused, not charged: RMSNorm (+ residual add) -> FP8/FP4 quant (fuse_norm_quant, on by default at O1) feeds the
  qkv and the dense FFN / shared-expert gate_up GEMMs; SiLU+Mul -> FP8/FP4 quant (fuse_act_quant, on at O1) feeds
  the dense FFN / shared-expert down GEMM. The fused norm writes 1 B instead of 2; that saving is not subtracted.
- charged (op "act_quant", one kernel per attention layer): attention output -> quant before the o projection
  (fuse_attn_quant: "Off by default").
- charged (op "moe_quant", one kernel per MoE layer): the routed experts' input T x d (the normed hidden state also
  feeds the bf16 router, so the norm cannot hand over only a quantized copy).
- the down-projection input of the routed rows, T_st k x F_e / tp (op "moe_down_quant", one kernel per MoE layer):
  fused where the experts run at the fp4 rate (W4A4): TensorRT-LLM's generated MoE kernels on B200 write the
  gate_up output directly in FP4 (kernel `bmm_E2m1_E2m1E2m1_Fp32`, "E2m1" output, then `bmm_Bfloat16_E2m1E2m1_Fp32`
  for the down projection, with no quantize between them: SGLang DeepSeek-R1-FP4 decode trace on 4 x B200,
  github.com/SemiAnalysisAI/InferenceX/issues/863). For fp8, int8 and MXFP8 (mxfp4 weights) no source read says the
  grouped kernel requantizes its intermediate in its epilogue: the unfused path is kept (an activation kernel, then
  a separate quantize of the intermediate, as vLLM's Triton fused_moe runs it).
The lm_head is kept in bf16 by fp8 checkpoints and the router runs in bf16: neither is quantized here.

MoE permute / unpermute (the MoE "permute" and "finalize/combine" kernels of published breakdowns). The grouped
GEMM needs each expert's tokens contiguous: the permute gathers the T_st k (token, expert) rows of d values this
rank's experts receive (read T_st k x d, write T_st k x d, in the quantized format when the experts' input was
quantized first, else bf16); the unpermute reads the T_st k expert outputs (bf16, plus the k routing weights) and
writes the weighted sum of each token's k rows (T_st x d bf16). Per chip with expert parallelism: the rank's share
of the routed rows. Not divided by tp: tensor-parallel ranks each hold every token's whole hidden vector.

Top-k (TOPK). The router's logits T x E (bf16) are read once; the k expert ids (int32) and the k weights (fp32)
of each token are written: T (E x 2 + k x 8) bytes.
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.dtypes import DTYPES, DType

ACT_IN_BYTES = 2.0     # the bf16 activation a quantize reads
# bytes per value of the quantized activation, with its scales, by the resolved matmul rate (Hardware.flops_key):
# fp8 W8A8: per-token (or per-tensor) fp32 scales, under 0.1% of a row of >= 4096 values: the fp8 format's bytes;
# int8 W8A8 (SmoothQuant) the same; int4 weights at the int8 rate: llama.cpp quantizes activations to q8_1, blocks of
# 32 int8 with two fp16 (scale, sum) = 36 B / 32 values (ggml-common.h block_q8_1);
# MXFP8 (mxfp4 weights on Blackwell): OCP Microscaling v1.0, 32 fp8 values share one E8M0 scale: 1 + 1/32;
# fp4 / nvfp4 W4A4: activations in the weights' 4-bit block format (NVFP4: 16 values + one E4M3 scale).
Q8_1_BYTES = 36.0 / 32.0
MXFP8_BYTES = 1.0 + 1.0 / 32.0
LOW_RATES = ("fp8", "int8", "fp4", "int4")


def activation_bytes(weight: DType, hw) -> float:
    """Bytes per activation value a matmul on `weight` reads after quantization on chip `hw`; 0.0 where the matmul
    runs at 16 bits or more (no quantize: W8A16 / W4A16 fallbacks, bf16 weights)."""
    key = hw.flops_key(weight.compute)
    if key not in LOW_RATES:
        return 0.0
    if weight.compute == "mxfp4":
        return MXFP8_BYTES
    if weight.name == "int4":
        return Q8_1_BYTES
    return weight.bytes if key == "fp4" else DTYPES[key].bytes


def quantize_bytes(elements, out_bytes: float, transpose: bool = False, in_bytes: float = ACT_IN_BYTES):
    """HBM bytes of quantizing `elements` values: read in_bytes each, write out_bytes each (twice with the
    transposed copy a training FP8 GEMM needs: Transformer Engine's cast-transpose)."""
    return np.asarray(elements, float) * (in_bytes + out_bytes * (2.0 if transpose else 1.0))


def o_proj_input_width(m, ws) -> float:
    """Values per token entering the attention output projection on one chip (ws: the projection's weight split),
    averaged over the attention layers (full layers may have their own head size: Gemma 4)."""
    if m.is_mla:
        head = m.v_head_dim
    else:
        head = (m.n_full_layers * m.hd_full + m.n_sliding_layers * m.hd) / max(m.n_attention_layers, 1)
    return m.n_heads * head / np.asarray(ws, float)


def attn_quant_bytes(m, tokens, ws, q_bytes: float):
    """One attention layer's stand-alone quantize: the attention output (tokens x o-proj input per chip)."""
    return quantize_bytes(np.asarray(tokens, float) * o_proj_input_width(m, ws), q_bytes)


def moe_quant_bytes(m, tokens, q_bytes: float):
    """One MoE layer's quantize of the experts' input: tokens x d (the tokens this chip's attention holds)."""
    return quantize_bytes(np.asarray(tokens, float) * m.d_model, q_bytes)


def moe_down_quant_bytes(m, routed_rows, tp, q_bytes: float):
    """One MoE layer's quantize of the down-projection input of the routed rows this chip computes:
    routed_rows x F_e / tp."""
    return quantize_bytes(np.asarray(routed_rows, float) * m.moe_intermediate / np.asarray(tp, float), q_bytes)


def down_quant_fused(expert, hw) -> bool:
    """Whether the grouped GEMM writes its intermediate already quantized (W4A4 at the fp4 rate, see above)."""
    return hw.flops_key(expert.compute) == "fp4"


def permute_bytes(m, routed_rows, row_bytes: float):
    """The MoE permute of one layer: gather routed_rows rows of d values (read and write, row_bytes per value)."""
    return 2.0 * np.asarray(routed_rows, float) * m.d_model * row_bytes


def unpermute_bytes(m, routed_rows, act_bytes: float):
    """The MoE unpermute of one layer: read routed_rows expert outputs (d values each) and their routing weights
    (fp32), write the routed_rows / k tokens' weighted sums."""
    r = np.asarray(routed_rows, float)
    return r * m.d_model * act_bytes + r * 4.0 + r / m.experts_per_token * m.d_model * act_bytes


def topk_bytes(m, tokens, logit_bytes: float):
    """The router's top-k of one layer: read tokens x E logits, write k int32 ids and k fp32 weights per token."""
    return np.asarray(tokens, float) * (m.n_experts * logit_bytes + m.experts_per_token * 8.0)
