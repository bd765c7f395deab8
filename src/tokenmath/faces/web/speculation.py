"""Speculative decoding on the web API's infer, hyperbola and simulate: the CLI's `--draft MODEL --spec-k K --acceptance A`
and `--mtp K` as the parameters draft, spec_k, acceptance and mtp. The answer gains `speculative`, the to_dict() of
analyses.serving.speculative.speculative at the answer's batches, as the CLI's JSON does. No physics here."""
from __future__ import annotations

from tokenmath.base.errors import InputError, unknown_name
from tokenmath.specs.question.deployment import KNOB_FIELDS, SPECULATION_FIELDS
from tokenmath.specs.question.deployment import field as dfield

# draft, spec_k, acceptance and mtp: the declared fields (the draft a catalog id here: spec_of refuses anything else)
SPEC = tuple(dfield(n) for n in SPECULATION_FIELDS)


def asked(a: dict) -> bool:
    return any(a.get(k) is not None for k in SPECULATION_FIELDS)


def spec_of(a: dict):
    """The request's analyses.serving.speculative.Speculation, or None when none was asked (the draft a catalog id,
    never a path or an upload)."""
    if not asked(a):
        return None
    from tokenmath.analyses.serving.speculative import speculation
    from tokenmath.specs.model_catalog import catalog
    draft = a.get("draft")
    if draft is not None and draft.lower() not in catalog():
        raise unknown_name("draft", draft, catalog())
    return speculation(None if draft is None else draft.lower(), a.get("spec_k"), a.get("acceptance"), a.get("mtp"))


def speculative_part(model, hardware, a: dict, batches, efficiency=None, *, context: int | None = None) -> dict:
    """{"speculative": the speculative decode beside a plain answer at `batches`} ({} when none was asked).
    `context`: a hyperbola's (every sequence holds that many tokens while it decodes, as the CLI reads it)."""
    if not asked(a):
        return {}
    from tokenmath.analyses.serving.speculative import speculative
    spec = spec_of(a)
    for name in ("pp", "cp"):
        if (a.get(name) or 1) > 1:
            raise InputError(name, "speculative decoding is modelled without pipeline or context parallelism",
                             f"leave {name} blank, or turn speculative decoding off")
    if context is not None:
        lens = dict(input_len=max(int(context) - 1, 1), output_len=1)
    else:
        lens = dict(input_len=a["input_len"], output_len=a["output_len"])
    r = speculative(model, hardware, spec, batches=batches, chips=a.get("chips"), tp=a.get("tp"), ep=a.get("ep"),
                    dp=a.get("dp"), weight_dtype=a.get("weight_dtype"), kv_dtype=a.get("kv_dtype"),
                    efficiency=efficiency, engine=a.get("engine"), **lens,
                    # the deployment's knobs the request sent (analyses.setup.with_deployment_knobs applies them)
                    **{k: a[k] for k in KNOB_FIELDS if a.get(k) is not None})
    from tokenmath.faces.explain_speculative import explain_speculative
    return {"speculative": {**r.to_dict(), "explain": explain_speculative(r)}}
