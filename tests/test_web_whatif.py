"""The web API's what-if hardware (`set`), speculative decoding (draft / spec_k / acceptance / mtp) and
/api/sensitivity: the same answers as the Python analyses they call, with hand-computed checks of the physics they
carry through. API level (no browser); the page's controls are in tests/test_web_browser_whatif.py."""
from __future__ import annotations

import json

import pytest

from web_calls import call, refused


# ---- set: what-if hardware ----------------------------------------------------------------------------------------

def test_set_echoes_the_changed_figures_as_the_cli_json_does(api):
    d = call(api, "infer", batch=64, set="memory_bw_tbs=6.7,price=2x")
    # H100 SXM: 3.35 TB/s and $2.99 per chip-hour in the catalog; 2x of 2.99 = 5.98
    assert d["what_if"] == [{"field": "memory_bw_tbs", "value": 6.7, "catalog": 3.35, "unit": "TB/s"},
                            {"field": "price_usd_per_hour", "value": pytest.approx(5.98), "catalog": 2.99,
                             "unit": "$/chip-hour"}]
    assert "what_if" not in call(api, "infer", batch=64)     # only when asked, as on the command line


def test_price_alone_scales_the_cost_and_leaves_the_step(api):
    """$ per Mtok = $/s x step / batch tokens: doubling the price doubles the cost exactly, the step is unchanged."""
    plain = call(api, "infer", batch=32)
    dear = call(api, "infer", batch=32, set="price_usd_per_hour=2x")
    assert dear["decode_step_s"] == plain["decode_step_s"]
    assert dear["cost_per_mtok_output_usd"] / plain["cost_per_mtok_output_usd"] == pytest.approx(2.0, rel=1e-12)


def test_set_gives_what_the_analysis_gives_on_the_overridden_chip(api):
    from tokenmath.analyses.serving.infer import infer
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.overrides import apply
    hw, _ = apply(get_hardware("h100-sxm"), {"memory_bw_tbs": "6.7"})
    want = infer(get_model("llama-3.1-8b"), hw, batch=8, input_len=1024, output_len=256, engine="vllm")
    got = call(api, "infer", batch=8, set="memory_bw_tbs=6.7")
    assert got["decode_step_s"] == pytest.approx(want.decode_step_s, rel=1e-12)
    # twice the bandwidth: a memory-bound step gets faster, but not 2x (fixed per-step terms stay)
    base = call(api, "infer", batch=8)
    assert base["bottleneck_decode"] == "memory"
    assert 0.5 < got["decode_step_s"] / base["decode_step_s"] < 1.0


def test_set_reaches_every_serving_endpoint(api):
    for name, extra in (("hyperbola", {"context": 1280}), ("context", {"context": 4096}),
                        ("prices", {"contexts": "1024"}), ("pareto", {"chips": 1}),
                        ("simulate", {"requests": 20, "concurrency": 4})):
        d = call(api, name, set="memory_gb=160", **extra)
        assert d["what_if"][0]["field"] == "memory_gb" and d["what_if"][0]["value"] == 160, name
    # twice the HBM holds more sequences at a context (weights fixed, KV per sequence fixed)
    small = call(api, "hyperbola", context=1280)
    big = call(api, "hyperbola", context=1280, set="memory_gb=160")
    assert big["max_batch"] > 2 * small["max_batch"]


@pytest.mark.parametrize("text,field", [("memory_bw=3", "set.memory_bw"), ("memory_bw_tbs=0", "set.memory_bw_tbs"),
                                        ("memory_bw_tbs=abc", "set.memory_bw_tbs"), ("memory_gb", "set"),
                                        ("price=1,price=2", "set.price_usd_per_hour"), ("x" * 500, "set")])
def test_a_bad_what_if_is_refused_naming_its_field(api, text, field):
    refused(api, "infer", field, set=text)


def test_an_unknown_field_is_answered_with_the_closest_names(api):
    assert "memory_bw_tbs" in refused(api, "infer", "set.memory_bw", set="memory_bw=3")


# ---- speculative decoding ------------------------------------------------------------------------------------------

def test_mtp_uses_the_published_acceptance_and_its_expected_tokens(api):
    d = call(api, "infer", model="deepseek-v3", chips=16, batch=8, mtp=1)
    s = d["speculative"]
    assert s["acceptance"] == 0.875 and "2412.19437" in s["acceptance_source"]
    # E = (1 - a^(k+1)) / (1 - a) = 1 + a for k = 1: 1.875 (Leviathan et al. 2023, eq. 1)
    assert s["tokens_per_step"] == pytest.approx(1.875)
    assert s["layout"] == f"tp={d['tp']} pp=1 ep={d['ep']} dp={d['dp']}"      # the answer's own layout
    assert s["batch"] == [8] and s["fits"] == [True]
    assert s["per_token_s"][0] == pytest.approx((s["draft_s"][0] + s["verify_s"][0]) / 1.875)
    assert "Leviathan" in s["explain"]


def test_a_draft_model_on_the_hyperbola_covers_every_batch(api):
    d = call(api, "hyperbola", model="llama-3.1-70b", chips=8, context=1280, draft="llama-3.2-1b", spec_k=4,
             acceptance=0.7)
    s = d["speculative"]
    # E = (1 - 0.7^5) / (1 - 0.7) = (1 - 0.16807) / 0.3 = 2.77310
    assert s["tokens_per_step"] == pytest.approx(2.77310, abs=1e-5)
    assert s["batch"] == [p["batch"] for p in d["points"]]
    # at batch 1 the verify pass is memory-bound: the drafted tokens come nearly free
    assert s["speedup"][0] > 1.5


def test_speculation_is_refused_in_the_page_s_terms(api):
    refused(api, "infer", "acceptance", draft="llama-3.2-1b")            # no published default for a pair
    refused(api, "infer", "draft", draft="../../etc/passwd", acceptance=0.5)   # a catalog id, never a path
    refused(api, "infer", "mtp", draft="llama-3.2-1b", acceptance=0.5, mtp=1)
    refused(api, "infer", "acceptance", mtp=1, acceptance=1.5)
    refused(api, "infer", "pp", pp=2, chips=2, mtp=1)


# ---- sensitivity ---------------------------------------------------------------------------------------------------

def test_sensitivity_is_the_analysis_and_price_moves_the_cost_in_proportion(api):
    d = call(api, "sensitivity", batch=64)
    rows = {r["input"]: r for r in d["rows"]}
    base = call(api, "infer", batch=64)
    assert d["base_answer"] == pytest.approx(base["cost_per_mtok_output_usd"], rel=1e-12)
    # cost is proportional to the price: -20% / +20% of the price gives 0.8x / 1.2x the answer
    p = rows["price_usd_per_hour"]
    assert p["low"] == pytest.approx(2.99 * 0.8) and p["high"] == pytest.approx(2.99 * 1.2)
    assert p["answer_low"] == pytest.approx(0.8 * d["base_answer"])
    assert p["answer_high"] == pytest.approx(1.2 * d["base_answer"])
    swings = [r["swing"] for r in d["rows"]]
    assert swings == sorted(swings, reverse=True)
    assert d["metric_label"] == "$ per Mtok output (decode step)"


def test_sensitivity_takes_a_metric_and_the_what_if_chip(api):
    d = call(api, "sensitivity", batch=1, metric="decode_step_s", set="memory_bw_tbs=6.7")
    assert d["metric"] == "decode_step_s" and d["what_if"][0]["value"] == 6.7
    rows = {r["input"]: r for r in d["rows"]}
    assert rows["memory_bw_tbs"]["base"] == pytest.approx(6.7)     # moved around the what-if figure
    assert "price_usd_per_hour" not in rows or rows["price_usd_per_hour"]["swing"] == 0   # a time ignores the price
    refused(api, "sensitivity", "metric", metric="speed")
    refused(api, "sensitivity", "delta", delta=0.95)


def test_the_page_gets_the_metric_labels_from_the_api(api):
    from tokenmath.analyses.serving.sensitivity import METRICS
    assert json.loads(api.meta())["sensitivity_metrics"] == METRICS
