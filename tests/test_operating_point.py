"""Beside the batch asked for, infer answers at the batch a provider would run: the largest whose decode still
gives each user a stated speed (default 20 tokens/s, price's default and DeepSeek's published 20-22)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import tokenmath as tm
from tokenmath.analyses.serving.operating_point import DEFAULT_SPEED, largest_batch_at_speed
from tokenmath.analyses.setup import setup
from tokenmath.engine.static_batch import serve_batch
from tokenmath.faces.cli import cli

SU = setup("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")


def _speed(b, ctx):
    sv = serve_batch(SU.model, SU.hardware, SU.layout, SU.precision, SU.efficiency, np.asarray(b, float), float(ctx),
                     256, SU.reserve, **SU.transport.kw())
    return 1.0 / np.asarray(sv.decode_step_s, float)


@settings(max_examples=25, deadline=None)
@given(ctx=st.sampled_from([128, 1024, 8192, 32768]), bmax=st.integers(0, 3000), target=st.floats(1, 200))
def test_the_search_finds_the_last_batch_meeting_the_speed(ctx, bmax, target):
    b = int(largest_batch_at_speed(SU, ctx, 256, bmax, target))
    assert 0 <= b <= bmax
    if b:
        assert _speed(b, ctx) >= target
    if b < bmax:
        assert _speed(b + 1, ctx) < target       # the next batch is too slow (the step never shrinks with batch)


def test_infer_shows_a_providers_batch_beside_batch_one():
    r = tm.infer("llama-3.1-70b", "h100-sxm", chips=8)
    d = r.to_dict()
    op = d["operating_point"]
    assert d["batch"] == 1 and op["min_tokens_per_s_per_user"] == DEFAULT_SPEED
    # Llama 3.1 70B on 8 x H100, 1,024 in / 256 out: batch 640 still decodes at >= 20 tokens/s per user
    assert op["batch"] == 640 and op["output_tokens_per_s_per_user"] >= 20
    # the same function at that batch: the figures are infer's own
    same = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=640).to_dict()
    for k in ("decode_step_s", "cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "ttft_s"):
        assert op[k] == same[k]
    # batching is what a provider sells: output costs far less than at batch 1 ($84.62 vs $0.51 per Mtok)
    assert op["cost_per_mtok_output_usd"] < d["cost_per_mtok_output_usd"] / 50
    # a static batch that large prefills for 31 s before any first token: the answer says so
    assert "throughput bound" in op["static_ttft_note"]


def test_a_stated_speed_moves_the_operating_point_and_cli_python_agree():
    out = CliRunner().invoke(cli, ["infer", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8",
                                   "--min-tokens-per-s-per-user", "50", "--json"]).output
    op = json.loads(out)["operating_point"]
    assert op["min_tokens_per_s_per_user"] == 50 and op["batch"] < 640
    py = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, min_tokens_per_s_per_user=50).to_dict()["operating_point"]
    assert py == op


def test_too_fast_a_speed_says_why_there_is_no_such_batch():
    op = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, min_tokens_per_s_per_user=500).to_dict()["operating_point"]
    assert op["batch"] == 0 and "even batch 1 is slower than 500" in op["reason"]


def test_under_load_the_load_sets_the_batch_and_the_speed_option_says_so():
    d = tm.infer("llama-3.1-8b", "h100-sxm", concurrency=8, min_tokens_per_s_per_user=30).to_dict()
    assert "operating_point" not in d
    assert any("under load the users or the arrival rate set the batch" in n for n in d["notes"])
