"""KV-cache bytes: what each token leaves behind in every layer, and what a sequence holds at a context length.

GQA/MQA/MHA: 2 (K and V) x n_kv_heads x head_dim values per layer per token.
MLA (DeepSeek-V2/V3): the compressed latent kv_lora_rank plus the decoupled RoPE key qk_rope_head_dim per layer
per token (DeepSeek-V2 paper, Sec. 2.1.3: "(d_c + d_h^R) l elements").
DeepSeek Sparse Attention (DeepSeek-V3.2): the lightning indexer also caches one index key of index_head_dim values
per token per layer, in FP8 with one float32 scale per 128 values whatever the KV dtype (DeepSeek-V3.2-Exp
inference/model.py, `Indexer`: k_cache float8_e4m3fn [.., head_dim], k_scale_cache float32 [.., head_dim // 128]):
128 + 4 = 132 bytes.
Gemma 4: the full (global) layers have their own head size and KV heads (global_head_dim 512 and
num_global_key_value_heads, against head_dim 256 and num_key_value_heads on the sliding layers), so the two kinds
leave different bytes per token. With attention_k_eq_v the full layers have no v_proj, but V (v_norm of the K
projection) and K (k_norm and RoPE of it) differ, and both transformers' Gemma4TextAttention and vLLM's
Gemma4Attention cache K and V: 2 x kv heads x head dim there too.
Sliding-window and chunked-attention layers keep at most `window` tokens (a chunked layer keeps only its current
chunk: at most the chunk, which is what a server must reserve).
Recurrent layers (Gated DeltaNet, Mamba-2, Kimi Delta Attention, lightning attention) keep no per-token cache: a fixed state per sequence, the same at any
context (see recurrent_state_values).
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.model import Model

# The conv state is kept in the model's 16-bit dtype, and so is the recurrent state unless the config asks for more
# (Model.linear_state_bytes: Qwen3.5's "mamba_ssm_dtype": "float32"): vLLM's mamba_cache_dtype and
# mamba_ssm_cache_dtype default to "auto", the model dtype (vLLM engine arguments, "--mamba-ssm-cache-dtype").
STATE_BYTES = 2.0


def kv_main_values(m: Model) -> int:
    """Values per token per attention layer that attention reads (K and V, or the MLA latent + RoPE key); a local
    (sliding / chunked) layer's where the full layers are shaped apart (kv_full_values)."""
    if m.is_mla:
        return m.kv_lora_rank + m.qk_rope_head_dim
    return 2 * m.kv_heads * m.hd


def kv_full_values(m: Model) -> int:
    """Values per token per full-attention layer (K and V of its own KV heads and head size: Gemma 4)."""
    if m.is_mla:
        return kv_main_values(m)
    return 2 * m.kv_heads_full * m.hd_full


def index_values(m: Model) -> int:
    """Values per token per layer of the sparse-attention indexer's key cache (0 without one)."""
    return m.index_head_dim if m.is_sparse_attention else 0


INDEX_SCALE_BLOCK = 128      # index-key values per float32 scale (DeepSeek-V3.2-Exp inference/model.py block_size)


def index_key_bytes(m: Model) -> float:
    """Bytes per token per layer of the indexer's key cache: FP8 values + a float32 scale per 128 (0 without one)."""
    d = index_values(m)
    return float(d + 4 * -(-d // INDEX_SCALE_BLOCK)) if d else 0.0


def _mean_over_attention_layers(m: Model, full: float, local: float):
    """The mean of a per-layer figure over the attention layers (the figure itself where both kinds agree)."""
    if full == local:
        return full
    n_full, n_local = m.n_full_layers, m.n_sliding_layers
    return (full * n_full + local * n_local) / max(n_full + n_local, 1)


def kv_values_per_token_per_layer(m: Model):
    """Values one token leaves per attention layer, the mean over the layers where the kinds differ (Gemma 4)."""
    return _mean_over_attention_layers(m, kv_full_values(m) + index_values(m), kv_main_values(m) + index_values(m))


def kv_layer_bytes(m: Model, kv_bytes: float) -> tuple[float, float]:
    """(full layer, local layer) bytes one token leaves: K and V (or the MLA latent) at the KV dtype + index key."""
    return kv_full_values(m) * kv_bytes + index_key_bytes(m), kv_main_values(m) * kv_bytes + index_key_bytes(m)


def kv_bytes_per_token_per_layer(m: Model, kv_bytes: float) -> float:
    """Bytes one token leaves in one attention layer: K and V (or the MLA latent) at the KV dtype, plus the index key
    (the mean over the attention layers where full and local layers differ)."""
    return _mean_over_attention_layers(m, *kv_layer_bytes(m, kv_bytes))


def kv_bytes_per_token(m: Model, kv_bytes: float) -> float:
    """Bytes per token summed over the attention layers, at short context (every such layer holds the token)."""
    full, local = kv_layer_bytes(m, kv_bytes)
    return full * m.n_full_layers + local * m.n_sliding_layers


def recurrent_state_values(m: Model) -> tuple[int, int]:
    """(state, conv state) values of ONE recurrent layer for one sequence, independent of context.
    Gated DeltaNet: one dk x dv matrix per value head (Yang et al. 2024, Gated Delta Networks, Eq. 4: S_t in
    R^{dv x dk}); Mamba-2: one P x N state per head (Dao & Gu 2024, SSD, Sec. 3: h_t in R^{P x N}). Both are
    linear_heads x linear_key_dim x linear_value_dim. The causal conv keeps its last (kernel - 1) inputs over the
    conv channels: q, k, v for GDN (2 hk dk + hv dv); x, B, C for Mamba-2 (H P + 2 G N) -- the same expression.
    Kimi Delta Attention keeps GDN's state and conv (dk x dv per head; Kimi Linear report, arXiv 2510.26692, Sec. 3);
    lightning attention (MiniMax-01, arXiv 2501.08313, Sec. 2.2.1) a d x d KV state per head and no conv."""
    if not m.n_linear_layers:
        return 0, 0
    state = m.linear_heads * m.linear_key_dim * m.linear_value_dim
    conv_dim = 2 * m.linear_key_heads * m.linear_key_dim + m.linear_heads * m.linear_value_dim
    return state, max(m.linear_conv - 1, 0) * conv_dim


def state_bytes_per_layer(m: Model) -> float:
    """Bytes of recurrent state (and conv state) one sequence holds in ONE recurrent layer."""
    s, c = recurrent_state_values(m)
    return float(s * m.linear_state_bytes + c * STATE_BYTES)


def state_bytes_per_sequence(m: Model) -> float:
    """Bytes of recurrent state one sequence holds over all recurrent layers: constant in context."""
    return state_bytes_per_layer(m) * m.n_linear_layers


def kv_bytes_per_sequence(m: Model, context, kv_bytes: float):
    """Bytes one sequence holds at `context` tokens (array-friendly): windows cap the sliding layers; recurrent
    layers add their fixed state."""
    context = np.asarray(context, dtype=float)
    full, local = kv_layer_bytes(m, kv_bytes)
    out = full * m.n_full_layers * context
    if m.n_sliding_layers:
        out = out + local * m.n_sliding_layers * np.minimum(context, m.sliding_window)
    if m.n_linear_layers:
        out = out + state_bytes_per_sequence(m)
    return out


def kv_bytes_full_layers(m: Model, context, kv_bytes: float):
    """The part of kv_bytes_per_sequence held by the full-attention layers (array-friendly): what splits over the
    full layers' own KV heads where they have fewer than the local layers (Gemma 4)."""
    return kv_layer_bytes(m, kv_bytes)[0] * m.n_full_layers * np.asarray(context, dtype=float)


def context_holding(m: Model, nbytes: float, kv_bytes: float) -> float | None:
    """The context (tokens, real-valued) at which one sequence holds `nbytes` of KV: the inverse of
    kv_bytes_per_sequence, piecewise linear (all layers grow until the sliding window, then only the full layers).
    None where it never does (every layer sliding and nbytes above what the windows hold)."""
    full, local = kv_layer_bytes(m, kv_bytes)
    held = float(nbytes) - state_bytes_per_sequence(m)
    n_full, n_sl, w = m.n_full_layers, m.n_sliding_layers, m.sliding_window
    per_token = full * n_full + local * n_sl          # bytes per token while every layer still grows
    if n_sl and held <= per_token * w:
        return held / per_token
    if not n_full:
        return None
    return (held - local * n_sl * w) / (full * n_full)
