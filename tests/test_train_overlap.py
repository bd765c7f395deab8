"""Round three of issue 19: the interleaved schedule's p2p overlap, the DP overlap with one exposed chunk, and the
NeMo rows' micro-batch read from their quotes."""
import numpy as np
import pytest

from tokenmath.analyses.training.train import train
from tokenmath.analyses.training.validate_runs import load_runs


def test_pp_overlap_hides_each_hand_off_behind_one_chunk():
    """Llama 2 13B, tp 1, pp 4, v 10 on 16 H100 (NeMo 24.07's layout): 2 x 10 hand-offs of 4096 x 5120 x 2 B =
    41.9 MB each per micro-batch. With overlap_p2p_comm each forward hand-off hides behind a chunk's forward F/10
    and each backward one behind (B + R)/10; exposed = 10 (max(p2p - F/10, 0) + max(p2p - (B + R)/10, 0))."""
    kw = dict(tp=1, pp=4, dp=4, seq_len=4096, global_batch_tokens=128 * 4096, recompute="none", dtype="fp8",
              schedule="interleaved", virtual_stages=10)
    off = train("llama-2-13b", "h100-sxm", **kw).step
    on = train("llama-2-13b", "h100-sxm", pp_overlap=True, **kw).step
    total = float(off.pp_p2p_mb_s)
    assert float(off.terms["p2p_bytes"]) == pytest.approx(4096 * 5120 * 2, rel=1e-12)
    one = total / 20
    F, B, R = float(on.fwd_s), float(on.bwd_s), float(on.recompute_s)
    want = 10 * (max(one - F / 10, 0.0) + max(one - (B + R) / 10, 0.0))
    assert float(on.pp_p2p_mb_s) == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert float(on.pp_p2p_mb_s) < total
    assert float(on.step_time_s) < float(off.step_time_s)
    # the bubble shrinks with the exposed p2p in t_mb: (pp - 1)/v x t_mb
    assert float(on.pp_bubble_s) == pytest.approx(3 / 10 * float(on.microbatch_s), rel=1e-12)


def test_pp_overlap_needs_an_interleaved_schedule():
    kw = dict(tp=8, pp=4, dp=1, seq_len=8192, global_batch_tokens=8 * 8192, recompute="full")
    a = train("llama-3.1-70b", "h100-sxm", **kw).step
    b = train("llama-3.1-70b", "h100-sxm", pp_overlap=True, **kw).step
    assert float(b.pp_p2p_mb_s) == float(a.pp_p2p_mb_s) > 0


def test_dp_overlap_exposes_one_chunk_when_the_windows_are_long():
    """ZeRO-1 (distributed optimizer) on 64 H100, tp 8 pp 1 dp 8, Llama 3.1 70B with full recompute: the
    gradients' reduce-scatter hides behind the last backward and the weights' all-gather behind the next step's
    first forward; both windows are longer than the collectives, so exactly one chunk (a layer: 80 of them) of each
    is exposed: (rs + ag) / 80."""
    kw = dict(tp=8, pp=1, dp=8, seq_len=8192, global_batch_tokens=64 * 8192, micro_batch=4, recompute="full", zero=1)
    s = train("llama-3.1-70b", "h100-sxm", **kw).step
    total = float(s.dp_comm_total_s)
    assert float(s.fwd_s) > total / 2 and float(s.bwd_s) > total / 2     # both windows outlast their halves
    assert float(s.dp_comm_exposed_s) == pytest.approx(total / 80, rel=1e-9)
    off = train("llama-3.1-70b", "h100-sxm", overlap=False, **kw).step
    assert float(off.dp_comm_exposed_s) == pytest.approx(total, rel=1e-12)


def test_dp_chunks_are_the_model_chunks_when_interleaved():
    """Interleaved v = 4: the DP communication goes by model chunk (NeMo: 'the granularity of DP communication
    becomes the Transformer layers per virtual pipeline stage'), so at least a quarter of it is exposed."""
    kw = dict(tp=8, pp=4, dp=8, seq_len=8192, global_batch_tokens=256 * 8192, recompute="full", zero=1,
              schedule="interleaved", virtual_stages=4)
    s = train("llama-3.1-70b", "h100-sxm", **kw).step
    assert float(s.dp_comm_exposed_s) >= float(s.dp_comm_total_s) / 4 * (1 - 1e-12)


def test_nemo_rows_carry_the_micro_batch_of_their_quote():
    """The MBS column of every NeMo performance-summary quote (its place read from the column names the quote
    carries in parentheses: the fourth in NeMo's tables, the fifth in Megatron-Bridge's) is the run's micro-batch."""
    rows = [r for r in load_runs() if "performance" in r["source"].lower() and "NeMo" in r["source"]]
    assert len(rows) >= 30
    for r in rows:
        # a quote without column names is in NeMo's own order (Model | #-GPUs | GBS | MBS | ...)
        row, names = (r["quote"] + "  (Model | #-GPUs | GBS | MBS)").split("  (")[:2]
        cols = [c.strip() for c in row.split("|") if c.strip()]
        heads = [c.strip() for c in names.rstrip(")").split("|")]
        at = len(cols) - len(heads) if len(heads) > 4 else 0    # some quotes name every column but the model's
        assert int(cols[at + heads.index("MBS")]) == r.get("micro_batch", 1), r["id"]
        assert int(cols[at + heads.index("#-GPUs")]) == r["chips"], r["id"]


def test_every_pp_overlap_row_is_interleaved_and_names_its_source():
    runs = [r for r in load_runs() if r.get("pp_comm_overlap")]
    assert runs
    for r in runs:
        assert r["pp"] > 1 and r["schedule"] == "interleaved" and r["virtual_stages"] > 1, r["id"]
        assert "overlap_p2p_comm = True" in r["pp_comm_overlap_source"], r["id"]


def test_search_finds_a_layout_at_least_as_fast_as_every_published_one():
    """Issue 19 item 2: for every published run the model predicts, `train --search` over the same chips, batch,
    sequence, precision and cp finds a layout whose step is no slower than the published layout's. NeMo ran Llama
    3.1 405B's 126 layers on pp 8 (16 layers on the slowest stage): the search tries every pp dividing the chips."""
    from tokenmath.analyses.training.train_search import search
    from tokenmath.analyses.training.validate_runs import _kw, predict_run
    checked = 0
    for run in load_runs():
        c = predict_run(run)
        if c.predicted_mfu is None:
            continue
        kw = _kw(run, c.recompute)
        pub = train(run["model"], run["hardware"], **kw)
        best = search(run["model"], run["hardware"], chips=run["chips"], seq_len=kw["seq_len"],
                      global_batch_tokens=kw["global_batch_tokens"], cp=kw["cp"], dtype=kw["dtype"],
                      balanced=kw["balanced"], flash=kw["flash"], dropout=kw["dropout"], tp_overlap=kw["tp_overlap"],
                      pp_overlap=kw["pp_overlap"], ep_comm=kw["ep_comm"], ep_overlap=kw["ep_overlap"],
                      act=kw["act"], adam_bytes=kw["adam_bytes"], grad_bytes=kw["grad_bytes"],
                      dualpipe=kw["dualpipe"], reserve=kw["reserve"], top=1).top[0]
        assert float(best.step.step_time_s) <= float(pub.step.step_time_s) * (1 + 1e-9), run["id"]
        checked += 1
    assert checked >= 20


DSV3 = dict(tp=1, pp=16, dp=2, ep=64, seq_len=4096, global_batch_tokens=15360 * 4096, dtype="fp8", recompute="full")


def test_deepep_transport_moves_fewer_bytes_than_one_bf16_copy_per_expert():
    """DeepSeek-V3's layout on 2048 H800: FP8 dispatch and one copy per remote node (node-limited routing) cost less
    than a bf16 copy per routed expert; a dense model's step does not change with the transport."""
    bf = train("deepseek-v3", "h800", **DSV3).step
    de = train("deepseek-v3", "h800", ep_comm="deepep", **DSV3).step
    assert 0 < float(de.ep_comm_mb_s) < float(bf.ep_comm_mb_s) / 2
    kw = dict(tp=8, pp=1, dp=1, seq_len=4096, global_batch_tokens=4096)
    assert float(train("llama-3.1-8b", "h100-sxm", ep_comm="deepep", ep_overlap=True, **kw).step.step_time_s) == \
        float(train("llama-3.1-8b", "h100-sxm", **kw).step.step_time_s)


def test_dualpipe_overlap_costs_the_sms_of_the_communication_kernels():
    """With the deepep transport the all-to-all and p2p of a micro-batch are shorter than the paired compute, so the
    EP term is only the compute slowdown of running on 132 - 20 of the H800's 132 SMs:
    (132 / 112 - 1) x (F + B + R) = 0.1786 x (F + B + R); p2p is hidden too."""
    s = train("deepseek-v3", "h800", ep_comm="deepep", ep_overlap=True, **DSV3).step
    comp = float(s.fwd_s + s.bwd_s + s.recompute_s)
    assert float(s.terms["ep_comm_total_mb_s"]) + float(s.terms["pp_p2p_plain_mb_s"]) < 132 / 112 * comp
    assert float(s.ep_comm_mb_s) == pytest.approx((132 / 112 - 1) * comp, rel=1e-12)
    assert float(s.pp_p2p_mb_s) == 0.0
    off = train("deepseek-v3", "h800", ep_comm="deepep", **DSV3).step
    assert float(s.step_time_s) < float(off.step_time_s)


def test_ep_comm_is_checked():
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError, match="ep_comm"):
        train("deepseek-v3", "h800", ep_comm="carrier-pigeon", **DSV3)


def test_cli_explains_the_new_overlaps():
    from click.testing import CliRunner

    from tokenmath.faces.cli import cli as main
    r = CliRunner().invoke(main, ["train", "-m", "llama-2-13b", "--tp", "1", "--pp", "4", "--dp", "4", "--seq-len",
                                  "4096", "--global-batch-tokens", str(128 * 4096), "--dtype", "fp8", "--recompute",
                                  "none", "--schedule", "interleaved", "--virtual-stages", "10", "--pp-comm-overlap",
                                  "--explain"])
    assert r.exit_code == 0, r.output
    assert "PP overlap (overlap_p2p_comm)" in r.output
    r = CliRunner().invoke(main, ["train", "-m", "deepseek-v3", "-H", "h800", "--tp", "1", "--pp", "16", "--dp", "2",
                                  "--ep", "64", "--seq-len", "4096", "--global-batch-tokens", str(15360 * 4096),
                                  "--dtype", "fp8", "--recompute", "full", "--ep-comm", "deepep", "--overlap-ep",
                                  "--json"])
    assert r.exit_code == 0, r.output
    import json
    d = json.loads(r.output)
    assert d["ep_comm"] == "deepep" and d["ep_overlap"] is True and d["fits"] is True


def test_backward_gemms_at_their_own_shapes():
    """Llama 3.1 8B, tp 2, 1 sequence of 192 tokens per micro-batch: per layer the FFN's gate_up GEMM is
    192 x 14336 x 4096 forward (M = 192 tokens, output 2 x 14336 / 2, reduction 4096), its dgrad 192 x 4096 x 14336
    and its wgrad 4096 x 14336 x 192 (the tokens are the reduction). Each runs at the kernel model's fraction for
    its own shape; the backward's extra over 2 x the forward is sum over ops of
    count x (max(t0 + c f/f_d, mem) + max(t0 + c f/f_w, mem) - 2 max(t0 + c, mem)). Without a kernel model
    (--peak) every shape runs at the peak and the extra is 0."""
    from tokenmath.engine.kernels import gemm_fraction, op_shapes
    from tokenmath.specs.efficiency import PEAK
    from tokenmath.specs.kernels import resolve
    kw = dict(tp=2, pp=1, dp=1, seq_len=192, global_batch_tokens=192, recompute="none")
    r = train("llama-3.1-8b", "h100-sxm", **kw)
    s, m, hw = r.step, r.model, r.hardware
    km = resolve(r.efficiency.kernels, hw)
    want = 0.0
    for name in ("attn_proj", "ffn"):
        op, sh = s.forward.ops[name], op_shapes(m, name, 2)
        w = [N * K for N, K in sh]
        f = float(gemm_fraction(km, "bf16", 192, sh))
        fd = sum(w) / sum(x / float(gemm_fraction(km, "bf16", 192, ((K, N),))) for x, (N, K) in zip(w, sh))
        fw = sum(w) / sum(x / float(gemm_fraction(km, "bf16", K, ((N, 192),))) for x, (N, K) in zip(w, sh))
        t0, mem = float(op.fixed_s), float(op.memory_s)
        c = float(op.compute_s) - t0
        want += op.count * (max(t0 + c * f / fd, mem) + max(t0 + c * f / fw, mem) - 2 * max(t0 + c, mem))
    assert float(s.terms["bwd_gemm_shape_extra_s"]) == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert want != 0.0
    flat = train("llama-3.1-8b", "h100-sxm", efficiency=PEAK, **kw).step
    assert float(flat.terms["bwd_gemm_shape_extra_s"]) == 0.0
