"""A deployment's knobs (specs/question/deployment.KNOB_FIELDS) reach the engine by one road: the question passes them
through unnamed, analyses.setup.with_deployment_knobs applies them, and the setup's Transport hands forward_pass its
expert-parallel keywords (engine/forward.TRANSPORT_DEFAULTS). So every path that prices a pass runs with them: the
static speculative figures beside infer, a grid's prefix-cache TTFT and its speculative step, the web page."""
from __future__ import annotations

import inspect
import json
from dataclasses import fields

import numpy as np
import pytest

from tokenmath.analyses.setup import Transport, setup, with_deployment_knobs
from tokenmath.engine.forward import TRANSPORT_DEFAULTS, forward_pass
from tokenmath.engine.static_batch import pass_options, serve_batch
from tokenmath.specs.question.deployment import KNOB_FIELDS, field


def test_every_declared_knob_is_applied_by_the_setup_and_every_transport_field_is_a_forward_keyword():
    taken = inspect.signature(with_deployment_knobs).parameters
    assert set(KNOB_FIELDS) <= set(taken), set(KNOB_FIELDS) - set(taken)
    assert {f.name for f in fields(Transport)} == set(TRANSPORT_DEFAULTS)
    assert set(TRANSPORT_DEFAULTS) <= set(inspect.signature(forward_pass).parameters)
    for n in KNOB_FIELDS:
        field(n)                       # declared (raises for an undeclared name)


def test_pass_options_leaves_the_defaults_out_and_refuses_an_unknown_keyword():
    assert pass_options(**TRANSPORT_DEFAULTS) == {}
    assert pass_options(ep_imbalance=None, ep_comm="bf16") == {}
    assert pass_options(ep_imbalance="routing", ep_overlap=True, ep_comm="fp8", experts_whole=True) == {
        "ep_imbalance": "routing", "ep_overlap": True, "ep_comm": "fp8", "experts_whole": True}
    assert pass_options(links="L") == {"links": "L"}
    with pytest.raises(TypeError):
        pass_options(ep_comms="fp8")


def test_the_static_speculative_figures_run_with_the_deployments_ep_transport():
    """Before, speculative() took only ep_imbalance and ep_overlap: DeepSeek-V3 on 8 x H200 (ep 8, MTP 1, batch 64)
    gave the same verification step with and without FP8 dispatch."""
    from tokenmath.analyses.serving.speculative import speculation, speculative
    kw = dict(batches=[64], chips=8, ep=8)
    bf16 = speculative("deepseek-v3", "h200", speculation(None, None, None, 1), **kw)
    fp8 = speculative("deepseek-v3", "h200", speculation(None, None, None, 1), ep_comm="fp8", **kw)
    # FP8 dispatch halves the dispatch bytes: the plain and the verification steps both get shorter
    assert float(fp8.plain_step_s[0]) < float(bf16.plain_step_s[0])
    assert float(fp8.step_s[0]) < float(bf16.step_s[0])


def test_a_grids_prefix_cache_ttft_is_priced_with_the_experts_placement():
    """Before, grid.evaluate priced the uncached part of a prompt without experts_whole (moe_sharding ep)."""
    from tokenmath.analyses.serving.grid import evaluate
    from tokenmath.engine.prefix_cache import ttft_with_hits
    su = setup("qwen3-30b-a3b", "h100-sxm", chips=4, tp=4, moe_sharding="ep")
    g = evaluate(su, [(4, 1, 1, 1)], [8], 2048, 256, prefix_hit=0.5)
    lay = su.layout
    sv = serve_batch(su.model, su.hardware, lay, su.precision, su.efficiency, np.array([[8.0]]), 2048, 256,
                     su.reserve, experts_whole=True)
    want = ttft_with_hits(sv, su.model, su.hardware, lay, su.precision, su.efficiency, 2048, 0.5,
                          experts_whole=True)[0]
    assert float(g.ttft_s.ravel()[0]) == pytest.approx(float(np.ravel(want)[0]), rel=1e-9)


def test_the_web_page_takes_every_declared_knob_but_the_what_if_set():
    from tokenmath.faces.web.api import Api
    from tokenmath.faces.web.serving_fields import KNOB_NAMES
    assert set(KNOB_NAMES) == set(KNOB_FIELDS) - {"what_if"}
    api = Api()
    q = dict(model="deepseek-v3", hardware="h200", chips=8, ep=8, concurrency=32, requests=64, input_len=1024,
             output_len=64)
    plain = json.loads(api.call("simulate", dict(q)))
    bal = json.loads(api.call("simulate", dict(q, adp_balance=True)))
    # balanced attention groups split a step's prompts evenly: another TTFT (before: not a parameter of the page)
    assert bal["ttft_s"] != plain["ttft_s"]
