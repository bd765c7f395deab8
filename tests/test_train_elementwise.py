"""Round two of issue 19: training-side elementwise kernels as their own time, FlashAttention's 2.5x backward, the
fp32 cross-entropy, and Transformer Engine's TP communication overlap."""
import pytest

from tokenmath.analyses.training.train import train
from tokenmath.engine.train_elementwise import (
    CE_BWD_BYTES_PER_LOGIT,
    CE_FWD_BYTES_PER_LOGIT,
    cross_entropy_bytes,
    layer_elementwise_bytes,
)
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.model import Model


def test_elementwise_bytes_by_hand_llama2_7b():
    # Llama 2 7B: d 4096, 32 heads = 32 kv heads x 128, SwiGLU F 11008, 32 layers; 4096 tokens, tp 1.
    # forward per token per layer: norms 2 x 4d + adds 2 x 6d = 20d = 81,920; RoPE 4 x (32 + 32) x 128 = 32,768;
    # SwiGLU 6F = 66,048 -> 180,736 B.  backward: norms 2 x 6d + adds 2 x 6d = 24d = 98,304;
    # RoPE 32,768; SwiGLU 10F = 110,080 -> 241,152 B
    m = get_model("llama-2-7b")
    f, b = layer_elementwise_bytes(m, 4096, 1)
    assert float(f) == 180_736 * 4096 * 32
    assert float(b) == 241_152 * 4096 * 32
    # tensor (and sequence) parallelism shards every term; dropout masks add 1 B x d twice each way
    f8, _ = layer_elementwise_bytes(m, 4096, 8)
    assert float(f8) == pytest.approx(float(f) / 8, rel=1e-12)
    fd, bd = layer_elementwise_bytes(m, 4096, 1, dropout=True)
    assert float(fd - f) == float(bd - b) == 2 * 4096 * 4096 * 32


def test_gelu_model_and_cross_entropy_by_hand():
    g = Model(id="g", name="g", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=256,
              ffn_gated=False)
    # forward 20 x 64 + 4 x (4 + 4) x 16 + 4 x 256 = 1280 + 512 + 1024 = 2816 B per token per layer
    # backward 24 x 64 + 512 + 6 x 256 = 1536 + 512 + 1536 = 3584
    f, b = layer_elementwise_bytes(g, 10, 1)
    assert float(f) == 2816 * 10 * 2 and float(b) == 3584 * 10 * 2
    # fp32 cross-entropy: 38 B forward and 14 B backward per logit; 10 tokens x 100 / tp 2 logits
    cf, cb = cross_entropy_bytes(g, 10, 2)
    assert (CE_FWD_BYTES_PER_LOGIT, CE_BWD_BYTES_PER_LOGIT) == (38.0, 14.0)
    assert float(cf) == 38 * 500 and float(cb) == 14 * 500


def test_backward_carries_its_own_elementwise_and_flash_terms():
    r = train("llama-2-7b", "h100-sxm", tp=1, pp=1, dp=8, seq_len=4096, global_batch_tokens=8 * 4096,
              recompute="none", zero=1)
    t = r.step.terms
    # backward = 2 x (forward without its elementwise kernels) + their own backward + FA's extra half forward
    # (+ the dense GEMMs' dgrad / wgrad at their own shapes, round three: tests/test_train_overlap.py)
    F, B = float(r.step.fwd_s), float(r.step.bwd_s)
    assert B == pytest.approx(2 * (F - float(t["elementwise_fwd_s"])) + float(t["elementwise_bwd_s"])
                              + float(t["attn_bwd_extra_s"]) + float(t["bwd_gemm_shape_extra_s"]), rel=1e-12)
    # FA's backward: 2.5 x the forward's FLOPs at FA3's backward / forward speed at 4,096 tokens (2k 0.802,
    # 16k 0.866, a third of the way in log2: 0.8233), less the 2 x forward already counted
    r_bwd = 0.802 + (0.866 - 0.802) / 3
    assert float(t["attn_bwd_extra_s"]) == pytest.approx((2.5 / r_bwd - 2.0) * float(t["attn_core_s"]), rel=1e-9)
    assert float(t["elementwise_bwd_s"]) > float(t["elementwise_fwd_s"]) > 0


def test_tp_overlap_hides_all_but_one_chunk_where_gemms_are_long():
    kw = dict(tp=8, pp=4, dp=1, seq_len=8192, global_batch_tokens=4 * 8192, recompute="full", zero=1)
    off = train("llama-3.1-70b", "h100-sxm", **kw).step
    on = train("llama-3.1-70b", "h100-sxm", tp_overlap=True, **kw).step
    total = float(off.terms["tp_comm_total_mb_s"])
    assert float(off.tp_comm_mb_s) == pytest.approx(total, rel=1e-12)
    # a 70B layer's GEMMs at 8K tokens outlast its collectives: only the pipeline fill (1 of tp chunks) is exposed
    assert float(on.tp_comm_mb_s) == pytest.approx(total / 8, rel=1e-12)
    assert float(on.step_time_s) < float(off.step_time_s)
    # tp = 1: nothing to overlap, nothing changes
    one = dict(kw, tp=1, pp=1, dp=8, global_batch_tokens=8 * 8192)
    assert float(train("llama-3.1-8b", "h100-sxm", tp_overlap=True, **one).step.step_time_s) == \
        float(train("llama-3.1-8b", "h100-sxm", **one).step.step_time_s)


def test_nemo_gpt3_userbuffers_overlap_hides_most_of_its_tp_traffic():
    """NeMo 25.02 GPT-3 175B on 512 H100 ran with userbuffers TP overlap (its performance script). Round two pinned
    this row at +1.2 points; round three reads its micro-batch of 2 from the quote and adds the interleaved
    schedule's p2p overlap, and the row moved to +9.5 (docs/training.md): what stays asserted is the physics, that
    hiding the TP collectives (tp 4, 12288-wide activations) makes the step faster by a large part of its TP time."""
    from tokenmath.analyses.training.validate_runs import load_runs, predict_run
    run = next(r for r in load_runs() if r["id"] == "nemo2502-gpt3-175b-512xh100-fp8")
    assert run["tp_comm_overlap"] is True and "userbuffers" in run["tp_comm_overlap_source"]
    on, off = predict_run(run), predict_run({**run, "tp_comm_overlap": False})
    assert on.predicted_mfu > off.predicted_mfu
    assert on.error_points - off.error_points > 7


def test_every_overlapped_run_names_its_source():
    from tokenmath.analyses.training.validate_runs import load_runs
    runs = [r for r in load_runs() if r.get("tp_comm_overlap")]
    assert len(runs) == 3          # the NeMo 25.02 rows whose performance scripts were read
    for r in runs:
        assert r["tp"] > 1 and "scripts/performance/llm" in r["tp_comm_overlap_source"], r["id"]
