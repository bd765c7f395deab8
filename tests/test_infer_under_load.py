"""`infer --concurrency`: the system throughput and the input cost under load (a closed loop with a queue).

Found on gpt-oss-120b, one H100, 1,024 in / 1,024 out, vLLM, 256 users: only ~93 sequences fit at once, ~163 wait.
The table printed 1,436.5 tokens/s (running x output_len / (TTFT incl. the queue wait + output_len x TPOT)) beside
the steady state's own 3,956 tokens/s, so throughput FELL from 2,853 at 60 users to 1,437 at 256: a closed loop's
throughput can only saturate. Little's law fixes the right value: users x output_len / end-to-end latency.
"""
from __future__ import annotations

import pytest

import tokenmath as tm

KW = dict(model="gpt-oss-120b", hardware="h100-sxm", input_len=1024, output_len=1024, engine="vllm")


@pytest.fixture(scope="module")
def queued():
    return tm.infer(**KW, concurrency=256)


def test_a_queue_forms_in_this_case(queued):
    assert queued.load.queued > 100 and queued.load.running < 256


def test_throughput_under_load_is_littles_law(queued):
    # users x output tokens per request / end-to-end latency of a request (s)
    little = 256 * 1024 / queued.load.e2e_s
    assert queued.output_tokens_per_s == pytest.approx(little, rel=1e-9)
    assert queued.to_dict()["output_tokens_per_s"] == pytest.approx(queued.load.output_tokens_per_s, rel=1e-12)


def test_closed_loop_throughput_never_falls_as_users_grow():
    tput = [tm.infer(**KW, concurrency=c).output_tokens_per_s for c in (16, 60, 128, 256, 512)]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(tput, tput[1:])), tput


def test_input_cost_under_load_counts_chip_time_not_the_queue(queued):
    # the queue wait is in TTFT but costs no chip time: the input's $/Mtok is the running batch's prefill time
    # x $/s / (running x input_len), as for a static batch of that many sequences
    static = tm.infer(**KW, batch=queued.batch)
    assert queued.cost_per_mtok_input_usd == pytest.approx(static.cost_per_mtok_input_usd, rel=1e-12)
    assert queued.ttft_s > 10 * static.ttft_s     # ... while TTFT does hold the wait
