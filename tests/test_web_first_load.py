"""Issue 39 item 1, the API behind the page's first load: chips left blank mean the fewest chips that fit
(analyses.serving.fewest_chips, one rule for every serving endpoint), and a training run with chips and layout
blank opens on the fewest chips on which a layout fits (analyses.training.fewest_chips). Before: DeepSeek-V3 on H200
with chips blank ran on 1 chip ("does not fit", a 422 on simulate) and trained on 8 x tp 1 (396 GB per chip)."""
from __future__ import annotations

import json

import pytest

import tokenmath as tm
from tokenmath.analyses.serving.fewest_chips import fewest_chips
from tokenmath.analyses.training.fewest_chips import fewest_chips_search

DS = {"model": "deepseek-v3", "hardware": "h200"}


def call(api, name, **q):
    return json.loads(api.call(name, q))


def test_fewest_chips_is_the_first_power_of_two_that_holds_the_sequence():
    # DeepSeek-V3's 671 GB of fp8 weights need 5 H200s; 5 chips do not split 256 experts, 8 do (ep 8)
    n = fewest_chips("deepseek-v3", "h200", context=1280, engine="vllm")
    assert n == 8
    assert tm.infer("deepseek-v3", "h200", chips=8).fits and not tm.infer("deepseek-v3", "h200", chips=4).fits
    assert fewest_chips("llama-3.1-8b", "h100-sxm", context=1280) == 1
    # the degrees given are kept: their product times a power of two
    assert fewest_chips("llama-3.1-70b", "h100-sxm", context=1280, tp=4) == 4
    # a longer sequence or a larger batch needs more
    assert fewest_chips("llama-3.1-70b", "h100-sxm", context=1280, batch=256) > \
        fewest_chips("llama-3.1-70b", "h100-sxm", context=1280)


def test_blank_chips_answer_a_layout_that_fits_on_every_serving_endpoint(api):
    d = call(api, "infer", **DS)
    assert d["fits"] and d["chips"] == 8 and d["ep"] == 8 and d["decode_step_s"] > 0
    for name, extra in (("hyperbola", {}), ("context", {}), ("prices", {}), ("sensitivity", {}),
                        ("simulate", {"requests": 100}), ("simulate_sweep", {"requests": 32, "concurrencies": "1,4"})):
        d = call(api, name, **DS, **extra)
        assert "error" not in d, (name, d)
        assert d["chips"] == 8 if name != "sensitivity" else d["layout"] == "tp=1 pp=1 ep=8 dp=1", (name, d)
    assert call(api, "hyperbola", **DS)["points"]
    assert call(api, "prices", **DS)["rows"][0]["fits"]


def test_chips_left_out_mean_the_same_count_on_the_cli_in_python_and_on_the_page(api):
    """One rule wherever the count is left out (analyses.ask.filled -> fewest_chips.blank_chips): before, the CLI and
    Python ran DeepSeek-V3 on 1 H200 ("does not fit") where the page ran it on 8."""
    from click.testing import CliRunner

    from tokenmath.faces.cli import cli
    for name, q in (("infer", {}), ("hyperbola", {}), ("context", {})):
        web = call(api, name, **DS)
        py = tm.ask(name, tm.Deployment.of(model="deepseek-v3", hardware="h200"))
        d = py.to_dict()
        assert d["chips"] == web["chips"] == 8, name
        assert any("chips left out: 8" in n for n in d["notes"]), name
    r = CliRunner().invoke(cli, ["infer", "--model", "deepseek-v3", "--hardware", "h200", "--json"])
    d = json.loads(r.output)
    assert d["chips"] == 8 and d["fits"] and d["decode_step_s"] == pytest.approx(
        tm.infer("deepseek-v3", "h200").to_dict()["decode_step_s"])
    # a model that fits on one chip keeps it, with no note; a named count or dp is kept, fitting or not
    assert tm.infer("llama-3.1-8b", "h100-sxm").to_dict()["chips"] == 1
    assert not any("chips left out" in n for n in tm.infer("llama-3.1-8b", "h100-sxm").to_dict()["notes"])
    assert tm.infer("deepseek-v3", "h200", chips=1).to_dict()["chips"] == 1
    assert tm.infer("deepseek-v3", "h200", dp=1, tp=1).to_dict()["chips"] == 1
    # Llama 3.1 70B's 141 GB of bf16 weights: 2 H100s (tp 2); at a given tp 1 more chips only add replicas that
    # cannot hold it either, so the question stays on the degrees given and says it does not fit
    d = tm.infer("llama-3.1-70b", "h100-sxm").to_dict()
    assert (d["chips"], d["tp"]) == (2, 2) and d["fits"]
    d = tm.infer("llama-3.1-70b", "h100-sxm", tp=1).to_dict()
    assert d["chips"] == 1 and not d["fits"] and not any("chips left out" in n for n in d["notes"])


def test_named_chips_are_kept_even_when_they_do_not_fit(api):
    d = call(api, "infer", **DS, chips=1)
    assert d["chips"] == 1 and not d["fits"] and d["advice"]


def test_training_with_chips_blank_opens_on_a_layout_that_fits(api):
    d = call(api, "train", **DS)
    assert "error" not in d, d
    assert d["fits"] and d["memory_per_chip_bytes"] <= d["memory_usable_per_chip_bytes"]
    s = fewest_chips_search("deepseek-v3", "h200", top=1, micro_batches=(1,), recomputes=("selective",), zeros=(1,))
    assert d["chips"] == s.chips and d["chips"] > 8 and "fewest chips" in d["notes"][0]
    # chips named keep their meaning: dp over them (the layout the user asked for, fitting or not)
    d8 = call(api, "train", model="llama-3.1-8b", hardware="h100-sxm", chips=8)
    assert (d8["chips"], d8["dp"], d8["tp"]) == (8, 8, 1) and "auto_layout" not in d8


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b"])
def test_a_small_model_trains_on_the_first_node(api, model):
    d = call(api, "train", model=model, hardware="h200")
    assert d["fits"] and d["chips"] in (8, 16)


def test_deduce_takes_a_known_api_endpoint(api):
    """Issue 39 item 10: the Deduce tab can pick a known API model (the CLI's --api-model --provider)."""
    from tokenmath.analyses.inverse.deduce import Priors
    from tokenmath.analyses.inverse.narrowing import deduce_api_model
    meta = json.loads(api.meta())
    choices = next(p for p in meta["endpoints"]["/api/deduce"]["params"] if p["name"] == "api_model")["choices"]
    assert "openai: gpt-4o" in choices and "microsoft azure ai: deepseek-v3" in choices
    d = call(api, "deduce", api_model="Microsoft Azure AI: DeepSeek-V3", samples=20_000)
    cli = deduce_api_model("DeepSeek-V3", "Microsoft Azure AI", Priors(samples=20_000))
    assert d["evidence"]["provider"] == "Microsoft Azure AI" and d["true_active_params_b"] == pytest.approx(37.55, 0.01)
    assert d["active_params_b"]["median"] == pytest.approx(cli.to_dict()["active_params_b"]["median"])
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError, match="api_model"):
        call(api, "deduce", api_model="nobody: gpt-9")
