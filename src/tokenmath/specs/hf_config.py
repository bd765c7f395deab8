"""Hugging Face config.json -> Model, for the families tokenmath knows.

Field names follow transformers' configuration classes (LlamaConfig, MixtralConfig, Qwen2/Qwen3(Moe)Config,
DeepseekV3Config, GptOssConfig, Gemma2/Gemma3TextConfig, Phi3Config, GPT2Config); the 2025-26 families (Qwen3-Next,
Llama 4, MiniMax-M2, GLM-4.5, Nemotron-H, Nemotron-4, Kimi Linear, MiniMax-M1, Granite 4.0, Gemma 4) add their own fields in hf_families.py, DeepSeek-V3.2 its
sparse-attention indexer. Every bad or missing field is reported by its config.json key.
"""
from __future__ import annotations

from tokenmath.base.errors import InputError, show
from tokenmath.specs import hf_families
from tokenmath.specs.hf_fields import ConfigFields
from tokenmath.specs.model import Model, validate

SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
             "deepseek_v3", "deepseek_v32", "kimi_k2", "gpt_oss", "gemma", "gemma2", "gemma3", "gemma3_text", "phi3",
             "gpt2", *hf_families.TYPES)
ARCH_TO_TYPE = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
                "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
                "Qwen2MoeForCausalLM": "qwen2_moe", "DeepseekV3ForCausalLM": "deepseek_v3",
                "DeepseekV2ForCausalLM": "deepseek_v2", "GptOssForCausalLM": "gpt_oss",
                "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
                "Gemma3ForConditionalGeneration": "gemma3", "Phi3ForCausalLM": "phi3", "GPT2LMHeadModel": "gpt2",
                "DeepseekV32ForCausalLM": "deepseek_v32", "Qwen3NextForCausalLM": "qwen3_next",
                "Llama4ForConditionalGeneration": "llama4", "Llama4ForCausalLM": "llama4_text",
                "MiniMaxM2ForCausalLM": "minimax_m2", "Glm4MoeForCausalLM": "glm4_moe",
                "NemotronHForCausalLM": "nemotron_h", "NemotronForCausalLM": "nemotron",
                "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe", "Qwen3_5ForConditionalGeneration": "qwen3_5",
                "KimiLinearForCausalLM": "kimi_linear", "MiniMaxM1ForCausalLM": "minimax_m1",
                "GraniteMoeHybridForCausalLM": "granitemoehybrid", "Gemma4ForConditionalGeneration": "gemma4",
                "Gemma4ForCausalLM": "gemma4_text"}
def _dtype(data: dict) -> tuple[str, str]:
    q = data.get("quantization_config")
    td = data.get("torch_dtype") or data.get("dtype") or "bfloat16"   # only a known string matters
    base = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(td, "bf16") if isinstance(td, str) else "bf16"
    if isinstance(q, dict):
        method = q.get("quant_method", "")
        method = method.lower() if isinstance(method, str) else ""
        if method == "fp8":
            return "fp8", ""
        if method == "mxfp4":
            return base, "mxfp4"
        if method in ("gptq", "awq") and q.get("bits") == 4:
            return "int4", ""
    return base, ""


def model_from_hf_config(data: dict, name: str = "config.json") -> Model:
    if not isinstance(data, dict):
        raise InputError("config.json", "is not a JSON object", "a Hugging Face config.json")
    mt = data.get("model_type")
    if mt is None:
        archs = data.get("architectures")
        if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise InputError("architectures", f"must be a list of class names, got {show(archs)}",
                             'e.g. ["LlamaForCausalLM"], or give model_type')
        if archs and archs[0] in ARCH_TO_TYPE:
            mt = ARCH_TO_TYPE[archs[0]]
    if not isinstance(mt, str):
        raise InputError("model_type", "missing or not a string", f"one of {', '.join(SUPPORTED)}")
    prefix = ""
    if isinstance(data.get("text_config"), dict) and mt in ("gemma3", "gemma4", "llama4", "mistral3", "qwen3_5",
                                                                  "qwen3_5_moe"):
        inner = data["text_config"]
        data = {**inner, "quantization_config": data.get("quantization_config"),
                "torch_dtype": inner.get("torch_dtype", data.get("torch_dtype"))}
        prefix = "text_config."
        mt = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
              "qwen3_5_moe": "qwen3_5_moe_text"}.get(mt, mt)
    if mt not in SUPPORTED:
        raise InputError("model_type", f"unsupported model_type {show(mt)}",
                         f"supported: {', '.join(SUPPORTED)}; wrapping a text_config: gemma3, gemma4, llama4, qwen3_5, "
                         "qwen3_5_moe")
    c = ConfigFields(data, prefix)
    kw: dict = {"name": name}
    dt, edt = _dtype(data)
    kw["native_dtype"], kw["native_expert_dtype"] = dt, edt

    if mt == "gpt2":
        d = c.int("n_embd", None, 1)
        kw.update(n_layers=c.int("n_layer", None, 1), d_model=d, n_heads=c.int("n_head", None, 1),
                  vocab_size=c.int("vocab_size", None, 1), ffn_intermediate=c.int("n_inner", 4 * d, 1),
                  ffn_gated=False, max_context=c.int("n_positions", 1024, 1), norm="layernorm", qkv_bias=True,
                  o_bias=True, mlp_bias=True, positional="learned", tie_embeddings=c.bool("tie_word_embeddings", True))
        return validate(Model(id=name, **kw), prefix.rstrip(".") or "config.json")

    d = c.int("hidden_size", None, 1)
    h = c.int("num_attention_heads", None, 1)
    kw.update(n_layers=c.int("num_hidden_layers", None, 1), d_model=d, n_heads=h,
              n_kv_heads=c.int("num_key_value_heads", h, 1), vocab_size=c.int("vocab_size", None, 1),
              max_context=c.int("max_position_embeddings", 0, 0))
    if c.has("head_dim"):
        kw["head_dim"] = c.int("head_dim", None, 1)
    tie_default = mt.startswith("gemma")
    kw["tie_embeddings"] = c.bool("tie_word_embeddings", tie_default)
    kw["qkv_bias"] = c.bool("attention_bias", mt == "qwen2")
    kw["o_bias"] = c.bool("attention_bias", False) if mt in ("llama", "gpt_oss") else False
    kw["mlp_bias"] = c.bool("mlp_bias", mt == "gpt_oss")

    if mt in hf_families.TYPES:
        hf_families.fill(mt, data, c, kw)
    elif mt in ("mixtral",):
        kw.update(n_experts=c.int("num_local_experts", None, 1), experts_per_token=c.int("num_experts_per_tok", None, 1),
                  moe_intermediate=c.int("intermediate_size", None, 1), ffn_intermediate=0)
    elif mt in ("qwen2_moe", "qwen3_moe"):
        n_layers = kw["n_layers"]
        mlp_only = data.get("mlp_only_layers") or []
        if not isinstance(mlp_only, list):
            raise InputError(f"{prefix}mlp_only_layers", "must be a list of layer indices", "e.g. []")
        step = c.int("decoder_sparse_step", 1, 1, n_layers)
        kw.update(n_experts=c.int("num_experts", None, 1), experts_per_token=c.int("num_experts_per_tok", None, 1),
                  moe_intermediate=c.int("moe_intermediate_size", None, 1), moe_layer_step=step,
                  ffn_intermediate=c.int("intermediate_size", 0, 0) if mlp_only or step > 1 else 0)
        if mlp_only:
            # leading dense layers are the only pattern the layer-count model represents exactly
            kw["first_dense_layers"] = len(mlp_only)
        if c.has("shared_expert_intermediate_size") and c.int("shared_expert_intermediate_size", 0, 0):
            kw.update(n_shared_experts=1, shared_intermediate=c.int("shared_expert_intermediate_size", 0, 0))
    elif mt in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2"):
        kw.update(attention="mla", q_lora_rank=c.int("q_lora_rank", 0, 0), kv_lora_rank=c.int("kv_lora_rank", None, 1),
                  qk_rope_head_dim=c.int("qk_rope_head_dim", None, 1), qk_nope_head_dim=c.int("qk_nope_head_dim", None, 1),
                  v_head_dim=c.int("v_head_dim", None, 1), n_kv_heads=h, head_dim=0,
                  ffn_intermediate=c.int("intermediate_size", None, 1))
        if c.has("n_routed_experts"):
            kw.update(n_experts=c.int("n_routed_experts", None, 1), experts_per_token=c.int("num_experts_per_tok", None, 1),
                      moe_intermediate=c.int("moe_intermediate_size", None, 1),
                      n_shared_experts=c.int("n_shared_experts", 0, 0),
                      first_dense_layers=c.int("first_k_dense_replace", 0, 0, kw["n_layers"]),
                      moe_layer_step=c.int("moe_layer_freq", 1, 1, kw["n_layers"]),
                      router_bias=data.get("topk_method") == "noaux_tc")
            if c.has("n_group") and c.int("n_group", 0, 0) > 1:   # group-limited routing (n_group 1: unrestricted)
                kw.update(routing_groups=c.int("n_group", 0, 0), routing_group_limit=c.int("topk_group", 1, 1))
        if mt == "deepseek_v32":
            hf_families.sparse_attention(data, c, kw)
    elif mt == "gpt_oss":
        kw.update(n_experts=c.int("num_local_experts", None, 1),
                  experts_per_token=c.int("num_experts_per_tok", None, 1, 100_000_000, "experts_per_token"),
                  moe_intermediate=c.int("intermediate_size", None, 1), ffn_intermediate=0, router_bias=True,
                  attention_sinks=True, o_bias=c.bool("attention_bias", True))
    else:
        kw["ffn_intermediate"] = c.int("intermediate_size", None, 1)

    if mt in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        kw["qk_norm"] = True
    if mt in ("gemma", "gemma2", "gemma3", "gemma3_text"):
        act = data.get("hidden_activation") or data.get("hidden_act") or "gelu"
        act = act if isinstance(act, str) else "gelu"
        kw["ffn_gated"] = True
        kw["notes"] = f"GeGLU ({act})"

    # sliding windows: explicit layer_types win; else family conventions
    window = data.get("sliding_window")
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text") \
            and not data.get("use_sliding_window", False):
        window = None
    if window is not None:
        w = c.int("sliding_window", None, 1)
        kw["sliding_window"] = w
        lt = data.get("layer_types")
        if isinstance(lt, list) and lt:
            kinds = []
            for i, t in enumerate(lt):
                if t not in ("sliding_attention", "full_attention"):
                    raise InputError(f"{prefix}layer_types[{i}]", f"unknown layer type {show(t)}",
                                     "sliding_attention or full_attention")
                kinds.append("sliding" if t == "sliding_attention" else "full")
            if len(kinds) != kw["n_layers"]:
                raise InputError(f"{prefix}layer_types", f"has {len(kinds)} entries for {kw['n_layers']} layers",
                                 "one entry per hidden layer")
            kw["attention_pattern"] = tuple(kinds)
        elif mt == "gemma2":
            kw["attention_pattern"] = ("sliding", "full")
        elif mt in ("gemma3", "gemma3_text"):
            p = c.int("sliding_window_pattern", 6, 1, 1000, "_sliding_window_pattern")
            kw["attention_pattern"] = ("sliding",) * (p - 1) + ("full",)
        else:
            kw["attention_pattern"] = ("sliding",)
    return validate(Model(id=name, **kw), prefix.rstrip(".") or "config.json")
