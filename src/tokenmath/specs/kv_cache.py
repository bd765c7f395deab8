"""KV-cache bytes: what each token leaves behind in every layer, and what a sequence holds at a context length.

GQA/MQA/MHA: 2 (K and V) x n_kv_heads x head_dim values per layer per token.
MLA (DeepSeek-V2/V3): the compressed latent kv_lora_rank plus the decoupled RoPE key qk_rope_head_dim per layer
per token (DeepSeek-V2 paper, Sec. 2.1.3: "(d_c + d_h^R) l elements").
Sliding-window layers keep at most `window` tokens.
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.model import Model


def kv_values_per_token_per_layer(m: Model) -> int:
    if m.is_mla:
        return m.kv_lora_rank + m.qk_rope_head_dim
    return 2 * m.kv_heads * m.hd


def kv_bytes_per_token(m: Model, kv_bytes: float) -> float:
    """Bytes per token summed over all layers, at short context (every layer holds the token)."""
    return kv_values_per_token_per_layer(m) * m.n_layers * kv_bytes


def kv_bytes_per_sequence(m: Model, context, kv_bytes: float):
    """Bytes one sequence holds at `context` tokens (array-friendly): windows cap the sliding layers."""
    context = np.asarray(context, dtype=float)
    per_layer = kv_values_per_token_per_layer(m) * kv_bytes
    held = m.n_full_layers * context
    if m.n_sliding_layers:
        held = held + m.n_sliding_layers * np.minimum(context, m.sliding_window)
    return per_layer * held


def context_holding(m: Model, nbytes: float, kv_bytes: float) -> float | None:
    """The context (tokens, real-valued) at which one sequence holds `nbytes` of KV: the inverse of
    kv_bytes_per_sequence, piecewise linear (all layers grow until the sliding window, then only the full layers).
    None where it never does (every layer sliding and nbytes above what the windows hold)."""
    per_layer = kv_values_per_token_per_layer(m) * kv_bytes
    token_layers = float(nbytes) / per_layer            # tokens summed over the layers
    n_full, n_sl, w = m.n_full_layers, m.n_sliding_layers, m.sliding_window
    if n_sl and token_layers <= (n_full + n_sl) * w:
        return token_layers / (n_full + n_sl)
    if not n_full:
        return None
    return (token_layers - n_sl * w) / n_full
