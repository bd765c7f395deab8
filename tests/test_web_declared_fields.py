"""The web API's serving parameters are the declared fields (specs/question/deployment.py and workload.py): the
same defaults as the CLI and Python, tighter bounds only where a request must be bounded, and the deployment knobs that
infer and simulate take (EP transport, running-sequence cap, chip-hour price) honoured, not dropped."""
from __future__ import annotations

import json

import pytest

from tokenmath.faces.web.api import Api
from tokenmath.specs.question.defaults import question_defaults
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
from tokenmath.specs.question.workload import WORKLOAD_FIELDS

DECLARED = {f.name: f for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS}
# a question's own default where its command has one (the CLI's default for that question)

OWN_DEFAULT = {("sensitivity", "batch"): "max", ("overtrain", "min_tokens_per_s_per_user"): 20.0,
               ("overtrain", "output_len"): 512}


@pytest.fixture(scope="module")
def api():
    return Api()


def call(api, name, **kw) -> dict:
    return json.loads(api.call(name, kw))


def test_every_declared_parameter_has_the_declared_default_and_no_wider_bounds(api):
    seen = 0
    for name, ep in api.endpoints.items():
        for p in ep.params:
            f = DECLARED.get(p.name)
            if f is None or name in ("train", "deduce", "chinchilla"):   # training and inverse inputs are their own
                continue
            seen += 1
            own = question_defaults(name).get(p.name)       # the question's own default, as the CLI applies it
            if own is not None and p.default is not None and (name, p.name) not in OWN_DEFAULT:
                assert str(p.default) == own or float(p.default) == float(own), (name, p.name)
                continue
            assert p.default == OWN_DEFAULT.get((name, p.name), f.default), (name, p.name)
            if f.lo is not None and p.lo is not None:
                assert p.lo >= f.lo, (name, p.name)
            if f.hi is not None and p.hi is not None:
                assert p.hi <= f.hi, (name, p.name)
    assert seen > 60


def test_engine_is_a_shipped_id_and_vllm_by_default(api):
    engine = next(p for p in api.endpoints["infer"].params if p.name == "engine")
    assert engine.kind == "choice" and engine.default == "vllm" and "none" in engine.choices
    assert not any(c.endswith((".toml", ".json")) for c in engine.choices)


def test_hyperbola_defaults_to_the_clis_context(api):
    from tokenmath.faces.commands.hyperbola import hyperbola
    cli = next(p.default for p in hyperbola.params if p.name == "context")
    d = call(api, "hyperbola")
    assert d["context"] == int(cli) == 2048


def test_infer_honours_the_ep_transport_as_python_does(api):
    from tokenmath.analyses.serving.infer import infer
    q = dict(model="deepseek-v3", hardware="h200", chips=8, ep=8, batch=64)
    base = call(api, "infer", **q)
    for knob in ({"ep_comm": "deepep", "ep_overlap": True}, {"ep_imbalance": "routing"}):
        d = call(api, "infer", **q, **knob)
        assert d["decode_step_s"] != pytest.approx(base["decode_step_s"], rel=1e-3), knob
        r = infer(q["model"], q["hardware"], chips=8, ep=8, batch=64, engine="vllm", **knob)
        assert d["decode_step_s"] == pytest.approx(r.decode_step_s, rel=1e-9), knob


def test_infer_honours_the_running_cap_and_the_price(api):
    assert call(api, "infer", batch="max", max_running=64)["batch"] == 64
    a, b = call(api, "infer"), call(api, "infer", price_usd_per_hour=10.0)
    assert b["cost_per_mtok_output_usd"] > a["cost_per_mtok_output_usd"]


def test_simulate_honours_the_running_cap(api):
    q = dict(concurrency=64, requests=200)
    a, b = call(api, "simulate", **q), call(api, "simulate", **q, max_running=8)
    assert b["output_tokens_per_s"] < a["output_tokens_per_s"]


@pytest.mark.parametrize("name,params,field", [
    ("infer", {"ep_comm": "fp4"}, "ep_comm"),
    ("infer", {"ep_imbalance": 0.5}, "ep_imbalance"),
    ("infer", {"max_running": 0}, "max_running"),
    ("simulate", {"price_usd_per_hour": -1}, "price_usd_per_hour"),
    ("simulate", {"arrival_rate": 0}, "arrival_rate"),        # the web's floor: a rate above 0
    ("pareto", {"chips": 8192}, "chips"),                     # the web's bound on a searched chip count
    ("infer", {"engine": "engines/vllm.toml"}, "engine"),     # never a file
])
def test_bad_values_are_refused_naming_the_field(api, name, params, field):
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError) as e:
        api.call(name, params)
    assert e.value.field == field
