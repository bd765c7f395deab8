"""Pipeline schedules, in-flight activations and the published-runs validation (issue 19)."""
import numpy as np
import pytest

from tokenmath.analyses.training.train import train
from tokenmath.base.errors import InputError
from tokenmath.engine.train_memory import activation_bytes_per_layer, in_flight_layers, stage_layers
from tokenmath.specs.model_catalog import get_model

META = dict(tp=8, pp=16, dp=64, seq_len=8192, global_batch_tokens=16 * 1024 * 1024, recompute="none", zero=2,
            schedule="interleaved", virtual_stages=4, balanced=True)


def test_activations_without_dropout_and_with_flash_attention():
    m = get_model("gpt-3-175b")
    s, b, h, a = 2048, 1, 12288, 96
    # Korthikanti's 34 sbh holds three sbh dropout masks' worth less two: attention 11 -> 10, MLP 19 -> 18
    sel = activation_bytes_per_layer(m, s, b, 8, 1, "selective", dropout=False)
    assert float(sel) == pytest.approx(32 * s * b * h / 8)
    # no dropout, scores stored: softmax output only, 2 a s^2 b (the 5 was 2 softmax + 1 mask + 2 dropout output)
    none = activation_bytes_per_layer(m, s, b, 8, 1, "none", dropout=False)
    assert float(none) == pytest.approx((32 * s * b * h + 2 * a * s * s * b) / 8)
    # FlashAttention: no scores, the fp32 log-sum-exp 4 a s b
    flash = activation_bytes_per_layer(m, s, b, 8, 1, "none", flash=True, dropout=False)
    assert float(flash) == pytest.approx((32 * s * b * h + 4 * a * s * b) / 8)


def test_in_flight_layers_by_schedule():
    m = get_model("llama-3.1-405b")                     # 126 layers on 16 ranks
    # unbalanced: ceil(126/16) = 8 layers per rank. 1F1B holds pp = 16 micro-batches of 8 layers = 128
    assert float(in_flight_layers(m, 16, 32, "1f1b", 1, False)) == 128
    # interleaved v = 4, chunks of 2: chunk 0 for 2p - 1 = 31 micro-batches, chunks 1-3 for 16: 62 + 96 = 158
    # = Korthikanti et al. 2022 Sec. 4.2.3's L (1 + (p - 1)/(p v)) = 128 x (1 + 15/64) = 158
    assert float(in_flight_layers(m, 16, 32, "interleaved", 4, False)) == 158 == 128 * (1 + 15 / 64)
    # Llama 3's balancing: 128 slots, the first rank's chunk 0 holds the embedding + 1 layer: 31 x 1 + 3 x 16 x 2
    assert stage_layers(m, 16, True) == (8, 7)
    assert float(in_flight_layers(m, 16, 32, "interleaved", 4, True)) == 31 + 96 == 127
    assert float(in_flight_layers(m, 16, 32, "1f1b", 1, True)) == 16 * 7 == 112
    # ZB-H1 keeps 1F1B's peak; fewer micro-batches than stages hold only m
    assert float(in_flight_layers(m, 16, 32, "zb-h1", 1, True)) == 112
    assert float(in_flight_layers(m, 16, 4, "1f1b", 1, True)) == 4 * 7


def test_bubble_by_schedule():
    kw = dict(tp=8, pp=8, dp=1, seq_len=2048, global_batch_tokens=32 * 2048, recompute="full", zero=1)
    one = train("llama-3.1-70b", "h100-sxm", **kw).step
    inter = train("llama-3.1-70b", "h100-sxm", schedule="interleaved", virtual_stages=5, **kw).step
    zb = train("llama-3.1-70b", "h100-sxm", schedule="zb-h1", **kw).step
    m = 32
    # 1F1B: (p - 1) t_mb; interleaved: (p - 1)/v t_mb (Narayanan et al. 2021 Sec. 2.2.2)
    assert float(one.pp_bubble_s) == pytest.approx(7 * float(one.microbatch_s))
    assert float(inter.pp_bubble_s) == pytest.approx(7 / 5 * float(inter.microbatch_s))
    assert float(inter.pp_bubble_s / (m * inter.microbatch_s)) == pytest.approx(7 / (5 * m))
    # ZB-H1: (p - 1)(t_mb - B): the weight-gradient half of the backward fills the bubble
    assert float(zb.pp_bubble_s) == pytest.approx(7 * float(zb.microbatch_s - zb.bwd_s))
    assert float(zb.step_time_s) < float(one.step_time_s)
    assert float(inter.step_time_s) < float(one.step_time_s)
    # interleaving sends v times the p2p traffic
    assert float(inter.pp_p2p_mb_s) == pytest.approx(5 * float(one.pp_p2p_mb_s))
    # interleaving holds more activations: 80 layers, 10 per rank, chunks of 2: 15 x 2 + 4 x 8 x 2 = 94 vs 80
    assert float(inter.memory.activations) > float(one.memory.activations)


def test_llama3_405b_fits_at_metas_layout_and_lands_near_its_mfu():
    """Llama 3 (arXiv 2407.21783) Sec. 3.3.2: TP8 PP16 DP64, 8K sequences, 16M tokens, interleaved schedule,
    balanced stages, FSDP sharding optimizer and gradients (ZeRO-2), 'without activation checkpointing';
    Table 4: 430 TFLOP/s per GPU = 43.5% of 989."""
    r = train("llama-3.1-405b", "h100-sxm", **META)
    assert r.fits
    mem = r.step.memory
    assert float(mem.total) < 80e9 * 0.97
    # activations: 127 layer-micro-batches of (8h + 2(q + k + v + o) + 6F) s b / t bytes + lse, no dropout
    h, F = 16384, 53248
    per_tok = 8 * h + 2 * (h + 1024 + 1024 + h) + 6 * F + 4 * 128
    assert float(mem.activations) == pytest.approx(127 * per_tok * 8192 / 8, rel=1e-9)
    # the target: within 5 points of the 38-43% Meta reports. Round six: 44.5% (hidden ZeRO-2 traffic
    # slows the compute beside it by 18.9% of its time; it was 48.5%, 0.5 points outside)
    assert 0.38 - 0.05 <= r.mfu <= 0.43 + 0.05
    # the same layout with selective recomputation at 1F1B without balancing also fits now (34 -> 32 sbh, flash)
    assert train("llama-3.1-405b", "h100-sxm", tp=8, pp=16, dp=64, seq_len=8192,
                 global_batch_tokens=16 * 1024 * 1024, recompute="selective", zero=2).fits


def test_virtual_stages_must_split_a_rank():
    with pytest.raises(InputError) as e:
        train("llama-3.1-405b", "h100-sxm", **{**META, "virtual_stages": 3})
    assert "divisor of 8" in str(e.value)
    with pytest.raises(InputError):
        train("llama-3.1-8b", "h100-sxm", chips=8, virtual_stages=2)


def test_search_finds_a_layout_at_least_as_fast_as_metas():
    from tokenmath.analyses.training.train_search import search
    meta = train("llama-3.1-405b", "h100-sxm", **META)
    s = search("llama-3.1-405b", "h100-sxm", chips=8192, seq_len=8192, global_batch_tokens=16 * 1024 * 1024,
               balanced=True, top=1, micro_batches=(1,))
    assert s.top[0].fits and s.top[0].step_time_s <= meta.step_time_s * (1 + 1e-9)


def test_published_runs_catalog_and_validation():
    from tokenmath.analyses.training.validate_runs import load_runs, validate_runs
    runs = load_runs()
    assert len(runs) >= 20
    for run in runs:
        assert run["source"] and run["quote"]
        assert run["chips"] == run["tp"] * run["pp"] * run["dp"] * run["ep"] * run["cp"], run["id"]
    v = validate_runs()
    d = v.to_dict()
    assert d["runs"] == len(runs) and d["scored"] >= 18
    llama = {r.id: r for r in v.rows if r.id.startswith("llama3-405b") and r.id.endswith("dp64")}
    assert all(r.fits and abs(r.error_points) <= 6 for r in llama.values())
    assert np.isfinite(d["median_abs_error_points"])


def test_published_tflops_are_read_on_the_flops_their_source_counted():
    from tokenmath.analyses.training.validate_runs import load_runs, tflops_key, validate_runs
    runs = {r["id"]: r for r in load_runs()}
    # Llama 3 Table 4 with PaLM's causal attention term; Megatron-LM's Eq. 3 on executed FLOPs; default 6N
    assert tflops_key(runs["llama3-405b-16384xh100-tp8-cp16-pp16-dp8-128k"]) == "tflops_with_attention_per_chip"
    assert tflops_key(runs["megatron-gpt-1t-3072xa100"]) == "hardware_tflops_per_chip"
    assert tflops_key({"id": "x"}) == "tflops_per_chip"
    with pytest.raises(ValueError):
        tflops_key({"id": "x", "flops_counted": "6N"})
    # 128K tokens: the attention term per token is 12 x 126 x 16384 x 65,536.5 (causal mean keys) = 1.62 TFLOP,
    # two thirds of 6N = 6 x 403.8 B = 2.42 TFLOP, so the two readings differ by 1.67x and only one can be right
    r = train("llama-3.1-405b", "h100-sxm", tp=8, pp=16, dp=8, cp=16, seq_len=131072,
              global_batch_tokens=128 * 131072, recompute="none", zero=2, schedule="interleaved", virtual_stages=4,
              balanced=True, reserve=0.0)
    d = r.to_dict()
    assert d["tflops_with_attention_per_chip"] / d["tflops_per_chip"] == pytest.approx(
        1 + 12 * 126 * 16384 * 65536.5 / (6 * float(r.to_dict()["params_matmul"])), rel=1e-3)
    row = next(x for x in validate_runs().rows if x.id == "llama3-405b-16384xh100-tp8-cp16-pp16-dp8-128k")
    assert abs(row.error_points) <= 3


def test_a_miss_read_as_compute_slows_the_compute_when_predicted_too_fast():
    # compute_factor: the measured step = (predicted step - compute) + compute x factor; > 1 exactly where the
    # prediction is too fast (error > 0), for every metric (tokens/s, TFLOP/s, GPU-hours)
    from tokenmath.analyses.training.validate_runs import validate_runs
    rows = [r for r in validate_runs().rows if r.error_points is not None]
    assert {r.metric for r in rows} >= {"tokens_per_s_per_chip", "tflops_per_chip", "gpu_hours"}
    for r in rows:
        assert 0 < r.compute_share <= 1
        assert (r.compute_factor > 1) == (r.error_points > 0), r.id
        # MFU scales as 1 / step: predicted / measured MFU = measured step / predicted step
        implied = (1 - r.compute_share) + r.compute_share * r.compute_factor
        assert implied == pytest.approx(r.predicted_mfu / r.measured_mfu, rel=1e-9), r.id


def test_training_overheads_by_hand():
    from tokenmath.engine.train_overheads import fp8_cast_bytes, fp8_gemm_widths, unfused_attention_bytes
    m = get_model("llama-2-7b")                 # d 4096, 32 heads of 128, MHA, gated FFN 11008, 32 layers
    w_in, w_out = fp8_gemm_widths(m)
    # inputs: qkv d + out-proj H hd + FFN d + down F; outputs: qkv 3d + out-proj d + gate/up 2F + down d
    assert w_in == 4096 + 4096 + 4096 + 11008
    assert w_out == 3 * 4096 + 4096 + 2 * 11008 + 4096
    f, b = fp8_cast_bytes(m, 4096, 1)
    assert float(f) == 4 * w_in * 4096 * 32 and float(b) == 4 * w_out * 4096 * 32
    g = get_model("gpt-3-175b")                 # 96 heads, 96 layers; tp 8 -> 12 heads per chip
    # scores 12 x 2048 queries x 2048 keys per layer, 2 + 4 + 5 bytes each with dropout, 2 + 4 + 2 without
    assert float(unfused_attention_bytes(g, 2048, 2048, 8, True)) == 96 * 12 * 2048 * 2048 * 11
    assert float(unfused_attention_bytes(g, 2048, 2048, 8, False)) == 96 * 12 * 2048 * 2048 * 8


def test_fp8_and_unfused_attention_slow_the_step():
    kw = dict(tp=8, pp=1, dp=1, seq_len=2048, global_batch_tokens=8 * 2048, recompute="full", zero=1)
    base = train("megatron-gpt-18.4b", "a100-80gb", **kw).step
    unfused = train("megatron-gpt-18.4b", "a100-80gb", flash=False, dropout=True, **kw).step
    assert float(unfused.fwd_s) > float(base.fwd_s)
    h = dict(tp=8, pp=4, dp=1, seq_len=4096, global_batch_tokens=8 * 4096, recompute="full", zero=1)
    fp8 = train("llama-3.1-70b", "h100-sxm", dtype="fp8", **h).step
    bf16 = train("llama-3.1-70b", "h100-sxm", **h).step
    assert float(fp8.step_time_s) < float(bf16.step_time_s)        # still faster than bf16, by less than 2x
    assert float(bf16.step_time_s) / float(fp8.step_time_s) < 2


def test_megatron_a100_runs_within_five_and_a_half_points():
    """Narayanan et al. 2021 Table 1 (A100, full recomputation, materialized attention): each within 5.5 points
    (worst today: the 39.1B run, +5.0; before the unfused-attention traffic they were 5-8 points high)."""
    from tokenmath.analyses.training.validate_runs import validate_runs
    rows = [r for r in validate_runs().rows if r.id.startswith("megatron-gpt")]
    assert len(rows) == 5
    assert all(abs(r.error_points) <= 6.5 for r in rows), [(r.id, r.error_points) for r in rows]


def test_train_says_where_published_runs_ran_slower():
    # the validation's two worst regimes are said where they apply, and only there
    moe = train("qwen3-30b-a3b", "b200", tp=1, pp=1, dp=1, ep=8, seq_len=4096, global_batch_tokens=64 * 4096,
                dtype="fp8", recompute="none")
    assert any("Host time per layer" in n for n in moe.notes)
    assert any(n.startswith("fp8 on Blackwell") for n in moe.notes)
    dense_h100 = train("llama-3.1-8b", "h100-sxm", tp=1, pp=1, dp=8, seq_len=4096,
                       global_batch_tokens=64 * 4096, dtype="fp8", recompute="none")
    assert not any("Host time per layer" in n or n.startswith("fp8 on Blackwell") for n in dense_h100.notes)


def test_training_table_groups_partition_the_scored_runs():
    from tokenmath.analyses.training.validate_runs import validate_runs
    v = validate_runs()
    g = v.groups()
    n = len(v.scored)
    classes = {k for k in g if k.startswith(("nvidia-", "amd-", "google-", "tpu"))}
    assert sum(g[k][0] for k in classes) == n                          # each run in one chip class
    assert g["dense"][0] + g["MoE"][0] == n and g["bf16"][0] + g["fp8"][0] == n
    hop = [abs(r.error_points) for r in v.scored if r.chip_class == "nvidia-hopper"]
    assert g["nvidia-hopper"] == (len(hop), pytest.approx(float(np.median(hop))))
