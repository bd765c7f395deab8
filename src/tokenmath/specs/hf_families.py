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
  M a Mamba-2 mixer, * an attention mixer, - a squared-ReLU MLP (no gate), E a MoE of squared-ReLU experts
  (n_routed_experts, num_experts_per_tok, moe_intermediate_size, a shared expert of
  moe_shared_expert_intermediate_size, a routing bias: Nemotron 3), each block with its own norm.
- nemotron (NemotronConfig, Nemotron-4): squared-ReLU MLP without a gate, LayerNorm1P (weight and bias).
- kimi_linear (KimiLinearConfig, the Kimi-Linear repo's configuration_kimi.py): Kimi Delta Attention layers
  (linear_attn_config.kda_layers, 1-based) and MLA layers (full_attn_layers) without q LoRA; DeepSeek-style MoE
  (num_experts, num_experts_per_token, num_shared_experts, first_k_dense_replace, a routing bias).
- minimax_m1 (MiniMaxM1Config, the MiniMax-M1 repo's configuration_minimax_m1.py): attn_type_list, 0 a lightning
  (linear) attention layer, 1 a softmax GQA layer; every layer a Mixtral-style MoE of intermediate_size experts.
- granitemoehybrid (GraniteMoeHybridConfig, IBM Granite 4.0): layer_types, "mamba" a Mamba-2 mixer (Bamba's:
  mamba_n_heads x mamba_d_head, mamba_n_groups x mamba_d_state, conv mamba_d_conv) and "attention" a GQA layer (no
  positional encoding unless position_embedding_type is "rope"); every layer has a SwiGLU shared MLP of
  shared_intermediate_size and, when num_local_experts > 0, a MoE of num_local_experts SwiGLU experts of
  intermediate_size (top num_experts_per_tok, router without bias).
- gemma4_text (Gemma4TextConfig, transformers' modeling_gemma4.py; the text tower of gemma4 in text_config): Gemma 3's
  sliding / full layers (layer_types, sliding_window) whose full layers have their own head size (global_head_dim)
  and, with attention_k_eq_v, their own KV heads (num_global_key_value_heads) and no v_proj (V is the K
  projection); a GeGLU MLP in every layer and, with enable_moe_block, a MoE of num_experts GeGLU experts of
  moe_intermediate_size (top top_k_experts) beside it in every layer -- the MLP is then counted as a shared expert,
  as Granite 4.0's shared MLP is. Refused: per-layer embeddings (hidden_size_per_layer_input > 0) and KV shared
  across layers (num_kv_shared_layers > 0), the E2B / E4B sizes' features, which the Model does not represent.
"""
from __future__ import annotations

from tokenmath.base.errors import InputError, show
from tokenmath.specs.hf_fields import ConfigFields

TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "llama4_text", "minimax_m2", "glm4_moe", "nemotron_h",
         "nemotron", "kimi_linear", "minimax_m1", "granitemoehybrid", "gemma4_text")
# Chunk length of the chunked prefill scan of Gated DeltaNet: flash-linear-attention's chunk_gated_delta_rule works
# on chunks of 64 tokens (fla/ops/gated_delta_rule/chunk.py, BT = 64), the kernel vLLM and SGLang call. Kimi Delta
# Attention's chunked kernel (fla/ops/kda, the kernel the Kimi Linear README points to) uses the same chunk of 64.
GDN_CHUNK = 64
# Lightning attention (MiniMax-01/M1) computes the prefill in blocks: intra-block as softmax-free attention,
# inter-block through the running KV state (MiniMax-01 report, arXiv 2501.08313, Sec. 2.2.1); vLLM's kernel
# (model_executor/layers/lightning_attn.py, `lightning_attention(..., block_size=256)`) uses blocks of 256.
LIGHTNING_BLOCK = 256


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
    bad = sorted(set(pat) - set("M*-E"))
    if bad:
        raise InputError(f"{c.prefix}hybrid_override_pattern", f"unsupported block letter(s) {', '.join(bad)}",
                         "M (Mamba-2), * (attention), - (MLP) or E (MoE)")
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
    if "E" in pat:
        _experts(c, kw, "n_routed_experts")
        kw.update(moe_layers=pat.count("E"), moe_intermediate=c.int("moe_intermediate_size", None, 1),
                  n_shared_experts=c.int("n_shared_experts", 0, 0), router_bias=True,
                  shared_intermediate=c.int("moe_shared_expert_intermediate_size", 0, 0))
    if data.get("mamba_ssm_cache_dtype") == "float32":
        kw["linear_state_bytes"] = 4


def _nemotron(data: dict, c: ConfigFields, kw: dict) -> None:
    kw.update(ffn_intermediate=c.int("intermediate_size", None, 1), ffn_gated=False, norm="layernorm",
              mlp_bias=c.bool("mlp_bias", False))
    if not c.has("head_dim") and c.has("kv_channels"):
        kw["head_dim"] = c.int("kv_channels", None, 1)


def _kimi_linear(data: dict, c: ConfigFields, kw: dict) -> None:
    n, h = kw["n_layers"], kw["n_heads"]
    la = data.get("linear_attn_config")
    if not isinstance(la, dict):
        raise InputError(f"{c.prefix}linear_attn_config", "missing or not an object",
                         "kda_layers, full_attn_layers (1-based), num_heads, head_dim, short_conv_kernel_size")
    lc = ConfigFields(la, f"{c.prefix}linear_attn_config.")
    full, kda = la.get("full_attn_layers"), la.get("kda_layers")
    if not (isinstance(full, list) and isinstance(kda, list) and all(isinstance(i, int) for i in full + kda)
            and sorted(full + kda) == list(range(1, n + 1))):
        raise InputError(f"{c.prefix}linear_attn_config.full_attn_layers",
                         "full_attn_layers and kda_layers must together list every layer once",
                         f"1-based layer numbers 1..{n}")
    full_set = set(full)
    kw.update(attention="mla", q_lora_rank=c.int("q_lora_rank", 0, 0), kv_lora_rank=c.int("kv_lora_rank", None, 1),
              qk_rope_head_dim=c.int("qk_rope_head_dim", None, 1), qk_nope_head_dim=c.int("qk_nope_head_dim", None, 1),
              v_head_dim=c.int("v_head_dim", None, 1), n_kv_heads=h, head_dim=0,
              ffn_intermediate=c.int("intermediate_size", None, 1),
              attention_pattern=tuple("full" if i + 1 in full_set else "linear" for i in range(n)),
              linear_kind="kda", linear_heads=lc.int("num_heads", None, 1), linear_key_heads=lc.int("num_heads", None, 1),
              linear_key_dim=lc.int("head_dim", None, 1), linear_value_dim=lc.int("head_dim", None, 1),
              linear_conv=lc.int("short_conv_kernel_size", 4, 1), linear_chunk=GDN_CHUNK)
    if c.has("num_experts"):
        _experts(c, kw, "num_experts", "num_experts_per_token")
        kw.update(moe_intermediate=c.int("moe_intermediate_size", None, 1),
                  n_shared_experts=c.int("num_shared_experts", 0, 0),
                  first_dense_layers=c.int("first_k_dense_replace", 0, 0, n),
                  moe_layer_step=c.int("moe_layer_freq", 1, 1, n), router_bias=c.bool("use_grouped_topk", False))


def _minimax_m1(data: dict, c: ConfigFields, kw: dict) -> None:
    n = kw["n_layers"]
    types = data.get("attn_type_list")
    if not (isinstance(types, list) and len(types) == n and all(t in (0, 1) and not isinstance(t, bool) for t in types)):
        raise InputError(f"{c.prefix}attn_type_list", f"must list 0 (lightning) or 1 (softmax attention) for each of "
                         f"the {n} layers", "e.g. [0, 0, 0, 0, 0, 0, 0, 1, ...]")
    _experts(c, kw, "num_local_experts")
    hd = c.int("head_dim", None, 1)
    kw.update(moe_intermediate=c.int("intermediate_size", None, 1), ffn_intermediate=0,
              attention_pattern=tuple("full" if t == 1 else "linear" for t in types), linear_kind="lightning",
              linear_heads=kw["n_heads"], linear_key_heads=kw["n_heads"], linear_key_dim=hd, linear_value_dim=hd,
              linear_conv=0, linear_chunk=LIGHTNING_BLOCK)
    if c.int("shared_intermediate_size", 0, 0):
        kw.update(n_shared_experts=1, shared_intermediate=c.int("shared_intermediate_size", 0, 0))


def _granite_hybrid(data: dict, c: ConfigFields, kw: dict) -> None:
    n, d = kw["n_layers"], kw["d_model"]
    lt = data.get("layer_types")
    if not (isinstance(lt, list) and len(lt) == n and all(t in ("mamba", "attention") for t in lt)):
        raise InputError(f"{c.prefix}layer_types", f"must list 'mamba' or 'attention' for each of the {n} layers",
                         'e.g. ["mamba", "mamba", "mamba", "mamba", "mamba", "attention", ...]')
    if c.bool("mamba_proj_bias", False):
        raise InputError(f"{c.prefix}mamba_proj_bias", "true is not modelled (the Granite 4.0 releases use false)",
                         "false")
    heads = c.int("mamba_n_heads", 128, 1)
    if isinstance(data.get("mamba_d_head"), str):     # "auto": the mixer's width (mamba_expand x d) over its heads
        head = c.int("mamba_expand", 2, 1) * d // heads
    else:
        head = c.int("mamba_d_head", None, 1)
    pos = data.get("position_embedding_type")
    kw.update(attention_pattern=tuple("linear" if t == "mamba" else "full" for t in lt), linear_kind="mamba2",
              linear_heads=heads, linear_key_heads=c.int("mamba_n_groups", 1, 1),
              linear_key_dim=c.int("mamba_d_state", 256, 1), linear_value_dim=head,
              linear_conv=c.int("mamba_d_conv", 4, 1), linear_chunk=c.int("mamba_chunk_size", 256, 1),
              positional="rope" if pos == "rope" else "none")
    shared = c.int("shared_intermediate_size", None, 1)
    if c.int("num_local_experts", 0, 0):
        _experts(c, kw, "num_local_experts")
        kw.update(moe_intermediate=c.int("intermediate_size", None, 1), n_shared_experts=1,
                  shared_intermediate=shared, ffn_intermediate=0)
    else:                                           # dense: the shared MLP is the layer's only FFN
        kw["ffn_intermediate"] = shared


def _gemma4(data: dict, c: ConfigFields, kw: dict) -> None:
    n = kw["n_layers"]
    if c.int("hidden_size_per_layer_input", 0, 0):
        raise InputError(f"{c.prefix}hidden_size_per_layer_input", "per-layer embeddings (Gemma 4 E2B / E4B) are not "
                         "modelled: a second embedding table of num_hidden_layers x this width per token and a gated "
                         "projection in every layer", "0 (the 26B A4B and 31B sizes)")
    if c.int("num_kv_shared_layers", 0, 0, n):
        raise InputError(f"{c.prefix}num_kv_shared_layers", "layers that reuse an earlier layer's KV cache (Gemma 4 "
                         "E2B / E4B) are not modelled: the KV bytes and the k/v projections would be counted for "
                         "every layer", "0 (the 26B A4B and 31B sizes)")
    if not isinstance(data.get("layer_types"), list):
        # the published files list every layer's kind; no default pattern is guessed
        raise InputError(f"{c.prefix}layer_types", "missing or not a list", 'one entry per layer: "sliding_attention" '
                         'or "full_attention"')
    c.int("sliding_window", None, 1)           # the local layers' window (read again with the layer kinds)
    act = data.get("hidden_activation") or data.get("hidden_act") or "gelu_pytorch_tanh"
    k_eq_v = c.bool("attention_k_eq_v", False)
    kw.update(qk_norm=True, notes=f"GeGLU ({act if isinstance(act, str) else 'gelu'})", full_k_eq_v=k_eq_v)
    if c.has("global_head_dim"):
        kw["full_head_dim"] = c.int("global_head_dim", None, 1)
    if k_eq_v and c.has("num_global_key_value_heads"):
        # Gemma4TextAttention: num_global_key_value_heads only where attention_k_eq_v holds on a full layer
        kw["full_kv_heads"] = g = c.int("num_global_key_value_heads", None, 1)
        if kw["n_heads"] % g:
            raise InputError(f"{c.prefix}num_global_key_value_heads", f"{kw['n_heads']} heads are not divisible "
                             f"into {g} KV groups", "a divisor of num_attention_heads")
    F = c.int("intermediate_size", None, 1)
    if c.bool("enable_moe_block", False):
        kw.update(n_experts=c.int("num_experts", None, 1), experts_per_token=c.int("top_k_experts", None, 1),
                  moe_intermediate=c.int("moe_intermediate_size", None, 1), n_shared_experts=1, shared_intermediate=F,
                  ffn_intermediate=0)
    else:
        kw["ffn_intermediate"] = F


_FILL = {"qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_next, "qwen3_5_moe_text": _qwen3_next, "llama4_text": _llama4, "minimax_m2": _minimax_m2, "glm4_moe": _glm4_moe,
         "nemotron_h": _nemotron_h, "nemotron": _nemotron, "kimi_linear": _kimi_linear, "minimax_m1": _minimax_m1,
         "granitemoehybrid": _granite_hybrid, "gemma4_text": _gemma4}


def fill(mt: str, data: dict, c: ConfigFields, kw: dict) -> None:
    """Add the family's own fields to `kw` (the shared ones are already there)."""
    _FILL[mt](data, c, kw)


def sparse_attention(data: dict, c: ConfigFields, kw: dict) -> None:
    """DeepSeek-V3.2 (deepseek_v32): DeepSeek-V3's MLA and MoE plus the lightning indexer (index_n_heads,
    index_head_dim) choosing index_topk cached tokens per query."""
    kw.update(index_heads=c.int("index_n_heads", None, 1), index_head_dim=c.int("index_head_dim", None, 1),
              index_topk=c.int("index_topk", None, 1))
