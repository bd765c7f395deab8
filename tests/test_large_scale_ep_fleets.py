"""The largest public deployments with published figures, predicted by `fleet`'s disaggregated sizing configured as
they were. Targets from the serving-economics issue: within 25%. Not met with the deployments' stated expert load
balancing (EPLB): the model over-predicts per-node throughput, prefill most, and these tests hold the honest band it
reaches so that a change in either direction is seen.

DeepSeek, "Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview" (deepseek-ai/open-infra-index,
202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md): over 24 h an average of 226.75
H800 nodes (1,814 GPUs) at $2 per GPU-hour served 608 B input tokens (56.3% on-disk KV-cache hits) and 168 B output
tokens at 20-22 tokens/s per user; prefill EP32 (4 nodes), decode EP144 (18 nodes), FP8 dispatch, compute-communication
overlap, EPLB; per node 73.7k input tokens/s in prefill (cache hits included) and 14.8k output tokens/s in decode.
$87,072 a day over 168 B output tokens: $0.518 per million output tokens.

LMSYS, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs"
(https://lmsys.org/blog/2025-05-05-large-scale-ep/): SGLang, prefill 4 nodes EP32, decode 9 nodes EP72, DeepEP,
two-batch overlap, EPLB, 2,000-token inputs: 52.3k input tokens/s per prefill node, 22.3k output tokens/s per decode
node."""
from __future__ import annotations

import pytest

from tokenmath.analyses.ask import ask, split
from tokenmath.analyses.serving.plan_disaggregated import instance_pools
from tokenmath.analyses.setup import setup

pytestmark = pytest.mark.slow        # a 144-chip disaggregated search: ~20 s

DAY6_GPUS, DAY6_USD_PER_MTOK = 226.75 * 8, 87_072 / 168_000
DEMAND = 168e9 / 86_400              # output tokens/s
INPUT_LEN = round(608 / 168 * 1200)  # DeepSeek's mix: 608 B in over 168 B out; 1,200 output tokens a request (4,343)


def _day6(ep_imbalance):
    dep, wl, _ = split("deepseek-v3", "h800", engine="sglang", ep_comm="deepep", ep_overlap=True,
                       ep_imbalance=ep_imbalance, price_usd_per_hour=2.0, input_len=INPUT_LEN, output_len=1200,
                       prefix_hit=0.563, min_tokens_per_s_per_user=20.0)
    return ask("fleet", dep, wl, demand=DEMAND, max_chips=144, decode_chips=144, prefill_chips=32).to_dict()


def test_deepseek_day6_fleet_with_eplb_is_0_7x_of_the_published_gpus_and_cost():
    d = _day6("eplb")["disaggregated"]
    assert d["decode"]["layout"] == "tp=1 pp=1 ep=144 dp=1" and d["prefill"]["layout"] == "tp=1 pp=1 ep=32 dp=1"
    gpus, cost = d["chips"] / DAY6_GPUS, d["fleet_cost_per_mtok_output_usd"] / DAY6_USD_PER_MTOK
    # measured on this model: 1,312 GPUs (0.72x) and $0.375 / Mtok (0.72x): outside the 25% target
    assert 0.6 <= gpus <= 0.85, gpus
    assert 0.6 <= cost <= 0.85, cost


def test_per_node_throughput_against_deepseek_and_lmsys():
    """Where the gap lies: per-node prefill is over-predicted ~1.4-1.8x, decode ~1.3x."""
    su = setup("deepseek-v3", "h800", engine="sglang", ep_comm="deepep", ep_overlap=True, ep_imbalance="eplb")
    d = instance_pools(su, 144, 32, INPUT_LEN, 1200, 20.0, 2.0, {"chip_s_per_mtok_output": None,
                                                                  "cost_per_mtok_output_request_usd": None},
                       prefix_hit=0.563)
    decode_node = d["decode"]["decode_output_tokens_per_s"] / 18
    prefill_node = d["prefill"]["prompt_tokens_per_s_per_chip"] * 8
    assert 1.1 <= decode_node / 14_800 <= 1.6, decode_node
    assert 1.4 <= prefill_node / 73_700 <= 2.0, prefill_node
    su = setup("deepseek-v3", "h100-sxm", engine="sglang", ep_comm="deepep", ep_overlap=True, ep_imbalance="eplb")
    d = instance_pools(su, 72, 32, 2000, 1000, 20.0, None, {"chip_s_per_mtok_output": None,
                                                            "cost_per_mtok_output_request_usd": None})
    assert 1.1 <= d["decode"]["decode_output_tokens_per_s"] / 9 / 22_300 <= 1.5
    assert 1.2 <= d["prefill"]["prompt_tokens_per_s_per_chip"] * 8 / 52_300 <= 1.6
