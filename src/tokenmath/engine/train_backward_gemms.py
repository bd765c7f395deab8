"""The backward GEMMs at their own shapes: what a training step's backward costs beyond 2 x the forward GEMMs.

A linear layer y = x W (x: T x K tokens by input width, W: K x N) runs three GEMMs per training step (Narayanan et
al. 2021 Sec. 3.2; Kaplan et al. 2020 Sec. 2.1), each with the same 2 T K N FLOPs but its own shape:
  forward  y  = x W       M = T rows,  output N, reduction K
  dgrad    dx = dy W^T    M = T rows,  output K, reduction N
  wgrad    dW = x^T dy    M = K rows,  output N, reduction T   (the tokens are the reduction)
train_step takes the backward as 2 x the forward; this module re-times dgrad and wgrad with the shape-aware kernel
model (engine/kernels.py gemm_fraction: tile and wave quantization of each shape, the class's large-GEMM fraction),
and returns the difference, seconds per micro-batch on one chip, all layers:
  extra = count x (max(t0 + c r_d, mem) + max(t0 + c r_w, mem) - 2 max(t0 + c, mem)),  r = f_forward / f_shape,
with c the forward's compute time without its fixed t0 and mem its memory time. Dense GEMM ops only (qkv / out
projections, the FFN, shared experts); the grouped expert GEMMs and the lm_head keep 2 x. Without a kernel model
(a flat efficiency, or --peak) every shape runs at the same fraction and the extra is 0. Arrays broadcast.
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine.kernels import gemm_fraction, op_shapes

BACKWARD_SHAPED_OPS = ("attn_proj", "ffn", "shared_experts")


def _harmonic(km, key, rows, shapes):
    """FLOP-weighted (harmonic) fraction of GEMMs each given as (M, N, K)."""
    w_sum, t_sum = 0.0, 0.0
    for M, N, K in shapes:
        w = np.asarray(M, float) * np.asarray(N, float) * np.asarray(K, float)
        w_sum, t_sum = w_sum + w, t_sum + w / gemm_fraction(km, key, M, ((N, K),))
    return w_sum / t_sum


def backward_gemm_extra_s(m, hw, km, ops: dict, tokens, tp, compute: str):
    """Seconds per micro-batch (all layers, one chip) that dgrad + wgrad at their shapes take beyond 2 x the
    forward GEMMs; `ops` is the forward pass's op table, `tokens` the rows of each GEMM (b x L/cp), `compute` the
    matmul dtype."""
    if km is None or km.curve_rows:
        return 0.0
    key = hw.flops_key(compute)
    T = np.asarray(tokens, float)
    extra = 0.0
    for name in BACKWARD_SHAPED_OPS:
        op = ops.get(name)
        shapes = op_shapes(m, name, tp)
        if op is None or not shapes:
            continue
        f_fwd = gemm_fraction(km, key, T, shapes)
        f_dgrad = _harmonic(km, key, T, [(T, K, N) for N, K in shapes])
        f_wgrad = _harmonic(km, key, T, [(K, N, T) for N, K in shapes])
        t0 = np.asarray(op.fixed_s, float)
        c = np.maximum(np.asarray(op.compute_s, float) - t0, 0.0)
        mem = np.asarray(op.memory_s, float)
        base = np.maximum(t0 + c, mem)
        back = np.maximum(t0 + c * f_fwd / f_dgrad, mem) + np.maximum(t0 + c * f_fwd / f_wgrad, mem)
        extra = extra + op.count * (back - 2.0 * base)
    return extra
