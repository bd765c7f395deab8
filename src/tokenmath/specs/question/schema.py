"""The JSON Schema (draft 2020-12) of a question: its Deployment and its Workload, generated from the one declaration
of each field (deployment.py, workload.py), so the schema, the CLI's options and the web page's parameters cannot
disagree. Each property carries the field's bounds, default, unit, help and the questions that use it
(`x-questions`, `x-unit`: schema annotations, ignored by validators)."""
from __future__ import annotations

from tokenmath.specs.question.fields import Field

DIALECT = "https://json-schema.org/draft/2020-12/schema"
LENGTH_PATTERN = r"^(\d+|uniform:\d+-\d+|lognormal:\d+(\.\d+)?,\d+(\.\d+)?|fit:.+)$"   # analyses/.../workload.py forms
OVERRIDE_PATTERN = r"^[a-z_][a-z0-9_]*=.+$"                                              # FIELD=VALUE, as --set


def _bounded(kind: str, f: Field) -> dict:
    d: dict = {"type": kind}
    if f.lo is not None:
        d["minimum"] = f.lo
    if f.hi is not None:
        d["maximum"] = f.hi
    return d


def field_schema(f: Field) -> dict:
    """One declared field as a JSON Schema property."""
    k = f.kind
    if k == "int":
        d = _bounded("integer", f)
    elif k == "float":
        d = _bounded("number", f)
    elif k == "bool":
        d = {"type": "boolean"}
    elif k == "choice":
        d = {"type": "string", "enum": list(f.choices)}
    elif k == "batch":
        d = {"oneOf": [_bounded("integer", f), {"const": "max"}]}
    elif k == "imbalance":
        d = {"oneOf": [{"type": "number", "minimum": 1}, {"enum": ["routing", "eplb"]}]}
    elif k == "length":
        d = {"oneOf": [_bounded("integer", f), {"type": "string", "pattern": LENGTH_PATTERN}]}
    elif k == "overrides":
        d = {"type": "array", "items": {"type": "string", "pattern": OVERRIDE_PATTERN}}
    else:                   # model, hardware, engine, draft: a catalog id or a file path
        d = {"type": "string", "minLength": 1}
    if f.default not in (None, ()):
        d["default"] = f.default
    d["description"] = f.help + (f" ({f.unit})" if f.unit else "")
    if f.unit:
        d["x-unit"] = f.unit
    if f.questions:
        d["x-questions"] = list(f.questions)
    return d


def object_schema(title: str, fields: tuple[Field, ...], question: str | None = None) -> dict:
    """An object of `fields` (those `question` uses, when given); no other keys allowed."""
    use = [f for f in fields if question is None or not f.questions or question in f.questions]
    return {"title": title, "type": "object", "additionalProperties": False,
            "properties": {f.name: field_schema(f) for f in use}}


def question_schema(question: str | None = None) -> dict:
    """The schema of {"deployment": {...}, "workload": {...}}: every field, or those `question` (e.g. "infer") uses."""
    from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
    from tokenmath.specs.question.workload import WORKLOAD_FIELDS
    name = f"tokenmath {question} question" if question else "tokenmath question"
    return {"$schema": DIALECT, "title": name, "type": "object", "additionalProperties": False,
            "properties": {"deployment": object_schema("Deployment: what runs", DEPLOYMENT_FIELDS, question),
                           "workload": object_schema("Workload: what arrives", WORKLOAD_FIELDS, question)},
            # exactly one arrival mode (Workload.of enforces it): a static batch, a closed loop or an open loop
            "$comment": "workload: at most one of batch, concurrency, arrival_rate"}
