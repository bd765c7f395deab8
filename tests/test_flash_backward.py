"""FlashAttention's backward runs at a lower speed than its forward (FA3 paper, H100 SXM5, head dim 128, non-causal:
backward / forward TFLOP/s 424/565, 501/625, 561/648 at 1k / 2k / 16k tokens; data/kernels.toml
[flash_attention_backward]); the training step prices its 2.5 x FLOPs at that ratio of the forward's speed."""
from dataclasses import replace

import pytest

import tokenmath as tm
from tokenmath.engine.kernels import flash_attention_backward_ratio
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.specs.kernels import kernel_model


def test_ratio_by_hand():
    km = kernel_model("h100-sxm")
    assert float(flash_attention_backward_ratio(km, 1024)) == pytest.approx(424 / 565, abs=1e-3)   # 0.750
    assert float(flash_attention_backward_ratio(km, 2048)) == pytest.approx(501 / 625, abs=1e-3)   # 0.802
    assert float(flash_attention_backward_ratio(km, 16384)) == pytest.approx(561 / 648, abs=1e-3)  # 0.866
    # 4,096 tokens: a third of the way from 2k to 16k in log2: 0.802 + (0.866 - 0.802) / 3 = 0.8233
    assert float(flash_attention_backward_ratio(km, 4096)) == pytest.approx(0.802 + 0.064 / 3, rel=1e-9)
    assert float(flash_attention_backward_ratio(km, 256)) == 0.750                 # held outside the points
    assert flash_attention_backward_ratio(replace(km, fa_bwd_ratio=()), 4096) == 1.0


def test_training_step_pays_the_slower_backward_and_never_beats_the_roofline():
    kw = dict(chips=8, tp=2, dp=4, seq_len=8192, global_batch_tokens=8 * 8192 * 4, dtype="bf16", recompute="selective")
    slow = tm.train("llama-3.1-8b", "h100-sxm", efficiency=DEFAULT, **kw)
    km = kernel_model("h100-sxm")
    same = replace(DEFAULT, kernels=replace(km, fa_bwd_ratio=()))     # backward at the forward's speed
    fast = tm.train("llama-3.1-8b", "h100-sxm", efficiency=same, **kw)
    peak = tm.train("llama-3.1-8b", "h100-sxm", efficiency=PEAK, **kw)
    assert fast.to_dict()["step_time_s"] < slow.to_dict()["step_time_s"]
    # the attention backward is a few percent of an 8k-token step of an 8B model: more than 1%, less than 10%
    assert 1.01 < slow.to_dict()["step_time_s"] / fast.to_dict()["step_time_s"] < 1.10
    assert slow.to_dict()["step_time_s"] > peak.to_dict()["step_time_s"]
