"""Chips left blank on the web API: the fewest chips that fit (analyses.serving.fewest_chips.blank_chips, the one rule
the CLI and Python follow too), on every serving endpoint, before the analysis runs; the answer's own "chips" then
says how many. A request that names chips or dp keeps them. No physics here."""
from __future__ import annotations

from tokenmath.analyses.serving.fewest_chips import blank_chips, sequence_of as _sequence, tokens_of
from tokenmath.faces.web.overrides import chip

__all__ = ["tokens_of", "with_fewest_chips", "sequence_of"]


def with_fewest_chips(m, a: dict, context: int, batch=1) -> dict:
    """The request `a` with its blank chips filled with the fewest that hold `batch` sequences of `context` tokens
    (batch None or "max": one); `a` itself when it names chips or dp, or when no count fits (its question then says
    why)."""
    n = blank_chips(m, chip(a), chips=a.get("chips"), dp=a.get("dp"), context=context, batch=batch, tp=a.get("tp"),
                    pp=a.get("pp"), ep=a.get("ep"), weight_dtype=a.get("weight_dtype"), kv_dtype=a.get("kv_dtype"),
                    engine=a.get("engine"))
    return a if n is None or n == a.get("chips") else {**a, "chips": n}


def sequence_of(a: dict) -> int:
    """One sequence's tokens when its last token is made: input + output (blank: the declared 1,024 + 256)."""
    return _sequence(a.get("input_len"), a.get("output_len"))
