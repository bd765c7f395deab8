"""Parallelism across the rack boundary: systems, collectives by hand, a known case per parallelism type, plan and moe."""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.setup import resolve_precision, system_setup
from tokenmath.mapping.candidates import layouts_for
from tokenmath.analyses.serving.moe import moe
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.grid import evaluate, links_for
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.engine import collectives as coll
from tokenmath.engine.static_batch import serve_batch
from tokenmath.engine.forward import forward_pass
from tokenmath.base.errors import InputError
from tokenmath.specs.kv_cache import kv_bytes_per_sequence
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.systems import get_system, slice_sizes, system_ids

H100 = get_system("hgx-h100", 16)
MB = 1e6


def lat(p, hw=H100):
    return hw.scaleup_latency + 2e-6 * (math.sqrt(p) - 1)


# ---- systems ------------------------------------------------------------------------------------------------------
def test_catalog_systems_resolve_with_sources():
    want = {"hgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "gb300-nvl72", "tpu-v5p", "tpu-v6e", "mi300x-node"}
    assert want <= set(system_ids())
    for sid in want:
        s = get_system(sid)
        assert s.chips >= 1 and s.scaleup_domain >= 1 and s.scaleup_bw > 0 and s.scaleout_bw > 0
        assert s.system_sources.get("scaleup") and s.system_sources.get("latency")
    assert get_system("hgx-h100").scaleup_domain == 8 and get_system("gb200-nvl72").scaleup_domain == 72
    assert get_system("hgx-h100", 16).domains == 2
    assert get_system("hgx-h100").price_usd_per_hour == 2.99          # the chip's sourced price carries over


def test_chip_id_means_its_usual_domain():
    s = get_system("h200", 32)
    assert s.chip == "h200" and s.scaleup_domain == 8 and s.domains == 4 and s.topology == "switch"
    assert s.scaleup_bw == 450e9 and s.group_bw("all_reduce", 8) is None


def test_tpu_slices_on_their_torus():
    v5p = get_system("tpu-v5p", 64)
    assert v5p.torus == (4, 4, 4) and v5p.scaleup_domain == 64
    assert get_system("tpu-v5p", 6144).torus == (16, 16, 24)
    two = get_system("tpu-v5p", 8192)            # two 4096-chip slices over the data-centre network
    assert two.scaleup_domain == 4096 and two.domains == 2
    assert get_system("tpu-v6e", 256).torus == (16, 16)
    assert [n for n, _ in slice_sizes([16, 16])] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    with pytest.raises(InputError) as e:
        get_system("tpu-v5p", 48)
    assert e.value.field == "chips" and "64" in e.value.valid


def test_unknown_system_names_closest():
    with pytest.raises(InputError) as e:
        get_system("hgx-h10")
    assert e.value.field == "system" and "hgx-h100" in e.value.valid


def test_torus_and_mesh_group_bandwidth_by_hand():
    v5p = get_system("tpu-v5p", 64)          # 4x4x4, 100 GB/s per link one way, axes of 4 wrap around
    # a ring on k whole axes uses 2k links: 4 chips -> 1 axis, 16 -> 2, 64 -> 3 (= the chip's 600 GB/s)
    assert list(v5p.group_bw("all_reduce", np.array([4, 16, 64]))) == [200e9, 400e9, 600e9]
    # 2 chips use part of an axis: no wraparound, one link
    assert float(v5p.group_bw("all_gather", 2)) == 100e9
    # all-to-all is bisection-bound: 64 chips on 4x4x4, t = 4 S / (8 L) -> bw = (63/64) x 8 L / 4
    assert float(v5p.group_bw("all_to_all", 64)) == pytest.approx(63 / 64 * 8 * 100e9 / 4)
    # all-reduce of 1 MB over 16 chips (2 axes): 2 x 15/16 x 1 MB / 400 GB/s + 1 us + 2 us x (4 - 1)
    t = coll.all_reduce(MB, 16, v5p, up_bw=v5p.group_bw("all_reduce", 16))
    assert float(t) == pytest.approx(2 * 15 / 16 * MB / 400e9 + 1e-6 + 2e-6 * 3)
    mi = get_system("mi300x-node")           # full mesh: one 64 GB/s link per peer
    assert list(mi.group_bw("all_reduce", np.array([2, 4, 8]))) == [64e9, 192e9, 448e9]
    t = coll.all_reduce(MB, 2, mi, up_bw=mi.group_bw("all_reduce", 2))
    assert float(t) == pytest.approx(2 * 0.5 * MB / 64e9 + 6e-6 + 2e-6 * (math.sqrt(2) - 1))


# ---- collectives by hand (hgx-h100: 450 GB/s NVLink, 50 GB/s NIC, 6 us + 2 us (sqrt p - 1), +40 us across) ----
def test_all_gather_and_reduce_scatter_by_hand():
    inside = 7 / 8 * MB / 450e9 + lat(8)
    assert float(coll.all_gather(MB, 8, H100)) == pytest.approx(inside)
    assert float(coll.reduce_scatter(MB, 8, H100)) == pytest.approx(inside)
    # 16 chips = 2 nodes: in-node phase 7/8 of the buffer on NVLink, then 1/2 of (1 MB / 8) over the NIC
    across = 7 / 8 * MB / 450e9 + 0.5 * (MB / 8) / 50e9 + lat(16) + 40e-6
    assert float(coll.all_gather(MB, 16, H100)) == pytest.approx(across)
    # at 80% of link rate the bandwidth terms stretch by 1/0.8, the latency does not
    assert float(coll.all_gather(MB, 8, H100, 0.8)) == pytest.approx(7 / 8 * MB / (0.8 * 450e9) + lat(8))
    assert float(coll.all_gather(MB, 1, H100)) == 0.0


def test_all_to_all_by_hand():
    assert float(coll.all_to_all(MB, 8, H100)) == pytest.approx(7 / 8 * MB / 450e9 + lat(8))
    # 16 ranks over 2 nodes: 8/16 of each rank's payload crosses the NIC (10 us) while 7/16 moves on NVLink
    expect = max(7 / 16 * MB / 450e9, 8 / 16 * MB / 50e9) + lat(16) + 40e-6
    assert float(coll.all_to_all(MB, 16, H100)) == pytest.approx(expect)
    assert expect == pytest.approx(10e-6 + 6e-6 + 6e-6 + 40e-6)


def test_p2p_inside_and_across_by_hand():
    assert float(coll.p2p(MB, False, H100)) == pytest.approx(MB / 450e9 + 6e-6)
    assert float(coll.p2p(MB, True, H100)) == pytest.approx(MB / 50e9 + 6e-6 + 40e-6)
    both = coll.p2p(MB, np.array([False, True]), H100, 0.8)
    assert np.allclose(both, [MB / (0.8 * 450e9) + 6e-6, MB / (0.8 * 50e9) + 46e-6])


SWITCHED = ["hgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "gb300-nvl72"]


@pytest.mark.parametrize("sid", SWITCHED + ["mi300x-node", "tpu-v5p"])
def test_a_group_inside_one_domain_is_never_slower(sid):
    hw = get_system(sid)
    for p in (2, 4, 8, 16, 64):
        if p > hw.scaleup_domain:
            continue
        split = hw.replace(scaleup_domain=max(1, p // 2))   # the same p chips spread over two domains
        for S in (1e3, 1e6, 1e9):
            for f in (coll.all_reduce, coll.all_gather, coll.all_to_all):
                up = getattr(hw, "group_bw")(f.__name__, p)
                assert float(f(S, p, hw, 0.8, up_bw=up)) <= float(f(S, p, split, 0.8, up_bw=up)) * (1 + 1e-12)
            assert float(coll.p2p(S, False, hw)) <= float(coll.p2p(S, True, hw))


def test_more_scaleout_bandwidth_is_never_slower():
    su, n = system_setup("deepseek-v3", "hgx-h200", 32, None, None, None, None)
    lays = layouts_for(su.model, n, allow_pp=True)
    fast = su.__class__(su.model, su.hardware.replace(scaleout_bw=su.hardware.scaleout_bw * 4), su.layout,
                        su.precision, su.efficiency, su.reserve)
    a = evaluate(su, lays, [1, 16, 256], 1024, 128, links=links_for(su.hardware))
    b = evaluate(fast, lays, [1, 16, 256], 1024, 128, links=links_for(fast.hardware))
    assert np.all(b.step_s <= a.step_s * (1 + 1e-12)) and np.all(b.ttft_s <= a.ttft_s * (1 + 1e-12))
    assert np.any(b.step_s < a.step_s * 0.99)          # and the layouts that cross domains do get faster


# ---- a known case per parallelism type --------------------------------------------------------------------------
PREC70 = resolve_precision(get_model("llama-3.1-70b"), None, None)


def _decode(m, hw, lay, prec, S=4, ctx=1000, **kw):
    return forward_pass(m, hw, lay, prec, PEAK, phase="decode", seqs=S, new_tokens=1, pairs_full=ctx,
                        pairs_sliding=ctx, kv_read_full=ctx - 1, kv_read_sliding=ctx - 1, **kw)


def test_tp_two_allreduces_of_activations_per_layer():
    m = get_model("llama-3.1-70b")
    pc = _decode(m, H100, Layout(tp=8), PREC70, S=4)
    op = pc.ops["tp_allreduce"]
    assert op.count == 2 * 80
    # 4 tokens x 8192 x 2 B = 65,536 B ring all-reduce over 8 GPUs: 2 x 7/8 x 65,536 / 450e9 + 10.3 us
    assert float(op.comm_s) == pytest.approx(2 * 7 / 8 * 65_536 / 450e9 + lat(8))
    # across two nodes (tp = 16) the same all-reduce pays the NIC and 40 us more
    op16 = _decode(m, H100, Layout(tp=16), PREC70, S=4).ops["tp_allreduce"]
    assert float(op16.comm_s) > float(op.comm_s) + 40e-6


def test_ep_alltoall_payload_is_batch_x_topk_x_dmodel():
    m = get_model("deepseek-v3")
    prec = resolve_precision(m, None, None)
    hw = get_system("hgx-h200", 16)
    lay = Layout(tp=1, ep=16)
    pc = _decode(m, hw, lay, prec, S=32)
    op = pc.ops["ep_alltoall"]
    assert op.count == 58                                   # 61 layers, the first 3 dense
    payload = 32 * 8 * 7168 * 2                             # B x top-k x d_model x 2 bytes per rank
    assert float(op.comm_s) == pytest.approx(2 * float(coll.all_to_all(payload, 16, hw)))
    # the busiest rank gets 1.5 x the mean: 1.5 x the expert FLOPs and 1.5 x the payload
    hot = _decode(m, hw, lay, prec, S=32, ep_imbalance=1.5)
    assert float(hot.ops["experts"].flops) == pytest.approx(1.5 * float(pc.ops["experts"].flops))
    assert float(hot.ops["ep_alltoall"].comm_s) == pytest.approx(2 * float(coll.all_to_all(1.5 * payload, 16, hw)))
    assert float(hot.time_s) > float(pc.time_s)
    # two-micro-batch overlap exposes only what the layer's compute (each micro-batch reading the weights) does not
    # hide, and reads every weight twice
    ov = _decode(m, hw, lay, prec, S=32, ep_overlap=True)
    a2a = float(pc.ops["ep_alltoall"].comm_s)
    layer = sum(float(ov.ops[k].time_s) for k in ("attn_proj", "norms", "router", "experts", "shared_experts")) \
        + float(ov.ops["attention"].total_s) / 61
    assert float(ov.ops["ep_alltoall"].comm_s) == pytest.approx(max(0.0, a2a - layer))
    for k in ("attn_proj", "experts", "shared_experts", "lm_head"):
        assert float(ov.ops[k].weight_bytes) == pytest.approx(2 * float(pc.ops[k].weight_bytes))
    assert float(ov.ops["embed"].weight_bytes) == float(pc.ops["embed"].weight_bytes)


def test_pp_handoffs_bubble_and_kv_in_flight():
    m = get_model("llama-3.1-70b")
    lay = Layout(tp=8, pp=2)                                 # 16 GPUs: the stage boundary crosses the node
    sv = serve_batch(m, H100, lay, PREC70, DEFAULT, 16, 1024, 128, 0.1)
    # 16 sequences flow as M = min(pp, 16) = 2 micro-batches of 8; one hand-off of 8 x 8192 x 2 B / tp per token
    assert float(sv.microbatches) == 2 and float(sv.seqs_per_microbatch) == 8
    hop = coll.p2p(8 * 8192 * 2 / 8, True, H100, DEFAULT.link_bw)
    assert float(sv.pp_p2p_s) == pytest.approx(float(hop))
    assert float(sv.decode_step_s) == pytest.approx(float(sv.decode.time_s) + float(hop))
    # prefill fills the pipeline: (M + pp - 1) / pp passes of one micro-batch through all layers
    assert float(sv.ttft_s) == pytest.approx(3 / 2 * float(sv.prefill.time_s))
    # KV held per chip counts every sequence in flight (all micro-batches), each stage its half of the layers
    per_seq = float(kv_bytes_per_sequence(m, 1024 + 128, 2))
    assert float(sv.memory.kv) == pytest.approx(16 * per_seq / (2 * 8))
    one = serve_batch(m, H100, Layout(tp=8, pp=4), PREC70, DEFAULT, 16, 1024, 128, 0.1)
    assert float(one.microbatches) == 4 and float(one.memory.kv) == pytest.approx(16 * per_seq / (4 * 8))


def test_dp_replicas_scale_throughput_linearly():
    m = get_model("llama-3.1-8b")
    prec = resolve_precision(m, None, None)
    a = serve_batch(m, H100, Layout(tp=2), prec, DEFAULT, 16, 1024, 128, 0.1)
    b = serve_batch(m, H100, Layout(tp=2, dp=4), prec, DEFAULT, 64, 1024, 128, 0.1)
    assert float(b.decode_step_s) == pytest.approx(float(a.decode_step_s))
    assert float(b.ttft_s) == pytest.approx(float(a.ttft_s))
    # 4 replicas serve 4 x the sequences at the same speed: 4 x the tokens/s on 4 x the chips
    assert 64 / float(b.decode_step_s) == pytest.approx(4 * 16 / float(a.decode_step_s))


def test_cp_splits_long_prompts_and_their_kv():
    from tokenmath.analyses.serving.infer import infer
    a = infer("llama-3.1-70b", "h100-sxm", chips=8, tp=8, input_len=65536, output_len=64)
    b = infer("llama-3.1-70b", "h100-sxm", chips=16, tp=8, cp=2, input_len=65536, output_len=64)
    assert b.to_dict()["cp"] == 2 and b.chips == 16
    assert b.ttft_s < 0.6 * a.ttft_s                           # the prompt is split over two chips
    assert float(b.memory.kv) == pytest.approx(float(a.memory.kv) / 2)
    assert "cp_ring" in b.prefill.ops and "cp_combine" in b.decode.ops
    assert float(b.memory.weights) == pytest.approx(float(a.memory.weights))   # weights are replicated over cp
    with pytest.raises(InputError) as e:
        infer("llama-3.1-70b", "h100-sxm", chips=12, tp=8, cp=2)
    assert e.value.field == "chips"


# ---- plan ---------------------------------------------------------------------------------------------------------
def test_evaluate_with_the_plan_options_at_their_defaults_changes_nothing():
    # plan and moe call the same grid evaluation as pareto/slowmode/fleet, with options; at their defaults (and a
    # switched system, whose groups all get the scale-up bandwidth) the grid is the plain one
    su, n = system_setup("llama-3.1-70b", "hgx-h100", 8, None, None, None, None)
    lays = layouts_for(su.model, n, allow_pp=True)
    a = evaluate(su, lays, [1, 8, 64], 1024, 128)
    b = evaluate(su, lays, [1, 8, 64], 1024, 128, ep_imbalance=1.0, ep_overlap=False, links=links_for(su.hardware))
    assert np.array_equal(a.step_s, b.step_s) and np.array_equal(a.ttft_s, b.ttft_s)
    assert np.array_equal(a.fits, b.fits) and np.array_equal(a.comm_share, b.comm_share)


@pytest.mark.parametrize("mid,sid,chips", [("llama-3.1-405b", "hgx-h100", 16), ("deepseek-v3", "gb200-nvl72", 72)])
def test_plan_best_meets_targets_and_sits_on_or_under_the_frontier(mid, sid, chips):
    p = plan(mid, sid, chips=chips, ttft_ms=5000, min_tokens_per_s_per_user=20)
    b = p.best
    assert b["ttft_s"] <= 5.0 and b["output_tokens_per_s_per_user"] >= 20
    assert b["tp"] * b["pp"] * b["ep"] * b["dp"] == chips
    assert 0 <= b["communication_share"] < 1 and b["bottleneck"] in ("compute", "memory", "communication", "overhead")
    # some frontier point is at least as interactive and at least as productive
    assert any(f["output_tokens_per_s_per_user"] >= b["output_tokens_per_s_per_user"] * (1 - 1e-9)
               and f["output_tokens_per_s_per_chip"] >= b["output_tokens_per_s_per_chip"] * (1 - 1e-9) for f in p.frontier)
    # and nothing that meets the targets is cheaper
    for r in p.runner_ups:
        assert r["cost_per_mtok_output_request_usd"] >= b["cost_per_mtok_output_request_usd"] * (1 - 1e-9)
    # the frontier trades interactivity for throughput
    for a, c in zip(p.frontier, p.frontier[1:]):
        assert a["output_tokens_per_s_per_user"] >= c["output_tokens_per_s_per_user"]
        assert a["output_tokens_per_s_per_chip"] <= c["output_tokens_per_s_per_chip"]
    assert p.layouts_evaluated >= 10 and p.search_s < 1.0


def test_plan_unreachable_targets_name_the_target():
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", "hgx-h100", chips=16, min_tokens_per_s_per_user=500)
    assert e.value.field == "min_tokens_per_s_per_user" and "fastest reachable" in e.value.valid
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", "hgx-h100", chips=16, ttft_ms=1)
    assert e.value.field == "ttft_ms" and "fastest reachable TTFT" in e.value.valid
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", "hgx-h100", chips=8)
    assert e.value.field == "chips"


def test_plan_disaggregated_sizes_prefill_from_the_traffic_mix():
    p = plan("deepseek-v3", "hgx-h200", chips=32, input_len=2048, output_len=256, min_tokens_per_s_per_user=20,
             ttft_ms=2000, disaggregated=True)
    d = p.disaggregated
    assert d["prefill"]["ttft_s"] <= 2.0 and d["decode"]["output_tokens_per_s_per_user"] >= 20
    # prompts arrive at (decode tokens/s / output_len) x input_len and the prefill pool is sized to them
    assert d["prompt_tokens_per_s"] == pytest.approx(d["decode"]["decode_output_tokens_per_s"] / 256 * 2048)
    assert d["prefill_chips"] == pytest.approx(d["prompt_tokens_per_s"] / d["prefill"]["prompt_tokens_per_s_per_chip"])
    assert d["prefill_to_decode_chip_ratio"] == pytest.approx(d["prefill_chips"] / 32)
    assert d["kv_bytes_per_request"] == pytest.approx(2048 * 70_272)


def test_plan_on_a_torus_and_a_mesh():
    t = plan("qwen3-30b-a3b", "tpu-v5p", chips=16)
    assert t.best["batch"] >= 1 and t.to_dict()["system"]["torus"] == [2, 2, 4]
    m = plan("llama-3.1-70b", "mi300x-node", chips=8)
    assert m.best["output_tokens_per_s_per_chip"] > 0
    # a chip without a scale-out figure: only layouts whose replicas stay inside one domain are searched
    h = plan("llama-3.1-70b", "h20", chips=16)
    assert h.best["tp"] * h.best["pp"] * h.best["ep"] <= 8 and any("scale-out" in n for n in h.notes)


# ---- moe ----------------------------------------------------------------------------------------------------------
def test_moe_rack_boundary():
    r = moe("deepseek-v3", "hgx-h200", chips=32, batch=256, context=4096)
    d = r.to_dict()
    assert d["fits_in_one_domain"] is True
    a = d["all_to_all"]
    assert a["inside"]["payload_bytes_per_rank"] == 32 * 8 * 7168 * 2        # ceil(256 / 8) tokens x k x d x 2 B
    assert a["inside"]["per_layer_s"] < a["same_ranks_split_over_two_domains"]["per_layer_s"]
    assert a["inside"]["per_layer_s"] < a["across"]["per_layer_s"]
    # fp8 DeepSeek-V3 experts (654 B params) fit in 8 x 141 GB with room to spare at this batch
    assert d["max_expert_params_per_domain"] > 654e9
    bigger = moe("deepseek-v3", "hgx-h200", chips=32, batch=2048, context=4096).to_dict()
    assert bigger["max_expert_params_per_domain"] < d["max_expert_params_per_domain"]   # KV eats expert room
    names = [row["name"] for row in d["layouts"]]
    assert {"TP", "EP (DP attention)", "PP"} <= set(names)
    for row in d["layouts"]:
        assert row["tp"] * row["pp"] * row["ep"] * row["dp"] == 32
        if row["fits"]:
            assert row["decode_step_s"] > 0 and 0 <= row["communication_share"] < 1 and row["kv_per_chip_bytes"] > 0
    small = moe("deepseek-v3", "hgx-h100", chips=8, batch=8).to_dict()
    assert small["fits_in_one_domain"] is False                  # 671 GB of fp8 weights > 8 x 72 GB usable
    with pytest.raises(InputError) as e:
        moe("llama-3.1-8b", "hgx-h100")
    assert e.value.field == "model"


# ---- command line ---------------------------------------------------------------------------------------------------
def test_plan_moe_systems_commands(tmp_path):
    run = CliRunner().invoke
    r = run(cli, ["plan", "--model", "deepseek-v3", "--system", "gb200-nvl72", "--chips", "72", "--input-len", "2048",
                  "--output-len", "512", "--json", "--plot", str(tmp_path / "plan.png")])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("tp", "ep", "pp", "dp", "batch", "cost_per_mtok_output_request_usd", "ttft_s", "output_tokens_per_s_per_user",
              "output_tokens_per_s_per_chip", "communication_share", "bottleneck"):
        assert k in d["best"] and all(k in f for f in d["frontier"])
    assert (tmp_path / "plan.png").stat().st_size > 5000
    r = run(cli, ["moe", "--model", "mixtral-8x7b", "--system", "hgx-h100", "--json", "--plot", str(tmp_path / "m.svg")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["layouts"] and (tmp_path / "m.svg").exists()
    r = run(cli, ["plan", "--model", "llama-3.1-405b", "--system", "hgx-h100", "--chips", "16",
                  "--min-tokens-per-s-per-user", "1000", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "min_tokens_per_s_per_user"
    r = run(cli, ["plan", "--system", "hgx-h10", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "system"
    r = run(cli, ["systems", "--json"])
    assert r.exit_code == 0 and {s["id"] for s in json.loads(r.output)} >= {"hgx-h100", "tpu-v6e"}
    r = run(cli, ["plan", "--model", "llama-3.1-70b", "--system", "hgx-h100", "--explain"])
    assert r.exit_code == 0 and "communication" in r.output


def test_moe_on_a_72_gpu_rack_lays_out_wide_expert_parallelism():
    """DeepSeek-V3's 256 experts over all 72 GPUs of a GB200 NVL72 (redundant experts fill the remainder, as
    DeepSeek's decode EP144 runs): a layout moe compares, not only 8-wide expert groups; on one NVLink domain its
    all-to-all stays inside, so it decodes more per chip than EP 8 x DP 9."""
    from tokenmath.analyses.serving.moe import moe
    rows = moe("deepseek-v3", "gb200-nvl72", engine="vllm").to_dict()["layouts"]
    wide = [r for r in rows if r["ep"] == 72]
    ep8 = [r for r in rows if r["ep"] == 8 and r["tp"] == 1]
    assert wide and ep8
    assert wide[0]["output_tokens_per_s_per_chip"] > ep8[0]["output_tokens_per_s_per_chip"]
