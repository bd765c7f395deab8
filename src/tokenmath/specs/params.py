"""Parameter counts: per component, per layer, total and active per token.

Shapes follow the Hugging Face implementations (LlamaAttention, DeepseekV3Attention for MLA, MixtralSparseMoeBlock,
GptOssExperts; Qwen3NextGatedDeltaNet and Qwen3NextAttention's output gate; NemotronHMamba2Mixer; Kimi Linear's
KimiDeltaAttention (modeling_kimi.py); vLLM's MiniMaxText01LinearAttention for MiniMax-M1; the DeepSeek-V3.2
Indexer of deepseek-ai/DeepSeek-V3.2-Exp inference/model.py). Norm weights and biases are small but counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tokenmath.specs.model import Model


@dataclass(frozen=True)
class Params:
    """Parameter counts (values, not bytes) per component of one model, per layer and in total."""
    attn_per_layer: float         # q, k, v, o (or the MLA projections) + their biases/norms, one layer; the mean
                                  # over the attention layers where full and local layers differ (Gemma 4)
    dense_ffn_per_layer: float    # one dense FFN block
    expert: float                 # one routed expert
    shared_per_moe_layer: float   # shared expert(s) in one MoE layer
    router_per_moe_layer: float
    norms_per_layer: float
    n_dense_layers: int
    n_moe_layers: int
    n_experts: int
    top_k: int
    embedding: float              # token embedding (+ learned positions)
    lm_head: float                # 0 when tied to the embedding
    final_norm: float
    n_layers: int = 0             # all layers (attention + recurrent)
    n_attn_layers: int = 0        # layers with attention (and a KV cache)
    linear_per_layer: float = 0.0  # one recurrent (GDN / Mamba-2) mixer: projections, conv, gates, norm
    n_linear_layers: int = 0
    index_per_layer: float = 0.0  # the sparse-attention indexer (inside attn_per_layer), one layer
    attn_full_per_layer: float = 0.0   # one full-attention layer's projections (= attn_per_layer unless they differ)
    attn_local_per_layer: float = 0.0  # one sliding / chunked layer's projections

    @property
    def attn(self) -> float:
        """Token mixers over all layers: attention layers' projections and recurrent layers' mixers."""
        return self.attn_per_layer * self.n_attn_layers + self.linear_per_layer * self.n_linear_layers

    @property
    def experts_total(self) -> float:
        return self.expert * self.n_experts * self.n_moe_layers

    @property
    def experts_active(self) -> float:
        return self.expert * self.top_k * self.n_moe_layers

    @property
    def dense_ffn(self) -> float:
        return self.dense_ffn_per_layer * self.n_dense_layers

    @property
    def moe_fixed(self) -> float:
        """Shared experts and routers over all MoE layers (read every step whatever the routing)."""
        return (self.shared_per_moe_layer + self.router_per_moe_layer) * self.n_moe_layers

    @property
    def norms(self) -> float:
        return self.norms_per_layer * self.n_layers + self.final_norm

    @property
    def non_expert(self) -> float:
        return self.attn + self.dense_ffn + self.moe_fixed + self.norms + self.embedding + self.lm_head

    @property
    def total(self) -> float:
        return self.non_expert + self.experts_total

    @property
    def active(self) -> float:
        """Parameters touched per token: everything except the routed experts a token does not choose."""
        return self.non_expert + self.experts_active


def _ffn(d: int, width: int, gated: bool, bias: bool) -> float:
    mats = 3 if gated else 2
    b = (width * (2 if gated else 1) + d) if bias else 0
    return mats * d * width + b


def linear_mixer_params(m: Model) -> float:
    """One recurrent layer's mixer. Gated DeltaNet (Qwen3NextGatedDeltaNet): in_proj_qkvz d x (2 hk dk + 2 hv dv),
    in_proj_ba d x 2 hv, depthwise conv over q, k, v (conv_dim x kernel), dt_bias and A_log (hv each), gated norm
    (dv), out_proj hv dv x d. Mamba-2 (NemotronHMamba2Mixer): in_proj d x (2 H P + 2 G N + H) for z, x, B, C, dt;
    conv over x, B, C with bias; dt_bias, A_log, D (H each); gated norm (H P); out_proj H P x d.
    Kimi Delta Attention (KimiDeltaAttention): q, k, v projections d x (2 H dk + H dv); conv over q, k, v (no bias);
    the channel-wise decay through a rank-dk bottleneck f_a (d x dk), f_b (dk x H dk) and dt_bias (H dk); the output
    gate's bottleneck g_a (d x dk), g_b (dk x H dv); b_proj (d x H) for beta; A_log (H); o_norm (dv); o_proj H dv x d.
    Lightning attention (MiniMaxText01LinearAttention): qkv_proj d x 3 H hd, output_gate d x H hd, norm (H hd),
    out_proj H hd x d -- no conv, no data-dependent decay (a fixed slope per head)."""
    if not m.n_linear_layers:
        return 0.0
    d, H, G, K, V = m.d_model, m.linear_heads, m.linear_key_heads, m.linear_key_dim, m.linear_value_dim
    conv_dim = 2 * G * K + H * V
    if m.linear_kind == "kda":
        return float(d * conv_dim + conv_dim * m.linear_conv + d * K + K * H * K + H * K + d * K + K * H * V
                     + d * H + H + V + H * V * d)
    if m.linear_kind == "lightning":
        return float(d * (2 * G * K + H * V) + d * H * V + H * V + H * V * d)
    if m.linear_kind == "gated_deltanet":
        return float(d * (2 * G * K + 2 * H * V) + d * 2 * H + conv_dim * m.linear_conv + 2 * H + V + H * V * d)
    return float(d * (2 * H * V + 2 * G * K + H) + conv_dim * (m.linear_conv + 1) + 3 * H + H * V + H * V * d)


def indexer_params(m: Model) -> float:
    """DeepSeek-V3.2's lightning indexer, one layer: wq_b (q_lora_rank x index_heads x index_head_dim), wk
    (d x index_head_dim), its LayerNorm (2 x index_head_dim), weights_proj (d x index_heads)."""
    if not m.is_sparse_attention:
        return 0.0
    q_in = m.q_lora_rank or m.d_model
    return float(q_in * m.index_heads * m.index_head_dim + m.d_model * m.index_head_dim + 2 * m.index_head_dim
                 + m.d_model * m.index_heads)


def _gqa_attention(m: Model, hd: int, kvh: int, k_eq_v: bool) -> float:
    """One GQA layer: q (d x h hd), k and v (d x kvh hd each; no v with k_eq_v: Gemma 4's full layers take V from
    the K projection, Gemma4TextAttention v_proj None), o (h hd x d), biases, q/k norms (hd each)."""
    d, h = m.d_model, m.n_heads
    kv_mats = 1 if k_eq_v else 2
    attn = d * h * hd + kv_mats * d * kvh * hd + h * hd * d
    if m.qkv_bias:
        attn += h * hd + kv_mats * kvh * hd
    if m.o_bias:
        attn += d
    if m.qk_norm:
        attn += 2 * hd
    if m.attn_output_gate:
        attn += d * h * hd
    return float(attn)


@cache
def count_params(m: Model) -> Params:
    d, h = m.d_model, m.n_heads
    attn_full = attn_local = None
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * h * qk) if m.q_lora_rank else d * h * qk
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        attn = q + kv + h * m.v_head_dim * d
    else:
        attn_local = _gqa_attention(m, m.hd, m.kv_heads, False)
        attn_full = _gqa_attention(m, m.hd_full, m.kv_heads_full, m.full_k_eq_v)
        n_full, n_attn = m.n_full_layers, max(m.n_attention_layers, 1)
        # the mean over the attention layers: the op table's count x per-layer sum stays exact
        attn = (attn_full * n_full + attn_local * (n_attn - n_full)) / n_attn if m.has_full_shapes else attn_local
    extra = (h if m.attention_sinks else 0) + indexer_params(m)
    attn += extra
    norm_w = 2 if m.norm == "layernorm" else 1
    embedding = m.vocab_size * d + (m.max_context * d if m.positional == "learned" else 0)
    return Params(
        attn_per_layer=float(attn),
        dense_ffn_per_layer=float(_ffn(d, m.ffn_intermediate, m.ffn_gated, m.mlp_bias)) if m.ffn_intermediate else 0.0,
        expert=float(_ffn(d, m.moe_intermediate, m.ffn_gated, m.mlp_bias)) if m.is_moe else 0.0,
        shared_per_moe_layer=float(_ffn(d, m.shared_width, m.ffn_gated, m.mlp_bias)) if m.shared_width else 0.0,
        router_per_moe_layer=float(d * m.n_experts + (m.n_experts if m.router_bias else 0)) if m.is_moe else 0.0,
        norms_per_layer=float(2 * d * norm_w),
        n_dense_layers=m.n_dense_layers,
        n_moe_layers=m.n_moe_layers,
        n_experts=m.n_experts,
        top_k=m.experts_per_token,
        embedding=float(embedding),
        lm_head=0.0 if m.tie_embeddings else float(m.vocab_size * d),
        final_norm=float(d * norm_w),
        n_layers=m.n_layers,
        n_attn_layers=m.n_attention_layers,
        linear_per_layer=linear_mixer_params(m),
        n_linear_layers=m.n_linear_layers,
        index_per_layer=indexer_params(m),
        attn_full_per_layer=float(attn if attn_full is None else attn_full + extra),
        attn_local_per_layer=float(attn if attn_local is None else attn_local + extra),
    )
