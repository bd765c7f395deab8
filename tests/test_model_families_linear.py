"""Issue 20, round two: Kimi Linear (Kimi Delta Attention + MLA), MiniMax-M1 (lightning attention) and Nemotron 3
Nano (Nemotron-H with MoE blocks) load from their published config.json (tests/fixtures, where each came from: tests/fixtures/SOURCES.md), their counts match
the checkpoints and cards, their state and KV bytes by hand; and the simulator prices DeepSeek-V3.2's indexer as
growing with context."""
import json

import numpy as np
import pytest

from tokenmath.analyses.serving.simulation.step_cost import StepCost
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.forward import forward_pass
from tokenmath.engine.recurrent import state_flops_per_token
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.kv_cache import kv_bytes_per_token, state_bytes_per_sequence
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params, linear_mixer_params

def test_kimi_linear_counts_by_hand_and_against_the_checkpoint():
    m = get_model("kimi-linear-48b-a3b")
    assert (m.n_linear_layers, m.n_attention_layers) == (20, 7)
    assert [i + 1 for i, k in enumerate(m.layer_kinds) if k == "full"] == [4, 8, 12, 16, 20, 24, 27]
    # KDA mixer, d 2304, 32 heads x 128: q, k, v 3 x 2304 x 4096 = 28,311,552; conv 3 x 4096 x 4 = 49,152;
    # f_a 2304 x 128 + f_b 128 x 4096 = 819,200; dt_bias 4096; g_a + g_b 819,200; b_proj 2304 x 32 = 73,728;
    # A_log 32; o_norm 128; o_proj 4096 x 2304 = 9,437,184
    assert linear_mixer_params(m) == (28_311_552 + 49_152 + 819_200 + 4096 + 819_200 + 73_728 + 32 + 128
                                      + 9_437_184) == 39_514_272
    p = count_params(m)
    # the sum of the checkpoint's safetensors tensors (public model-information report; tests/fixtures/SOURCES.md)
    assert p.total == 49_122_681_728
    # the card's "48B total" and "3B activated": the count without the two 163840 x 2304 embedding tables
    # (377,487,360 each) is 48.37B, within 1%; active 3.48B with them, within one unit of "3B"
    assert p.embedding == p.lm_head == 163_840 * 2304
    assert abs((p.total - p.embedding - p.lm_head) / 48e9 - 1) < 0.01
    assert abs(p.active - 3e9) <= 1e9


def test_minimax_m1_counts_by_hand_and_against_the_card():
    m = get_model("minimax-m1")
    assert (m.n_linear_layers, m.n_attention_layers) == (70, 10)
    # lightning attention, d 6144, 64 heads x 128: qkv 6144 x 3 x 8192 = 150,994,944; output_gate 6144 x 8192 =
    # 50,331,648; norm 8192; out_proj 8192 x 6144 = 50,331,648
    assert linear_mixer_params(m) == 150_994_944 + 50_331_648 + 8192 + 50_331_648 == 251_666_432
    p = count_params(m)
    # MiniMax-M1 report: "a total of 456 billion parameters with 45.9 billion parameters activated per token";
    # the active figure leaves out both 200064 x 6144 embedding tables
    assert abs(p.total / 456e9 - 1) < 0.01
    assert abs((p.active - p.embedding - p.lm_head) / 45.9e9 - 1) < 0.01


def test_nemotron3_nano_moe_blocks_by_hand():
    m = get_model("nemotron-3-nano-30b-a3b")
    # 52 blocks: 23 M (Mamba-2), 6 * (attention), 23 E (MoE), no - (MLP)
    assert (m.n_linear_layers, m.n_attention_layers, m.n_moe_layers, m.n_dense_layers) == (23, 6, 23, 0)
    p = count_params(m)
    # squared-ReLU experts have no gate: 2 x 2688 x 1856 = 9,977,856 each; the shared expert 2 x 2688 x 3712;
    # router 2688 x 128 + 128 (routing bias)
    assert p.expert == 2 * 2688 * 1856 == 9_977_856
    assert p.shared_per_moe_layer == 2 * 2688 * 3712
    assert p.router_per_moe_layer == 2688 * 128 + 128
    # Nemotron 3 Nano report / card: 31.6B total, 3.2B active (3.6B including embeddings); the 3.2B leaves out the
    # 131072 x 2688 input embedding
    assert abs(p.total / 31.6e9 - 1) < 0.01
    assert abs(p.active / 3.6e9 - 1) < 0.01 and abs((p.active - p.embedding) / 3.2e9 - 1) < 0.01
    # state in float32 (mamba_ssm_cache_dtype): 64 heads x 64 x 128 x 4 B + conv 3 x (64 x 64 + 2 x 8 x 128) x 2 B,
    # x 23 layers; KV 2 x 2 KV heads x 128 x 2 B x 6 layers
    assert state_bytes_per_sequence(m) == (64 * 64 * 128 * 4 + 3 * 6144 * 2) * 23 == 49_082_368
    assert kv_bytes_per_token(m, 2) == 2 * 2 * 128 * 2 * 6 == 6144


def test_hand_computed_state_and_kv_bytes():
    kimi, m1 = get_model("kimi-linear-48b-a3b"), get_model("minimax-m1")
    # Kimi: KV only in the 7 MLA layers: (512 latent + 64 rope) x 2 B x 7 = 8,064 B per token; each KDA layer holds
    # 32 x 128 x 128 = 524,288 state values + conv 3 x (2 x 32 x 128 + 32 x 128) = 36,864, x 2 B x 20 layers
    assert kv_bytes_per_token(kimi, 2) == 576 * 2 * 7 == 8064
    assert state_bytes_per_sequence(kimi) == (524_288 + 36_864) * 2 * 20 == 22_446_080
    # M1: KV only in the 10 softmax layers: 2 x 8 KV heads x 128 x 2 B x 10 = 40,960 B per token; a lightning layer
    # holds a 128 x 128 KV state per head (64 heads) and no conv: 64 x 128 x 128 x 2 B x 70 layers
    assert kv_bytes_per_token(m1, 2) == 2 * 8 * 128 * 2 * 10 == 40_960
    assert state_bytes_per_sequence(m1) == 64 * 128 * 128 * 2 * 70 == 146_800_640


def test_recurrent_flops_by_hand():
    # KDA: the gated delta rule, 7 FLOPs per state element (engine/recurrent.py): 7 x 32 x 128 x 128
    assert state_flops_per_token(get_model("kimi-linear-48b-a3b"), "decode") == 7 * 32 * 128 * 128
    # lightning: decay, rank-1 update, read-out: 5 per element; prefill adds 2 x 256 x (128 + 128) x 64
    m1 = get_model("minimax-m1")
    assert state_flops_per_token(m1, "decode") == 5 * 64 * 128 * 128
    assert state_flops_per_token(m1, "prefill") == 5 * 64 * 128 * 128 + 2 * 256 * 256 * 64


def _decode(mid, contexts, batch=16):
    su = setup(mid, "h200", chips=8)
    return serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, batch, np.asarray(contexts, float),
                       1, su.reserve).decode


@pytest.mark.parametrize("mid", ["kimi-linear-48b-a3b", "minimax-m1", "nemotron-3-nano-30b-a3b"])
def test_hybrid_decode_grows_with_context_only_through_attention_layers(mid):
    lo, hi = _decode(mid, [4096]), _decode(mid, [131072])
    grew = {k for k in lo.ops if not np.allclose(lo.ops[k].total_s, hi.ops[k].total_s, rtol=0, atol=0)}
    assert grew == {"attention"}
    assert np.ravel(lo.ops["recurrent"].kv_bytes)[0] == np.ravel(hi.ops["recurrent"].kv_bytes)[0] > 0
    grow = np.ravel(hi.time_s - lo.time_s)[0]
    assert grow > 0 and grow == pytest.approx(np.ravel(hi.ops["attention"].total_s - lo.ops["attention"].total_s)[0])


def _patched(fixtures, fname, **patch):
    d = json.loads((fixtures / fname).read_text())
    d.update(patch)
    return d


def test_bad_configs_name_the_field(fixtures):
    d = _patched(fixtures, "Kimi-Linear-48B-A3B-Instruct.json")
    d["linear_attn_config"] = {**d["linear_attn_config"], "full_attn_layers": [4, 8]}
    with pytest.raises(InputError) as e:
        model_from_hf_config(d)
    assert e.value.field == "linear_attn_config.full_attn_layers"
    with pytest.raises(InputError) as e:
        model_from_hf_config(_patched(fixtures, "MiniMax-M1.json", attn_type_list=[0, 1]))
    assert e.value.field == "attn_type_list"
    with pytest.raises(InputError) as e:
        model_from_hf_config(_patched(fixtures, "MiniMax-M1.json", model_type="minimax_m9"))
    assert "kimi_linear" in str(e.value) and "minimax_m1" in str(e.value)


def test_simulator_prices_the_indexer_growing_with_context():
    su = setup("deepseek-v3.2", "h200", chips=8)
    cost = StepCost(su, 10_000)
    n = 16
    lo, hi = cost.step_s(n, n * 4096.0), cost.step_s(n, n * 131072.0)
    # past 2,048 tokens the main attention reads the top 2,048 either way: the step grows by the indexer alone,
    # which scores (and reads the index key of) every cached token -- as the engine prices one pass
    g = su.layout.dp * su.layout.ep

    def indexer(ctx):
        p = forward_pass(su.model, su.hardware, su.layout, su.precision, su.efficiency, phase="decode", seqs=n / g,
                         new_tokens=1.0, pairs_full=ctx, pairs_sliding=ctx, kv_read_full=ctx - 1,
                         kv_read_sliding=ctx - 1)
        return p.ops["indexer"].total_s.item(), p.ops["attention"].total_s.item()
    (i_lo, a_lo), (i_hi, a_hi) = indexer(4096.0), indexer(131072.0)
    assert a_lo == a_hi and i_hi > 10 * i_lo
    assert hi - lo == pytest.approx(i_hi - i_lo, rel=1e-9)
    # and the fast path matches the engine at the step's own shape, decode and mixed
    for args in [(n, n * 131072.0), (n, n * 1000.0), (64, 64 * 50_000.0, 3000, 2, 6e6, 6e6, 4e4, 4e4)]:
        assert cost.step_s(*args) == pytest.approx(cost.direct(*args)[0], rel=0.01)
