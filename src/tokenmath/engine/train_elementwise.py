"""Training-side elementwise and memory-bound kernels, counted as their own time (HBM bytes per micro-batch per chip,
all layers; forward and backward apart, because a backward is not 2 x forward for these kernels). Arrays broadcast.

The serving op table (engine/forward.py) carries one "norms" op of 6 bytes x d per token per layer (2 norms and
the residual adds, forward only); a training step runs these kernels, and more, each as its own launch that
reads and writes HBM, in a different proportion backward. Bytes per token per layer, bf16 (2 B) activations, widths
before tensor parallelism (sequence parallelism shards the norm/residual regions, tensor parallelism the heads and
the FFN width, so every term divides by tp):

  kernel (Megatron-LM / Transformer Engine)     forward bytes               backward bytes
  RMSNorm / LayerNorm x 2                       read x, write y: 2 x 4d     read dy, x, write dx: 2 x 6d
  residual add x 2 (bias-dropout-add)           read 2d, write d: 2 x 6d    gradient branch sum: 2 x 6d
  dropout masks (dropout on) x 2                write 1 B mask: 2 x d       read the mask: 2 x d
  rotary embedding (RoPE) on q and k            read, write: 4 (H + kv) hd  same: 4 (H + kv) hd
  SwiGLU (gated FFN)                            read 2F, write F: 6F        read dy F, input 2F, write 2F: 10F
  GeLU (bias-gelu fusion)                       read F, write F: 4F         read dy, x, write dx: 6F
  (an MoE layer: k routed experts' and the shared experts' widths; MLA: RoPE on its rope head dims only)

Cross-entropy in fp32 (Megatron-LM computes the vocab-parallel loss on logits.float() unless fp16_lm_cross_entropy,
megatron/model/gpt_model.py post_language_model_processing; its _VocabParallelCrossEntropy runs max, subtract,
exp, sum and divide as separate kernels over the V/tp logits of every token), bytes per logit:
  forward: cast bf16 -> fp32 (2 + 4), max (4), subtract in place (4 + 4), exp in place (4 + 4), sum (4),
           divide in place (4 + 4) = 38
  backward: softmax - one-hot, scaled, in place (4 + 4), cast of the gradient to bf16 (4 + 2) = 14
The logits' write by the head GEMM and the gradient's read by its backward stay with the lm_head op.

FlashAttention's backward executes 2.5 x its forward FLOPs: it recomputes the scores S = QK^T and runs dV = P^T dO,
dP = dO V^T, dQ = dS K, dK = dS^T Q: five matmuls of the forward's two (Dao 2023, FlashAttention-2, Sec. 3.1.2 /
Algorithm 2; the repository's benchmarks count backward = 2.5 x forward FLOPs). FLASH_BWD_FACTOR.
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

FLASH_BWD_FACTOR = 2.5          # FlashAttention backward FLOPs / forward FLOPs (five matmuls vs two)
CE_FWD_BYTES_PER_LOGIT = 38.0   # fp32 cross-entropy, forward (see the module docstring)
CE_BWD_BYTES_PER_LOGIT = 14.0   # fp32 cross-entropy, backward


def _ffn_width(m: Model) -> float:
    """Mean activation width (before tp) of the FFN's elementwise kernel per token per layer, dense and MoE."""
    P = count_params(m)
    dense = float(m.ffn_intermediate) if P.n_dense_layers else 0.0
    moe = 0.0
    if P.n_moe_layers:
        moe = m.experts_per_token * m.moe_intermediate + (m.shared_width or 0.0)
    return (P.n_dense_layers * dense + P.n_moe_layers * moe) / m.n_layers


def _rope_width(m: Model) -> float:
    """Elements of q and k that get rotated per token per layer (before tp)."""
    if m.is_mla:
        return (m.n_heads + 1) * m.qk_rope_head_dim      # q's rope dims per head + the shared k_rope
    return (m.n_heads + m.kv_heads) * m.hd


def layer_elementwise_bytes(m: Model, tokens_per_chip, tp, dropout: bool = False):
    """(forward, backward) HBM bytes of the elementwise kernels of all layers, one micro-batch on one chip."""
    d = m.d_model
    F = _ffn_width(m)
    gated = bool(m.ffn_gated)
    fwd = 2 * 4 * d + 2 * 6 * d + 4 * _rope_width(m) + (6 if gated else 4) * F
    bwd = 2 * 6 * d + 2 * 6 * d + 4 * _rope_width(m) + (10 if gated else 6) * F
    if dropout:
        fwd, bwd = fwd + 2 * d, bwd + 2 * d      # two 1-byte masks of d, written forward, read backward
    T = np.asarray(tokens_per_chip, float) * m.n_layers / np.asarray(tp, float)
    return fwd * T, bwd * T


def cross_entropy_bytes(m: Model, tokens_per_chip, tp):
    """(forward, backward) HBM bytes of the fp32 vocab-parallel cross-entropy, one micro-batch on one chip."""
    logits = np.asarray(tokens_per_chip, float) * m.vocab_size / np.asarray(tp, float)
    return CE_FWD_BYTES_PER_LOGIT * logits, CE_BWD_BYTES_PER_LOGIT * logits
