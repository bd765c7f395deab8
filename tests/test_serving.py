"""Serving economics: hand-computed points, invariants, plots that carry their data."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.context import context
from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.pareto import frontier_mask, pareto
from tokenmath.analyses.serving.input_vs_output import prices
from tokenmath.analyses.serving.slowmode import slowmode
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import PEAK
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


@pytest.mark.parametrize("mid,hw,chips", [("llama-3.1-70b", "h100-sxm", 8), ("deepseek-v3", "h200", 8),
                                          ("gpt-oss-120b", "h100-sxm", 1), ("mistral-7b", "a100-80gb", 1)])
def test_hyperbola_invariants(mid, hw, chips):
    h = hyperbola(mid, hw, chips=chips, context=2048)
    per_tok = h.per_token_s
    # cost per token never rises with a batch that splits evenly over the attention groups (dp x ep); one more
    # sequence on the busiest group (batch = k x groups + 1) may lengthen the step more than it adds tokens
    groups = int(h.setup.layout.dp) * int(h.setup.layout.ep)
    even = per_tok[(h.batch % groups) == 0]
    assert np.all(np.diff(even) <= 1e-12 * even[:-1])
    assert np.all(per_tok >= h.floor_per_token_s * (1 - 1e-9))      # nothing beats the floor it flattens onto
    assert np.all(np.diff(h.step_s) >= -1e-15)                      # a bigger batch never makes the step faster
    assert h.batch[-1] == h.max_batch
    d = h.to_dict()
    assert set(d) >= {"points", "critical_batch", "floor_cost_per_mtok_output_usd"}


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
    # cached input (issue 15): held in the cheapest tier that reloads it in time, here local NVMe at $0.08 per GiB-month:
    # 327,680 B x 300 s x $0.08 / (730 h x 3600 s x 2^30 B) x 1e6 tokens; never above the uncached input
    assert a["cost_per_mtok_cached_input"] == pytest.approx(327_680 * 300 * 0.08 / (730 * 3600 * 2 ** 30) * 1e6, rel=1e-5)
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
    assert a["megawatts"] == pytest.approx(a["chips"] * 700 / 1e6)
    with pytest.raises(InputError) as e:
        fleet("llama-3.1-70b", "h100-sxm", demand=1e6, min_tokens_per_s_per_user=10_000)
    assert "fastest reaches" in e.value.valid


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
