"""Chips left blank on the web API: the fewest chips that fit (analyses.serving.fewest_chips, the one rule), on every
serving endpoint, before the analysis runs; the answer's own "chips" then says how many. A request that names chips
or dp keeps them. No physics here."""
from __future__ import annotations

from tokenmath.faces.web.overrides import chip


def tokens_of(v, default: int) -> int:
    """A token count of a request (a count, or a simulated distribution's mean; blank: `default`)."""
    if v is None:
        return default
    if isinstance(v, str):
        from tokenmath.analyses.serving.simulation.workload import parse_lengths
        return max(int(round(parse_lengths(v, "input_len").moments()[0])), 1)
    return int(v)


def with_fewest_chips(m, a: dict, context: int, batch=1) -> dict:
    """The request `a` with its blank chips filled with the fewest that hold `batch` sequences of `context` tokens
    (batch None or "max": one); `a` itself when it names chips or dp, or when no count fits (its question then says
    why)."""
    if a.get("chips") is not None or a.get("dp") is not None:
        return a
    from tokenmath.analyses.serving.fewest_chips import fewest_chips
    b = batch if isinstance(batch, int) else 1
    n = fewest_chips(m, chip(a), context=context, batch=b, tp=a.get("tp"), pp=a.get("pp"), ep=a.get("ep"),
                     weight_dtype=a.get("weight_dtype"), kv_dtype=a.get("kv_dtype"), engine=a.get("engine"))
    return a if n is None else {**a, "chips": n}


def sequence_of(a: dict) -> int:
    """One sequence's tokens when its last token is made: input + output (blank: the declared 1,024 + 256)."""
    return tokens_of(a.get("input_len"), 1024) + tokens_of(a.get("output_len"), 256)
