"""Issue 34, defects 7 and 9: fleet's static sizing carries its TTFT and says when it is not servable; fleet megawatts
count whole nodes at their sourced system power (with PUE); slowmode states its saving; sensitivity has no silent
0.0% rows.

Sources of the figures checked here (data/systems.toml carries them with each figure):
- DGX H100 / DGX H200: 10.2 kW max for 8 GPUs (NVIDIA DGX H100/H200 User Guide, Introduction, Power Specifications,
  https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html).
- DGX B200: 14.3 kW max for 8 GPUs (NVIDIA DGX B200 User Guide, Introduction, Power Specifications,
  https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html).
- GB200 NVL72: about 120 kW per 72-GPU rack (NVIDIA DGX GB200 User Guide, Hardware,
  https://docs.nvidia.com/dgx/dgxgb200-user-guide/hardware.html).
- 2 s TTFT: MLPerf Inference's server-scenario limit for Llama 2 70B (mlcommons/inference, language/llama2-70b README;
  simulation/simulate.TTFT_TARGET_S).
"""
import math

import pytest

from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.infer import infer
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.provider_price import price
from tokenmath.analyses.serving.sensitivity import sensitivity
from tokenmath.analyses.serving.simulation.simulate import TTFT_TARGET_S
from tokenmath.analyses.serving.slowmode import slowmode
from tokenmath.engine.economics import megawatts
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.systems import get_system, node_power


# ---- the catalog: sourced whole-system power -------------------------------------------------------------------

@pytest.mark.parametrize("sid, kw, chips", [("hgx-h100", 10.2, 8), ("hgx-h200", 10.2, 8), ("hgx-b200", 14.3, 8),
                                            ("gb200-nvl72", 120.0, 72)])
def test_systems_carry_sourced_node_power(sid, kw, chips):
    """DGX H100/H200 10.2 kW, DGX B200 14.3 kW (8 GPUs each), GB200 NVL72 ~120 kW per 72-GPU rack: each with the
    NVIDIA user guide it comes from."""
    s = get_system(sid)
    assert s.node_w == pytest.approx(kw * 1e3) and s.node_chips == chips
    assert "https://docs.nvidia.com/dgx/" in s.system_sources["power"]
    d = s.describe()
    assert d["node_kw"] == pytest.approx(kw) and d["node_chips"] == chips
    # the chip the system is built of finds it (fleet's --hardware is a chip id)
    p = node_power(get_hardware(s.chip))
    assert p.system == sid and p.watts == pytest.approx(kw * 1e3) and p.chips == chips


@pytest.mark.parametrize("chip", ["mi300x", "gb300-nvl72", "tpu-v5p", "l40s", "h800"])
def test_no_node_power_where_none_is_sourced(chip):
    """No vendor system power was found for these (the MI300X platform, GB300 NVL72, TPU slices) or they have no
    system in the catalog: no figure is invented."""
    assert node_power(get_hardware(chip)) is None


def test_megawatts_is_one_formula():
    # units x W each x PUE / 1e6: 111 DGX H200 nodes x 10,200 W x PUE 1.3 = 1.47186 MW; 888 chips x 700 W = 0.6216 MW
    assert megawatts(111, 10_200, 1.3) == pytest.approx(111 * 10_200 * 1.3 / 1e6) == pytest.approx(1.47186)
    assert megawatts(888, 700, 1.0) == pytest.approx(0.6216)


# ---- fleet: megawatts from whole nodes ---------------------------------------------------------------------------

def test_fleet_megawatts_count_whole_dgx_nodes_with_pue():
    """DeepSeek-V3 on H200 at 1e6 output tok/s: every sizing (static, continuous, disaggregated) counts whole 8-GPU
    nodes at 10.2 kW: MW = ceil(chips / 8) x 10.2 kW x PUE / 1000 (before: chips x 700 W, 1.82x less)."""
    d = fleet("deepseek-v3", "h200", demand=1e6, engine="vllm", pue=1.3).to_dict()
    p = d["power"]
    assert p["basis"] == "node" and p["system"] == "hgx-h200" and p["node_kw"] == 10.2 and p["node_chips"] == 8
    assert "docs.nvidia.com" in p["source"] and p["pue"] == 1.3
    for x in (d, d["continuously_batched"], d["disaggregated"]):
        assert x["nodes"] == math.ceil(x["chips"] / 8)
        assert x["megawatts"] == pytest.approx(x["nodes"] * 10.2 * 1.3 / 1000)
        # the whole node draws 10.2 kW where its eight chips' TDPs add to 5.6 kW
        assert x["megawatts"] >= x["chips"] * 700 * 1.3 / 1e6 * 10.2 / 5.6 * (1 - 1e-12)


def test_fleet_on_an_nvl72_counts_racks():
    # GB200 NVL72: racks of 72 GPUs at ~120 kW each: MW = ceil(chips / 72) x 120 kW x PUE / 1000
    d = fleet("llama-3.1-70b", "gb200-nvl72", demand=1e5, pue=1.2).to_dict()
    assert d["power"]["basis"] == "node" and d["power"]["system"] == "gb200-nvl72"
    assert d["nodes"] == math.ceil(d["chips"] / 72)
    assert d["megawatts"] == pytest.approx(d["nodes"] * 120 * 1.2 / 1000)


def test_fleet_without_a_sourced_node_counts_chip_tdp_and_says_so():
    # L40S has no system in the catalog: MW = chips x 350 W (its TDP) x PUE / 1e6, and the answer says why
    d = fleet("llama-3.1-8b", "l40s", demand=1e5, pue=1.5).to_dict()
    p = d["power"]
    assert p["basis"] == "chip" and p["chip_tdp_w"] == 350 and "no whole-node power" in p["why"]
    assert d["nodes"] is None and d["megawatts"] == pytest.approx(d["chips"] * 350 * 1.5 / 1e6)
    # a what-if TDP: the catalog's node figure no longer holds, so the chips' (new) TDP is counted
    w = fleet("llama-3.1-8b", "h100-sxm", demand=1e6, what_if=(("tdp_w", "1000"),)).to_dict()
    assert w["power"]["basis"] == "chip" and "what-if" in w["power"]["why"]
    assert w["megawatts"] == pytest.approx(w["chips"] * 1000 / 1e6)
    # H800 has no TDP in the catalog: no megawatts, and the answer says why
    h = fleet("deepseek-v3", "h800", demand=1e6, max_chips=16).to_dict()
    assert h["megawatts"] is None and h["power"]["basis"] is None and "no TDP" in h["power"]["why"]


# ---- the static answer's TTFT --------------------------------------------------------------------------------

def test_fleet_static_sizing_carries_its_ttft_and_says_when_it_is_not_servable():
    """The static replica's ttft_s is the prefill of its whole batch (infer's static-batch TTFT at the same layout
    and batch); past 2 s (MLPerf's server limit) the answer says it is a throughput bound, not servable."""
    d = fleet("llama-3.1-70b", "h100-sxm", demand=1e6, engine="vllm").to_dict()
    r = infer("llama-3.1-70b", "h100-sxm", chips=d["replica_chips"], tp=d["tp"], pp=d["pp"], ep=d["ep"], dp=d["dp"],
              batch=d["batch"], engine="vllm")
    assert d["ttft_s"] == pytest.approx(r.ttft_s, rel=1e-9)
    assert d["ttft_s"] > TTFT_TARGET_S
    note = d["static_ttft_note"]
    assert "MLPerf" in note and "2 s" in note and "not a servable answer" in note and f"{d['batch']:,} prompts" in note
    assert "continuously batched" in note
    # a tight per-user target keeps the batch small: its whole-batch prefill stays within 2 s, and nothing is said
    q = fleet("llama-3.1-8b", "h100-sxm", demand=1e6, min_tokens_per_s_per_user=150).to_dict()
    assert q["ttft_s"] <= TTFT_TARGET_S and q["static_ttft_note"] is None


def test_price_and_plan_say_when_the_static_ttft_is_long():
    p = price("deepseek-v3", "h200", engine="vllm").to_dict()
    assert p["ttft_s"] > TTFT_TARGET_S and "not a servable answer" in p["static_ttft_note"]
    pl = plan("llama-3.1-70b", "hgx-h100", chips=8, engine="vllm", concurrency=())
    assert pl.best["ttft_s"] > TTFT_TARGET_S
    assert any(n.startswith("best: TTFT") and "MLPerf" in n for n in pl.notes)
    # with a 2 s TTFT target the best static batch is servable, and plan says nothing
    ok = plan("llama-3.1-70b", "hgx-h100", chips=8, ttft_ms=2000, engine="vllm", concurrency=())
    assert ok.best["ttft_s"] <= TTFT_TARGET_S and not any("MLPerf" in n for n in ok.notes)


# ---- slowmode: the saving, stated ----------------------------------------------------------------------------

def test_slowmode_states_the_saving_against_the_tightest_budget():
    """cost_ratio = cost within the tightest budget met / cost here, saving = 1 - cost here / that cost (written out
    on the rows' own costs), at every feasible budget and at saturation."""
    s = slowmode("llama-3.1-8b", "h100-sxm", budgets_s=[0.001, 0.005, 0.02, 0.2])
    d = s.to_dict()
    key = "cost_per_mtok_output_request_usd"
    met = [r for r in d["rows"] if r["feasible"]]
    ref = min(met, key=lambda r: r["budget_s"])
    assert not d["rows"][0]["feasible"] and "saving_vs_tightest" not in d["rows"][0]    # 1 ms: no point meets it
    assert d["saving"]["reference"]["budget_s"] == ref["budget_s"] and d["saving"]["reference"]["cost"] == ref[key]
    for r in met:
        v = r["saving_vs_tightest"]
        assert v["reference_budget_s"] == ref["budget_s"]
        assert v["cost_ratio"] == pytest.approx(ref[key] / r[key])
        assert v["saving"] == pytest.approx(1 - r[key] / ref[key])
    assert ref["saving_vs_tightest"]["cost_ratio"] == 1.0 and ref["saving_vs_tightest"]["saving"] == 0.0
    # a looser budget never saves less
    savings = [r["saving_vs_tightest"]["saving"] for r in sorted(met, key=lambda r: r["budget_s"])]
    assert savings == sorted(savings) and savings[-1] > 0.4      # 49% with the shipped calibration
    sat = d["saturation"]["saving_vs_tightest"]
    assert sat == d["saving"]["at_saturation"]
    assert sat["cost_ratio"] == pytest.approx(ref[key] / d["saturation"][key])
    # the text says it
    from tokenmath.faces.explain_serving import explain_slowmode
    text = explain_slowmode(s)
    assert f"{sat['cost_ratio']:.3g}x cheaper than within" in text and "the tightest budget met" in text


# ---- sensitivity: no silent 0.0% rows ------------------------------------------------------------------------

def test_sensitivity_moves_what_the_kernel_model_uses_and_explains_every_still_row():
    """Under the shape-aware kernel model (every calibrated chip's default) efficiency.flops and efficiency.memory_bw
    never enter the engine (engine/kernels.op_rates gives every op's rates): before, they were listed at 0.0%. Now
    they are left out with a note, and the kernel model's residuals, which do enter, are moved instead."""
    r = sensitivity("llama-3.1-8b", "h100-sxm", metric="decode_step_s", batch=1, chips=1)
    rows = {x.name: x for x in r.rows}
    assert "efficiency.flops" not in rows and "efficiency.memory_bw" not in rows
    assert any("efficiency.flops and efficiency.memory_bw are left out" in n for n in r.notes)
    # the flat fraction truly cannot move the answer: the same question at half of it gives the same step
    from dataclasses import replace
    from tokenmath.analyses.setup import serving_efficiency
    eff = serving_efficiency(get_hardware("h100-sxm"), None, None)
    assert eff.kernels is not None
    a = infer("llama-3.1-8b", "h100-sxm", batch=1, chips=1, efficiency=eff).decode_step_s
    assert infer("llama-3.1-8b", "h100-sxm", batch=1, chips=1,
                 efficiency=replace(eff, flops=eff.flops / 2, memory_bw=eff.memory_bw / 2)).decode_step_s == a
    # the bandwidth residual scales every op's bandwidth as the chip's HBM bandwidth does: the same answers
    # (below its bound: bw_scale is a share of the kernels' streaming rate, at most 1, so its +20% stops at 1.0 where
    # the chip's HBM bandwidth goes on to +20%: the step then falls less)
    bw, hbm = rows["kernels.bw_scale"], rows["memory_bw_tbs"]
    assert bw.answer_low == pytest.approx(hbm.answer_low, rel=1e-9)
    assert bw.high <= 1.0 and bw.swing > 0
    if bw.high == pytest.approx(bw.base * 1.2):
        assert bw.answer_high == pytest.approx(hbm.answer_high, rel=1e-9)
    else:
        assert hbm.answer_high < bw.answer_high < r.base_answer
    # every row whose answer does not move says why
    still = [x for x in r.rows if x.swing <= 1e-9 * r.base_answer]
    assert still and all(x.note for x in still)
    assert "one chip" in rows["scaleup_gbs"].note and "price" in rows["price_usd_per_hour"].note
    assert "FLOP/s" in rows["kernels.compute_scale"].note


def test_sensitivity_flat_efficiency_keeps_its_rows():
    # without a kernel model (the pure roofline) the flat fractions are what the engine uses: their rows stay
    from tokenmath.specs.efficiency import PEAK
    r = sensitivity("llama-3.1-8b", "h100-sxm", metric="decode_step_s", batch=1, chips=1, efficiency=PEAK,
                    engine="none")
    rows = {x.name: x for x in r.rows}
    assert "efficiency.memory_bw" in rows and "kernels.bw_scale" not in rows
    assert rows["efficiency.flops"].note          # memory-bound at batch 1: FLOP/s binds nothing, and it says so
