"""The largest public deployments with published figures, predicted by `fleet`'s disaggregated sizing configured as
they were. Targets from the serving-economics issue: within 25%. Met for DeepSeek's fleet (0.86x of its GPUs and
cost) and for LMSYS's per-node throughput (prefill 1.16x, decode 1.03x); DeepSeek's per-node prefill stays 1.45x
over its day average. These tests hold the band the model reaches so that a change in either direction is seen.

What moved them (engine/expert_parallel.py): DeepEP decodes with its low-latency kernels (one copy per expert over
RDMA, not the normal kernels' one copy per node); two micro-batches overlap on DeepSeek's schedules (decode: the
routed experts run alone, only the attention side hides the transfers; prefill: each compute block beside one
transfer), each kernel launched twice on half the rows; DeepEP's normal kernels hold 24 of 132 SMs while prefill
overlaps. Before: DeepSeek fleet 0.72x, per node prefill 1.75x, decode 1.35x; LMSYS prefill 1.41x, decode 1.31x
(at 20 tokens/s per user, not LMSYS's own ~100 ms inter-token latency).

Why DeepSeek's prefill stays over: its per-node figures are 24-hour averages (nodes scaled with the day's load, peak
278 against 226.75 on average), and LMSYS's reading of DeepSeek's own prefill profile (EP32, 16K tokens per GPU,
balanced routing) is 62,713 prompt tokens/s per node against the 32,206 of the day-6 average without cache hits:
production ran at about half its profiled rate. The engine predicts that profile within 4%
(tests/test_ep_overlap_schedule.py), so the rest is load, not the step's physics.

DeepSeek, "Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview" (deepseek-ai/open-infra-index,
202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md): over 24 h an average of 226.75
H800 nodes (1,814 GPUs) at $2 per GPU-hour served 608 B input tokens (56.3% on-disk KV-cache hits) and 168 B output
tokens at 20-22 tokens/s per user; prefill EP32 (4 nodes), decode EP144 (18 nodes), FP8 dispatch, compute-communication
overlap, EPLB; per node 73.7k input tokens/s in prefill (cache hits included) and 14.8k output tokens/s in decode.
$87,072 a day over 168 B output tokens: $0.518 per million output tokens.

LMSYS, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs"
(https://lmsys.org/blog/2025-05-05-large-scale-ep/): SGLang, prefill 4 nodes EP32, decode 9 nodes EP72, DeepEP,
two-batch overlap, EPLB, 2,000-token inputs: 52.3k input tokens/s per prefill node, 22.3k output tokens/s per decode
node, the latter at 256 requests per GPU (a 92 ms step; the blog: "ITL at approximately 100ms"), so its decode pool is
sized here at 10 tokens/s per user."""
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


def test_deepseek_day6_fleet_with_eplb_is_within_25_percent_of_the_published_gpus_and_cost():
    d = _day6("eplb")["disaggregated"]
    # DeepSeek ran EP144; on 144 chips two EP72 replicas come out 0.6% ahead of one EP144 (15.9k against 15.9k per
    # node), so either is the published layout's answer
    assert d["decode"]["layout"] in ("tp=1 pp=1 ep=144 dp=1", "tp=1 pp=1 ep=72 dp=2"), d["decode"]["layout"]
    assert d["prefill"]["layout"] == "tp=1 pp=1 ep=32 dp=1"
    gpus, cost = d["chips"] / DAY6_GPUS, d["fleet_cost_per_mtok_output_usd"] / DAY6_USD_PER_MTOK
    # measured on this model: 1,552 GPUs (0.86x) and $0.443 / Mtok (0.86x); before 1,312 (0.72x), $0.375
    assert 0.75 <= gpus <= 0.95, gpus
    assert 0.75 <= cost <= 0.95, cost


def test_per_node_throughput_against_deepseek_and_lmsys():
    """Per node: DeepSeek decode 1.08x, prefill 1.45x (a day average, module docstring); LMSYS prefill 1.16x,
    decode 1.03x."""
    su = setup("deepseek-v3", "h800", engine="sglang", ep_comm="deepep", ep_overlap=True, ep_imbalance="eplb")
    d = instance_pools(su, 144, 32, INPUT_LEN, 1200, 20.0, 2.0, {"chip_s_per_mtok_output": None,
                                                                  "cost_per_mtok_output_request_usd": None},
                       prefix_hit=0.563)
    decode_node = d["decode"]["decode_output_tokens_per_s"] / 18
    prefill_node = d["prefill"]["prompt_tokens_per_s_per_chip"] * 8
    assert 0.95 <= decode_node / 14_800 <= 1.2, decode_node
    assert 1.3 <= prefill_node / 73_700 <= 1.6, prefill_node
    su = setup("deepseek-v3", "h100-sxm", engine="sglang", ep_comm="deepep", ep_overlap=True, ep_imbalance="eplb")
    d = instance_pools(su, 72, 32, 2000, 1000, 10.0, None, {"chip_s_per_mtok_output": None,
                                                            "cost_per_mtok_output_request_usd": None})
    assert 0.9 <= d["decode"]["decode_output_tokens_per_s"] / 9 / 22_300 <= 1.15
    assert 1.0 <= d["prefill"]["prompt_tokens_per_s_per_chip"] * 8 / 52_300 <= 1.3
