"""Issue 15 item 4: --explain's napkin floor is the bytes one replica's critical path reads per decode step over that
path's bandwidth (the weights each chip of the path reads, for MoE only the experts touched, plus its KV), computed
by the engine, never above the prediction.

Before the fix the floor was all weights / (all chips x bandwidth): 2.4 ms for 8B --dp 2 (the replica reads all
16 GB alone), 15.1 ms for 405B tp8 pp2 (the two stages run one after the other) and 17.5 ms for DeepSeek-V3 TP8
at batch 1 (which reads 8 of 256 experts), above its own 7.06 ms prediction.

Every case: batch 1, 1,024 tokens in, 256 out, so a decode step attends 1,024 + (256 + 1) / 2 = 1,152.5 tokens
(the mean context), and reads that many tokens of KV per layer (1,151.5 cached + the one it writes).
"""
import pytest

import tokenmath as tm
from tokenmath.faces.explain_infer import explain_infer

CTX = 1024 + (256 + 1) / 2          # 1,152.5 tokens attended per decode step, on average


def _check(r, by_hand_bytes, bandwidth):
    floor = by_hand_bytes / bandwidth
    assert r.decode_napkin_floor_s == pytest.approx(floor, rel=1e-9)
    # the napkin floor reads weights and KV only: never above the pure roofline, never above the prediction
    assert r.decode_napkin_floor_s <= r.decode_floor_s * (1 + 1e-12) <= r.decode_step_s
    assert r.to_dict()["decode_napkin_floor_s"] == pytest.approx(floor, rel=1e-9)
    return floor


def test_napkin_floor_data_parallel_reads_one_replica():
    # Llama 3.1 8B bf16, 2 x H100 SXM (3.35 TB/s), dp=2: one sequence on one replica, which reads every weight itself
    r = tm.infer("llama-3.1-8b", "h100-sxm", chips=2, dp=2, batch=1)
    # per layer: attention 41,943,040 + FFN 176,160,768 = 218,103,808 params; 32 layers = 6,979,321,856
    # + lm_head 525,336,576 = 7,504,658,432 params x 2 B = 15,009,316,864 B; the embedding table is not read,
    # only the token's row: 4,096 x 2 B = 8,192 B
    weights = (32 * (41_943_040 + 176_160_768) + 525_336_576) * 2 + 4_096 * 2
    assert weights == 15_009_325_056
    # KV: 2 x 8 heads x 128 x 2 B = 4,096 B per token per layer, 32 layers, 1,152.5 tokens
    kv = 32 * 4_096 * CTX
    assert kv == 151_060_480
    floor = _check(r, weights + kv, 3.35e12)
    assert floor == pytest.approx(4.5255e-3, rel=1e-4)          # was 16.1 GB / (2 x 3.35 TB/s) = 2.4 ms
    text = explain_infer(r)
    assert "napkin floor" in text and "4.53 ms" in text.split("napkin floor")[1].split("\n")[0]


def test_napkin_floor_pipeline_stages_run_in_sequence():
    # Llama 3.1 405B bf16, 16 x H100 SXM, tp=8 pp=2: the step runs stage 1 then stage 2, each chip reading 1/8 of
    # its stage's layers; the path's bytes per chip are 1/8 of all layers
    r = tm.infer("llama-3.1-405b", "h100-sxm", chips=16, tp=8, pp=2, batch=1)
    # per layer 570,425,344 + 2,617,245,696 = 3,187,671,040 params; x 126 = 401,646,551,040; + lm_head
    # 2,101,346,304 = 403,747,897,344 params x 2 B / tp 8 = 100,936,974,336 B; + embedding row 16,384 x 2 B
    weights = (126 * (570_425_344 + 2_617_245_696) + 2_101_346_304) * 2 / 8 + 16_384 * 2
    assert weights == 100_937_007_104
    # KV: 4,096 B per token per layer, 8 KV heads split over tp 8 -> 512 B per chip; 126 layers, 1,152.5 tokens
    kv = 126 * 4_096 / 8 * CTX
    assert kv == 74_350_080
    floor = _check(r, weights + kv, 3.35e12)
    assert floor == pytest.approx(30.153e-3, rel=1e-4)          # was 812 GB / (16 x 3.35 TB/s) = 15.1 ms


def test_napkin_floor_moe_reads_the_experts_touched():
    # DeepSeek-V3 fp8 weights (1 B + a 4 B scale per 128 x 128 block = 1.000244140625 B), bf16 KV, 8 x H200 (4.8 TB/s), tp=8, batch 1: one token picks 8 of 256 experts,
    # 256 (1 - (1 - 8/256)^1) = 8 experts read per MoE layer
    r = tm.infer("deepseek-v3", "h200", chips=8, tp=8, ep=1, batch=1)
    assert r.layout.tp == 8 and r.layout.ep == 1
    # split over tp 8: attention 61 x 187,107,328; dense FFN 3 x 396,361,728; per MoE layer 8 routed + 1 shared
    # expert of 44,040,192 (58 layers); lm_head 926,679,040
    split = (61 * 187_107_328 + 3 * 396_361_728 + 58 * (8 + 1) * 44_040_192 + 926_679_040) / 8
    assert split == 4_564_786_432
    # replicated: the router 58 x 1,835,264 and the token's embedding row 7,168; all params x 1.000244140625 B
    weights = (split + 58 * 1_835_264 + 7_168) * (1 + 4 / (128 * 128))
    assert weights == 4_672_379_351.1875
    # KV: the MLA latent (512 + 64) x 2 B = 1,152 B per token per layer, replicated on every tp rank, 61 layers
    kv = 61 * 1_152 * CTX
    assert kv == 80_988_480
    floor = _check(r, weights + kv, 4.8e12)
    assert floor == pytest.approx(0.99028e-3, rel=1e-4)         # was 671 GB / (8 x 4.8 TB/s) = 17.5 ms
    assert floor < r.decode_step_s                                # the old floor was above the prediction (7.06 ms)
