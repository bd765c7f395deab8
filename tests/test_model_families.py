"""The 2025-26 families (issue 20): each published config.json loads, its counts match the card, and the attention
design (recurrent state, sparse top-k reads, chunked windows) shows in the KV, memory and decode-step answers.
Where each fixture comes from: tests/fixtures/SOURCES.md."""
import json

import numpy as np
import pytest

from tokenmath.analyses.serving.context import context
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token, state_bytes_per_sequence
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params, indexer_params, linear_mixer_params

NEW = {"Qwen3-Next-80B-A3B-Instruct.json": "qwen3-next-80b-a3b", "DeepSeek-V3.2.json": "deepseek-v3.2",
       "Llama-4-Scout-17B-16E-Instruct.json": "llama-4-scout",
       "Llama-4-Maverick-17B-128E-Instruct.json": "llama-4-maverick", "MiniMax-M2.5.json": "minimax-m2.5",
       "GLM-4.5-Air.json": "glm-4.5-air", "Nemotron-H-56B-Base-8K.json": "nemotron-h-56b",
       "Qwen3.5-35B-A3B.json": "qwen3.5-35b-a3b",
       # second round (tests/test_model_families_linear.py has their hand-computed checks)
       "Kimi-Linear-48B-A3B-Instruct.json": "kimi-linear-48b-a3b", "MiniMax-M1.json": "minimax-m1",
       "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json": "nemotron-3-nano-30b-a3b"}


@pytest.mark.parametrize("fname,mid", NEW.items())
def test_fixture_loads_as_the_catalog_entry(fixtures, fname, mid):
    m, c = get_model(str(fixtures / fname)), get_model(mid)
    assert count_params(m).total == count_params(c).total
    assert count_params(m).active == count_params(c).active
    assert kv_bytes_per_token(m, 2) == kv_bytes_per_token(c, 2)
    assert state_bytes_per_sequence(m) == state_bytes_per_sequence(c)
    assert m.layer_kinds == c.layer_kinds
    # the card's total (catalog official_params_total, with its source) within 1%
    assert abs(count_params(c).total / c.official_params_total - 1) < 0.01


# Active parameters against the cards. A card's rounded figure ("17B activated") carries one unit of its last
# digit; `without` names the embedding tables the figure leaves out (stated in each catalog entry's notes).
ACTIVE = [("llama-4-scout", 17e9, 1e9, ()),            # Meta card: '17B activated'
          ("llama-4-maverick", 17e9, 1e9, ()),
          ("qwen3-next-80b-a3b", 3e9, 1e9, ()),         # Qwen card: '3B activated'
          ("qwen3.5-35b-a3b", 3e9, 1e9, ()),            # NVIDIA Megatron Bridge docs: '3B activated per token'
          ("glm-4.5-air", 12e9, 1e9, ("embedding",)),    # GLM card: '12 billion active'
          ("minimax-m2.5", 10e9, 1e9, ("embedding", "lm_head")),   # SGLang docs: '10 billion active'
          ("deepseek-v3.2", 37e9, 1e9, ("embedding",))]  # V3's '37B activated' + the 0.85B indexer


@pytest.mark.parametrize("mid,card,unit,without", ACTIVE)
def test_active_params_match_the_cards(mid, card, unit, without):
    p = count_params(get_model(mid))
    got = p.active - sum(getattr(p, k) for k in without)
    assert abs(got - card) <= unit, (mid, got)


def test_qwen3_next_counts_by_hand():
    m = get_model("qwen3-next-80b-a3b")
    # Gated DeltaNet mixer, d 2048, 16 qk heads x 128, 32 v heads x 128, conv 4:
    # in_proj_qkvz 2048 x (2*16*128 + 2*32*128 = 12288) = 25,165,824; in_proj_ba 2048 x 64 = 131,072;
    # conv (2*16*128 + 32*128 = 8192) x 4 = 32,768; dt_bias + A_log 64; norm 128; out_proj 4096 x 2048 = 8,388,608
    assert linear_mixer_params(m) == 25_165_824 + 131_072 + 32_768 + 64 + 128 + 8_388_608 == 33_718_464
    # A public third-party test quotes these counts from the safetensors headers of Qwen3-Coder-Next, which has
    # every dimension of this config:
    # 79,674,391,296 total, 3,874,929,408 active, which also count the shared-expert gate (2048 x 1 x 48 layers)
    p = count_params(m)
    assert p.total + 2048 * 48 == 79_674_391_296
    assert p.active + 2048 * 48 == 3_874_929_408


def test_deepseek_v32_is_v3_plus_the_indexer():
    v32, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    # indexer per layer: wq_b 1536 x 64 x 128 = 12,582,912; wk 7168 x 128 = 917,504; LayerNorm 256;
    # weights_proj 7168 x 64 = 458,752 -> 13,959,424 x 61 layers = 851,524,864
    assert indexer_params(v32) == 13_959_424
    assert count_params(v32).total - count_params(v3).total == 61 * 13_959_424 == 851_524_864


def test_hand_computed_state_and_kv_bytes_hybrid():
    m = get_model("qwen3-next-80b-a3b")
    # KV only in the 12 gated-attention layers: 2 (K, V) x 2 KV heads x 256 x 12 layers x 2 B = 24,576 B per token
    assert m.n_attention_layers == 12 and m.n_linear_layers == 36
    assert kv_bytes_per_token(m, 2) == 24_576
    # state per GDN layer: 32 heads x 128 x 128 = 524,288 + conv (4 - 1) x 8192 = 24,576 -> 548,864 values;
    # x 36 layers x 2 B = 39,518,208 B per sequence, at any context
    assert state_bytes_per_sequence(m) == 39_518_208
    c = np.array([1, 8192, 131072, 1_000_000])
    assert np.array_equal(kv_bytes_per_sequence(m, c, 2), 24_576 * c + 39_518_208)
    # against Qwen3-32B (64 layers x 2 x 8 x 128 x 2 B = 262,144 B/token): 10.7x less KV per token
    assert kv_bytes_per_token(get_model("qwen3-32b"), 2) == 262_144


def test_qwen35_keeps_its_state_in_float32():
    m = get_model("qwen3.5-35b-a3b")
    assert m.layer_kinds[:4] == ("linear", "linear", "linear", "full") and m.n_linear_layers == 30
    # config mamba_ssm_dtype float32: state 32 x 128 x 128 x 4 B = 2,097,152 + conv 3 x 8192 x 2 B = 49,152 per layer
    assert state_bytes_per_sequence(m) == 30 * (2_097_152 + 49_152) == 64_389_120
    # KV: 10 attention layers x 2 x 2 KV heads x 256 x 2 B
    assert kv_bytes_per_token(m, 2) == 10 * 2 * 2 * 256 * 2 == 20_480


def test_hand_computed_kv_bytes_sparse_attention():
    m = get_model("deepseek-v3.2")
    # per layer per token: MLA latent 512 + RoPE key 64 = 576 values x 2 B = 1152 B, plus the index key in FP8
    # (128 B) with one float32 scale per 128 values (4 B): 1284 B x 61 layers = 78,324 B
    assert kv_bytes_per_token(m, 2) == (576 * 2 + 128 + 4) * 61 == 78_324
    # an FP8 KV cache halves the latent but not the index key: (576 + 132) x 61 = 43,188 B
    assert kv_bytes_per_token(m, 1) == 43_188
    assert state_bytes_per_sequence(m) == 0


def test_nemotron_h_blocks():
    m = get_model("nemotron-h-56b")
    # pattern: 54 M (Mamba-2), 10 * (attention), 54 - (squared-ReLU MLP, ungated)
    assert (m.n_linear_layers, m.n_attention_layers, m.n_dense_layers, m.ffn_gated) == (54, 10, 54, False)
    # Mamba-2 state 256 heads x 64 x 256 = 4,194,304 + conv 3 x (16384 + 2 x 8 x 256) = 61,440 values per layer
    assert state_bytes_per_sequence(m) == 54 * (4_194_304 + 61_440) * 2


def _decode(mid, contexts, batch=16):
    su = setup(mid, "h200", chips=8)
    return serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, batch, np.asarray(contexts, float),
                       1, su.reserve).decode


def test_hybrid_decode_grows_with_context_only_through_attention_layers():
    lo, hi = _decode("qwen3-next-80b-a3b", [4096]), _decode("qwen3-next-80b-a3b", [131072])
    grew = {k for k in lo.ops if not np.allclose(lo.ops[k].total_s, hi.ops[k].total_s, rtol=0, atol=0)}
    assert grew == {"attention"}
    # the recurrent layers' state traffic is the same at 4k and 128k
    assert np.ravel(lo.ops["recurrent"].kv_bytes)[0] == np.ravel(hi.ops["recurrent"].kv_bytes)[0] > 0
    # and the step's growth is exactly the attention layers' growth
    grow = np.ravel(hi.time_s - lo.time_s)[0]
    assert grow > 0 and grow == pytest.approx(np.ravel(hi.ops["attention"].total_s - lo.ops["attention"].total_s)[0])


def test_sparse_attention_reads_top_k_latents_and_every_index_key():
    d = _decode("deepseek-v3.2", [8192, 16384, 131072])
    att = np.asarray(d.ops["attention"].kv_bytes, float)
    idx = np.asarray(d.ops["indexer"].kv_bytes, float)
    assert att[0] == att[1] == att[2]            # past 2048 tokens the latents read stay at the top-k
    # index keys read grow with the context: (c + 1) tokens each
    assert idx[1] / idx[0] == pytest.approx(16385 / 8193) and idx[2] / idx[0] == pytest.approx(131073 / 8193)
    v3 = _decode("deepseek-v3", [131072])
    assert np.ravel(d.kv_bytes)[2] < np.ravel(v3.kv_bytes)[0] / 3


def test_chunked_attention_holds_at_most_a_chunk():
    m = get_model("llama-4-scout")
    assert m.local_kind == "chunked" and m.sliding_window == 8192 and (m.n_sliding_layers, m.n_full_layers) == (36, 12)
    per = 2 * 8 * 128 * 2
    assert float(kv_bytes_per_sequence(m, 1_000_000, 2)) == per * (12 * 1_000_000 + 36 * 8192)


def test_context_answers_name_the_design():
    from tokenmath.faces.explain_serving import explain_context
    c = context("qwen3-next-80b-a3b", "h200", chips=8, batch=16, context=131072)
    assert c.state_bytes_per_sequence == 39_518_208 and c.to_dict()["state_bytes_per_sequence"] == 39_518_208
    assert "recurrent gated_deltanet layers keep no KV" in explain_context(c)
    q32 = context("qwen3-32b", "h200", chips=8, batch=16, context=131072)
    assert c.max_context_at_batch > 5 * q32.max_context_at_batch
    assert "state_bytes_per_sequence" not in q32.to_dict()
    s = context("deepseek-v3.2", "h200", chips=8, batch=16, context=131072)
    assert "top 2,048 tokens" in explain_context(s)
    assert s.crossover_context > context("deepseek-v3", "h200", chips=8, batch=16, context=131072).crossover_context


def test_unknown_model_type_names_the_supported_ones():
    with pytest.raises(InputError) as e:
        model_from_hf_config({"model_type": "mamba9000", "hidden_size": 8})
    assert e.value.field == "model_type"
    for t in ("qwen3_next", "deepseek_v32", "llama4_text", "minimax_m2", "glm4_moe", "nemotron_h", "nemotron"):
        assert t in str(e.value)


@pytest.mark.parametrize("patch,field", [
    ({"linear_num_value_heads": "many"}, "linear_num_value_heads"),
    ({"layer_types": ["linear_attention"] * 47}, "layer_types"),
    ({"layer_types": ["linear_attention"] * 47 + ["mamba"]}, "layer_types[47]"),
    ({"linear_num_key_heads": 5}, "linear_key_heads"),
])
def test_bad_hybrid_configs_name_the_field(fixtures, patch, field):
    cfg = json.loads((fixtures / "Qwen3-Next-80B-A3B-Instruct.json").read_text()) | patch
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field.endswith(field)


def test_nemotron_h_pattern_errors(fixtures):
    cfg = json.loads((fixtures / "Nemotron-H-56B-Base-8K.json").read_text())
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg | {"hybrid_override_pattern": "MXM" + cfg["hybrid_override_pattern"][3:]})
    assert e.value.field == "hybrid_override_pattern" and "X" in e.value.problem
    # a MoE block (E) needs the experts' fields
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg | {"hybrid_override_pattern": "MEM" + cfg["hybrid_override_pattern"][3:]})
    assert e.value.field == "n_routed_experts"
    with pytest.raises(InputError):
        model_from_hf_config(cfg | {"hybrid_override_pattern": cfg["hybrid_override_pattern"][:-1]})


def test_nemotron4_squared_relu_mlp_has_no_gate():
    # Nemotron-4 15B's shapes (arXiv 2402.16819, Table 1; its FFN width 4 x 6144 is not in that table): the
    # squared-ReLU MLP has no gate, so two matrices d x F, and LayerNorm1P carries a weight and a bias. The
    # published Nemotron-4 340B and Minitron configs are fixtures: tests/test_model_families_granite_nemotron.py
    m = model_from_hf_config({"model_type": "nemotron", "num_hidden_layers": 32, "hidden_size": 6144,
                              "num_attention_heads": 48, "num_key_value_heads": 8, "vocab_size": 256000,
                              "intermediate_size": 24576})
    assert not m.ffn_gated and m.norm == "layernorm"
    assert count_params(m).dense_ffn_per_layer == 2 * 6144 * 24576


def test_recurrent_flops_by_hand():
    from tokenmath.engine.recurrent import state_flops_per_token
    m = get_model("qwen3-next-80b-a3b")
    # decode: 7 FLOPs per state element (S k, decay, rank-1 correction, S q) x 32 heads x 128 x 128
    assert state_flops_per_token(m, "decode") == 7 * 32 * 128 * 128 == 3_670_016
    # chunked prefill adds the intra-chunk products: 2 x 64 (chunk) x (128 + 128) x 32 heads = 1,048,576
    assert state_flops_per_token(m, "prefill") == 3_670_016 + 1_048_576
    nh = get_model("nemotron-h-56b")
    assert state_flops_per_token(nh, "decode") == 5 * 256 * 256 * 64     # Mamba-2: 5 per element, 256 heads x 256 x 64


def test_sparse_attention_caps_pairs_at_top_k():
    from tokenmath.engine import sparse_attention as dsa
    m = get_model("deepseek-v3.2")
    # decode at 100,000 cached tokens: the main attention reads 2048 latents (2047 cached + the new one)
    read, pairs = dsa.selected(m, "decode", 100_000, 1, 100_001)
    assert (float(read), float(pairs)) == (2047.0, 2048.0)
    # a 4096-token prompt: sum over p of min(p, 2048) = 2048 x 2049 / 2 + 2048 x 2048 = 6,292,480 of
    # 4096 x 4097 / 2 = 8,390,656 causal pairs; every cached latent is still read in prefill
    read, pairs = dsa.selected(m, "prefill", 0, 4096, 8_390_656)
    assert float(read) == 0.0 and float(pairs) == pytest.approx(6_292_480)


def test_context_decode_cost_is_infer_decode_cost():
    """The closing figures: `context` prices the decode step at its context exactly as `infer` does."""
    from tokenmath.analyses.serving.infer import infer
    c = context("qwen3-next-80b-a3b", "h200", chips=8, batch=16, context=131072)
    r = infer("qwen3-next-80b-a3b", "h200", chips=8, batch=16, input_len=131072, output_len=1)
    assert c.decode_usd_per_mtok_at_context == pytest.approx(float(r.cost_per_mtok_output_usd), rel=1e-9)
    # and it is the economics identity: 8 chips x $/chip-h / 3600 x step / batch x 1e6
    hw = c.setup.hardware
    assert c.decode_usd_per_mtok_at_context == pytest.approx(
        8 * hw.price_usd_per_hour / 3600 * c.decode_step_s_at_context / 16 * 1e6)
