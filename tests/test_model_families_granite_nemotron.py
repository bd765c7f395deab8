"""Issue 20, third round: NVIDIA Nemotron-4 (model_type nemotron: squared-ReLU MLP without a gate) and IBM Granite
4.0 (model_type granitemoehybrid: Mamba-2 + attention, MoE with a shared expert). Fixtures and where each comes
from: tests/fixtures/SOURCES.md. Counts are checked against the published figures named beside each assert."""
import json

import numpy as np
import pytest

from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.recurrent import state_flops_per_token
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token, state_bytes_per_sequence
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params, linear_mixer_params

FIXTURE_OF = {"Nemotron-4-340B-Base-hf.json": "nemotron-4-340b", "granite-4.0-h-tiny.json": "granite-4.0-h-tiny"}


@pytest.mark.parametrize("fname,mid", FIXTURE_OF.items())
def test_fixture_loads_as_the_catalog_entry(fixtures, fname, mid):
    m, c = get_model(str(fixtures / fname)), get_model(mid)
    for f in ("total", "active", "embedding", "lm_head"):
        assert getattr(count_params(m), f) == getattr(count_params(c), f), f
    assert kv_bytes_per_token(m, 2) == kv_bytes_per_token(c, 2)
    assert state_bytes_per_sequence(m) == state_bytes_per_sequence(c)
    assert m.layer_kinds == c.layer_kinds and m.positional == c.positional


def test_nemotron4_340b_matches_the_report_by_hand():
    p = count_params(get_model("nemotron-4-340b"))
    # embedding and output tables, untied: 2 x 256,000 x 18,432 = 9,437,184,000 (report: '9.4 billion embedding')
    assert p.embedding + p.lm_head == 9_437_184_000
    # one layer: q 18432 x 18432 = 339,738,624; k, v 2 x 18432 x (8 x 192) = 56,623,104; o 339,738,624
    # -> 736,100,352; squared-ReLU MLP 2 x 18432 x 73728 = 2,717,908,992 (two matrices, no gate);
    # two LayerNorm1P (weight + bias) 2 x 2 x 18432 = 73,728 -> 3,454,083,072 x 96 layers = 331,591,974,912,
    # + the final LayerNorm 36,864 = 331,592,011,776 (report: '331.6 billion non-embedding parameters')
    assert p.attn_per_layer == 736_100_352 and p.dense_ffn_per_layer == 2 * 18432 * 73728 == 2_717_908_992
    assert p.total - p.embedding - p.lm_head == 96 * (736_100_352 + 2_717_908_992 + 73_728) + 36_864 \
        == 331_592_011_776
    assert abs(p.total / 340e9 - 1) < 0.01 and round((p.total - p.embedding - p.lm_head) / 1e8) == 3316


# Minitron cards give only the rounded name ('8B', '4B': one unit of the last digit), so these are fixtures, not
# catalog entries (tests/test_params.py holds every catalog total to 1%); both are Nemotron-4 15B pruned
@pytest.mark.parametrize("fname,card", [("Minitron-8B-Base.json", 8e9), ("Minitron-4B-Base.json", 4e9)])
def test_minitron_totals_match_the_cards(fixtures, fname, card):
    m = get_model(str(fixtures / fname))
    p = count_params(m)
    assert m.norm == "layernorm" and not m.ffn_gated and m.hd == 128
    # untied 256k-token tables: 2 x 256,000 x d; the rest is 32 layers of GQA + a 2-matrix squared-ReLU MLP
    d, f, h = m.d_model, m.ffn_intermediate, m.n_heads
    layer = 2 * d * h * 128 + 2 * d * 8 * 128 + 2 * d * f + 4 * d
    assert p.total == 2 * 256_000 * d + 32 * layer + 2 * d
    assert abs(p.total - card) <= 1e9          # 8,271,699,968 and 4,190,509,056


def test_squared_relu_ffn_op_reads_and_computes_two_matrices(fixtures):
    su = setup(str(fixtures / "Minitron-8B-Base.json"), "h200", chips=1)
    d = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, 1, np.asarray([1000.0]), 1,
                    su.reserve).decode
    ffn = d.ops["ffn"]
    # one decode token, one layer: 2 matrices x 4096 x 16384 weights, 2 FLOPs each = 268,435,456 FLOPs, and the
    # same count of bf16 bytes (2 B x 134,217,728 weights); a SwiGLU MLP of the same width would be 1.5x both
    assert np.ravel(ffn.flops)[0] == 2 * 2 * 4096 * 16384 == 268_435_456
    assert np.ravel(ffn.weight_bytes)[0] == 2 * 4096 * 16384 * 2


def test_granite_h_tiny_counts_by_hand():
    m = get_model("granite-4.0-h-tiny")
    assert (m.n_linear_layers, m.n_attention_layers, m.n_moe_layers, m.n_dense_layers) == (36, 4, 40, 0)
    # Mamba-2 mixer (Bamba's, the one NemotronH uses): in_proj 1536 x (2 x 48 x 64 + 2 x 1 x 128 + 48 = 6448)
    # = 9,904,128; conv over x, B, C (3072 + 256 = 3328 channels) x (4 taps + bias) = 16,640; dt_bias, A_log, D
    # 3 x 48 = 144; gated norm 3072; out_proj 3072 x 1536 = 4,718,592 -> 14,642,576
    assert linear_mixer_params(m) == 9_904_128 + 16_640 + 144 + 3_072 + 4_718_592 == 14_642_576
    p = count_params(m)
    # SwiGLU experts: 3 x 1536 x 512 = 2,359,296 each; the shared MLP 3 x 1536 x 1024 = 4,718,592; router 1536 x 64
    assert p.expert == 2_359_296 and p.shared_per_moe_layer == 4_718_592 and p.router_per_moe_layer == 98_304
    # IBM: '7B total / 1B activated' -- total within 1%; active within one unit of the rounded '1B':
    # 6 x 2,359,296 x 40 = 566,231,040 routed + everything but the experts = 1,465,470,528
    assert abs(p.total / 7e9 - 1) < 0.01
    assert p.active == 6 * 2_359_296 * 40 + p.non_expert == 1_465_470_528 and abs(p.active - 1e9) <= 1e9


def test_granite_h_small_matches_the_card():
    p = count_params(get_model("granite-4.0-h-small"))
    # IBM: '32B total / 9B activated'
    assert abs(p.total / 32e9 - 1) < 0.01 and abs(p.active - 9e9) <= 1e9
    # experts: 72 x 3 x 4096 x 768 x 40 layers = 27,179,089,920 of the 32.2B
    assert p.experts_total == 72 * 3 * 4096 * 768 * 40 == 27_179_089_920


def test_granite_state_and_kv_bytes_by_hand():
    m = get_model("granite-4.0-h-tiny")
    # KV only in the 4 attention layers: 2 x 4 KV heads x 128 x 2 B x 4 = 8,192 B per token
    assert kv_bytes_per_token(m, 2) == 2 * 4 * 128 * 2 * 4 == 8_192
    # state per Mamba-2 layer: 48 heads x 64 x 128 = 393,216 + conv 3 x 3328 = 9,984 values, x 2 B x 36 layers
    assert state_bytes_per_sequence(m) == (393_216 + 9_984) * 2 * 36 == 29_030_400
    c = np.array([1, 4096, 131072])
    assert np.array_equal(kv_bytes_per_sequence(m, c, 2), 8_192 * c + 29_030_400)
    # Mamba-2 recurrence: 5 FLOPs per state element per token
    assert state_flops_per_token(m, "decode") == 5 * 48 * 64 * 128


def test_granite_decode_grows_with_context_only_through_attention():
    su = setup("granite-4.0-h-small", "h200", chips=8)

    def dec(ctx):
        return serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, 16, np.asarray([ctx], float),
                           1, su.reserve).decode
    lo, hi = dec(4096), dec(131072)
    grew = {k for k in lo.ops if not np.allclose(lo.ops[k].total_s, hi.ops[k].total_s, rtol=0, atol=0)}
    assert grew == {"attention"}
    assert np.ravel(lo.ops["recurrent"].kv_bytes)[0] == np.ravel(hi.ops["recurrent"].kv_bytes)[0] > 0


def test_granite_dense_and_bad_configs(fixtures):
    cfg = json.loads((fixtures / "granite-4.0-h-tiny.json").read_text())
    # a dense Granite (num_local_experts 0): the shared MLP is the only FFN, in every layer
    dense = model_from_hf_config(cfg | {"num_local_experts": 0, "num_experts_per_tok": 0,
                                        "shared_intermediate_size": 4096})
    assert not dense.is_moe and dense.ffn_intermediate == 4096 and dense.n_dense_layers == 40
    # Granite 4.0 Micro style: every layer attention, RoPE
    plain = model_from_hf_config(cfg | {"layer_types": ["attention"] * 40, "position_embedding_type": "rope"})
    assert plain.n_linear_layers == 0 and plain.positional == "rope"
    for patch, field in [({"layer_types": ["mamba"] * 39}, "layer_types"),
                         ({"layer_types": ["mamba"] * 39 + ["conv"]}, "layer_types"),
                         ({"mamba_proj_bias": True}, "mamba_proj_bias"),
                         ({"mamba_n_groups": 5}, "linear_key_heads")]:
        with pytest.raises(InputError) as e:
            model_from_hf_config(cfg | patch)
        assert e.value.field.endswith(field), (patch, e.value.field)
    del cfg["model_type"]                       # read by its architectures class
    assert model_from_hf_config(cfg).linear_kind == "mamba2"
