"""Expert parallelism inside the attention's tensor parallelism (--moe-sharding ep; engine/forward.py's
experts_whole): the routed experts sit whole on a TP group's ranks instead of each expert split tp ways, as SGLang's
--ep-size and TensorRT-LLM's --ep_size equal to the TP size run them without attention DP (InferenceX's recipes:
510 of its runs). Same FLOPs and the same bytes once every expert is touched; at a small batch the busiest rank
reads more whole experts than the split reads slices, and the step waits for it."""
from __future__ import annotations

import pytest

from tokenmath.engine.expert_parallel import busiest_rank_experts
from tokenmath.engine.forward import forward_pass
from tokenmath.mapping.layout import Layout
from tokenmath.analyses.ask import ask, split
from tokenmath.analyses.setup import setup


def _experts(tokens: int, whole: bool):
    su = setup("deepseek-v3", "h200", chips=8, tp=8)
    p = forward_pass(su.model, su.hardware, Layout(tp=8), su.precision, su.efficiency, phase="decode", seqs=tokens,
                     new_tokens=1, pairs_full=1024, pairs_sliding=0, kv_read_full=1024, kv_read_sliding=0,
                     experts_whole=whole)
    return su.model, p.ops["experts"]


def test_one_token_reads_its_busiest_ranks_whole_experts_instead_of_an_eighth_of_each():
    m, split_tp = _experts(1, False)
    _, whole = _experts(1, True)
    # one token routes to k = 8 of DeepSeek-V3's 256 experts. Split 8 ways, each rank reads 1/8 of those 8: one
    # expert's worth. Whole, 32 experts on each of the 8 ranks: the busiest rank reads E[max of 8 binomials] of them,
    # busiest_rank_experts(m, 1, 8, 32/256) = 2.54 (engine/expert_parallel.py), each whole
    e_max = float(busiest_rank_experts(m, 1, 8, 32 / 256))
    assert e_max == pytest.approx(2.54, abs=0.01)
    assert float(whole.weight_bytes) / float(split_tp.weight_bytes) == pytest.approx(e_max / 1.0, rel=0.01)
    # the same multiply-adds either way: 2 x 1 token x 8 experts x their weights / 8 ranks
    assert float(whole.flops) == pytest.approx(float(split_tp.flops), rel=1e-12)


def test_once_every_expert_is_touched_the_two_placements_read_the_same_bytes():
    _, split_tp = _experts(4096, False)
    _, whole = _experts(4096, True)
    # 4,096 tokens x 8 touch all 256 experts: 32 whole experts per rank = 256 experts / 8 ranks
    assert float(whole.weight_bytes) == pytest.approx(float(split_tp.weight_bytes), rel=1e-6)


def test_the_option_reaches_infer_and_slows_a_small_batch_on_tp_only():
    def step(**kw):
        dep, wl, own = split("deepseek-v3", "h200", chips=8, batch=4, **kw)
        r = ask("infer", dep, wl, **own)
        return r.to_dict()["decode_step_s"], r.to_dict()["notes"]
    tp_split, _ = step(tp=8)
    tp_whole, _ = step(tp=8, moe_sharding="ep")
    assert tp_whole > tp_split
    # with tp = 1 there is no TP group to place experts in: the same answer, and the note says why
    ep_plain, _ = step(ep=8)
    ep_whole, notes = step(ep=8, moe_sharding="ep")
    assert ep_whole == ep_plain and any("--moe-sharding ep changes nothing" in n for n in notes)


def test_inferencex_runs_with_ep_inside_tp_are_read_with_whole_experts():
    """InferenceX's TensorRT-LLM recipes run DeepSeek-R1 on 8 x H200 at TP 8 with --ep_size 8 and no attention DP
    (dsr1_fp8_h200_trt.sh at InferenceX 8eec0d4e: --tp_size=$TP --ep_size=$EP_SIZE, enable_attention_dp false).
    Read as plain TP, the 1K/1K runs at 4 users were predicted at 1.78x their measured throughput; with the experts
    whole on the ranks, 1.43x (the rest is TensorRT-LLM's optimism at every layout: `tokenmath validate
    --inferencex`)."""
    from tokenmath.analyses.calibration.inferencex import load_runs
    from tokenmath.analyses.calibration.inferencex_predict import experts_whole, predict_runs
    assert experts_whole(8, False, 8) and not experts_whole(8, True, 8) and not experts_whole(1, False, 8)
    runs = [r for r in load_runs() if r.row["framework"] == "trt" and r.row["hardware"] == "h200" and not r.mtp
            and r.row["decode_ep"] == 8 and not r.row["decode_dp_attention"] and r.row["conc"] == 4
            and r.row["isl"] == 1024 and r.row["osl"] == 1024][:2]
    assert runs
    for p in predict_runs(runs):
        assert p.skipped is None and any("experts whole on its ranks" in n for n in p.notes)
        assert 1.2 <= p.ratio <= 1.6, p.ratio
