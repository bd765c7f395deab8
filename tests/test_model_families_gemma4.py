"""Gemma 4 (model_type gemma4, 2026): full (global) layers shaped apart from the sliding ones, K = V projection on
the full layers, a MoE beside the dense MLP in every layer (26B A4B). Hand-computed parameter counts, KV bytes and
per-op decode costs for both layer kinds; the cards' totals within 1%; what is not modelled refused by its field.
Shapes from transformers' modeling_gemma4.py (Gemma4TextAttention, Gemma4TextDecoderLayer); the fixture's
provenance in tests/fixtures/SOURCES.md."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.forward import forward_pass
from tokenmath.engine.memory import held_per_sequence_per_chip
from tokenmath.faces.cli import cli
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.kv_cache import context_holding, kv_bytes_per_sequence, kv_bytes_per_token
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params

FIXTURE = "gemma-4-26B-A4B.json"


def _cfg(fixtures, **text_patch):
    d = json.loads((fixtures / FIXTURE).read_text())
    d["text_config"] = {**d["text_config"], **text_patch}
    return d


def test_fixture_loads_as_the_catalog_entry(fixtures):
    m, c = model_from_hf_config(_cfg(fixtures)), get_model("gemma-4-26b-a4b")
    for f in ("n_layers", "d_model", "n_heads", "kv_heads", "hd", "hd_full", "kv_heads_full", "full_k_eq_v",
              "layer_kinds", "sliding_window", "n_experts", "experts_per_token", "moe_intermediate", "shared_width",
              "vocab_size", "tie_embeddings", "qk_norm", "max_context"):
        assert getattr(m, f) == getattr(c, f), f
    assert count_params(m) == count_params(c)
    assert (m.n_full_layers, m.n_sliding_layers) == (5, 25)      # layer_types: every 6th layer is full


def test_26b_a4b_counts_by_hand():
    p = count_params(get_model("gemma-4-26b-a4b"))
    d, h = 2816, 16
    # sliding layer: q, k, v, o with 8 KV heads x 256, q/k norms of 256
    local = d * h * 256 + 2 * d * 8 * 256 + h * 256 * d + 2 * 256
    # full layer: q and o with 512-wide heads, one k_proj of 2 KV heads x 512 and no v_proj, q/k norms of 512
    full = d * h * 512 + d * 2 * 512 + h * 512 * d + 2 * 512
    assert (p.attn_local_per_layer, p.attn_full_per_layer) == (local, full) == (34_603_520, 49_021_952)
    assert p.attn == 25 * local + 5 * full
    expert = 3 * d * 704                    # GeGLU: gate, up, down
    mlp = 3 * d * 2112                      # the dense MLP beside the MoE, every layer
    router = d * 128
    norms = 30 * 2 * d + d                  # 2 RMSNorms per layer as the Model counts them + the final norm
    emb = 262144 * d                        # tied: no lm_head
    total = 25 * local + 5 * full + 30 * (128 * expert + mlp + router) + norms + emb
    active = total - 30 * (128 - 8) * expert
    assert (p.total, p.active) == (total, active) == (25_232_631_040, 3_822_019_840)
    # Gemma 4 card: 25.2B total, 3.8B active (text decoder; the ~550M vision encoder is listed apart)
    assert abs(p.total / 25.2e9 - 1) < 0.01 and abs(p.active / 3.8e9 - 1) < 0.01


def test_31b_counts_by_hand():
    m = get_model("gemma-4-31b")
    p = count_params(m)
    d, h = 5376, 32
    local = d * h * 256 + 2 * d * 16 * 256 + h * 256 * d + 2 * 256
    full = d * h * 512 + d * 4 * 512 + h * 512 * d + 2 * 512
    total = 50 * local + 10 * full + 60 * (3 * d * 21504 + 2 * d) + d + 262144 * d
    assert p.total == p.active == total == 30_696_700_160
    assert abs(p.total / 30.7e9 - 1) < 0.01          # card: 30.7B


def test_kv_bytes_per_token_by_layer_kind():
    # bf16: sliding 2 (K, V) x 8 heads x 256 x 2 B = 8,192 B per layer; full 2 x 2 heads x 512 x 2 B = 4,096 B
    m = get_model("gemma-4-26b-a4b")
    assert kv_bytes_per_token(m, 2.0) == 25 * 8192 + 5 * 4096 == 225_280
    assert kv_bytes_per_token(m, 1.0) == 225_280 / 2
    # 31B: sliding 2 x 16 x 256 x 2 B = 16,384 B; full 2 x 4 x 512 x 2 B = 8,192 B
    assert kv_bytes_per_token(get_model("gemma-4-31b"), 2.0) == 50 * 16384 + 10 * 8192 == 901_120


def test_sliding_layers_hold_at_most_the_window():
    m = get_model("gemma-4-26b-a4b")
    # below the 1,024 window every layer holds every token; above it only the 5 full layers grow
    assert kv_bytes_per_sequence(m, 512, 2.0) == 512 * 225_280
    assert kv_bytes_per_sequence(m, 131072, 2.0) == 25 * 8192 * 1024 + 5 * 4096 * 131072 == 2_894_069_760
    for ctx in (100.0, 1024.0, 5000.0, 131072.0):
        assert context_holding(m, float(kv_bytes_per_sequence(m, ctx, 2.0)), 2.0) == pytest.approx(ctx)


def _decode(mid, ctx, seqs=4.0, chips=1):
    su = setup(mid, "h200", chips=chips, tp=chips)
    return su, forward_pass(su.model, su.hardware, su.layout, su.precision, su.efficiency, phase="decode", seqs=seqs,
                            new_tokens=1.0, pairs_full=ctx, pairs_sliding=min(ctx, 1024.0),
                            kv_read_full=ctx - 1, kv_read_sliding=min(ctx, 1024.0) - 1)


def test_decode_ops_by_layer_kind():
    ctx, S = 8192.0, 4.0
    su, p = _decode("gemma-4-26b-a4b", ctx, S)
    full, loc = p.ops["attention"], p.ops["attention_local"]
    assert (full.count, loc.count) == (5, 25)
    # FLOPs per layer: 4 x heads x head_dim per (query, key) pair: full 4 x 16 x 512, local 4 x 16 x 256
    assert float(full.flops) == 4 * 16 * 512 * ctx * S
    assert float(loc.flops) == 4 * 16 * 256 * 1024 * S
    # KV read per layer (cached + the new token, bf16): full 2,048 values x 2 B per token, local 4,096 x 2 B
    assert float(full.kv_bytes) == 2048 * 2 * ctx * S
    assert float(loc.kv_bytes) == 4096 * 2 * 1024 * S
    # q in and o out per layer (bf16): heads x head_dim each
    assert float(full.bytes) - float(full.kv_bytes) == S * 16 * 512 * 2 * 2
    assert float(loc.bytes) - float(loc.kv_bytes) == S * 16 * 256 * 2 * 2
    # the projections over all 30 layers: 2 FLOPs per weight per token
    P = count_params(su.model)
    proj = p.ops["attn_proj"]
    assert proj.count * float(proj.flops) == pytest.approx(2 * S * (25 * P.attn_local_per_layer + 5 * P.attn_full_per_layer))
    # the dense MLP runs beside the experts in every layer
    assert p.ops["shared_experts"].count == p.ops["experts"].count == 30


def test_decode_grows_with_context_only_through_the_full_layers():
    _, lo = _decode("gemma-4-26b-a4b", 4096.0)
    _, hi = _decode("gemma-4-26b-a4b", 131072.0)
    grew = {k for k in lo.ops if not np.allclose(lo.ops[k].total_s, hi.ops[k].total_s, rtol=0, atol=0)}
    assert grew == {"attention"}


def test_tensor_parallel_copies_the_full_layers_few_kv_heads():
    # tp=8: the sliding layers' 8 KV heads split 8 ways, the full layers' 2 heads only 2 ways (each copied 4 times,
    # as vLLM's max(1, kv_heads // tp) per rank does)
    su = setup("gemma-4-26b-a4b", "h200", chips=8, tp=8)
    ctx = 131072.0
    held = float(held_per_sequence_per_chip(su.model, su.layout, 2.0, ctx))
    assert held == pytest.approx(25 * 8192 * 1024 / 8 + 5 * 4096 * ctx / 2)
    _, p = _decode("gemma-4-26b-a4b", ctx, 4.0, chips=8)
    assert float(p.ops["attention"].kv_bytes) == 2048 * 2 * ctx * 4.0 / 2
    assert float(p.ops["attention_local"].kv_bytes) == 4096 * 2 * 1024 * 4.0 / 8


@pytest.mark.parametrize("patch,field", [({"hidden_size_per_layer_input": 256}, "text_config.hidden_size_per_layer_input"),
                                         ({"num_kv_shared_layers": 20}, "text_config.num_kv_shared_layers"),
                                         ({"global_head_dim": "512"}, "text_config.global_head_dim"),
                                         ({"num_global_key_value_heads": 3}, "text_config.num_global_key_value_heads"),
                                         ({"layer_types": None}, "text_config.layer_types"),
                                         ({"sliding_window": None}, "text_config.sliding_window"),
                                         ({"layer_types": ["sliding_attention"] * 29}, "text_config.layer_types")])
def test_what_is_not_modelled_is_refused_by_its_field(fixtures, patch, field):
    with pytest.raises(InputError) as e:
        model_from_hf_config(_cfg(fixtures, **patch))
    assert field in e.value.field


def test_global_kv_heads_apply_only_with_k_eq_v(fixtures):
    # Gemma4TextAttention: num_global_key_value_heads only where attention_k_eq_v; else the full layers keep
    # num_key_value_heads (and their v_proj)
    m = model_from_hf_config(_cfg(fixtures, attention_k_eq_v=False))
    assert (m.kv_heads_full, m.hd_full, m.full_k_eq_v) == (8, 512, False)
    assert count_params(m).attn_full_per_layer == 2816 * 16 * 512 * 2 + 2 * 2816 * 8 * 512 + 2 * 512


def test_dense_31b_shape_loads_without_the_moe_block(fixtures):
    m = model_from_hf_config(_cfg(fixtures, enable_moe_block=False))
    assert not m.is_moe and m.ffn_intermediate == 2112


@pytest.mark.parametrize("cmd", ["infer", "context"])
def test_cli_answers_for_the_fixture(fixtures, cmd):
    r = CliRunner().invoke(cli, [cmd, "--model", str(fixtures / FIXTURE), "--hardware", "h200", "--json"])
    assert r.exit_code == 0, r.output[-600:]
    out = json.loads(r.output)
    assert out["kv_bytes_per_token"] == 225_280


def test_prefill_attention_by_layer_kind():
    # one 4,096-token prompt: a full layer attends 4096 x 4097 / 2 causal pairs, a sliding layer at most 1,024 back
    su = setup("gemma-4-26b-a4b", "h200", chips=1)
    full_pairs, local_pairs = 4096 * 4097 / 2, 1024 * 1025 / 2 + (4096 - 1024) * 1024
    p = forward_pass(su.model, su.hardware, su.layout, su.precision, su.efficiency, phase="prefill", seqs=1.0,
                     new_tokens=4096.0, pairs_full=full_pairs, pairs_sliding=local_pairs, kv_read_full=0.0,
                     kv_read_sliding=0.0)
    assert float(p.ops["attention"].flops) == 4 * 16 * 512 * full_pairs
    assert float(p.ops["attention_local"].flops) == 4 * 16 * 256 * local_pairs
    # the new tokens' K and V written: 2,048 values (full) and 4,096 (sliding) x 2 B per token per layer
    assert float(p.ops["attention"].kv_bytes) == 2048 * 2 * 4096
    assert float(p.ops["attention_local"].kv_bytes) == 4096 * 2 * 4096


def test_only_gemma4_sets_its_full_layers_apart():
    from tokenmath.specs.model import full_layer_shapes
    from tokenmath.specs.model_catalog import model_ids
    apart = {mid for mid in model_ids() if get_model(mid).has_full_shapes}
    assert apart == {"gemma-4-26b-a4b", "gemma-4-31b"}
    m = get_model("llama-3.1-8b")
    assert full_layer_shapes(m) is m
    g = full_layer_shapes(get_model("gemma-4-31b"))
    assert (g.hd, g.kv_heads, g.has_full_shapes) == (512, 4, False)
