"""The config.json loader: real Hugging Face files give the same model as the catalog; bad files name the field."""
import json

import pytest

from tokenmath.base.errors import InputError
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params

PAIRS = {"Llama-3.1-8B.json": "llama-3.1-8b", "Llama-3.1-405B.json": "llama-3.1-405b",
         "Mixtral-8x7B-v0.1.json": "mixtral-8x7b", "Mixtral-8x22B-v0.1.json": "mixtral-8x22b",
         "Qwen3-8B.json": "qwen3-8b", "Qwen3-30B-A3B.json": "qwen3-30b-a3b", "Qwen3-235B-A22B.json": "qwen3-235b-a22b",
         "DeepSeek-V3.json": "deepseek-v3", "Kimi-K2-Instruct.json": "kimi-k2",
         "gpt-oss-20b.json": "gpt-oss-20b", "gpt-oss-120b.json": "gpt-oss-120b"}


@pytest.mark.parametrize("fname,mid", PAIRS.items())
def test_config_matches_catalog(fixtures, fname, mid):
    m = get_model(str(fixtures / fname))
    c = get_model(mid)
    assert count_params(m).total == pytest.approx(count_params(c).total, rel=1e-6)
    assert count_params(m).active == pytest.approx(count_params(c).active, rel=1e-6)
    assert kv_bytes_per_token(m, 2) == kv_bytes_per_token(c, 2)
    assert m.layer_kinds == c.layer_kinds


def test_deepseek_v3_config_reads_mla_and_fp8(fixtures):
    m = get_model(str(fixtures / "DeepSeek-V3.json"))
    assert m.is_mla and m.kv_lora_rank == 512 and m.qk_rope_head_dim == 64
    assert m.native_dtype == "fp8" and m.first_dense_layers == 3 and m.n_shared_experts == 1
    # MLA caches (512 + 64) values per layer: 576 x 61 layers x 2 bytes = 70,272 bytes per token in bf16
    assert kv_bytes_per_token(m, 2) == 70_272


def test_gpt_oss_alternates_sliding_layers(fixtures):
    m = get_model(str(fixtures / "gpt-oss-120b.json"))
    assert m.n_sliding_layers == 18 and m.sliding_window == 128 and m.native_expert_dtype == "mxfp4"


def test_gpt2_and_gemma_and_phi3_families():
    gpt2 = model_from_hf_config({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
                                 "n_positions": 1024})
    # GPT-2 small: 124,439,808 parameters (HF checkpoint, tied lm_head)
    assert count_params(gpt2).total == 124_439_808
    g3 = model_from_hf_config({"model_type": "gemma3_text", "num_hidden_layers": 12, "hidden_size": 640, "num_attention_heads": 4,
                               "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 1000, "intermediate_size": 2048,
                               "sliding_window": 512, "sliding_window_pattern": 6})
    assert g3.n_sliding_layers == 10 and g3.n_full_layers == 2 and g3.tie_embeddings
    phi = model_from_hf_config({"model_type": "phi3", "num_hidden_layers": 40, "hidden_size": 5120, "num_attention_heads": 40,
                                "num_key_value_heads": 10, "vocab_size": 100352, "intermediate_size": 17920})
    assert abs(count_params(phi).total / 14.66e9 - 1) < 0.01


@pytest.mark.parametrize("patch,field", [
    ({"num_hidden_layers": "many"}, "num_hidden_layers"),
    ({"num_hidden_layers": 1e30}, "num_hidden_layers"),
    ({"hidden_size": -4096}, "hidden_size"),
    ({"num_key_value_heads": 7}, "n_kv_heads"),
    ({"model_type": "mamba"}, "model_type"),
    ({"vocab_size": None, "model_type": "llama"}, "vocab_size"),
])
def test_bad_configs_name_the_field(fixtures, patch, field):
    data = json.loads((fixtures / "Llama-3.1-8B.json").read_text())
    data.update(patch)
    if patch.get("vocab_size", 0) is None:
        del data["vocab_size"]
    with pytest.raises(InputError) as e:
        model_from_hf_config(data)
    assert field in e.value.field


def test_unsupported_architecture_is_named(fixtures):
    data = json.loads((fixtures / "gemma-4-26B-A4B.json").read_text())
    data["model_type"] = "gemma9"        # Gemma 4 itself loads (tests/test_model_families_gemma4.py)
    with pytest.raises(InputError) as e:
        model_from_hf_config(data)
    assert e.value.field == "model_type" and "gemma9" in str(e.value) and "gemma4" in str(e.value)


def test_file_errors(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    big = tmp_path / "big.json"
    big.write_text('{"a": "' + "x" * 3_000_000 + '"}')
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama", ')
    for p in (deep, big, bad, tmp_path / "missing.json"):
        with pytest.raises(InputError) as e:
            get_model(str(p))
        assert e.value.field == "model"


def test_new_families_detected_from_architectures(fixtures):
    """A config.json without model_type is read by its architectures class (issue 20 families)."""
    cfg = json.loads((fixtures / "Qwen3-Next-80B-A3B-Instruct.json").read_text())
    del cfg["model_type"]
    m = model_from_hf_config(cfg)
    assert m.n_linear_layers == 36 and m.linear_kind == "gated_deltanet"
    cfg = json.loads((fixtures / "DeepSeek-V3.2.json").read_text())
    del cfg["model_type"]
    assert model_from_hf_config(cfg).index_topk == 2048
