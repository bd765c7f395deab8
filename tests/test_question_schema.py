"""The JSON Schema of a question is generated from the same declarations that validate it: the schema and
Deployment.of / Workload.of accept and refuse the same values."""
import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS, Deployment
from tokenmath.specs.question.schema import question_schema
from tokenmath.specs.question.workload import WORKLOAD_FIELDS, Workload

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = question_schema()
CHECK = jsonschema.Draft202012Validator(SCHEMA)
NUMERIC = [f for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS if f.kind in ("int", "float") and f.lo is not None]


def _schema_ok(where: str, name: str, value) -> bool:
    return CHECK.is_valid({where: {name: value}})


def _types_ok(where: str, name: str, value) -> bool:
    try:
        (Deployment if where == "deployment" else Workload).of(**{name: value})
        return True
    except InputError:
        return False


def test_the_schema_is_valid_and_holds_every_declared_field():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    props = SCHEMA["properties"]
    assert set(props["deployment"]["properties"]) == {f.name for f in DEPLOYMENT_FIELDS}
    assert set(props["workload"]["properties"]) == {f.name for f in WORKLOAD_FIELDS}
    chips = props["deployment"]["properties"]["chips"]
    assert chips["type"] == "integer" and chips["minimum"] == 1 and chips["x-unit"] == "chips"
    assert props["deployment"]["properties"]["kv_dtype"]["enum"] == ["bf16", "fp16", "fp8", "int8", "fp32"]


@pytest.mark.parametrize("f", NUMERIC, ids=lambda f: f.name)
def test_schema_and_validator_agree_at_each_bound(f):
    where = "deployment" if f in DEPLOYMENT_FIELDS else "workload"
    step = 1 if f.kind == "int" else max(abs(f.lo) * 1e-3, 1e-9)
    cases = [f.lo, f.hi, f.lo - step] + ([f.hi + step] if f.hi is not None else [])
    for v in cases:
        v = int(v) if f.kind == "int" and float(v).is_integer() else v
        assert _schema_ok(where, f.name, v) == _types_ok(where, f.name, v), (f.name, v)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NUMERIC), st.floats(-1e12, 1e12, allow_nan=False))
def test_schema_and_validator_agree_on_any_number(f, x):
    where = "deployment" if f in DEPLOYMENT_FIELDS else "workload"
    v = int(x) if f.kind == "int" else x
    assert _schema_ok(where, f.name, v) == _types_ok(where, f.name, v), (f.name, v)


def test_a_question_schema_holds_only_the_fields_it_uses_and_the_cli_prints_it():
    out = CliRunner().invoke(cli, ["schema", "--question", "fleet"]).output
    wl = json.loads(out)["properties"]["workload"]["properties"]
    assert "min_tokens_per_s_per_user" in wl and "concurrency" not in wl      # fleet sizes at a speed, not users
    assert json.loads(out) == question_schema("fleet")
