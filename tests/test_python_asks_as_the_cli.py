"""The Python keyword form asks what the command line asks (analyses.python_api.public with specs/question/defaults.py):
the same engine and the same question's own defaults. Before, tokenmath.price("llama-3.1-70b", "h100-sxm") went
straight to the analysis with no serving engine and answered $0.478 per Mtok output where `tokenmath price` said
$0.679 (vLLM's engine)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tokenmath as tm
from tokenmath.faces.cli import cli
from tokenmath.specs.question.defaults import QUESTION_DEFAULTS


def _cli(*args) -> dict:
    r = CliRunner().invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.mark.parametrize("question,kw,args", [
    ("price", {"max_chips": 2}, ["--max-chips", "2"]),
    ("fleet", {"demand": 1e4, "max_chips": 2}, ["--demand", "10000", "--max-chips", "2"]),
])
def test_price_and_fleet_in_python_equal_the_cli(question, kw, args):
    py = getattr(tm, question)("llama-3.1-8b", "h100-sxm", **kw).to_dict()
    cl = _cli(question, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *args)
    assert py["engine"]["id"] == cl["engine"]["id"] == "vllm"
    for k in ("cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "chips", "layout", "batch"):
        if k in cl:
            assert py[k] == (cl[k] if isinstance(cl[k], str) else pytest.approx(cl[k], rel=1e-12)), k


def test_price_takes_its_own_default_lengths_in_python_too():
    d = tm.price("llama-3.1-8b", "h100-sxm", max_chips=1).to_dict()
    assert (d["input_len"], d["output_len"]) == (2000, 500) == (int(QUESTION_DEFAULTS["price"]["input_len"]),
                                                                int(QUESTION_DEFAULTS["price"]["output_len"]))
    # a length given is kept
    assert tm.price("llama-3.1-8b", "h100-sxm", max_chips=1, input_len=1024).to_dict()["input_len"] == 1024


def test_pareto_keeps_a_concurrency_axis_and_plan_its_default_model():
    p = tm.pareto("llama-3.1-8b", "h100-sxm", chips=1, concurrency=[1, 8])
    assert p.frontier and tm.pareto("llama-3.1-8b", "h100-sxm", chips=1, concurrency=()).frontier
    assert tm.plan(hardware="hgx-h200", chips=8).to_dict()["model"] == "deepseek-v3"


def test_simulate_in_python_asks_what_the_cli_asks():
    """tokenmath.simulate goes through the same typed question as `tokenmath simulate`: the fewest chips that fit
    when none are given (a 600K-token request needs more than one H100), the same figures, and a Speculation object
    read back into the Deployment's fields."""
    from tokenmath.analyses.serving.speculative import speculation
    kw = {"concurrency": 4, "requests": 40, "input_len": 512, "output_len": 64}
    py = tm.simulate("llama-3.1-8b", "h100-sxm", **kw).to_dict()
    cl = _cli("simulate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--concurrency", "4", "--requests",
              "40", "--input-len", "512", "--output-len", "64")
    for k in ("output_tokens_per_s", "duration_s"):
        assert py[k] == pytest.approx(cl[k], rel=1e-12), k
    assert tm.simulate("llama-3.1-8b", "h100-sxm", requests=2, input_len=600_000, output_len=8).layout["tp"] > 1
    via_object = tm.simulate("deepseek-v3", "h200", chips=8, speculation=speculation(mtp=1), **kw).to_dict()
    via_fields = tm.simulate("deepseek-v3", "h200", chips=8, mtp=1, **kw).to_dict()
    assert via_object == via_fields
    with pytest.raises(tm.InputError):
        tm.simulate(tm.Deployment(), tm.Workload(), speculation=speculation(mtp=1))
