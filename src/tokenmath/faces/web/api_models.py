"""Deduce on the web API for a known API endpoint (data/api_prices.toml with data/api_evidence.toml): the `api_model`
choice, "provider: model" in lower case (the declared choices are matched case-insensitively, as evidence.find
matches), and its answer, `tokenmath deduce --api-model MODEL --provider PROVIDER`'s. No physics here."""
from __future__ import annotations

from functools import cache


@cache
def api_model_names() -> tuple[str, ...]:
    """Every API endpoint a deduce request may name, "provider: model", in the catalog's order."""
    from tokenmath.analyses.inverse.evidence import load
    return tuple(f"{r.provider}: {r.model}".lower() for r in load())


def api_model_response(row: str, priors) -> dict:
    """The endpoint `row` ("provider: model") deduced from all its shipped evidence: the same keys as a deduction
    from typed prices, with its evidence, the steps that narrowed it and, for open weights, the true counts."""
    from tokenmath.analyses.inverse.narrowing import deduce_api_model
    from tokenmath.faces.explain_inverse import explain_api_deduction
    provider, name = row.split(": ", 1)
    r = deduce_api_model(name, provider, priors)
    d = dict(r.to_dict())
    d["explain"] = explain_api_deduction(r, True)
    return d
