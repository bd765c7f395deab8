"""Which question uses which field, and what a question says about a field it does not use: one home for "never
dropped silently". A field set away from its default on a question that does not use it gives a note naming the
field, the question and why (the field's declared `why_not`)."""
from __future__ import annotations

from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS, Deployment
from tokenmath.specs.question.workload import WORKLOAD_FIELDS, Workload

ALL_FIELDS = DEPLOYMENT_FIELDS + WORKLOAD_FIELDS


def uses(question: str, name: str) -> bool:
    """Whether `question` (a command name) uses the field `name`."""
    f = next(f for f in ALL_FIELDS if f.name == name)
    return question in f.questions


def not_applied(question: str, deployment: Deployment | None = None, workload: Workload | None = None) -> list[str]:
    """Notes for the fields the user set that `question` does not use."""
    out = []
    for decl, obj in ((DEPLOYMENT_FIELDS, deployment), (WORKLOAD_FIELDS, workload)):
        if obj is None:
            continue
        for f in decl:
            v = getattr(obj, f.name)
            if v == f.default or question in f.questions:
                continue
            why = f.why_not or "this question does not use it"
            out.append(f"{f.option} {_show(v)} does not apply to `{question}`: {why}")
    return out


def _show(v) -> str:
    if isinstance(v, bool):
        return "" if v else "off"
    return str(getattr(v, "id", v))
