"""Prefix caching (engine/prefix_cache.py): --prefix-hit on infer, plan and simulate."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.infer import infer
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.simulation.simulate import simulate
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.prefix_cache import cached_prefill, cached_tokens, hit_rate
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import PEAK


def test_cached_prefill_flops_hand_computed():
    # Llama 3.1 8B (d 4096, 32 layers, 32 heads x 128, 8 KV heads, FFN 14336), one 4096-token prompt, half cached:
    # c = 2048 tokens are not recomputed. Per layer and token: attention projections 2 x 4096 x (4096 + 1024 + 1024
    # + 4096) = 2 x 41,943,040, FFN 2 x 3 x 4096 x 14336 = 2 x 176,160,768; per (query, key) pair 4 x 32 x 128 =
    # 16,384 FLOPs, and the cached tokens' own pairs 2048 x 2049 / 2 = 2,098,176 are not attended again.
    # Saved: 32 x (2 x 218,103,808 x 2048 + 16,384 x 2,098,176) = 29,687,350,820,864 FLOPs.
    su = setup("llama-3.1-8b", "h100-sxm", chips=1, efficiency=PEAK, engine="none")

    def p(h):
        return cached_prefill(su.model, su.hardware, su.layout, su.precision, su.efficiency, 1, 4096, h)
    full, half = p(0.0), p(0.5)
    assert float(full.flops - half.flops) == pytest.approx(29_687_350_820_864, rel=1e-12)
    # KV bytes: the full pass writes 4096 tokens; the cached one reads 2048 and writes 2048 (same traffic)
    assert float(half.kv_bytes) == pytest.approx(float(full.kv_bytes))
    # the weights are still read once per pass: the saving is FLOPs, not weight reads
    assert float(half.weight_bytes) == pytest.approx(float(full.weight_bytes), rel=2e-3)


def test_cached_tokens_leave_one_to_compute():
    assert float(cached_tokens(1000, 1.0)) == 999.0 and float(cached_tokens(1000, 0.25)) == 250.0
    assert hit_rate(None) == 0.0 and hit_rate(0) == 0.0 and hit_rate("0.5") == 0.5
    for bad in (-0.1, 1.5, "x", float("nan")):
        with pytest.raises(InputError) as e:
            hit_rate(bad)
        assert e.value.field == "prefix_hit"


def test_infer_ttft_and_input_cost_fall_with_the_hit_rate():
    kw = dict(chips=8, batch=8, input_len=8192, output_len=256, engine="none")
    rs = [infer("llama-3.1-70b", "h100-sxm", prefix_hit=h, **kw) for h in (None, 0.5, 0.9)]
    ttft = [r.ttft_s for r in rs]
    assert ttft[0] > ttft[1] > ttft[2]
    # compute-bound prefill (batch 8 x 8192 tokens): TTFT falls about in proportion to the tokens computed,
    # a little less (the new tokens still attend to the cached ones)
    assert 0.5 < ttft[1] / ttft[0] < 0.56 and 0.1 < ttft[2] / ttft[0] < 0.12
    assert rs[1].decode_step_s == rs[0].decode_step_s                  # decode and memory unchanged
    d = rs[2].to_dict()
    assert d["prefix_cache"]["ttft_uncached_s"] == pytest.approx(ttft[0])
    assert d["cost_per_mtok_input_usd"] < 0.12 * d["prefix_cache"]["cost_per_mtok_input_uncached_usd"]
    assert "prefix_cache" not in rs[0].to_dict()
    # a short prompt at batch 1 is weight-bound: caching 90% of it saves much less than 90%
    short = [infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, input_len=256, engine="none", prefix_hit=h)
             for h in (None, 0.9)]
    assert short[1].ttft_s > 0.5 * short[0].ttft_s
    with pytest.raises(InputError) as e:
        infer("llama-3.1-8b", "h100-sxm", prefix_hit=0.5, concurrency=4)
    assert e.value.field == "prefix_hit"


def test_plan_serves_a_larger_batch_within_the_ttft_target():
    kw = dict(chips=8, input_len=8192, ttft_ms=2000, min_tokens_per_s_per_user=20)
    p0 = plan("llama-3.1-70b", "hgx-h100", **kw)
    p9 = plan("llama-3.1-70b", "hgx-h100", prefix_hit=0.9, **kw)
    assert p9.best["batch"] > 4 * p0.best["batch"]
    assert p9.best["cost_per_mtok_output_request_usd"] < 0.25 * p0.best["cost_per_mtok_output_request_usd"]
    assert p9.to_dict()["prefix_hit"] == 0.9 and "prefix_hit" not in p0.to_dict()


def test_simulate_prefix_hit_is_a_workload_option():
    kw = dict(concurrency=32, input_len=4096, output_len=64, requests=150)
    s0 = simulate("llama-3.1-8b", "h100-sxm", **kw).to_dict()
    s9 = simulate("llama-3.1-8b", "h100-sxm", prefix_hit=0.9, **kw).to_dict()
    assert s9["workload"]["prefix_hit"] == 0.9 and "prefix_hit" not in s0["workload"]
    assert s9["output_tokens_per_s"] > 1.3 * s0["output_tokens_per_s"]
    with pytest.raises(InputError) as e:
        simulate("llama-3.1-8b", "h100-sxm", trace="tests/fixtures/none.csv", prefix_hit=0.5)
    assert e.value.field == "prefix_hit"


def test_cli_prefix_hit():
    r = CliRunner().invoke(cli, ["infer", "-m", "llama-3.1-8b", "--input-len", "4096", "--prefix-hit", "0.75",
                                 "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["prefix_cache"]["cached_tokens_per_prompt"] == 3072
    r = CliRunner().invoke(cli, ["plan", "-m", "llama-3.1-8b", "-S", "hgx-h100", "--chips", "1", "--prefix-hit",
                                 "2", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "prefix_hit"
