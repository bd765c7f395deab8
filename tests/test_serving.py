"""Serving economics: hand-computed points, invariants, plots that carry their data."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import tile_steps

from tokenmath.analyses.serving.context import context
from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.pareto import frontier_mask, pareto
from tokenmath.analyses.serving.input_vs_output import prices
from tokenmath.analyses.serving.slowmode import slowmode
from tokenmath.faces.cli import cli
from tokenmath.engine.kernels import compute_inflation, fills_tiles
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.efficiency import PEAK, calibrated
from tokenmath.specs.kernels import resolve as resolve_kernels
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import from_record
from tokenmath.specs.model import Model

TINY = Model(id="tiny", name="tiny", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=128)
# 1 GB of memory at 1 GB/s, 1 TFLOP/s, $3.6 per hour = $0.001 per second
SLOW = from_record("slow", {"memory_gb": 1, "memory_bw_tbs": 0.001, "tflops": {"bf16": 1}, "price_usd_per_hour": 3.6})


def test_hyperbola_batch1_point_by_hand():
    h = hyperbola(TINY, SLOW, context=9, efficiency=PEAK)
    d = h.to_dict()
    p1 = d["points"][0]
    # decode at context 9 (+1): the hand-computed step of tests/test_engine.py = 187,464 B / 1e9 B/s
    assert p1["batch"] == 1 and p1["step_s"] == pytest.approx(187_464e-9)
    # $/Mtok = 187.464 us x $0.001/s x 1e6 = $0.187464
    assert p1["cost_per_mtok_output_usd"] == pytest.approx(0.187464)
    # weight share: (32,768 + 2 x (32,768 + 49,152) + 12,800 + embedding row 128) B of 187,464 B
    assert p1["weight_share"] == pytest.approx((128 + 2 * (32_768 + 49_152) + 12_800) / 187_464)


HYPERBOLA_CASES = [("llama-3.1-70b", "h100-sxm", 8), ("deepseek-v3", "h200", 8), ("gpt-oss-120b", "h100-sxm", 1),
                   ("mistral-7b", "a100-80gb", 1)]


def _even_points(h):
    """The hyperbola's batches that split evenly over the attention groups (dp x ep), their cost per token, and the
    served batch: one more sequence on the busiest group (batch = k x groups + 1) may lengthen the step more than it
    adds tokens (tests/test_ep_fewer_sequences_than_groups.py), an exception apart from tile quantization."""
    su = h.setup
    groups = int(su.layout.dp) * int(su.layout.ep)
    even = (h.batch % groups) == 0
    B = h.batch[even]
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, B, h.context, 1, su.reserve)
    return B, h.per_token_s[even], sv


@pytest.mark.parametrize("mid,hw,chips,engine", [c + (None,) for c in HYPERBOLA_CASES]
                         + [("llama-3.1-70b", "h100-sxm", 8, "vllm")])     # the command's default engine
def test_hyperbola_invariants(mid, hw, chips, engine):
    # the default: the shape-aware kernel model (specs.efficiency.default_for -> physics_calibrated)
    h = hyperbola(mid, hw, chips=chips, context=2048, engine=engine)
    su = h.setup
    assert su.efficiency.kernels is not None
    per_tok = h.per_token_s
    B, c, sv = _even_points(h)
    assert np.allclose(np.asarray(sv.decode_step_s) / B, c, rtol=1e-12)     # the hyperbola's own points
    # cost per token never rises with batch, except where a GEMM's padded rows, split-K slices or waves step up,
    # and there by at most that GEMM's padded / unpadded compute ratio (docs/tile_quantization.md)
    state, inflation = tile_steps.quanta(su.model, su.hardware, su.layout, su.precision, su.efficiency, sv)
    assert list(tile_steps.violations(c, state, inflation)) == []
    # within one quantization interval a GEMM's time per useful FLOP only falls (the helper agrees with itself)
    same = ~np.any(state[1:] != state[:-1], axis=1)
    assert np.all(inflation[:, 1:][:, same] <= inflation[:, :-1][:, same] * (1 + 1e-12))
    # on whole-tile batches (every dense GEMM's rows fill their tiles: T = 64, 128, 256, ...) it never rises
    km = resolve_kernels(su.efficiency.kernels, su.hardware)
    whole = np.ones(B.shape, bool)
    for _name, _key, M, _shapes, _groups, grouped in tile_steps.decode_gemms(su.model, su.hardware, su.layout,
                                                                            su.precision, sv):
        if not grouped:
            whole &= np.broadcast_to(fills_tiles(km, M), B.shape)
    assert whole.sum() >= 2 and list(tile_steps.rises(c[whole])) == []
    assert np.all(per_tok >= h.floor_per_token_s * (1 - 1e-9))      # nothing beats the floor it flattens onto
    assert np.all(np.diff(h.step_s) >= -1e-15)                      # a bigger batch never makes the step faster
    assert h.batch[-1] == h.max_batch
    d = h.to_dict()
    assert set(d) >= {"points", "critical_batch", "floor_cost_per_mtok_output_usd"}


def test_hyperbola_staircase_of_llama_70b_on_8_h100():
    # the example of docs/tile_quantization.md: tp 8, context 2048, one group, so T = batch tokens in every GEMM.
    # The step pads the token rows to 64 (T <= 64) or to whole 128-row tiles: a rise is possible only just past
    # T = 64 and 128 k, and it happens at 129, 257, 385, 513 and 641 (at 65 the matmuls are still bandwidth-bound)
    h = hyperbola("llama-3.1-70b", "h100-sxm", chips=8, context=2048)
    B, c, sv = _even_points(h)
    up = B[tile_steps.rises(c) + 1]
    assert list(up) == [129, 257, 385, 513, 641]
    step = dict(zip(h.batch.astype(int), h.step_s))
    assert step[128] == pytest.approx(19.73e-3, abs=0.01e-3) and step[129] == pytest.approx(20.81e-3, abs=0.01e-3)
    # 129 rows pad to 2 x 128 = 256. The qkv projection (N = (64 + 2 x 8) x 128 / 8 = 1,280, K = 8,192) on 132 SMs,
    # the best of the 64/96/128/160-column tiles (split-K slices = floor(132 / tiles), K / 256 = 32 at most):
    #   128 rows: 128-column tiles, 1 x 10 = 10 tiles x 13 slices = 130 units in 1 wave: 130 / 132
    #   129 rows: 160-column tiles, 2 x 8 = 16 tiles x 8 slices = 128 units in 1 wave: (129 / 256) x 128 / 132
    # so its time per useful FLOP grows (130 / 132) / ((129 / 256) x (128 / 132)) = 2.016 x: the padded / unpadded
    # compute ratio. The cost per token rises far less (the other terms amortize), within that bound
    km = resolve_kernels(h.setup.efficiency.kernels, h.setup.hardware)
    qkv = ((1280, 8192),)
    r = float(compute_inflation(km, "bf16", 129, qkv) / compute_inflation(km, "bf16", 128, qkv))
    assert r == pytest.approx((130 / 132) / ((129 / 256) * (128 / 132)), rel=1e-12)
    assert 1 < step[129] / 129 / (step[128] / 128) < r
    # the checker can fail: a rise inside a tile interval (at 100 tokens), or past a tile by more than its padding
    state, inflation = tile_steps.quanta(h.setup.model, h.setup.hardware, h.setup.layout, h.setup.precision,
                                         h.setup.efficiency, sv)
    i100, i129 = int(np.nonzero(B == 100)[0][0]), int(np.nonzero(B == 129)[0][0])
    mid_tile, too_much = c.copy(), c.copy()
    mid_tile[i100] = c[i100 - 1] * 1.01
    too_much[i129] = c[i129 - 1] * 2.5
    assert list(tile_steps.violations(mid_tile, state, inflation)) == [i100 - 1]
    assert list(tile_steps.violations(too_much, state, inflation)) == [i129 - 1]


@pytest.mark.parametrize("mid,hw,chips", HYPERBOLA_CASES)
def test_hyperbola_flat_model_never_rises(mid, hw, chips):
    # the flat per-family fit (specs.efficiency.calibrated) has no tiles: cost per token never rises over batches
    # that split evenly over the attention groups, exactly
    h = hyperbola(mid, hw, chips=chips, context=2048, efficiency=calibrated(hw))
    assert h.setup.efficiency.kernels is None
    B, c, _ = _even_points(h)
    assert np.all(np.diff(c) <= 1e-12 * c[:-1])
    assert np.all(h.per_token_s >= h.floor_per_token_s * (1 - 1e-9))
    assert np.all(np.diff(h.step_s) >= -1e-15)


def test_floor_is_the_compute_bound_cost_at_short_context():
    # context 1: KV is negligible, so the floor is the matmul FLOPs per token at achievable peak
    h = hyperbola("llama-3.1-8b", "h100-sxm", context=1, efficiency=PEAK)
    assert h.floor_bottleneck == "compute"
    flops_per_token = 2 * 8.03e9   # 2 FLOPs per weight (the embedding gather is not a matmul)
    assert h.floor_per_token_s == pytest.approx(flops_per_token / 989e12, rel=0.08)


def test_critical_batch_matches_ridge_point():
    # bf16 weights: the matmuls turn compute-bound near peak/bandwidth x 2 bytes / 2 FLOPs = 989/3.35 = 295 tokens
    h = hyperbola("llama-3.1-70b", "h100-sxm", chips=8, context=1, efficiency=PEAK)
    assert 280 <= h.critical_batch <= 340


def test_moe_hyperbola_shows_distinct_experts():
    h = hyperbola("deepseek-v3", "h200", chips=8, context=1024)
    t = h.experts_touched
    assert t[0] == pytest.approx(8.0) and t[-1] > 250          # batch 1 reads 8 experts; a full batch all 256
    # so the weight bytes per step grow with batch before they amortize
    assert h.weight_share[0] * h.step_s[0] < h.weight_share[15] * h.step_s[15]


def test_context_too_long_says_what_fits():
    with pytest.raises(InputError) as e:
        hyperbola("llama-3.1-70b", "h100-sxm", chips=8, context=50_000_000)
    assert e.value.field == "context" and "fit" in e.value.valid


def test_context_weights_too_big_names_chips():
    # Qwen3-Next 80B in bf16 is ~159 GB of weights: more than one H100's 80 GB before any KV, so no context fits;
    # the field at fault is the chip count, not the batch the user never gave
    with pytest.raises(InputError) as e:
        context("qwen3-next-80b-a3b", "h100-sxm")
    assert e.value.field == "chips" and "--chips" in e.value.valid
    assert context("qwen3-next-80b-a3b", "h100-sxm", chips=4).max_batch_at_context >= 1


def test_slowmode_tighter_budget_never_cheaper():
    s = slowmode("llama-3.1-8b", "h100-sxm", budgets_s=[0.005, 0.01, 0.02, 0.05, 0.2, 1.0])
    costs = [r["cost_per_mtok_output_request_usd"] for r in s.rows if r["feasible"]]
    assert all(a >= b - 1e-12 for a, b in zip(costs, costs[1:]))
    assert s.saturation_budget_s is not None and s.saturation_budget_s <= 1.0
    assert s.rows[-1]["memory_limited"] or s.rows[-1]["decode_step_s"] < 1.0
    bad = slowmode("llama-3.1-70b", "h100-sxm", budgets_s=[0.0005])
    assert not bad.rows[0]["feasible"] and "fastest" in bad.rows[0]["reason"]


def test_pareto_frontier_is_non_dominated():
    x = np.array([1.0, 2, 3, 2.5])
    y = np.array([5.0, 4, 1, 0.5])
    assert list(frontier_mask(x, y)) == [True, True, True, False]
    p = pareto("llama-3.1-70b", "h100-sxm")
    f = p.frontier
    assert len(f) >= 3
    for a, b in zip(f, f[1:]):   # sorted by interactivity: throughput must rise as interactivity falls
        assert a["output_tokens_per_s_per_user"] >= b["output_tokens_per_s_per_user"]
        assert a["output_tokens_per_s_per_chip"] <= b["output_tokens_per_s_per_chip"]


def test_pareto_mla_moe():
    p = pareto("deepseek-v3", "h200", input_len=1024, output_len=256)
    assert p.frontier and all(q["cost_per_mtok_output_request_usd"] > 0 for q in p.frontier)


def test_prices_output_costs_more_and_grows_with_context():
    p = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[1024, 16384], output_len=256, batch=16)
    a, b = p.rows
    assert a["output_input_ratio"] > 1 and b["output_input_ratio"] > a["output_input_ratio"]
    # cached input: held in the cheapest tier that reloads it in time, here local NVMe at $0.08 per GiB-month, held
    # 327,680 B x 300 s x $0.08 / (730 h x 3600 s x 2^30 B) x 1e6 tokens, plus its write and its reload over the drive's
    # 6.25 GB/s link, each 327,680 B / 6.25e9 B/s of the whole 3.84 TB drive's time; never above the uncached input
    drive_usd_s = 3840e9 * 0.08 / (730 * 3600 * 2 ** 30)
    assert a["cost_per_mtok_cached_input"] == pytest.approx(
        (327_680 * 300 * 0.08 / (730 * 3600 * 2 ** 30) + 2 * 327_680 / 6.25e9 * drive_usd_s) * 1e6, rel=1e-5)
    assert a["cost_per_mtok_cached_input"] <= a["cost_per_mtok_input"]


def test_context_gqa_mla_sliding():
    c = context("llama-3.1-70b", "h100-sxm", chips=8, batch=16, context=8192)
    assert c.kv_bytes_per_token == 327_680
    # KV read = weight read per step: 16 x c x 327,680 B / 8 chips = 141.1e9 B / 8 -> c ~ 26,900
    assert c.crossover_context == pytest.approx(70.55e9 * 2 / (16 * 327_680), rel=0.05)
    assert context("mistral-7b", "h100-sxm", batch=16).max_context_at_batch is None
    assert context("deepseek-v3", "h200", chips=8, batch=16).kv_bytes_per_token == 70_272


def test_fleet_scales_with_demand():
    a = fleet("llama-3.1-8b", "h100-sxm", demand=1e6).to_dict()
    b = fleet("llama-3.1-8b", "h100-sxm", demand=1e7).to_dict()
    assert b["chips"] >= 9 * a["chips"] and a["replicas"] * a["replica_chips"] == a["chips"]
    # whole 8-GPU nodes at DGX H100's 10.2 kW max (NVIDIA DGX H100/H200 User Guide; data/systems.toml hgx-h100)
    assert a["megawatts"] == pytest.approx(-(-a["chips"] // 8) * 10_200 / 1e6)
    with pytest.raises(InputError) as e:
        fleet("llama-3.1-70b", "h100-sxm", demand=1e6, min_tokens_per_s_per_user=10_000)
    assert "fastest reaches" in e.value.valid


def test_fleet_sized_for_continuous_batching_by_hand():
    from tokenmath.analyses.serving.steady_state import steady_state
    a = fleet("llama-3.1-70b", "h100-sxm", demand=1e6, engine="vllm").to_dict()
    c = a["continuously_batched"]
    # the users' speed counts the prompts admitted among the decodes: the target holds, one user more breaks it
    assert c["tokens_per_s_per_user"] >= 20.0
    kw = dict(chips=c["replica_chips"], tp=c["tp"], pp=c["pp"], dp=c["dp"], engine="vllm")
    here, more = steady_state("llama-3.1-70b", "h100-sxm", concurrency=[c["concurrency"], c["concurrency"] + 1],
                              **kw).points
    assert here.output_tokens_per_s == pytest.approx(c["replica_output_tokens_per_s"])
    assert more.output_tokens_per_s_per_user < 20.0
    # replicas = ceil(1e6 / replica tok/s), chips = replicas x replica chips, MW = ceil(chips / 8) DGX H100 nodes x
    # 10.2 kW (NVIDIA DGX H100/H200 User Guide), $ = chips x $2.99 x 8760
    assert c["replicas"] == -(-1e6 // c["replica_output_tokens_per_s"])
    assert c["chips"] == c["replicas"] * c["replica_chips"]
    assert c["megawatts"] == pytest.approx(-(-c["chips"] // 8) * 10_200 / 1e6)
    assert c["usd_per_year"] == pytest.approx(c["chips"] * 2.99 * 8760)
    # Llama 3.1 70B on H100 at 20 tok/s/user: the static batch (decode-only speed) needs fewer chips than replicas
    # whose steps also carry the prompts (the by-concurrency points of test_by_concurrency: 24% more here)
    assert c["chips"] > a["chips"]
    assert fleet("llama-3.1-70b", "h100-sxm", demand=1e6, engine="none").to_dict()["continuously_batched"] is None


def test_fleet_with_prefill_on_chips_of_its_own_by_hand():
    from tokenmath.specs.kv_cache import kv_bytes_per_sequence
    from tokenmath.specs.model_catalog import get_model
    a = fleet("deepseek-v3", "h200", demand=1e6, engine="vllm").to_dict()
    d = a["disaggregated"]
    dec, pre = d["decode"], d["prefill"]
    # decode instances = ceil(1e6 / one instance's output tok/s); prefill instances = ceil(1e6 x 1024 / 256 prompt
    # tok/s / one instance's); the fleet is both pools, in whole 8-GPU nodes of 10.2 kW (DGX H200's max)
    assert dec["instances"] == -(-1e6 // dec["instance_output_tokens_per_s"])
    assert pre["instances"] == -(-(1e6 * 1024 / 256) // pre["instance_prompt_tokens_per_s"])
    assert d["chips"] == dec["instances"] * dec["instance_chips"] + pre["instances"] * pre["instance_chips"]
    assert d["megawatts"] == pytest.approx(-(-d["chips"] // 8) * 10_200 / 1e6)
    # the decode pool meets the speed with decodes alone; the prefill pool's batches stay within the 2 s TTFT
    # target (MLPerf's server constraint, the simulator's goodput default)
    assert dec["tokens_per_s_per_user"] >= 20 and pre["ttft_s"] <= 2.0
    # each request's prompt KV crosses once: 1024 tokens x 70.3 kB (MLA, bf16) per request, 1e6 / 256 requests/s
    kv = kv_bytes_per_sequence(get_model("deepseek-v3"), 1024, 2)
    assert d["kv_bytes_per_request"] == pytest.approx(kv)
    assert d["kv_transfer_bytes_per_s"] == pytest.approx(kv * 1e6 / 256)
    # no prompts among the decodes: far fewer chips than replicas that batch continuously (whose expert-parallel
    # layouts prefill whole prompts on one attention group while the others wait)
    assert d["chips"] < 0.5 * a["continuously_batched"]["chips"]


@pytest.mark.parametrize("cmd", [
    ["hyperbola", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8"],
    ["pareto", "--model", "deepseek-v3", "--hardware", "h200"],
    ["slowmode", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"],
    ["prices", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm"],
    ["context", "--model", "gpt-oss-120b", "--hardware", "h100-sxm", "--batch", "8"],
])
def test_commands_json_and_plots(tmp_path, cmd):
    out = tmp_path / "chart.png"
    r = CliRunner().invoke(cli, cmd + ["--json", "--plot", str(out)])
    assert r.exit_code == 0, r.output
    json.loads(r.output)
    assert out.exists() and out.stat().st_size > 5000


def test_plot_reads_back_the_data(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tokenmath.faces import plots
    h = hyperbola("llama-3.1-8b", "h100-sxm", context=1024)
    seen = {}
    orig = plots.save_figure

    def grab(fig, path):
        seen["lines"] = [ln.get_ydata() for ax in fig.axes for ln in ax.get_lines()]
        return orig(fig, path)
    plots.save_figure = grab
    try:
        plots.hyperbola_plot(h, tmp_path / "h.svg")
    finally:
        plots.save_figure = orig
    cost = h.cost_per_mtok_output_usd
    assert any(len(y) == len(cost) and np.allclose(y, cost) for y in seen["lines"])
    plt.close("all")
