"""Deduce one API endpoint from all its public evidence, adding one kind at a time, so that `--explain` can say which
evidence narrowed the interval and by how much (analyses/inverse/evidence.py reads the files)."""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.analyses.inverse.deduce import Deduction, Priors, deduce
from tokenmath.analyses.inverse.evidence import ApiEvidence, find
from tokenmath.base.errors import InputError


@dataclass(frozen=True)
class Step:
    """The deduction with the evidence kinds `kinds` (cumulative); `added` is the kind this step added. `error` is
    set when that kind contradicted the others under the priors: it is then left out of the later steps."""
    added: str
    kinds: tuple
    summary: dict | None
    error: str | None = None

    def width(self, key: str = "active_params_b") -> float | None:
        """high / low of the 80% interval (a factor)."""
        if not self.summary or not self.summary.get(key):
            return None
        iv = self.summary[key]
        return iv["high"] / iv["low"]

    def to_dict(self) -> dict:
        return {"added": self.added, "kinds": list(self.kinds), "error": self.error,
                "active_params_width": self.width(), "summary": self.summary}


@dataclass(frozen=True)
class ApiDeduction:
    evidence: ApiEvidence
    steps: tuple
    final: Deduction
    true_active_params_b: float | None = None    # open-weight models: the catalog's count
    true_total_params_b: float | None = None

    @property
    def price_only(self) -> Step:
        return self.steps[0]

    def flags(self) -> str:
        """The command line that asks the all-evidence question with flags (same_question.py): the same answer."""
        from tokenmath.analyses.inverse.same_question import as_flags
        last = [x for x in self.steps if x.summary][-1]
        return as_flags(self.evidence.deduce_kwargs(last.kinds))

    def to_dict(self) -> dict:
        """The all-evidence answer at the top level under the same keys as `deduce --input-price ...` (one meaning
        per key: active_params_b, total_params_b, kv_bytes_per_token, batch, ...), then how it was reached."""
        return {**self.final.summary, "evidence": self.evidence.to_dict(), "flags": self.flags(),
                "steps": [s.to_dict() for s in self.steps],
                "true_active_params_b": self.true_active_params_b, "true_total_params_b": self.true_total_params_b,
                "price_only": self.price_only.summary, "all_evidence": self.final.summary}


def deduce_api_model(name: str, provider: str | None = None, priors: Priors | None = None, kinds=None,
                     rows=None) -> ApiDeduction:
    """Deduce the endpoint `name` (data/api_prices.toml + data/api_evidence.toml) with price only, then each further
    kind of evidence it has (or only `kinds`), in evidence.KINDS order."""
    from tokenmath.analyses.inverse.evidence import KINDS
    for k in kinds or ():
        if k not in KINDS:
            from tokenmath.base.errors import unknown_name
            raise unknown_name("evidence", k, KINDS)
    ev = find(name, provider, rows)
    avail = [k for k in ev.available() if kinds is None or k in kinds or k == "price"]
    steps, used, final = [], [], None
    for k in avail:
        try:
            d = deduce(priors=priors, **ev.deduce_kwargs(tuple(used) + (k,)))
        except InputError as e:
            if k == "price":
                raise
            steps.append(Step(k, tuple(used) + (k,), None, str(e)))
            continue
        used.append(k)
        final = d
        steps.append(Step(k, tuple(used), d.summary))
    true = (None, None)
    if ev.catalog_id:
        from tokenmath.specs.model_catalog import get_model
        from tokenmath.specs.params import count_params
        c = count_params(get_model(ev.catalog_id))
        true = (c.active / 1e9, c.total / 1e9)
    return ApiDeduction(ev, tuple(steps), final, *true)
