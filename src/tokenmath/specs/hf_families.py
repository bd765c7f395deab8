"""config.json -> Model fields for the 2025-26 families: hybrid recurrent attention, chunked attention and the open
MoEs deployed now. hf_config.py reads the keys every family shares (hidden_size, heads, vocab, ...); `fill` adds the
family's own.

Field names follow transformers' configuration classes and the model repos' own code:
- qwen3_next (Qwen3NextConfig): Gated DeltaNet layers, one gated-attention layer every full_attention_interval
  (or an explicit layer_types list), 512-expert MoE with a shared expert. Qwen3.5 (qwen3_5 / qwen3_5_moe, the text
  tower in text_config: Qwen3_5TextConfig / Qwen3_5MoeTextConfig) is the same hybrid, dense or MoE, and may keep
  its recurrent state in float32 (mamba_ssm_dtype).
- llama4_text (Llama4TextConfig): MoE every interleave_moe_layer_step layers (a shared expert in each), dense layers
  of intermediate_size_mlp, chunked local attention (attention_chunk_size) on RoPE layers and global NoPE attention
  on every 4th layer (no_rope_layers; HF default no_rope_layer_interval 4).
- minimax_m2 (MiniMaxM2Config, the MiniMax-M2 repo's configuration_minimax_m2.py): every layer MoE, expert width
  intermediate_size, routing bias.
- glm4_moe (Glm4MoeConfig): DeepSeek-style MoE (first_k_dense_replace, n_shared_experts, routing bias) on GQA.
- nemotron_h (NemotronHConfig, nvidia's configuration_nemotron_h.py): one block per hybrid_override_pattern letter:
  M a Mamba-2 mixer, * an attention mixer, - a squared-ReLU MLP (no gate), each block with its own norm.
- nemotron (NemotronConfig, Nemotron-4): squared-ReLU MLP without a gate, LayerNorm1P (weight and bias).
"""
from __future__ import annotations

from tokenmath.base.errors import InputError, show
from tokenmath.specs.hf_fields import ConfigFields

TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "llama4_text", "minimax_m2", "glm4_moe", "nemotron_h",
         "nemotron")
# Chunk length of the chunked prefill scan of Gated DeltaNet: flash-linear-attention's chunk_gated_delta_rule works
# on chunks of 64 tokens (fla/ops/gated_delta_rule/chunk.py, BT = 64), the kernel vLLM and SGLang call.
GDN_CHUNK = 64


def _experts(c: ConfigFields, kw: dict, experts_key: str, k_key: str = "num_experts_per_tok") -> None:
    kw.update(n_experts=c.int(experts_key, None, 1), experts_per_token=c.int(k_key, None, 1))


def _qwen3_next(data: dict, c: ConfigFields, kw: dict) -> None:
    n = kw["n_layers"]
    kw.update(qk_norm=True, attn_output_gate=c.bool("attn_output_gate", True))
    if c.has("num_experts"):
        _experts(c, kw, "num_experts")
        mlp_only = data.get("mlp_only_layers") or []
        if not isinstance(mlp_only, list):
            raise InputError(f"{c.prefix}mlp_only_layers", "must be a list of layer indices", "e.g. []")
        step = c.int("decoder_sparse_step", 1, 1, n)
        kw.update(moe_intermediate=c.int("moe_intermediate_size", None, 1), moe_layer_step=step,
                  ffn_intermediate=c.int("intermediate_size", 0, 0) if mlp_only or step > 1 else 0,
                  first_dense_layers=len(mlp_only))
        if c.int("shared_expert_intermediate_size", 0, 0):
            kw.update(n_shared_experts=1, shared_intermediate=c.int("shared_expert_intermediate_size", 0, 0))
    else:
        kw["ffn_intermediate"] = c.int("intermediate_size", None, 1)
    if data.get("mamba_ssm_dtype") == "float32":
        kw["linear_state_bytes"] = 4
    lt = data.get("layer_types")
    if isinstance(lt, list) and lt:
        kinds = []
        for i, t in enumerate(lt):
            if t not in ("linear_attention", "full_attention"):
                raise InputError(f"{c.prefix}layer_types[{i}]", f"unknown layer type {show(t)}",
                                 "linear_attention or full_attention")
            kinds.append("linear" if t == "linear_attention" else "full")
        if len(kinds) != n:
            raise InputError(f"{c.prefix}layer_types", f"has {len(kinds)} entries for {n} layers",
                             "one entry per hidden layer")
        pattern = tuple(kinds)
    else:
        every = c.int("full_attention_interval", 4, 1, n)
        pattern = ("linear",) * (every - 1) + ("full",)     # layer i is full attention when (i + 1) % every == 0
    kw.update(attention_pattern=pattern, linear_kind="gated_deltanet",
              linear_heads=c.int("linear_num_value_heads", None, 1), linear_key_heads=c.int("linear_num_key_heads", None, 1),
              linear_key_dim=c.int("linear_key_head_dim", None, 1), linear_value_dim=c.int("linear_value_head_dim", None, 1),
              linear_conv=c.int("linear_conv_kernel_dim", 4, 1), linear_chunk=GDN_CHUNK)


def _llama4(data: dict, c: ConfigFields, kw: dict) -> None:
    n = kw["n_layers"]
    _experts(c, kw, "num_local_experts")
    Fe = c.int("intermediate_size", None, 1)
    kw.update(moe_intermediate=Fe, n_shared_experts=1, shared_intermediate=Fe,
              moe_layer_step=c.int("interleave_moe_layer_step", 1, 1, n),
              ffn_intermediate=c.int("intermediate_size_mlp", None, 1))
    # use_qk_norm is Llama4TextL2Norm: no weights, so nothing to count
    chunk = c.int("attention_chunk_size", 0, 0)
    nope = data.get("no_rope_layers")
    if isinstance(nope, list) and nope:
        if len(nope) != n:
            raise InputError(f"{c.prefix}no_rope_layers", f"has {len(nope)} entries for {n} layers", "one per layer")
        pattern = tuple("sliding" if r else "full" for r in nope)   # 1: RoPE (chunked) layer; 0: global NoPE layer
    else:
        every = c.int("no_rope_layer_interval", 4, 1, n)
        pattern = ("sliding",) * (every - 1) + ("full",)
    if chunk:
        kw.update(sliding_window=chunk, local_kind="chunked", attention_pattern=pattern)


def _minimax_m2(data: dict, c: ConfigFields, kw: dict) -> None:
    _experts(c, kw, "num_local_experts")
    kw.update(moe_intermediate=c.int("intermediate_size", None, 1), ffn_intermediate=0,
              router_bias=c.bool("use_routing_bias", False), qk_norm=c.bool("use_qk_norm", False))
    if c.int("shared_intermediate_size", 0, 0):
        kw.update(n_shared_experts=1, shared_intermediate=c.int("shared_intermediate_size", 0, 0))


def _glm4_moe(data: dict, c: ConfigFields, kw: dict) -> None:
    n = kw["n_layers"]
    _experts(c, kw, "n_routed_experts")
    kw.update(moe_intermediate=c.int("moe_intermediate_size", None, 1), n_shared_experts=c.int("n_shared_experts", 0, 0),
              first_dense_layers=c.int("first_k_dense_replace", 0, 0, n), ffn_intermediate=c.int("intermediate_size", None, 1),
              router_bias=True, qk_norm=c.bool("use_qk_norm", False), qkv_bias=c.bool("attention_bias", False))


def _nemotron_h(data: dict, c: ConfigFields, kw: dict) -> None:
    pat = data.get("hybrid_override_pattern")
    if not isinstance(pat, str) or not pat:
        raise InputError(f"{c.prefix}hybrid_override_pattern", "missing or not a string",
                         'one letter per block: M (Mamba-2), * (attention), - (MLP)')
    bad = sorted(set(pat) - set("M*-"))
    if bad:
        raise InputError(f"{c.prefix}hybrid_override_pattern", f"unsupported block letter(s) {', '.join(bad)}",
                         "M (Mamba-2), * (attention) or - (MLP); MoE blocks (E) are not supported yet")
    if len(pat) != kw["n_layers"]:
        raise InputError(f"{c.prefix}hybrid_override_pattern", f"has {len(pat)} letters for {kw['n_layers']} blocks",
                         "one letter per hidden layer")
    mixers = tuple("linear" if ch == "M" else "full" for ch in pat if ch in "M*")
    # A Model layer is a token mixer; the MLP blocks are counted apart (ffn_layers). Each Nemotron-H block has one
    # norm where the Model counts two per mixer layer: 2 x 64 vs 118 norms of d values for the 56B, 0.0001% of it.
    if c.has("attention_head_dim"):
        kw["head_dim"] = c.int("attention_head_dim", None, 1)
    act = data.get("mlp_hidden_act", "relu2")
    kw.update(n_layers=len(mixers), attention_pattern=mixers, ffn_layers=pat.count("-"),
              ffn_intermediate=c.int("intermediate_size", None, 1), ffn_gated=act not in ("relu2",),
              mlp_bias=c.bool("mlp_bias", False), positional="none", linear_kind="mamba2",
              linear_heads=c.int("mamba_num_heads", None, 1), linear_key_heads=c.int("n_groups", 1, 1),
              linear_key_dim=c.int("ssm_state_size", None, 1), linear_value_dim=c.int("mamba_head_dim", None, 1),
              linear_conv=c.int("conv_kernel", 4, 1), linear_chunk=c.int("chunk_size", 256, 1))


def _nemotron(data: dict, c: ConfigFields, kw: dict) -> None:
    kw.update(ffn_intermediate=c.int("intermediate_size", None, 1), ffn_gated=False, norm="layernorm",
              mlp_bias=c.bool("mlp_bias", False))
    if not c.has("head_dim") and c.has("kv_channels"):
        kw["head_dim"] = c.int("kv_channels", None, 1)


_FILL = {"qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_next, "qwen3_5_moe_text": _qwen3_next, "llama4_text": _llama4, "minimax_m2": _minimax_m2, "glm4_moe": _glm4_moe,
         "nemotron_h": _nemotron_h, "nemotron": _nemotron}


def fill(mt: str, data: dict, c: ConfigFields, kw: dict) -> None:
    """Add the family's own fields to `kw` (the shared ones are already there)."""
    _FILL[mt](data, c, kw)


def sparse_attention(data: dict, c: ConfigFields, kw: dict) -> None:
    """DeepSeek-V3.2 (deepseek_v32): DeepSeek-V3's MLA and MoE plus the lightning indexer (index_n_heads,
    index_head_dim) choosing index_topk cached tokens per query."""
    kw.update(index_heads=c.int("index_n_heads", None, 1), index_head_dim=c.int("index_head_dim", None, 1),
              index_topk=c.int("index_topk", None, 1))
