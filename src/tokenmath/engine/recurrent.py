"""The cost of recurrent (linear-attention / state-space) layers: Gated DeltaNet (Qwen3-Next), Mamba-2
(Nemotron-H, Granite 4.0), Kimi Delta Attention (Kimi Linear) and lightning attention (MiniMax-M1). Per layer, per chip; broadcasts like engine/forward.py.

A recurrent layer keeps no per-token cache: each sequence carries a fixed state (specs/kv_cache.recurrent_state_values:
linear_heads x key_dim x value_dim values, plus the conv's last kernel-1 inputs) that a pass reads and writes back
once, whatever the context. So its time does not grow with context -- the point of these layers.

  FLOPs per token = 2 x W_mixer (the projections)  +  c_state x H x dk x dv (the recurrence)
                    [prefill, chunked scan: + 2 x C x (dk + dv) x H, the intra-chunk products]
  bytes per pass  = W_mixer x w / tp  +  2 x state bytes x S / tp  +  activations

c_state counts FLOPs per state element per token in the recurrent (decode) form:
- Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", Sec. 3 / Eq. 1 with scalar A): h <- exp(dt A) h + dt x B^T
  (decay: 1 multiply; rank-1 update: 1 multiply-add) and y = h C (1 multiply-add): 1 + 2 + 2 = 5.
- Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks", Eq. 10): S <- S (alpha (I - beta k k^T)) + beta v k^T
  evaluated as S k (1 multiply-add), the gated decay (1 multiply), the rank-1 correction (1 multiply-add) and
  o = S q (1 multiply-add): 2 + 1 + 2 + 2 = 7.
- Kimi Delta Attention (Kimi Linear tech report, arXiv 2510.26692, Eq. 1): the delta rule of Gated DeltaNet with a
  channel-wise decay Diag(alpha_t) in place of the scalar alpha -- still one multiply per state element: 7.
- Lightning attention (MiniMax-01 report, arXiv 2501.08313, Sec. 2.2.1; TransNormerLLM's decayed linear
  attention): kv <- lambda kv + k^T v (decay: 1 multiply; rank-1 update: 1 multiply-add), o = q kv (1
  multiply-add): 5, as Mamba-2.
The chunked prefill (chunk length C = linear_chunk) replaces the per-token state update by per-chunk matmuls of
the same order plus the causal products inside each chunk (C/2 keys on average, over dk and dv, 2 FLOPs each).
Heads shard over tp like attention heads.
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.kv_cache import state_bytes_per_layer
from tokenmath.specs.model import Model
from tokenmath.specs.params import linear_mixer_params

STATE_FLOPS_PER_ELEMENT = {"mamba2": 5.0, "gated_deltanet": 7.0, "kda": 7.0, "lightning": 5.0}
NAMES = {"mamba2": "Mamba-2", "gated_deltanet": "Gated DeltaNet", "kda": "Kimi Delta Attention",
         "lightning": "lightning attention"}


def state_flops_per_token(m: Model, phase: str) -> float:
    """FLOPs of the recurrence itself per token per layer (all heads), on top of the projections."""
    H, K, V = m.linear_heads, m.linear_key_dim, m.linear_value_dim
    f = STATE_FLOPS_PER_ELEMENT[m.linear_kind] * H * K * V
    if phase == "prefill" and m.linear_chunk:
        f += 2.0 * m.linear_chunk * (K + V) * H
    return f


def recurrent_op(m: Model, phase: str, seqs, tokens, tp, weight_bytes: float, act_bytes: float) -> dict:
    """One recurrent layer's cost per chip: keyword arguments for forward_pass's `add` (flops, nbytes, weights, kv,
    note). seqs: sequences in the pass (each reads and writes its state once); tokens: tokens in the pass."""
    W = linear_mixer_params(m)
    S, T = np.asarray(seqs, float), np.asarray(tokens, float)
    state_rw = 2.0 * state_bytes_per_layer(m) * S / tp          # read the state, write it back
    G, H, K, V, d = m.linear_key_heads, m.linear_heads, m.linear_key_dim, m.linear_value_dim, m.d_model
    io = T * (2 * d + (2 * G * K + 3 * H * V) / tp) * act_bytes       # x in, out; q/k/v (x/B/C) and gate activations
    w = W * weight_bytes / tp
    return {"flops": (2.0 * W + state_flops_per_token(m, phase)) * T / tp, "nbytes": w + state_rw + io,
            "weights": w, "kv": state_rw,
            "note": f"{NAMES[m.linear_kind]} recurrent layers: a fixed {H} x {K} x {V} state per sequence, "
                    "read and written once per pass whatever the context"}
