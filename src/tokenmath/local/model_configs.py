"""The Hugging Face configs `tokenmath verify` runs: the built-in one sized to the device, a user's config.json, and
the tiny-width probe of either that measures per-layer framework overhead."""
from __future__ import annotations

import os

from tokenmath.specs.catalog import read_user_file
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.model import Model

# A Llama-style decoder sized for a 2-core machine: 12 layers of width 1024 with GQA (16 query heads, 4 KV heads),
# SwiGLU 2816, vocab 32000, untied: 201M parameters, 0.80 GB in fp32. A decode step reads all of it, tens of ms at
# a CPU's 20-30 GB/s; fp32 matmuls on two cores (~0.1 TFLOP/s) turn compute-bound within the batches 1-64.
DEFAULT_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "torch_dtype": "float32",
}
# on a GPU the same code at Llama-2-7B widths (layers chosen to fit a quarter of the memory)
GPU_WIDTHS = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 8}

# keys that shrink a config to its tiny overhead probe (the same layers, next to no FLOPs or bytes)
PROBE_SIZES = {"hidden_size": 64, "intermediate_size": 128, "vocab_size": 256, "head_dim": 16,
               "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "q_lora_rank": 16,
               "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "n_embd": 64,
               "n_inner": 128}


def default_config(device: str = "cpu", memory_bytes: float | None = None) -> dict:
    """The built-in config, sized to the device: the 201M-parameter model on a CPU (fewer layers when memory is
    short), Llama-2-7B widths on a GPU with as many layers (up to 32) as fit a quarter of its memory in fp32.
    memory_bytes: the device's memory in bytes (None: 80 GB on a GPU, no limit on a CPU)."""
    cfg = dict(DEFAULT_CONFIG)
    if device == "cuda":
        cfg.update(GPU_WIDTHS)
        per_layer = 4 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 11008)
        emb = 4 * 2 * 4096 * 32000
        budget = (memory_bytes or 80e9) / 4
        cfg["num_hidden_layers"] = int(max(2, min(32, (budget - emb) // per_layer)))
    elif memory_bytes:
        per_layer = 4 * (2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 2816)
        emb = 4 * 2 * 1024 * 32000
        fit = int((memory_bytes / 4 - emb) // per_layer)
        cfg["num_hidden_layers"] = int(max(2, min(12, fit)))
    return cfg


def load_config(path: str | os.PathLike) -> dict:
    """A config.json (or .toml) from disk; InputError("config") when it cannot be read."""
    return read_user_file(path, "config")


def probe_config(cfg: dict) -> dict:
    """The same architecture with tiny widths: its decode step is all framework overhead."""
    p = dict(cfg)
    for k, v in PROBE_SIZES.items():
        if k in p and p[k] is not None:
            p[k] = v
    heads = int(p.get("num_attention_heads") or p.get("n_head") or 4)
    kv = int(p.get("num_key_value_heads") or heads)
    if "num_attention_heads" in p:
        p["num_attention_heads"] = 4
        if "num_key_value_heads" in p:
            p["num_key_value_heads"] = 1 if kv < heads else 4
    if "n_head" in p:
        p["n_head"] = 4
    if p.get("head_dim") is not None:
        p["head_dim"] = 16
    if "text_config" in p and isinstance(p["text_config"], dict):
        p["text_config"] = probe_config(p["text_config"])
    return p


def model_from_config(cfg: dict, name: str) -> Model:
    """tokenmath's Model of the config as the verify run builds it (fp32, whatever the checkpoint's dtype)."""
    return model_from_hf_config({**cfg, "torch_dtype": "float32"}, name=name)
