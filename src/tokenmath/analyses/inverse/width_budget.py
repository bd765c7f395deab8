"""Which unknown makes deduce's interval wide: the 80% interval of active params re-deduced with ONE hidden prior
pinned to the middle of its range (everything else as in priors.Priors), for the same evidence.

A prior whose pinning narrows the interval most is the one the evidence does not resolve. Pinning changes the
answer's median as well as its width (the truth need not sit at the middle), so this measures the width budget only,
not accuracy. Middles: geometric for the log-uniform ranges (chip $/h factor, batch, context, prompt length, cache
TTL), arithmetic for the uniform ones (margin, utilization, FLOP/s and bandwidth efficiency); the chip and the weight
dtype are pinned to the prior's most likely choice (h100-sxm, fp8); "moe" pins the model to dense (moe_share 0);
"attention" rules out MLA (mla_share 0: GQA/MHA's attention FLOPs per KV byte only). "all provider unknowns" pins
every prior except the model's own (active params, MoE, KV, attention): the width left then comes from the noise
models and the model unknowns; "all provider unknowns + attention" pins the attention type as well.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.base.errors import InputError

LOG_UNIFORM = ("chip_cost_factor", "batch", "context", "prompt_len")
UNIFORM = ("margin", "utilization", "flops_eff", "bw_eff")
CHOICES = ("hardware", "weight_dtype")
MODEL = ("moe", "attention")
PROVIDER_UNKNOWNS = LOG_UNIFORM + UNIFORM + CHOICES
UNKNOWNS = PROVIDER_UNKNOWNS + MODEL


def pinned(pr: Priors, name: str) -> Priors:
    """`pr` with the prior `name` pinned to one value (see the module docstring for which value)."""
    if name in LOG_UNIFORM:
        lo, hi = getattr(pr, name)
        m = math.sqrt(lo * hi)
        return replace(pr, **{name: (m, m)})
    if name in UNIFORM:
        lo, hi = getattr(pr, name)
        m = 0.5 * (lo + hi)
        return replace(pr, **{name: (m, m)})
    if name in CHOICES:
        best = max(getattr(pr, name), key=lambda c: c[1])[0]
        return replace(pr, **{name: ((best, 1.0),)})
    if name == "moe":
        return replace(pr, moe_share=0.0)
    if name == "attention":
        return replace(pr, mla_share=0.0)
    raise InputError("unknown", f"{name!r} is not a prior deduce can pin", "one of " + ", ".join(UNKNOWNS))


@dataclass(frozen=True)
class Pin:
    """The 80% interval of active params (B) with `name` pinned; `narrower`: base width / this width."""
    name: str
    low_b: float
    median_b: float
    high_b: float
    narrower: float

    @property
    def width(self) -> float:
        return self.high_b / self.low_b

    def to_dict(self) -> dict:
        return {"name": self.name, "low_b": self.low_b, "median_b": self.median_b, "high_b": self.high_b,
                "width": self.width, "narrower": self.narrower}


@dataclass(frozen=True)
class WidthBudget:
    """The base deduction's interval and, per pinned unknown, how much narrower it comes out."""
    base_low_b: float
    base_median_b: float
    base_high_b: float
    pins: tuple

    @property
    def base_width(self) -> float:
        return self.base_high_b / self.base_low_b

    def dominant(self) -> Pin:
        """The single unknown whose pinning narrows the interval most (the "all" pin excluded)."""
        return max((p for p in self.pins if not p.name.startswith("all ")), key=lambda p: p.narrower)

    def to_dict(self) -> dict:
        return {"base": {"low_b": self.base_low_b, "median_b": self.base_median_b, "high_b": self.base_high_b,
                         "width": self.base_width},
                "pins": [p.to_dict() for p in self.pins], "dominant": self.dominant().name}


def _interval(pr: Priors, kwargs: dict) -> tuple[float, float, float]:
    a = deduce(priors=pr, **kwargs).summary["active_params_b"]
    return a["low"], a["median"], a["high"]


def width_budget(kwargs: dict, priors: Priors | None = None, names=UNKNOWNS, with_all: bool = True) -> WidthBudget:
    """Deduce with `kwargs` (deduce's keyword arguments: prices, speed, ...) once as given and once per pinned
    unknown of `names` (same seed, so the differences are the pin's, not Monte Carlo noise of a new draw)."""
    pr = priors or Priors()
    lo, med, hi = _interval(pr, kwargs)
    pins = []
    todo = [(n, pinned(pr, n)) for n in names]
    if with_all:
        allp = pr
        for n in PROVIDER_UNKNOWNS:
            allp = pinned(allp, n)
        todo += [("all provider unknowns", allp), ("all provider unknowns + attention", pinned(allp, "attention"))]
    for name, p in todo:
        a, m, b = _interval(p, kwargs)
        pins.append(Pin(name, a, m, b, (hi / lo) / (b / a)))
    return WidthBudget(lo, med, hi, tuple(pins))


def median_budget(rows, kinds, priors: Priors | None = None, names=UNKNOWNS) -> dict:
    """Over endpoints `rows` (evidence.ApiEvidence) deduced with evidence `kinds`: the median base width and, per
    unknown, the median width with it pinned and the median narrowing factor. A row whose evidence the priors cannot
    reproduce with some pin (deduce refuses it) is left out and counted in "refused"."""
    budgets, refused = [], 0
    for r in rows:
        try:
            budgets.append(width_budget(r.deduce_kwargs(kinds), priors, names))
        except InputError:
            refused += 1
    out = {"rows": len(budgets), "refused": refused, "median_base_width": float(np.median([b.base_width for b in budgets])), "pins": {}}
    for i, p in enumerate(budgets[0].pins if budgets else ()):
        out["pins"][p.name] = {"median_width": float(np.median([b.pins[i].width for b in budgets])),
                               "median_narrower": float(np.median([b.pins[i].narrower for b in budgets]))}
    return out
