"""The question a saved `--json` answer records (specs/question/answer_schema.py): its "schema" id, read and checked,
and its "question" echo, read back into the typed Deployment and Workload. `tokenmath export --answer` then deploys
the options the answer was priced with through the one mapping `tokenmath export` uses when asked directly
(export.options_of), never a second one.

The file is the user's: a bad id or echo is refused naming its key (schema, question.deployment.FIELD, ...), and an
echo that contradicts the answer it sits in (another model or engine, speculation on one side only) is refused too.
An answer saved before answers carried their question has no "question" key: asked_of gives None, and export says
its options were not recorded.
"""
from __future__ import annotations

import re

from tokenmath.base.errors import InputError, show
from tokenmath.specs.question.answer_schema import ANSWER_VERSION, answer_id
from tokenmath.specs.question.deployment import Deployment
from tokenmath.specs.question.workload import Workload

EXPORTED = ("plan", "fleet", "infer")       # the answers export deploys
RESAVE = "save the answer again with this tokenmath (`tokenmath plan ... --json > FILE`)"


def question_of(answer: dict) -> str | None:
    """The question the answer's "schema" id names (plan, fleet or infer); None: the answer carries no id."""
    if "schema" not in answer:
        return None
    s = answer["schema"]
    m = re.fullmatch(r"tokenmath\.([a-z_]+)/([0-9]{1,6})", s) if isinstance(s, str) else None
    if m is None:
        raise InputError("schema", f"{show(s)} is not a tokenmath answer id", f"e.g. {answer_id('plan')}")
    question, version = m.group(1), int(m.group(2))
    if question not in EXPORTED:
        raise InputError("schema", f"{s} is a {question} answer, and export deploys plan, fleet and infer answers",
                         ", ".join(answer_id(q) for q in EXPORTED))
    if version != ANSWER_VERSION:
        raise InputError("schema", f"{s} is version {version} of the {question} answer, and this tokenmath reads "
                         f"version {ANSWER_VERSION}", f"{answer_id(question)}: {RESAVE}")
    return question


def asked_of(answer: dict) -> tuple[Deployment, Workload] | None:
    """The Deployment and Workload the answer's "question" echo records, validated as Deployment.of / Workload.of
    validate a question (None: the answer has no echo)."""
    if "question" not in answer:
        return None
    q = answer["question"]
    valid = "the {deployment, workload} object tokenmath wrote"
    if not isinstance(q, dict):
        raise InputError("question", f"is a JSON {_kind(q)}, not an object", valid)
    for key in q:
        if key not in ("deployment", "workload"):
            raise InputError(f"question.{key}", "is not a part of a question", "deployment and workload")
    from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
    from tokenmath.specs.question.workload import WORKLOAD_FIELDS
    typed = []
    for part, cls, fields in (("deployment", Deployment, DEPLOYMENT_FIELDS), ("workload", Workload, WORKLOAD_FIELDS)):
        declared = {f.name: f for f in fields}
        if part not in q:
            raise InputError(f"question.{part}", "is missing from the answer's question", valid)
        raw = q[part]
        if not isinstance(raw, dict):
            raise InputError(f"question.{part}", f"is a JSON {_kind(raw)}, not an object", valid)
        for k, v in raw.items():        # a name or a path in JSON (Python alone passes resolved objects)
            f = declared.get(k)
            if f is not None and (f.kind == "text" or k == "efficiency") and v is not None and not isinstance(v, str):
                raise InputError(f"question.{part}.{k}", f"is a JSON {_kind(v)}, not a name", f.help)
        try:
            typed.append(cls.of(**raw))
        except InputError as e:
            raise InputError(f"question.{part}.{e.field}", e.problem, e.valid) from None
    dep = typed[0]
    if dep.draft is not None:
        from tokenmath.specs.model_catalog import get_model
        try:
            get_model(dep.draft)
        except InputError as e:
            raise InputError("question.deployment.draft", e.problem, e.valid) from None
    return dep, typed[1]


def check_agrees(answer: dict, dep: Deployment, deployed, engine_ids: dict) -> None:
    """Refuse an echo that describes another deployment than the answer's own keys (deployed: answer_pools.Deployed;
    an edited or spliced file): another catalog model, serving engine or dtype, or speculation on one side only."""
    from tokenmath.specs.model_catalog import catalog
    model, engine = deployed.model, deployed.engine
    if isinstance(dep.model, str) and dep.model.lower() in catalog() and dep.model.lower() != str(model).lower():
        raise InputError("question.deployment.model", f"is {dep.model}, and the answer is of {model}",
                         f"the question the answer was asked with: {RESAVE}")
    eid = engine_ids.get(dep.engine) if isinstance(dep.engine, str) else None
    if eid is not None and eid != engine:
        raise InputError("question.deployment.engine", f"is {dep.engine}, and the answer assumed {engine}",
                         f"the question the answer was asked with: {RESAVE}")
    for name in ("weight_dtype", "kv_dtype"):
        asked, held = getattr(dep, name), getattr(deployed, name)
        if asked is not None and asked != held:
            raise InputError(f"question.deployment.{name}", f"is {asked}, and the answer's {name} is {held}",
                             f"the question the answer was asked with: {RESAVE}")
    sp = answer.get("speculation")
    if bool(sp) != dep.speculating:
        name = "mtp" if dep.mtp is not None or isinstance(sp, dict) and sp.get("mtp") else "draft"
        said = "decodes speculatively" if sp else "does not decode speculatively"
        raise InputError(f"question.deployment.{name}", f"disagrees with the answer, which {said}",
                         f"the question the answer was asked with: {RESAVE}")


def _kind(v) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(v), "null") \
        if not isinstance(v, dict) else "object"
