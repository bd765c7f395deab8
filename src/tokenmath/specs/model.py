"""What a model is: its architecture, from the catalog (data/models.toml) or a Hugging Face config.json.

`Model` is a frozen dataclass of architecture fields; parameter counts live in params.py, KV bytes in
kv_cache.py, per-operation FLOPs and bytes in engine/ops.py.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cache, cached_property

from tokenmath.base.errors import InputError, show


@dataclass(frozen=True)
class Model:
    """A model's architecture (counts, widths in values; see the module docstring and data/models.toml)."""
    id: str
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    vocab_size: int
    n_kv_heads: int = 0            # 0 -> n_heads
    head_dim: int = 0              # 0 -> d_model // n_heads
    tie_embeddings: bool = False
    ffn_intermediate: int = 0      # dense FFN width (dense layers of a MoE too)
    ffn_gated: bool = True         # SwiGLU/GeGLU: 3 matrices; plain MLP: 2
    max_context: int = 0
    norm: str = "rmsnorm"          # rmsnorm | layernorm (with bias)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    positional: str = "rope"       # rope | learned | relative
    attention_sinks: bool = False  # gpt-oss: one learned logit per head per layer
    sliding_window: int = 0
    attention_pattern: tuple[str, ...] = ("full",)
    n_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    n_shared_experts: int = 0
    shared_intermediate: int = 0   # 0 -> n_shared_experts * moe_intermediate
    first_dense_layers: int = 0
    moe_layer_step: int = 1
    router_bias: bool = False
    # group-limited routing (DeepSeek-V2/V3 n_group / topk_group): the experts form routing_groups groups and a
    # token picks its top-k experts inside routing_group_limit of them; 0: unrestricted
    routing_groups: int = 0
    routing_group_limit: int = 0
    attention: str = "gqa"         # gqa | mla
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    attn_output_gate: bool = False  # Qwen3-Next gated attention: q_proj also emits a sigmoid gate (h x head_dim)
    local_kind: str = "sliding"    # sliding | chunked (Llama 4: a layer attends its own chunk of sliding_window tokens)
    # full (global) attention layers shaped apart from the local ones (Gemma 4: global_head_dim,
    # num_global_key_value_heads, attention_k_eq_v); 0 / False: the same shapes as every attention layer
    full_head_dim: int = 0         # 0 -> head_dim
    full_kv_heads: int = 0         # 0 -> n_kv_heads
    full_k_eq_v: bool = False      # no v_proj on full layers: V is the K projection (the cache still holds K and V)
    # recurrent (linear-attention / state-space) layers: the layers marked "linear" in attention_pattern
    linear_kind: str = ""          # gated_deltanet (Qwen3-Next) | mamba2 (Nemotron-H, Granite 4.0) | kda (Kimi Linear) | lightning (MiniMax-M1)
    linear_heads: int = 0          # value heads (GDN) / SSM heads (Mamba-2)
    linear_key_heads: int = 0      # q/k heads (GDN) / B,C groups (Mamba-2 n_groups)
    linear_key_dim: int = 0        # key head dim (GDN) / ssm_state_size (Mamba-2)
    linear_value_dim: int = 0      # value head dim (GDN) / mamba_head_dim (Mamba-2)
    linear_conv: int = 0           # causal conv kernel width (the conv state holds linear_conv - 1 inputs)
    linear_chunk: int = 0          # chunk length of the chunked prefill scan
    linear_state_bytes: int = 2    # bytes per value of the recurrent state (4: Qwen3.5's mamba_ssm_dtype float32)
    ffn_layers: int = -1           # layers with a dense FFN when not every layer has one (Nemotron-H '-' blocks)
    moe_layers: int = -1           # MoE blocks when they are counted apart from the mixers (Nemotron-H 'E' blocks)
    # DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer scores every cached token, attention reads top-k
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    native_dtype: str = "bf16"
    native_expert_dtype: str = ""
    official_params_total: float | None = None
    official_params_active: float | None = None
    params_source: str = ""
    source: str = ""
    notes: str = ""

    # ---- derived shape -------------------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def hd(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def hd_full(self) -> int:
        """Head size of the full-attention layers (head_dim unless full_head_dim sets them apart: Gemma 4)."""
        return self.full_head_dim or self.hd

    @property
    def kv_heads_full(self) -> int:
        """KV heads of the full-attention layers (kv_heads unless full_kv_heads sets them apart: Gemma 4)."""
        return self.full_kv_heads or self.kv_heads

    @property
    def has_full_shapes(self) -> bool:
        """Whether the full-attention layers differ in shape from the local ones (Gemma 4)."""
        return (self.hd_full, self.kv_heads_full, self.full_k_eq_v) != (self.hd, self.kv_heads, False)

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0 and self.experts_per_token > 0

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def is_sparse_attention(self) -> bool:
        return self.index_topk > 0

    @property
    def n_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        if self.moe_layers >= 0:
            return self.moe_layers
        rest = max(self.n_layers - self.first_dense_layers, 0)
        step = max(self.moe_layer_step, 1)
        # HF convention (Llama 4 interleave, Qwen2-MoE decoder_sparse_step): layer i is MoE when (i+1) % step == 0
        return rest // step

    @property
    def n_dense_layers(self) -> int:
        """Layers with a dense FFN: every layer that is not MoE, or ffn_layers where it is given."""
        return self.ffn_layers if self.ffn_layers >= 0 else self.n_layers - self.n_moe_layers

    @property
    def shared_width(self) -> int:
        return self.shared_intermediate or self.n_shared_experts * self.moe_intermediate

    @cached_property
    def layer_kinds(self) -> tuple[str, ...]:
        """'full', 'sliding' (a window, or Llama 4's chunk: local_kind) or 'linear' (a recurrent layer with a
        fixed-size state) for each layer (the pattern repeats cyclically)."""
        pat = self.attention_pattern or ("full",)
        kinds = tuple(pat[i % len(pat)] for i in range(self.n_layers))
        if not self.sliding_window:
            return tuple("full" if k == "sliding" else k for k in kinds)
        return kinds

    @cached_property
    def n_sliding_layers(self) -> int:
        return sum(k == "sliding" for k in self.layer_kinds)

    @cached_property
    def n_linear_layers(self) -> int:
        return sum(k == "linear" for k in self.layer_kinds)

    @property
    def n_attention_layers(self) -> int:
        """Layers that keep a KV cache (full and sliding/chunked)."""
        return self.n_layers - self.n_linear_layers

    @property
    def n_full_layers(self) -> int:
        return self.n_layers - self.n_sliding_layers - self.n_linear_layers

    def describe(self) -> str:
        bits = [f"{self.n_layers} layers", f"d_model {self.d_model}"]
        if self.is_mla:
            bits.append(f"MLA (kv_lora {self.kv_lora_rank} + rope {self.qk_rope_head_dim}), {self.n_heads} heads")
        else:
            bits.append(f"{self.n_heads} heads / {self.kv_heads} KV heads x {self.hd}")
            if self.has_full_shapes:
                bits.append(f"full layers {self.kv_heads_full} KV heads x {self.hd_full}"
                            + (" (V = K projection)" if self.full_k_eq_v else ""))
        if self.is_moe:
            bits.append(f"MoE {self.n_experts} experts top-{self.experts_per_token}"
                        + (f" + {self.n_shared_experts} shared" if self.n_shared_experts else ""))
        if self.n_sliding_layers:
            what = "chunked-attention" if self.local_kind == "chunked" else "sliding-window"
            bits.append(f"{self.n_sliding_layers} {what} ({self.sliding_window}) layers")
        if self.n_linear_layers:
            bits.append(f"{self.n_linear_layers} recurrent {self.linear_kind} layers")
        if self.is_sparse_attention:
            bits.append(f"sparse attention (indexer {self.index_heads} x {self.index_head_dim}, top-{self.index_topk})")
        return ", ".join(bits)


@cache
def full_layer_shapes(m: Model) -> Model:
    """The model with every attention layer shaped as its full-attention layers are (their head size and KV heads,
    Gemma 4), for rules written against head_dim / n_kv_heads (mapping.Layout.kv_shard: TP splits a full layer's
    KV over that layer's own KV heads). The model itself where the layer kinds share their shapes."""
    if not m.has_full_shapes:
        return m
    return replace(m, head_dim=m.hd_full, n_kv_heads=m.kv_heads_full, full_head_dim=0, full_kv_heads=0,
                   full_k_eq_v=False)


_INT_FIELDS = {f.name for f in fields(Model) if f.type in ("int",)}
_BOOL_FIELDS = {f.name for f in fields(Model) if f.type in ("bool",)}
_STR_FIELDS = {f.name for f in fields(Model) if f.type in ("str",)}
_LIMITS = {"n_layers": (1, 10_000), "d_model": (1, 1_000_000), "n_heads": (1, 100_000), "vocab_size": (1, 100_000_000),
           "ffn_layers": (-1, 20_000), "moe_layers": (-1, 20_000)}


def validate(m: Model, field_prefix: str = "model") -> Model:
    """Check the architecture is physically meaningful; every failure names the field."""
    def bad(name: str, problem: str, valid: str):
        raise InputError(f"{field_prefix}.{name}", problem, valid)

    for name in _INT_FIELDS:
        v = getattr(m, name)
        if isinstance(v, bool) or not isinstance(v, int):
            bad(name, f"must be an integer, got {type(v).__name__} {show(v)}", "a whole number")
        lo, hi = _LIMITS.get(name, (0, 100_000_000))
        if not lo <= v <= hi:
            bad(name, f"{show(v)} is out of range", f"between {lo} and {hi:,}")
    if m.n_kv_heads and m.n_heads % m.n_kv_heads:
        bad("n_kv_heads", f"{m.n_heads} heads are not divisible into {m.n_kv_heads} KV groups", "a divisor of n_heads")
    if m.full_kv_heads and m.n_heads % m.full_kv_heads:
        bad("full_kv_heads", f"{m.n_heads} heads are not divisible into {m.full_kv_heads} KV groups",
            "a divisor of n_heads")
    if m.is_mla and (m.full_head_dim or m.full_kv_heads or m.full_k_eq_v):
        bad("full_head_dim", "MLA layers have no per-kind head shapes", "0 (and full_kv_heads 0, full_k_eq_v false)")
    if m.attention not in ("gqa", "mla"):
        bad("attention", f"unknown kind {m.attention!r}", "gqa or mla")
    if m.is_mla and not (m.kv_lora_rank and m.qk_rope_head_dim and m.qk_nope_head_dim and m.v_head_dim):
        bad("kv_lora_rank", "MLA needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim", "positive integers")
    if not m.is_mla and not m.head_dim and m.d_model % m.n_heads:
        bad("head_dim", f"d_model {m.d_model} is not divisible by {m.n_heads} heads and no head_dim is given", "set head_dim")
    if m.n_experts and not 1 <= m.experts_per_token <= m.n_experts:
        bad("experts_per_token", f"{m.experts_per_token} of {m.n_experts} experts", f"between 1 and {m.n_experts}")
    if m.routing_groups > 1 and (not m.n_experts or m.n_experts % m.routing_groups):
        bad("routing_groups", f"{m.n_experts} experts do not split into {m.routing_groups} routing groups",
            "a divisor of n_experts (n_group), or 0")
    if m.routing_groups > 1 and not 1 <= m.routing_group_limit <= m.routing_groups:
        bad("routing_group_limit", f"{m.routing_group_limit} of {m.routing_groups} groups",
            f"between 1 and {m.routing_groups} (topk_group)")
    if m.is_moe and not m.moe_intermediate:
        bad("moe_intermediate", "a MoE model needs the per-expert FFN width", "a positive integer")
    if m.n_dense_layers and not m.ffn_intermediate:
        bad("ffn_intermediate", f"{m.n_dense_layers} dense layers need an FFN width", "a positive integer")
    for k in m.layer_kinds:
        if k not in ("full", "sliding", "linear"):
            bad("attention_pattern", f"unknown layer kind {k!r}", "full, sliding or linear")
    if m.local_kind not in ("sliding", "chunked"):
        bad("local_kind", f"unknown local attention {m.local_kind!r}", "sliding or chunked")
    if m.n_linear_layers:
        if m.linear_kind not in ("gated_deltanet", "mamba2", "kda", "lightning"):
            bad("linear_kind", f"unknown recurrent layer {m.linear_kind!r}", "gated_deltanet, mamba2, kda or lightning")
        if not (m.linear_heads and m.linear_key_heads and m.linear_key_dim and m.linear_value_dim):
            bad("linear_heads", "recurrent layers need linear_heads, linear_key_heads, linear_key_dim and "
                "linear_value_dim", "positive integers")
        if m.linear_state_bytes not in (1, 2, 4):
            bad("linear_state_bytes", f"{m.linear_state_bytes} bytes per state value", "1, 2 or 4")
        if m.linear_heads % m.linear_key_heads:
            bad("linear_key_heads", f"{m.linear_heads} heads are not divisible into {m.linear_key_heads} groups",
                "a divisor of linear_heads")
    if m.n_linear_layers == m.n_layers:
        bad("attention_pattern", "every layer is recurrent", "at least one attention layer")
    if m.ffn_layers > m.n_layers * 2:
        bad("ffn_layers", f"{m.ffn_layers} FFN layers for {m.n_layers} layers", f"at most {2 * m.n_layers}")
    if m.moe_layers > m.n_layers * 2:
        bad("moe_layers", f"{m.moe_layers} MoE layers for {m.n_layers} layers", f"at most {2 * m.n_layers}")
    if m.index_topk and not (m.index_heads and m.index_head_dim and m.is_mla):
        bad("index_topk", "sparse attention needs index_heads, index_head_dim and MLA", "positive integers")
    if m.norm not in ("rmsnorm", "layernorm"):
        bad("norm", f"unknown norm {m.norm!r}", "rmsnorm or layernorm")
    if m.positional not in ("rope", "learned", "relative", "alibi", "none"):
        bad("positional", f"unknown positional encoding {m.positional!r}", "rope, learned, relative, alibi or none")
    if m.positional == "learned" and not m.max_context:
        bad("max_context", "learned positions need the table size", "max_position_embeddings")
    return m


def from_record(mid: str, rec: dict, field_prefix: str = "model") -> Model:
    known = {f.name for f in fields(Model)} - {"id"}
    kw = {}
    for k, v in rec.items():
        if k not in known:
            raise InputError(f"{field_prefix}.{k}", "unknown key", f"valid keys: {', '.join(sorted(known))}")
        if k == "attention_pattern":
            v = tuple(v)
        kw[k] = v
    kw.setdefault("name", mid)
    for req in ("n_layers", "d_model", "n_heads", "vocab_size"):
        if req not in kw:
            raise InputError(f"{field_prefix}.{req}", "missing", "a positive integer")
    return validate(Model(id=mid, **kw), field_prefix)
