"""How an expert-parallel all-to-all moves tokens (engine/expert_parallel.py): FP8 dispatch, one copy per remote
domain (DeepEP normal kernels), group-limited routing (DeepSeek-V3 n_group 8 / topk_group 4), and the weight re-read
of two-micro-batch overlap. Hand-computed values in each test."""
import json
from pathlib import Path

import numpy as np
import pytest

from tokenmath.analyses.serving.infer import infer
from tokenmath.base.errors import InputError
from tokenmath.engine.expert_parallel import FP8_DISPATCH_BYTES, alltoall_s, remote_domains
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.hf_config import model_from_hf_config
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.efficiency import DEFAULT

V3 = get_model("deepseek-v3")
FIX = Path(__file__).parent / "fixtures"


def test_group_limited_routing_read_from_config_and_catalog():
    m = model_from_hf_config(json.loads((FIX / "DeepSeek-V3.json").read_text()))
    assert (m.routing_groups, m.routing_group_limit) == (8, 4) == (V3.routing_groups, V3.routing_group_limit)
    k2 = model_from_hf_config(json.loads((FIX / "Kimi-K2-Instruct.json").read_text()))
    assert (k2.routing_groups, k2.routing_group_limit) == (0, 0)          # n_group 1: unrestricted


def test_remote_domains_by_hand():
    # EP32 over 4 nodes of 8: each other node holds 1/4 of the 256 experts = 2 of the 8 groups. The token's 4 groups
    # all miss a given node with chance C(6,4)/C(8,4) = 15/70, so 3 x (1 - 15/70) = 2.357 remote nodes are reached
    # (unrestricted it would be 3 x (1 - C(192,8)/C(256,8)) = 2.71).
    assert 3 * remote_domains(V3, 0.25) == pytest.approx(3 * (1 - 15 / 70), rel=1e-9)
    free = 3 * (1 - np.prod([(192 - i) / (256 - i) for i in range(8)]))
    k2 = get_model("kimi-k2")
    assert 3 * remote_domains(k2, 0.25) == pytest.approx(3 * (1 - np.prod([(288 - i) / (384 - i) for i in range(8)])))
    assert free == pytest.approx(2.71, abs=0.005)
    # EP72 over 9 nodes: a node holds 8/9 of one group; reached when its group is chosen (4/8) and one of the ~2
    # experts the token takes there lands on it: 0.5 x (1 - (1/9)^2) = 0.494 per node, 3.95 of 8 (<= 4 nodes)
    assert 8 * remote_domains(V3, 1 / 9) == pytest.approx(8 * 0.5 * (1 - (1 / 9) ** 2))


def test_fp8_dispatch_and_per_domain_copies_by_hand():
    hw = get_hardware("h100-sxm")      # 8-GPU NVLink domain, InfiniBand across
    T = 8192.0
    bf, f8, dp = (alltoall_s(V3, hw, T, 1, 32, 1.0, comm=c) for c in ("bf16", "fp8", "deepep"))
    assert dp < f8 < bf
    # across nodes the worst rank sends 24/32 of its payload T x 8 x 7168 x B on InfiniBand (scale-out bound):
    # dispatch + combine = (B_dispatch + 2) / (2 + 2) of the bf16 time, latency apart
    lat = 2 * (bf / 2 - (24 / 32) * T * 8 * 7168 * 2 / hw.scaleout_bw)
    assert (f8 - lat) / (bf - lat) == pytest.approx((FP8_DISPATCH_BYTES + 2) / 4, rel=1e-6)
    # per node: 2.357 remote copies instead of 8 x 24/32 = 6 per token
    assert (dp - lat) / (f8 - lat) == pytest.approx(2.357142857 / 6, rel=1e-6)


def test_inside_one_domain_per_domain_copies_change_nothing():
    hw = get_hardware("h100-sxm")
    assert alltoall_s(V3, hw, 4096.0, 1, 8, 1.0, comm="deepep") == pytest.approx(alltoall_s(V3, hw, 4096.0, 1, 8, 1.0,
                                                                                             comm="fp8"))


def test_overlap_reads_the_weights_twice_and_never_beats_the_bound():
    kw = dict(chips=16, tp=1, ep=16, batch=256, input_len=1024, output_len=64, efficiency=DEFAULT)
    a = infer("deepseek-v3", "h100-sxm", **kw)
    b = infer("deepseek-v3", "h100-sxm", ep_overlap=True, **kw)
    wa = float(np.sum([op.count * np.asarray(op.weight_bytes) for op in a.decode.ops.values()]))
    wb = float(np.sum([op.count * np.asarray(op.weight_bytes) for k, op in b.decode.ops.items()]))
    emb = float(np.asarray(a.decode.ops["embed"].weight_bytes))
    assert wb == pytest.approx(2 * wa - emb, rel=1e-9)                 # all but the embedding gather, twice
    c = infer("deepseek-v3", "h100-sxm", ep_comm="deepep", **kw)
    assert c.decode_step_s <= a.decode_step_s and c.ttft_s <= a.ttft_s


def test_bad_mode_names_the_field():
    with pytest.raises(InputError) as e:
        infer("deepseek-v3", "h100-sxm", chips=16, ep=16, tp=1, ep_comm="fp4")
    assert e.value.field == "ep_comm" and "deepep" in e.value.valid
