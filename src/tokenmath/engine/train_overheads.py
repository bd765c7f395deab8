"""HBM traffic a training step moves that the serving op table (engine/forward.py) does not: the scores of unfused
attention and the casts of FP8 training. Seconds per micro-batch per chip, all layers; arrays broadcast.

- unfused attention (runs before FlashAttention, Dao et al. 2022): the (a/tp) x s x L scores of every layer make a
  round trip through HBM: QK^T writes them (2 B), the fused scale-mask-softmax reads and writes them (4 B),
  dropout writes its mask and output (1 + 2 B) and x V reads them (2 B); without dropout x V reads the softmax
  output (2 B). Megatron's kernel computes the whole s x L square, masked. Forward traffic; the backward (2 x F in
  train_step) carries it twice more.
- FP8 (Transformer Engine's delayed-scaling recipe): every FP8 GEMM input is cast from bf16 by a fused
  cast-transpose kernel that reads 2 B and writes the FP8 value and its transpose (1 + 1 B), because Hopper's FP8
  tensor-core GEMMs take only the TN layout and the weight-gradient GEMM needs the transposed operand
  (NVIDIA/TransformerEngine, transformer_engine/common/transpose/cast_transpose.cu). Forward: the input of each
  GEMM; backward: the incoming gradient of each GEMM's output. 4 B per element each way. FP8 weight copies are
  cast once per step (cached across micro-batches) and are left out.
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine.activation_ops import quantize_bytes
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

FP8_BYTES = 1.0     # Transformer Engine's FP8 tensors: one byte per value, one fp32 scale per tensor (negligible)


def unfused_attention_bytes(m: Model, seq_len, tokens_per_chip, tp, dropout: bool):
    """Forward HBM bytes of materialized attention scores, all layers, one micro-batch on one chip
    (tokens_per_chip = b x L/cp queries)."""
    L = np.asarray(seq_len, float)
    keys = (m.n_full_layers * L + m.n_sliding_layers * (np.minimum(L, m.sliding_window) if m.sliding_window
                                                          else L)) / m.n_layers
    per_elem = 2.0 + 4.0 + (5.0 if dropout else 2.0)
    return m.n_layers * (m.n_heads / np.asarray(tp, float)) * np.asarray(tokens_per_chip, float) * keys * per_elem


def fp8_gemm_widths(m: Model) -> tuple[float, float]:
    """(input, output) elements per token per layer of the layer's GEMMs, averaged over dense and MoE layers,
    before tensor parallelism: qkv (input d, output (H + 2 kv) hd), out-proj (H v_hd, d), FFN (d, 2F or F) and its
    down projection (F, d); an MoE layer runs k routed experts (and its shared experts) per token."""
    d = m.d_model
    if m.is_mla:
        q_out = m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_out = m.kv_lora_rank + m.qk_rope_head_dim + m.n_heads * (m.qk_nope_head_dim + m.v_head_dim)
        attn_in, attn_out = 2 * d + m.kv_lora_rank + m.n_heads * m.v_head_dim, q_out + kv_out + d
    else:
        attn_in, attn_out = d + m.n_heads * m.hd, (m.n_heads + 2 * m.kv_heads) * m.hd + d
    g = 2 if m.ffn_gated else 1

    def ffn(width, copies=1.0):
        return copies * (d + width), copies * (g * width + d)
    P = count_params(m)
    di, do = ffn(m.ffn_intermediate) if P.n_dense_layers else (0.0, 0.0)
    mi, mo = 0.0, 0.0
    if P.n_moe_layers:
        mi, mo = ffn(m.moe_intermediate, m.experts_per_token)
        if m.shared_width:
            si, so = ffn(m.shared_width)
            mi, mo = mi + si, mo + so
    n = m.n_layers
    ffn_in = (P.n_dense_layers * di + P.n_moe_layers * mi) / n
    ffn_out = (P.n_dense_layers * do + P.n_moe_layers * mo) / n
    return attn_in + ffn_in, attn_out + ffn_out


def fp8_cast_bytes(m: Model, tokens_per_chip, tp):
    """(forward, backward) HBM bytes of FP8 cast-transposes, all layers, one micro-batch on one chip."""
    w_in, w_out = fp8_gemm_widths(m)
    T = np.asarray(tokens_per_chip, float) * m.n_layers / np.asarray(tp, float)
    # read 2 B, write the 1-B value and its transpose: 4 B per element (the serving quantize's formula, one home)
    return quantize_bytes(w_in * T, FP8_BYTES, transpose=True), quantize_bytes(w_out * T, FP8_BYTES, transpose=True)
