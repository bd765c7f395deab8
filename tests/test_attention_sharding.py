"""Attention sharding inside a TP group (mapping/layout.py Layout.attn; engine/attention_sharding.py): heads (the
default), batch (Pope et al. 2022, arXiv 2211.05102, Sec. 3.3) and dp (data-parallel attention, SGLang
--enable-dp-attention). Hand-computed figures in the comments."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.base.errors import InputError
from tokenmath.engine.attention_sharding import batch_alltoall_bytes
from tokenmath.engine.forward import Precision, forward_pass
from tokenmath.engine.memory import kv_per_chip, max_batch, weights_per_chip
from tokenmath.engine.static_batch import serve_batch
from tokenmath.mapping.candidates import SEARCH_ATTENTION, as_layout, layouts_for
from tokenmath.mapping.layout import Layout, attention_code, with_attention
from tokenmath.specs.dtypes import get_dtype
from tokenmath.specs.efficiency import PEAK
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model_catalog import get_model
from tokenmath.analyses.serving.infer import infer

BF16 = get_dtype("bf16")
PREC = Precision(BF16, BF16, BF16)
# Llama 3.1 8B's shape (32 layers, d 4096, 32 heads of 128) with one KV head: a multiquery model
MQA = replace(get_model("llama-3.1-8b"), n_kv_heads=1)
GQA2 = replace(get_model("llama-3.1-8b"), n_kv_heads=2)


def _decode(m, lay, seqs, ctx=1000, eff=PEAK, hw="h100-sxm"):
    return forward_pass(m, get_hardware(hw), lay, PREC, eff, phase="decode", seqs=seqs, new_tokens=1,
                        pairs_full=ctx, pairs_sliding=0.0, kv_read_full=ctx - 1, kv_read_sliding=0.0)


def test_kv_per_chip_8x_lower_under_batch_and_dp_for_one_kv_head():
    # KV per token: 2 (k, v) x 1 head x 128 x 2 B x 32 layers = 16,384 B; 8 sequences of 1,000 tokens.
    # heads at tp=8: the one KV head is on every rank, each rank holds all 8 sequences: 8 x 1,000 x 16,384
    # = 131,072,000 B; batch / dp: each rank holds ceil(8 / 8) = 1 whole sequence: 16,384,000 B (8x lower)
    heads = float(kv_per_chip(MQA, Layout(tp=8), 2.0, 8, 1000))
    assert heads == 131_072_000
    for mode in ("batch", "dp"):
        lay = with_attention(MQA, Layout(tp=8), mode)
        assert float(kv_per_chip(MQA, lay, 2.0, 8, 1000)) == 16_384_000 == heads / 8
    # and the decode pass reads 8x less KV per chip: (999 read + 1 written) x 16,384 B x 1 sequence
    assert float(_decode(MQA, Layout(tp=8, attn=1), 8).kv_bytes) == 16_384_000
    assert float(_decode(MQA, Layout(tp=8), 8).kv_bytes) == 131_072_000


def test_max_batch_is_tp_times_larger_when_heads_replicates_every_kv():
    # heads replicates the single KV head on all 8 ranks: a rank's room holds n whole sequences and so does the
    # group; batch: each rank holds its own n, the group 8 n (same weights per chip under batch)
    hw = get_hardware("h100-sxm")
    b_heads = int(max_batch(MQA, hw.memory_bytes, Layout(tp=8), 2.0, 2.0, 2.0, 4096))
    b_batch = int(max_batch(MQA, hw.memory_bytes, Layout(tp=8, attn=1), 2.0, 2.0, 2.0, 4096))
    assert b_heads > 0 and b_batch == 8 * b_heads


def test_alltoall_bytes_by_hand():
    # 16 decode tokens in the group, tp = 8, 32 heads x 128, bf16: q payload per chip 16 x 4,096 x 2 / 8 =
    # 16,384 B, the output the same. GQA with 2 KV heads adds the new token's k and v: 32 x 128 + 2 x 2 x 128
    # = 4,608 values -> 16 x 4,608 x 2 / 8 = 18,432 B
    assert tuple(map(float, batch_alltoall_bytes(MQA, 16, 8, 2.0))) == (16_384.0, 16_384.0)
    assert tuple(map(float, batch_alltoall_bytes(GQA2, 16, 8, 2.0))) == (18_432.0, 16_384.0)


def test_alltoall_and_gather_seconds_by_hand():
    hw = get_hardware("h100-sxm")
    lat = hw.scaleup_latency + 2e-6 * (math.sqrt(8) - 1)      # alpha(8): collectives.latency
    bw = hw.scaleup_bw                                        # PEAK: link efficiency 1
    # batch: two all-to-alls of 16,384 B per attention layer, each (8-1)/8 x 16,384 / bw + alpha
    p = _decode(MQA, Layout(tp=8, attn=1), 16)
    want = 2 * (7 / 8 * 16_384 / bw + lat)
    assert float(p.ops["attn_alltoall"].comm_s) == pytest.approx(want, rel=1e-12)
    assert p.ops["attn_alltoall"].count == 32
    # TP's two all-reduces of 16 x 4,096 x 2 = 131,072 B per layer stay: 2 x 7/8 x 131,072 / bw + alpha
    assert float(p.ops["tp_allreduce"].comm_s) == pytest.approx(2 * 7 / 8 * 131_072 / bw + lat, rel=1e-12)
    # dp: all-gather + reduce-scatter of the 131,072 B hidden states per layer, each 7/8 x 131,072 / bw + alpha,
    # and no all-reduce
    q = _decode(MQA, Layout(tp=8, attn=2), 16)
    assert float(q.ops["dp_attn_gather"].comm_s) == pytest.approx(2 * (7 / 8 * 131_072 / bw + lat), rel=1e-12)
    assert q.ops["dp_attn_gather"].count == 32
    assert "tp_allreduce" not in q.ops
    assert "attn_alltoall" not in q.ops and "dp_attn_gather" not in p.ops


def test_dp_never_reads_fewer_weight_bytes_than_heads():
    m = get_model("llama-3.1-70b")
    for tp in (1, 2, 4, 8):
        for seqs in (1, 7, 64):
            h = float(_decode(m, Layout(tp=tp), seqs).weight_bytes)
            d = float(_decode(m, Layout(tp=tp, attn=2), seqs).weight_bytes)
            assert d >= h
            assert (d == h) == (tp == 1)
        wh = float(weights_per_chip(m, Layout(tp=tp), 2.0, 2.0))
        wd = float(weights_per_chip(m, Layout(tp=tp, attn=2), 2.0, 2.0))
        assert wd >= wh and (wd == wh) == (tp == 1)
    # by hand at tp = 8: dp adds the attention projections' other 7/8 on every chip
    from tokenmath.specs.params import count_params
    P = count_params(m)
    extra = P.attn_per_layer * P.n_attn_layers * 2.0 * (1 - 1 / 8)
    got = float(weights_per_chip(m, Layout(tp=8, attn=2), 2.0, 2.0) - weights_per_chip(m, Layout(tp=8), 2.0, 2.0))
    assert got == pytest.approx(extra, rel=1e-12)


def test_batch_smaller_than_tp_the_fullest_rank_sets_the_pace():
    # batch mode at tp = 8: 1 to 8 sequences put ceil(S / 8) = 1 on the fullest rank, so the attention core costs
    # the same; 9 sequences put 2 there (twice the KV read)
    att = [float(_decode(MQA, Layout(tp=8, attn=1), s).ops["attention"].total_s) for s in (1, 3, 8, 9)]
    assert att[0] == att[1] == att[2]
    assert att[3] == pytest.approx(2 * att[0], rel=1e-12)
    kv = [float(_decode(MQA, Layout(tp=8, attn=1), s).kv_bytes) for s in (3, 9)]
    assert kv == [16_384_000, 32_768_000]


def test_heads_mode_changes_nothing():
    # n_kv_heads = 8 >= tp = 8: heads, given or not, is the default to the bit
    a = infer("llama-3.1-70b", "h100-sxm", tp=8, batch=16).to_dict()
    b = infer("llama-3.1-70b", "h100-sxm", tp=8, batch=16, attention_sharding="heads").to_dict()
    assert a == b and "attention_sharding" not in a
    # nor does plan search batch or dp where heads already splits the KV without copies
    m = get_model("llama-3.1-70b")
    assert layouts_for(m, 8, attention=SEARCH_ATTENTION) == layouts_for(m, 8)
    # a layout array mixing heads and batch rows gives the heads rows exactly their heads figures
    lay = as_layout([(8, 1, 1, 1), (8, 1, 1, 1, 1)])
    mixed = serve_batch(m, get_hardware("h100-sxm"), lay, PREC, PEAK, [[4.0]], 1024, 128, 0.1)
    alone = serve_batch(m, get_hardware("h100-sxm"), Layout(tp=8), PREC, PEAK, 4.0, 1024, 128, 0.1)
    assert float(mixed.decode_step_s[0, 0]) == float(alone.decode_step_s)


def test_search_adds_batch_and_dp_where_heads_replicates():
    # MLA: every tp > 1 replicates the latent, so each such layout comes back as batch and as dp
    m = get_model("deepseek-v3")
    base = layouts_for(m, 8)
    found = layouts_for(m, 8, attention=SEARCH_ATTENTION)
    multi = [t for t in base if t[0] > 1]
    assert found == base + [t + (1,) for t in multi] + [t + (2,) for t in multi]


def test_palm_decode_no_longer_beats_the_pure_roofline():
    # Pope et al. 2022 (arXiv 2211.05102): PaLM 540B (heads padded to 64), 64 TPU v4, int8 weights, batch 64,
    # context 2048 + 64: 28.5 ms per token (data/measurements.toml, pope-palm540b-64xtpuv4-int8-bs64-decode).
    # Heads replicates the single KV head on all 64 chips; the paper shards the KV over the batch.
    kw = dict(chips=64, tp=64, batch=64, input_len=2048, output_len=64, weight_dtype="int8", kv_dtype="bf16",
              efficiency=PEAK, engine="none")
    heads = infer("palm-540b-64h", "tpu-v4", **kw)
    batch = infer("palm-540b-64h", "tpu-v4", attention_sharding="batch", **kw)
    assert heads.decode_step_s > 0.0285 > batch.decode_step_s
    # KV per chip: 64 sequences whole on every chip vs one per chip (ceil(64 / 64) = 1): 64x
    assert float(heads.memory.kv) == pytest.approx(64 * float(batch.memory.kv), rel=1e-12)


def test_errors_name_the_field():
    with pytest.raises(InputError) as e:
        attention_code("bach")
    assert e.value.field == "attention_sharding" and "batch" in str(e.value)
    with pytest.raises(InputError) as e:
        with_attention(MQA, Layout(tp=2, cp=2), "dp")
    assert e.value.field == "attention_sharding"


def test_plan_searches_the_option():
    from tokenmath.analyses.serving.plan import plan
    p = plan("palm-540b-64h", "tpu-v4", chips=64, weight_dtype="int8", input_len=2048, output_len=64,
             concurrency=()).to_dict()
    pts = [p["best"], *p["runner_ups"], *p["frontier"]]
    assert any(q.get("attention_sharding") in ("batch", "dp") for q in pts)
    pinned = plan("palm-540b-64h", "tpu-v4", chips=64, weight_dtype="int8", input_len=2048, output_len=64,
                  concurrency=(), attention_sharding="heads").to_dict()
    # the search includes every heads layout: its best is never dearer
    assert p["best"]["chip_s_per_mtok_output"] <= pinned["best"]["chip_s_per_mtok_output"]


def test_cli_flag():
    from tokenmath.faces.cli import cli as main
    r = CliRunner().invoke(main, ["infer", "-m", "palm-540b-64h", "-H", "tpu-v4", "--chips", "64", "--tp", "64",
                                  "--batch", "64", "--input-len", "2048", "--output-len", "64", "--weight-dtype", "int8",
                                  "--attention-sharding", "batch", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["attention_sharding"] == "batch" and d["fits"]
    r = CliRunner().invoke(main, ["infer", "--attention-sharding", "rows"])
    assert r.exit_code == 2
    r = CliRunner().invoke(main, ["infer", "-m", "palm-540b-64h", "-H", "tpu-v4", "--chips", "64", "--tp", "64",
                                  "--batch", "64", "--input-len", "2048", "--output-len", "64", "--weight-dtype", "int8",
                                  "--attention-sharding", "batch", "--explain"])
    assert r.exit_code == 0 and "attn_alltoall" in r.output and "ceil(64 / 64) = 1" in r.output


def test_array_of_modes_matches_each_alone():
    # one engine call over heads / batch / dp rows equals three separate calls (vectorized, no Python loop)
    m, hw = MQA, get_hardware("h100-sxm")
    lay = as_layout([(8, 1, 1, 1, 0), (8, 1, 1, 1, 1), (8, 1, 1, 1, 2)])
    sv = serve_batch(m, hw, lay, PREC, PEAK, np.array([[5.0, 40.0]]), 2048, 128, 0.1)
    for i, code in enumerate((0, 1, 2)):
        one = serve_batch(m, hw, Layout(tp=8, attn=code), PREC, PEAK, np.array([5.0, 40.0]), 2048, 128, 0.1)
        np.testing.assert_allclose(sv.decode_step_s[i], one.decode_step_s, rtol=1e-12)
        np.testing.assert_allclose(np.broadcast_to(sv.memory.kv, (3, 2))[i], np.broadcast_to(one.memory.kv, (2,)),
                                   rtol=1e-12)
        assert int(np.asarray(sv.max_batch)[i, 0]) == int(np.asarray(one.max_batch).ravel()[0])
