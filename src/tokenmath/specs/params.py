"""Parameter counts: per component, per layer, total and active per token.

Shapes follow the Hugging Face implementations (LlamaAttention, DeepseekV3Attention for MLA, MixtralSparseMoeBlock,
GptOssExperts). Norm weights and biases are small but counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tokenmath.specs.model import Model


@dataclass(frozen=True)
class Params:
    attn_per_layer: float         # q, k, v, o (or the MLA projections) + their biases/norms, one layer
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

    @property
    def attn(self) -> float:
        return self.attn_per_layer * (self.n_dense_layers + self.n_moe_layers)

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
        return self.norms_per_layer * (self.n_dense_layers + self.n_moe_layers) + self.final_norm

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


@cache
def count_params(m: Model) -> Params:
    d, h = m.d_model, m.n_heads
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * h * qk) if m.q_lora_rank else d * h * qk
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        attn = q + kv + h * m.v_head_dim * d
    else:
        hd, kvh = m.hd, m.kv_heads
        attn = d * h * hd + 2 * d * kvh * hd + h * hd * d
        if m.qkv_bias:
            attn += h * hd + 2 * kvh * hd
        if m.o_bias:
            attn += d
        if m.qk_norm:
            attn += 2 * hd
    if m.attention_sinks:
        attn += h
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
    )
