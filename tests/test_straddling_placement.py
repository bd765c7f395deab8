"""Issue 15 item 3: groups that straddle a scale-up domain are priced at scale-out speed.

Ranks sit on real chips in the order tp, ep, cp, pp, dp from a domain boundary (mapping/placement.py); each group of
g chips is a contiguous block, and a block whose size neither divides nor is a multiple of the domain D straddles
a boundary. The collectives are priced for the slowest member: in an all-to-all, a rank whose domain holds c of the
g ranks sends (g - c) / (g - 1) of what leaves it over the scale-out link."""
import numpy as np
import pytest

from tokenmath.analyses.serving.grid import evaluate, links_for
from tokenmath.analyses.serving.moe import moe
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.setup import system_setup
from tokenmath.engine import collectives as coll
from tokenmath.engine.forward import forward_pass
from tokenmath.engine.static_batch import serve_batch
from tokenmath.mapping.layout import Layout
from tokenmath.mapping.placement import place, span
from tokenmath.specs.efficiency import PEAK
from tokenmath.specs.systems import get_system


# ---- the placement rule ----------------------------------------------------------------------------------------
def test_aligned_groups_span_ceil_g_over_d():
    # 16 chips of tp=8 in domains of 8: both groups aligned, one domain each; ep=16 over 2 nodes: 2 domains of 8
    s = span(8, 16, 8)
    assert (int(s.domains), int(s.piece_min), int(s.piece_max)) == (1, 8, 8)
    s = span(16, 32, 8)
    assert (int(s.domains), int(s.piece_min), int(s.piece_max)) == (2, 8, 8)
    assert float(s.crossing_fraction) == pytest.approx(8 / 15)      # 8 peers of 15 sit in the other node


def test_replicas_of_48_on_two_nvl72_racks():
    # 144 chips, racks of 72: replicas at chips 0-47 (rack 1), 48-95 (24 in rack 1, 24 in rack 2), 96-143 (rack 2)
    s = span(48, 144, 72)
    assert int(s.domains) == 2
    assert int(s.piece_min) == 24 and int(s.piece_max) == 48
    # tp=16 dp=9: replica 5 sits at chips 64-79, 8 in each rack
    s = span(16, 144, 72)
    assert int(s.domains) == 2 and int(s.piece_min) == 8


def test_lone_rank_of_ep9_on_nodes_of_8():
    # 72 HGX H200 (9 nodes of 8), ep = 9: the first stage is chips 0-8, 8 ranks on node 1 and 1 rank on node 2;
    # that lone rank's 8 peers are all in the other node: it sends 8/8 of what leaves it across (not 1/9)
    s = span(9, 72, 8)
    assert int(s.domains) == 2 and int(s.piece_min) == 1 and int(s.piece_max) == 8
    assert float(s.crossing_fraction) == 1.0


def test_placement_broadcasts_over_layouts():
    lay = Layout(np.array([[1], [16], [8]]), 1, np.array([[48], [1], [1]]), np.array([[3], [9], [18]]))
    pl = place(lay, 72)
    assert pl.replica.domains.ravel().tolist() == [2, 2, 1]
    assert pl.tp.domains.ravel().tolist() == [1, 2, 1]


# ---- plan and moe report the straddle ----------------------------------------------------------------------------
def test_plan_grid_reports_two_domains_for_straddling_replicas():
    # before: domains_spanned = ceil(48 / 72) = 1 and ceil(16 / 72) = 1
    su, n = system_setup("deepseek-v3", "gb200-nvl72", 144, None, None, None, None)
    g = evaluate(su, [(1, 1, 48, 3), (16, 1, 1, 9), (8, 1, 1, 18), (1, 1, 72, 2)], [64], 1024, 256)
    assert g.domains_spanned.ravel().tolist() == [2, 2, 1, 1]


def test_moe_rows_report_two_domains_for_tp16_on_two_racks():
    r = moe("deepseek-v3", "gb200-nvl72", chips=144, batch=1152).to_dict()
    tp16 = [row for row in r["layouts"] if (row["tp"], row["ep"], row["dp"]) == (16, 1, 9)]
    assert tp16 and tp16[0]["domains_spanned"] == 2


def test_plan_without_scaleout_keeps_only_replicas_inside_a_domain(tmp_path):
    # 12 chips in domains of 8 and no scale-out link: a replica of 4 (tp=4 dp=3) puts chips 4-7 in domain 1 and
    # chips 8-11 in domain 2 -- no group straddles; a replica of 6 (chips 6-11) or 3 (chips 6-8) would straddle,
    # although 6 and 3 are below the domain size (before: kept, and priced inside one domain)
    f = tmp_path / "box.toml"
    f.write_text('[box]\nmemory_gb = 141\nmemory_bw_tbs = 4.8\nscaleup_domain = 8\nscaleup_gbs = 450\n'
                 '[box.tflops]\nbf16 = 989\n')
    hw = get_system(str(f), 12)
    assert hw.scaleout_bw is None and hw.scaleup_domain == 8
    p = plan("qwen3-30b-a3b", str(f), chips=12)
    assert p.layouts_evaluated >= 3
    for row in [p.best, *p.runner_ups, *p.frontier]:
        assert row["domains_spanned"] == 1
        assert 8 % (row["tp"] * row["pp"] * row["ep"]) == 0


# ---- the engine prices the slowest member ------------------------------------------------------------------------
def test_all_to_all_of_the_lone_rank_by_hand():
    # hgx-h200: scale-up 450 GB/s, scale-out 50 GB/s per GPU; latency 6 us + 2 us x (sqrt(9) - 1) + 40 us = 50 us.
    # ep = 9 ranks, S = 1 MB each. Worst rank: alone in its node, 8 of its 8 peers across:
    #   out: (9 - 1)/9 x 1e6 / 50e9 = 17.78 us;   in (8-rank node): (8 - 1)/9 x 1e6 / 450e9 = 1.73 us
    #   t = max(17.78, 1.73) + 50 = 67.78 us
    # before: the (9 - 8)/9 share crossed: max(1/9 x 1e6 / 50e9, 7/9 x 1e6 / 450e9) + 50 = 52.22 us
    hw = get_system("hgx-h200", 72)
    lat = 6e-6 + 2e-6 * (3 - 1) + 40e-6
    s = span(9, 72, 8)
    t = float(coll.all_to_all(1e6, 9, hw, span=s))
    assert t == pytest.approx(8 / 9 * 1e6 / 50e9 + lat, rel=1e-12)
    assert t == pytest.approx(67.78e-6, rel=1e-3)
    # aligned groups keep the old figure: 16 ranks over 2 nodes, 8/16 of the payload crosses
    s16 = span(16, 16, 8)
    assert float(coll.all_to_all(1e6, 16, hw, span=s16)) == pytest.approx(float(coll.all_to_all(1e6, 16, hw)), rel=1e-12)


def test_engine_ep9_alltoall_bandwidth_term_is_8x():
    # DeepSeek-V3 on 72 HGX H200, tp=1 ep=9 dp=8, decode with 64 sequences per group: payload per rank
    #   S = 64 tokens x 8 experts x 7,168 x 2 B = 7,340,032 B
    #   lone rank: 8/9 x S / 50e9 = 130.5 us crosses (before: 1/9 x S / 50e9 = 16.3 us), + 50 us latency
    #   per MoE layer (dispatch + combine) at 100% of link rate: 2 x (130.5 + 50) = 361.0 us (before 132.6 us)
    hw = get_system("hgx-h200", 72)
    su, n = system_setup("deepseek-v3", hw, 72, None, None, None, None)
    lay = Layout(1, 1, 9, 8)
    pc = forward_pass(su.model, hw, lay, su.precision, PEAK, phase="decode", seqs=64, new_tokens=1, pairs_full=1000,
                      pairs_sliding=1000, kv_read_full=999, kv_read_sliding=999)
    S = 64 * 8 * 7168 * 2
    lat = 6e-6 + 2e-6 * 2 + 40e-6
    expect = 2 * (8 / 9 * S / 50e9 + lat)
    assert expect == pytest.approx(361.0e-6, rel=1e-3)
    assert float(pc.ops["ep_alltoall"].comm_s) == pytest.approx(expect, rel=1e-12)


def test_straddling_tp_group_pays_the_scaleout_link():
    # tp=16 on two NVL72 racks (dp=9): the 5th replica has 8 chips in each rack; its all-reduce runs
    # hierarchically: reduce-scatter in each 8-chip piece, then the 2 pieces all-reduce S/8 over the scale-out
    # link, then all-gather: 2 x 7/8 x S / 900e9 + 2 x 1/2 x (S/8) / 50e9 + latency (6 + 2(4-1) + 40 us)
    hw = get_system("gb200-nvl72", 144)
    su, n = system_setup("deepseek-v3", hw, 144, None, None, None, None)
    lay = Layout(16, 1, 1, 9)
    S = 4 * 7168 * 2.0
    pc = forward_pass(su.model, hw, lay, su.precision, PEAK, phase="decode", seqs=4, new_tokens=1, pairs_full=1000,
                      pairs_sliding=1000, kv_read_full=999, kv_read_sliding=999)
    lat = hw.scaleup_latency + 2e-6 * (4 - 1) + hw.scaleout_latency
    expect = 2 * 7 / 8 * S / 900e9 + 2 * 1 / 2 * (S / 8) / 50e9 + lat
    assert float(pc.ops["tp_allreduce"].comm_s) == pytest.approx(expect, rel=1e-12)
    # before: priced inside one rack, 2 x 15/16 x S / 900e9 + 12 us
    assert float(pc.ops["tp_allreduce"].comm_s) > 2 * 15 / 16 * S / 900e9 + 12e-6 + 40e-6


def test_pp_handoff_of_a_straddling_replica_crosses():
    # tp=8 pp=2 dp=9 on 144 GB200: the replica at chips 64-79 hands off from rack 1 (64-71) to rack 2 (72-79)
    hw = get_system("gb200-nvl72", 144)
    su, n = system_setup("deepseek-v3", hw, 144, None, None, None, None)
    sv = serve_batch(su.model, hw, Layout(8, 2, 1, 9), su.precision, su.efficiency, 64, 1024, 128, su.reserve)
    hop = coll.p2p(4 * 7168 * 2 / 8, True, hw, su.efficiency.link_bw)
    assert float(sv.pp_p2p_s) == pytest.approx(float(hop), rel=1e-12)


def test_aligned_layouts_keep_their_figures():
    # nothing changes where every group is aligned (sizes dividing or multiples of the domain)
    su, n = system_setup("deepseek-v3", "hgx-h200", 32, None, None, None, None)
    lays = [(8, 1, 1, 4), (1, 1, 16, 2), (1, 1, 32, 1), (8, 2, 1, 2), (4, 1, 8, 1)]
    g = evaluate(su, lays, [1, 64], 1024, 128, links=links_for(su.hardware))
    hw = su.hardware
    for i, t in enumerate(lays):
        for j, b in enumerate((1, 64)):
            pc = serve_batch(su.model, hw, Layout(*t), su.precision, su.efficiency, b, 1024, 128, su.reserve)
            a2a = pc.decode.ops.get("ep_alltoall")
            if a2a is not None:
                g_ = t[0] * t[2]
                T = np.ceil(b / (t[2] * t[3]))
                old = 2 * coll.all_to_all(T * 8 * 7168 * 2 / t[0], g_, hw, su.efficiency.link_bw)
                assert float(a2a.comm_s) == pytest.approx(float(old), rel=1e-12)
            assert g.step_s[i, j] == pytest.approx(float(pc.decode_step_s), rel=1e-12)
