"""Issue 22: deduce from price, speed, TTFT, batch discount, context window and known hardware together."""
import functools
import json
import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.inverse import forward_model as fm
from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.analyses.inverse.evidence import KINDS, find, load
from tokenmath.base.errors import InputError
from tokenmath.engine.closed_form import prefill_chip_s_per_token
from tokenmath.faces.cli import cli as main
from tokenmath.specs.catalog import shipped


def _obs(**kw):
    base = dict(input_price=1.0, output_price=4.0, cached_input_price=None, long_threshold=None, long_input_price=None,
                long_output_price=None, output_speed=None, ttft_s=None, ttft_prompt_tokens=None, batch_discount=None,
                context_window=None)
    base.update(kw)
    return SimpleNamespace(**base)


# ---------------------------------------------------------------- the evidence file


def test_every_evidence_row_is_dated_sourced_and_joins_a_price_row():
    ev = shipped("api_evidence.toml")
    prices = {(r["model"], r["provider"]) for r in shipped("api_prices.toml")["price"]}
    providers = {p for _, p in prices}
    for kind in ("speed", "batch", "context", "hardware"):
        assert ev[kind], kind
        for r in ev[kind]:
            assert r["source"].startswith("https://"), r
            assert len(r["date"]) == 7 and r["date"][4] == "-", r
            assert r["quote"].strip(), r
            if "model" in r:
                assert (r["model"], r["provider"]) in prices, r
            else:
                assert r["provider"] in providers, r
    for r in ev["speed"]:
        assert 1 <= r["output_tokens_per_s"] <= 5000
    assert all(0 < r["discount"] <= 1 for r in ev["batch"])


def test_gateway_p50_speeds_are_recorded_but_not_used_as_decode_speed():
    """Vercel AI Gateway's P50 over live traffic is a different measurement: at the one endpoint measured both ways,
    gpt-oss-120b on Fireworks, the gateway's 79 t/s is below the benchmarks' geometric mean sqrt(683.4 x 525) =
    599.0 t/s by 599.0 / 79 = 7.58x, far outside the speed noise (e^(2 x 0.5) = 2.7x at 2 sd). So the decode speed
    uses the benchmarks only, and an endpoint with only a gateway figure has no speed evidence."""
    ev = shipped("api_evidence.toml")
    assert {r.get("method", "benchmark") for r in ev["speed"]} == {"benchmark", "gateway_p50"}
    r = find("gpt-oss-120b", "Fireworks")
    assert r.gateway_speeds == (79.0,) and sorted(r.speeds) == [525.0, 683.4]
    assert r.output_speed == pytest.approx(math.sqrt(683.4 * 525), rel=1e-9)
    assert r.output_speed / 79.0 == pytest.approx(7.58, abs=0.01)
    assert r.output_speed / 79.0 > math.exp(2 * Priors().speed_noise)
    t = find("openai/gpt-oss-20b", "Together AI")
    assert t.gateway_speeds == (138.0,) and t.output_speed is None and "speed" not in t.available()
    assert ("gateway_speed", "2026-12", "https://vercel.com/ai-gateway/models/gpt-oss-20b") in t.sources


def test_round_two_benchmark_speeds_join_their_endpoints():
    """Artificial Analysis provider pages added in round two (figures as printed there): Mistral 7B on Mistral
    162.0, Together 87.4, Amazon 74.4 t/s; Phi-4 on DeepInfra 85 t/s."""
    for (model, provider), v in {("open-mistral-7b", "Mistral AI"): 162.0,
                                 ("mistralai/Mistral-7B-Instruct-v0.3", "Together AI"): 87.4,
                                 ("Mistral 7B Instruct v0.2 (mistral.mistral-7b-instruct-v0:2)", "AWS Bedrock"): 74.4,
                                 ("microsoft/phi-4", "DeepInfra"): 85.0}.items():
        r = find(model, provider)
        assert r.speeds == (v,) and r.output_speed == pytest.approx(v) and "speed" in r.available(), (model, provider)
    usable = [r for r in load() if r.open_weights and r.catalog_id and "speed" in r.available()]
    assert len(usable) == 11 and len({r.provider for r in usable}) == 7


def test_the_five_named_models_have_speed_evidence():
    for name in ("gpt-4o", "gpt-4.1-mini", "claude-sonnet-4-5", "gemini-2.5-flash", "deepseek-chat"):
        assert "speed" in find(name).available(), name


def test_speed_noise_covers_the_spread_between_sources():
    """Pooled log-sd of repeated measurements of one (non-SRAM) endpoint, by hand for the shipped pairs:
    GPT-4o 31.7 / 45, DeepSeek 21 / 50, gpt-oss-120b Fireworks 683.4 / 525: each pair contributes
    ln(a/b)^2 / 2 with one degree of freedom: (0.350^2 + 0.868^2 + 0.264^2) / 2 / 3 = 0.157 -> sd 0.40.
    The stated noise (0.5) must cover it but not be a blanket (at most 2x)."""
    groups = {}
    for r in load():
        if len(r.speeds) >= 2 and not r.sram:
            groups[(r.model, r.provider)] = np.log(r.speeds)
    ss = sum(((g - g.mean()) ** 2).sum() for g in groups.values())
    dof = sum(len(g) - 1 for g in groups.values())
    sd = math.sqrt(ss / dof)
    assert sd == pytest.approx(math.sqrt((math.log(45 / 31.7) ** 2 + math.log(50 / 21) ** 2
                                          + math.log(683.4 / 525) ** 2) / 2 / 3), rel=1e-6)
    assert sd == pytest.approx(0.40, abs=0.01)
    assert sd <= Priors().speed_noise <= 2 * sd


def test_sram_hosts_keep_their_speed_out_of_the_physics():
    r = find("llama-3.1-8b-instant", "Groq")
    assert r.sram and r.speeds and r.output_speed is None and "speed" not in r.available()


def test_find_by_prefix_and_typo():
    assert find("claude-sonnet-4-5").model == "claude-sonnet-4-5-20250929"
    assert find("deepseek-chat").provider == "DeepSeek"
    with pytest.raises(InputError) as e:
        find("gpt-4oo")
    assert "gpt-4o" in str(e.value)
    with pytest.raises(InputError) as e:
        find("claude")
    assert "several" in str(e.value)


def test_known_hardware_without_a_price_is_not_used():
    r = find("gemini-2.5-flash")
    assert r.chips == ("tpu-v7",) and r.usable_chips() == () and "hardware" not in r.available()


# ---------------------------------------------------------------- the forward model, by hand


def _scenario(**kw):
    s = dict(Na=np.array([1e10]), Nt=np.array([2e10]), q=np.array([1.0]), K=np.array([1e5]), g=np.array([8.0]),
             F=np.array([5e14]), W=np.array([2e12]), B=np.array([64.0]), L=np.array([1000.0]), ctx=np.array([2000.0]),
             usd_h=np.array([3.6]), util=np.array([0.5]), margin=np.array([0.5]), hbm=np.array([8e10]),
             chips=np.array([4.0]))
    s.update(kw)
    return s


def test_ttft_is_the_prefill_of_the_benchmark_prompt_on_one_replica():
    """10k-token prompt, batch 1, 4 chips. Per token: max(2 x 1e10 / 5e14, 2e10 x 1 / (1e4 x 1 x 2e12)) = 4e-5 s
    (compute-bound) + attention 8 x 1e5 x 1e4 / 2 / 5e14 = 8e-6 s -> 4.8e-5 chip-s; x 1e4 tokens / 4 chips = 0.12 s."""
    p = fm.predict(_scenario(), _obs(ttft_s=0.5, ttft_prompt_tokens=1e4), Priors(cost_scale=1.0, samples=1000))
    assert p["ttft_s"][0] == pytest.approx(0.12)
    assert float(prefill_chip_s_per_token(1e10, 2e10, 1.0, 1e5, 1e4, 1.0, 5e14, 2e12, 8.0)) * 1e4 / 4 == \
        pytest.approx(0.12)


def test_speed_is_one_roofline_step_plus_the_step_cpu_time():
    """Batch 64 at context 2000 on 4 chips. Per token (chip-s): weights max(2 x 1e10 x 64 / 5e14 = 2.56e-3,
    2e10 x 1 / 2e12 = 1e-2) = 1e-2, attention KV 1e5 x 2000 x 64 = 1.28e10 B: max(8 x 1.28e10 / 5e14 = 2.048e-4,
    1.28e10 / 2e12 = 6.4e-3) = 6.4e-3; (1e-2 + 6.4e-3) / 64 = 2.5625e-4 chip-s per token; the step: x 64 / 4 chips
    = 4.1e-3 s. With a 2 ms step CPU time: 1 / 6.1e-3 s = 163.9 t/s; with none: 1 / 4.1e-3 = 243.9 t/s."""
    pr = Priors(cost_scale=1.0, samples=1000)
    o = _obs(output_speed=100.0)
    assert fm.predict(_scenario(t0=np.array([0.002])), o, pr)["output_speed"][0] == pytest.approx(1 / 6.1e-3)
    assert fm.predict(_scenario(t0=np.array([0.0])), o, pr)["output_speed"][0] == pytest.approx(1 / 4.1e-3)
    # the prior is the serving engines' bound on a step's CPU work (specs/serving_engines.STEP_CPU_BOUNDS_S)
    assert Priors().step_overhead_s == (0.0, 0.005)


def test_batch_price_must_cover_the_compute_floor():
    """At an unbounded batch, decode per token = weights 2 x 1e10 / 5e14 = 4e-5 s (the fetch amortized away) +
    attention max(8 x 1e5 x 2000 / 5e14 = 3.2e-6, 1e5 x 2000 / 2e12 = 1e-4) = 1e-4 s (KV reads bound) = 1.4e-4
    chip-s; at $3.6/h = $0.001/s and margin 0.5 (utilization 1): 1.4e-4 x 0.001 / 0.5 x 1e6 = $0.28/Mtok.
    Observed bound: discount 0.5 x $4 = $2."""
    o = _obs(batch_discount=0.5)
    pr = Priors(cost_scale=1.0, samples=1000)
    p = fm.predict(_scenario(), o, pr)
    assert p["batch_output_price"][0] == pytest.approx(0.28, rel=1e-9)
    assert fm.observed_values(o)["batch_output_price"] == 2.0


def test_context_window_needs_weights_and_one_window_of_kv_in_hbm():
    """2e10 params x 1 byte + 1e5 B/token x 1e6 tokens = 1.2e11 B over 4 chips x 8e10 B = 0.375 of the HBM."""
    p = fm.predict(_scenario(), _obs(context_window=1e6), Priors(cost_scale=1.0, samples=1000))
    assert p["context_window"][0] == pytest.approx(1.2e11 / 3.2e11)


def test_one_sided_terms_only_penalize_beyond_the_bound():
    pr = Priors(samples=1000)
    obsd = {"ttft_s": 1.0, "output_speed": 100.0}
    t = fm.loglik_terms({"ttft_s": np.array([0.5, 1.0, math.e]), "output_speed": np.array([100 * math.e, 100.0, 100.0])},
                        obsd, pr)
    assert list(t["ttft_s"]) == pytest.approx([0.0, 0.0, -0.5 / pr.speed_noise ** 2])
    assert t["output_speed"][0] == pytest.approx(-0.5 / pr.speed_noise ** 2)   # two-sided: too fast is penalized


def test_evidence_inputs_are_checked():
    with pytest.raises(InputError) as e:
        deduce(1, 4, ttft_s=0.5)
    assert e.value.field == "ttft_prompt_tokens"
    with pytest.raises(InputError) as e:
        deduce(1, 4, batch_discount=1.5)
    assert e.value.field == "batch_discount"
    with pytest.raises(InputError) as e:
        deduce(1, 4, context_window=-3)
    assert e.value.field == "context_window"


# ---------------------------------------------------------------- synthetic models whose truth is known


# Narrower than the default priors (one chip, one weight dtype) so that the posterior holds enough effective samples
# at 20k draws and the test runs in seconds; truth and inference share these priors, as the check requires.
SYNTH = Priors(samples=20_000, cost_scale=1.0, hardware=(("h100-sxm", 1.0),), weight_dtype=(("fp8", 1.0),),
               active_params=(1e9, 1e12))


@functools.lru_cache(maxsize=None)
def _synthetic_trials(n_trials, use_speed, seed=7):
    """Truth drawn from the priors; prices, cached price and speed generated by the same forward model with the
    stated noise (log-normal, sd price_noise / speed_noise); then deduced with or without the speed (the same truths
    and noise either way). Returns (inside_80, width) per trial; a refused deduction counts as a miss."""
    from tokenmath.specs.hardware import get_hardware
    pr = SYNTH
    hws = [get_hardware(h) for h, _ in pr.hardware]
    rng = np.random.default_rng(seed)
    template = _obs(cached_input_price=1.0, output_speed=1.0)
    s = fm.draw(pr, hws, rng, n_trials, template)
    p = fm.predict(s, template, pr)
    out = []
    for i in range(n_trials):
        noisy = {k: float(v[i]) * math.exp(rng.normal(0, fm.noise(k, pr))) for k, v in p.items()}
        try:
            a = deduce(noisy["input_price"], noisy["output_price"], cached_input_price=noisy["cached_input_price"],
                       output_speed=noisy["output_speed"] if use_speed else None,
                       priors=replace(SYNTH, seed=100 + i), calibrated=False).summary["active_params_b"]
        except InputError:
            out.append((False, float("nan")))
            continue
        out.append((a["low"] <= s["Na"][i] / 1e9 <= a["high"], a["high"] / a["low"]))
    return tuple(out)


def test_synthetic_truth_recovered_at_the_stated_rate():
    """30 synthetic models: the 80% interval should hold the truth in 80% of them; with 30 trials the binomial sd is
    7.3%, so anything in [57%, 97%] passes and a broken noise model (e.g. noise ignored: intervals far too narrow)
    fails. Measured: 23/30 without speed, 22/30 with it (round one: 24/30, 21/30; with speed the posterior is narrow
    and its effective samples few: ESS_WANTED in deduce.py)."""
    for use_speed in (False, True):
        cover = np.mean([x for x, _ in _synthetic_trials(30, use_speed)])
        assert 0.57 <= cover <= 0.97, (use_speed, cover)


def test_speed_narrows_the_synthetic_interval():
    """Same 30 truths and noise: adding the speed shrinks the median 80% width (measured 6.7x -> 5.8x; round one,
    without the step CPU time: 6.8x -> 5.4x)."""
    without = np.nanmedian([w for _, w in _synthetic_trials(30, False)])
    with_ = np.nanmedian([w for _, w in _synthetic_trials(30, True)])
    assert with_ < 0.9 * without, (with_, without)


# ---------------------------------------------------------------- published truth and the command


def test_deepseek_v3_all_evidence_holds_the_truth_and_beats_price_only():
    """DeepSeek-V3: 37.6 B active (catalog, DeepSeek-V3 technical report). All evidence must hold it in the 80%
    interval, with a narrower interval and a smaller error than price alone."""
    from tokenmath.analyses.inverse.narrowing import deduce_api_model
    r = deduce_api_model("deepseek-chat")
    true = r.true_active_params_b
    assert true == pytest.approx(37.6, abs=0.5)
    a0, a = r.price_only.summary["active_params_b"], r.final.summary["active_params_b"]
    assert a["low"] <= true <= a["high"]
    assert a["high"] / a["low"] < a0["high"] / a0["low"]
    err = lambda x: max(x / true, true / x)  # noqa: E731
    assert err(a["median"]) < err(a0["median"])


def test_cli_api_model_explain_and_json():
    res = CliRunner().invoke(main, ["deduce", "--api-model", "gpt-4.1-mini", "--explain", "--samples", "20000"])
    assert res.exit_code == 0, res.output
    assert "narrower" in res.output and "output speed" in res.output and "Posterior" in res.output
    res = CliRunner().invoke(main, ["deduce", "--api-model", "gpt-4.1-mini", "--json", "--samples", "20000",
                                    "--evidence", "price,speed"])
    assert res.exit_code == 0, res.output
    import json
    d = json.loads(res.output)
    assert [s["added"] for s in d["steps"]] == ["price", "speed"]
    assert d["all_evidence"]["observed"]["output_speed"] == pytest.approx(77.2)


@pytest.mark.parametrize("args, word", [(["--api-model", "gpt-4oo"], "gpt-4o"),
                                        (["--api-model", "gpt-4o", "--evidence", "speeed"], "speed")])
def test_cli_refuses_unknown_names_with_the_closest(args, word):
    res = CliRunner().invoke(main, ["deduce"] + args)
    assert res.exit_code == 2 and word in res.output
    assert "Traceback" not in res.output


def test_kinds_are_in_explain_order():
    assert KINDS[0] == "price" and len(set(KINDS)) == len(KINDS)


def test_deduce_alone_reads_an_api_whose_architecture_is_public():
    # `tokenmath deduce` with nothing asked deduces DeepSeek's own API (DeepSeek-V3: 37.6 B active, 671 B total) from
    # its shipped evidence, saying so on stderr, so the answer can be read against the truth; evidence without prices
    # is still refused, naming the missing price
    res = CliRunner().invoke(main, ["deduce", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["observed"]["input_price"] == 0.27 and d["observed"]["output_price"] == 1.1
    assert "no prices given" in res.stderr
    res = CliRunner().invoke(main, ["deduce", "--cached-input-price", "0.1", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["field"] == "input_price"
