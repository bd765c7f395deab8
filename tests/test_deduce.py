"""Deduce (price -> model) and price (model -> price): napkin vs engine, hand inversion, round trip, bad input."""
import pytest

import tokenmath as tm
from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.analyses.serving.provider_price import price
from tokenmath.specs.efficiency import PEAK
from tokenmath.engine.closed_form import decode_chip_s_per_token, prefill_chip_s_per_token
from tokenmath.base.errors import InputError
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params


@pytest.mark.parametrize("mid", ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"])
def test_napkin_agrees_with_the_engine(mid):
    """The closed form used for inversion stays within 15% of the per-operation engine (1 chip, 100% peaks)."""
    m = get_model(mid)
    p = count_params(m)
    hw = tm.get_hardware("b200")
    for b, ctx in ((1, 512), (64, 2048), (512, 1024)):
        r = tm.infer(m, hw, chips=1, batch=b, input_len=ctx, output_len=1, efficiency=PEAK)
        if not r.fits:
            continue
        eng = r.decode_step_s / b
        # per-token matmul FLOPs exclude the embedding gather; attention FLOPs per KV byte g = 4 h d / (2 kv d 2 B)
        g = 4 * m.n_heads * m.hd / (2 * m.kv_heads * m.hd * 2)
        nap = decode_chip_s_per_token(p.active - p.embedding, p.active - p.embedding, 2.0,
                                      kv_bytes_per_token(m, 2), ctx + 1, b, hw.peak_flops("bf16"), hw.memory_bw, g)
        assert nap == pytest.approx(eng, rel=0.15), (mid, b, ctx)


def test_single_scenario_inversion_by_hand():
    # One chip at $3.60/h = $0.001/s, no margin, full utilization, 1e15 FLOP/s: an input token at $0.10/Mtok buys
    # 1e-7 $ / 1e-3 $/s = 1e-4 chip-s; prefill is compute-bound, so N_active = 1e-4 s x 1e15 / 2 = 50e9
    t = prefill_chip_s_per_token(50e9, 50e9, 1.0, 0.0, 4096, 64, 1e15, 5e12)
    assert t == pytest.approx(1e-4)
    # decode of the same dense model at batch 10 on 5 TB/s, fp8 weights: weight fetch 50e9 B / 5e12 = 10 ms per step
    # vs FLOPs 2 x 50e9 x 10 / 1e15 = 1 ms: memory-bound, 10 ms / 10 tokens = 1 ms of chip time per token
    assert decode_chip_s_per_token(50e9, 50e9, 1.0, 0.0, 0.0, 10, 1e15, 5e12) == pytest.approx(1e-3)


def test_round_trip_recovers_active_params():
    """Price a known model with the engine, then deduce it back with the provider's hardware and margin known.
    The engine runs at the kernel-ceiling efficiencies (no per-layer launch overhead): the closed form that deduce
    inverts has no fixed per-step term, so the round trip checks the inversion itself."""
    from tokenmath.specs.efficiency import DEFAULT
    for mid in ("llama-3.1-70b", "qwen3-235b-a22b"):
        pr = price(mid, "h100-sxm", margin=0.5, utilization=0.6, efficiency=DEFAULT).to_dict()
        true = count_params(get_model(mid)).active / 1e9
        d = deduce(pr["price_per_mtok_input_usd"], pr["price_per_mtok_output_usd"], hardware="h100-sxm",
                   priors=Priors(margin=(0.4, 0.6), utilization=(0.5, 0.7), chip_cost_factor=(0.9, 1.1),
                                 samples=100_000, cost_scale=1.0)).to_dict()
        a = d["active_params_b"]
        assert a["low"] <= true <= a["high"], (mid, true, a)


def test_more_expensive_means_bigger():
    small = deduce(0.2, 0.6).to_dict()["active_params_b"]["median"]
    big = deduce(2.0, 6.0).to_dict()["active_params_b"]["median"]
    assert big > 3 * small


def test_kv_identified_only_with_kv_prices():
    assert deduce(1, 4).to_dict()["kv_bytes_per_token"] is None
    d = deduce(1, 4, cached_input_price=0.25).to_dict()
    k = d["kv_bytes_per_token"]
    assert k["low"] < k["median"] < k["high"] and d["kv_informed_by"] == ["cached_input_price"]


@pytest.mark.parametrize("kw,field", [
    (dict(input_price=0, output_price=1), "input_price"),
    (dict(input_price=1, output_price=-2), "output_price"),
    (dict(input_price=1e-6, output_price=1e-6), "input_price"),
    (dict(input_price=1, output_price=1, long_context_threshold=200_000), "long_output_price"),
])
def test_bad_prices_name_the_assumption(kw, field):
    with pytest.raises(InputError) as e:
        deduce(**kw)
    assert e.value.field == field


def test_price_needs_a_priced_chip():
    with pytest.raises(InputError) as e:
        price("llama-3.1-8b", "rtx-4090")
    assert e.value.field == "hardware"
    r = price("llama-3.1-8b", "h100-sxm", margin=0.0, utilization=1.0).to_dict()
    assert r["price_per_mtok_output_usd"] == pytest.approx(r["cost_per_mtok_output_usd"])
    assert 1 / r["decode_step_s"] >= 20


def test_price_continuously_batched_by_hand():
    from tokenmath.analyses.serving.steady_state import steady_state
    r = price("llama-3.1-70b", "h100-sxm", engine="vllm").to_dict()
    # a static batch's whole request per output token = output cost + input cost x input / output tokens
    assert r["cost_per_mtok_output_request_usd"] == pytest.approx(
        r["cost_per_mtok_output_usd"] + r["cost_per_mtok_input_usd"] * 2000 / 500)
    c = r["continuously_batched"]
    assert c["tokens_per_s_per_user"] >= 20
    kw = dict(chips=c["chips"], tp=c["tp"], pp=c["pp"], dp=c["dp"], engine="vllm", input_len=2000, output_len=500)
    here, more = steady_state("llama-3.1-70b", "h100-sxm", concurrency=[c["concurrency"], c["concurrency"] + 1],
                              **kw).points
    assert more.output_tokens_per_s_per_user < 20            # one user more and the target is missed
    # $ per Mtok = chips x $2.99 / 3600 / output tok/s x 1e6; priced at utilization 0.6 and margin 0.5: / 0.3
    cost = c["chips"] * 2.99 / 3600 / here.output_tokens_per_s * 1e6
    assert c["cost_per_mtok_output_request_usd"] == pytest.approx(cost)
    assert c["price_per_mtok_output_request_usd"] == pytest.approx(cost / (0.6 * 0.5))
    assert price("llama-3.1-8b", "h100-sxm", engine="none").to_dict()["continuously_batched"] is None


def test_cost_scale_is_a_price_rescaling():
    """cost_scale c compares prices with c x the closed form's cost: deducing (p_in, p_out) at scale c is the same
    inference as deducing (p_in / c, p_out / c) at scale 1 (same samples, same seed)."""
    a = deduce(1.0, 4.0, priors=Priors(samples=50_000, cost_scale=2.0)).to_dict()["active_params_b"]
    b = deduce(0.5, 2.0, priors=Priors(samples=50_000, cost_scale=1.0)).to_dict()["active_params_b"]
    assert a == pytest.approx(b)
    from tokenmath.analyses.inverse.deduce import _shipped_cost_scale
    assert Priors().cost_scale == _shipped_cost_scale() > 1.0      # the fitted scale ships as data
