"""Every serving question's `--json` answer follows its versioned schema (specs/question/answer_schema.py): it carries
"schema" (id and version) and "question" (the deployment and workload it answered, valid against the question's
schema and accepted back by Deployment.of / Workload.of), and the keys shared across commands keep one type."""
from __future__ import annotations

import json

import jsonschema
import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import cli
from tokenmath.specs.question.answer_schema import ANSWER_VERSION, answer_schema
from tokenmath.specs.question.deployment import Deployment
from tokenmath.specs.question.workload import Workload

CASES = {   # cheap questions, each with what makes it answer
    "infer": ["-m", "llama-3.1-8b", "--batch", "8"],
    "hyperbola": ["-m", "llama-3.1-8b"],
    "context": ["-m", "llama-3.1-8b"],
    "prices": ["-m", "llama-3.1-8b", "--contexts", "1024"],
    "price": ["-m", "llama-3.1-8b", "--max-chips", "1"],
    "fleet": ["-m", "llama-3.1-8b", "--max-chips", "1", "--demand", "1000"],
    "simulate": ["-m", "llama-3.1-8b", "--requests", "20", "--concurrency", "4"],
    "sensitivity": ["-m", "llama-3.1-8b", "--batch", "8"],
}


def _answer(question, args):
    r = CliRunner().invoke(cli, [question, *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.mark.parametrize("question", list(CASES))
def test_a_json_answer_validates_against_its_versioned_schema(question):
    d = _answer(question, CASES[question])
    assert d["schema"] == f"tokenmath.{question}/{ANSWER_VERSION}"
    jsonschema.validate(d, answer_schema(question))
    # the question it answered, typed back: the same Deployment and Workload the command built
    dep, wl = Deployment.of(**d["question"]["deployment"]), Workload.of(**d["question"]["workload"])
    assert dep.model == "llama-3.1-8b" and isinstance(wl, Workload)


def test_the_echo_holds_what_was_asked_and_only_the_fields_the_question_uses():
    d = _answer("infer", ["-m", "deepseek-v3", "-H", "h200", "--chips", "8", "--ep", "8", "--batch", "4",
                          "--moe-sharding", "ep"])
    q = d["question"]
    assert (q["deployment"]["chips"], q["deployment"]["ep"], q["deployment"]["moe_sharding"]) == (8, 8, "ep")
    assert q["workload"]["batch"] == 4
    ctx = _answer("context", ["-m", "llama-3.1-8b", "--mtp", "1"])      # context does not decode: no mtp echoed
    assert "mtp" not in ctx["question"]["deployment"]
    assert any("--mtp" in n for n in ctx["notes"])                     # and its notes say so


def test_a_command_that_builds_its_own_deployment_echoes_that_one():
    d = _answer("plan", ["-m", "llama-3.1-8b", "--system", "hgx-h100", "--chips", "1"])
    assert d["question"]["deployment"]["hardware"] == "hgx-h100"          # plan's --system, not the default chip
    jsonschema.validate(d, answer_schema("plan"))
    assert _answer("infer", ["--peak"])["question"]["deployment"]["efficiency"] == "peak"


def test_a_wrong_answer_fails_the_schema():
    d = _answer("infer", CASES["infer"])
    for bad in ({**d, "schema": "tokenmath.infer/0"}, {**d, "ttft_s": "fast"},
                {**d, "question": {**d["question"], "extra": 1}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, answer_schema("infer"))


def test_tokenmath_schema_prints_the_answer_schema():
    r = CliRunner().invoke(cli, ["schema", "--answer", "price"])
    assert r.exit_code == 0 and json.loads(r.output) == answer_schema("price")
    assert CliRunner().invoke(cli, ["schema", "--answer", "price", "--question", "price"]).exit_code == 2
