"""deduce's 80% interval, calibrated on endpoints whose truth is known (normalized split-conformal scaling).

The posterior's own 10th-90th percentiles are an 80% interval only if the priors are the population the endpoints
come from. They are wider than the market: on the provider table's open-weight endpoints (fit split, 2026-05-31)
the posterior interval of active params holds the truth in 89-94% of rows at 13-26x wide, while its median is off by
a factor of 1.6-1.9. So the interval deduce prints is the posterior's, scaled in log space about its median by q:

    low' = median x (low / median)^q,    high' = median x (high / median)^q

q is the 80th percentile, over the fit split's rows, of the normalized score of each row's truth t:
log(t / median) / log(high / median) above the median, log(t / median) / log(low / median) below it (the score is 1
where t sits on the posterior's own bound). A row whose score is at most q is covered by the scaled interval, so 80%
of the fit rows are, and rows drawn like them are covered at that rate (split conformal prediction with normalized
residuals: Lei, G'Sell, Rinaldo, Tibshirani, Wasserman 2018, "Distribution-free predictive inference for
regression", JASA 113(523), section 5.2; Romano, Patterson, Candes 2019, "Conformalized quantile regression",
NeurIPS). The posterior still sets where the interval is wide and where narrow; the data set only how far the
posterior's own percentiles are to be trusted. One q per evidence set (price; + output speed; + TTFT against prompt
length) and per quantity (active and total params), in data/deduce_calibration.toml [interval], rebuilt by
`python benchmarks/deduce_provider_table.py --fit-interval`.

Held out: the check split (2026-07-07, after the cut-off, never fitted on), each model left out of the fit split in
turn, and each provider left out (benchmarks/deduce_provider_table.py prints all three). Closed models and evidence
the table does not carry (cached-input prices, long-context tiers, batch discounts, context windows) are scaled with
the q of the set their speed and TTFT put them in: the rows behind q had none of that evidence, which the answer says.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SETS = ("price", "price+speed", "price+speed+ttft")
QUANTITIES = ("active_params_b", "total_params_b")
COVERAGE = 0.80


def evidence_set(obs) -> str:
    """The evidence set an Observed belongs to: what its speed and TTFT curve add to the prices."""
    if getattr(obs, "ttft_curve", None):
        return SETS[2]
    return SETS[1] if getattr(obs, "output_speed", None) is not None else SETS[0]


def scores(iv: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Normalized score of each row ((low, median, high) intervals, truth): 1 on the posterior's own bound, NaN
    where the deduction was refused."""
    lo, med, hi = iv[:, 0], iv[:, 1], iv[:, 2]
    r = np.log(true / med)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r >= 0, r / np.log(hi / med), r / np.log(lo / med))


def quantile(s: np.ndarray, coverage: float = COVERAGE) -> float:
    """The conformal quantile: the ceil((n + 1) coverage)-th smallest score of n (Lei et al. 2018, eq. 7), so the
    scaled interval covers a new row with probability >= coverage when rows are exchangeable."""
    s = np.sort(s[np.isfinite(s)])
    if s.size == 0:
        return float("nan")
    k = min(int(np.ceil((s.size + 1) * coverage)), s.size)
    return float(s[k - 1])


def scale(interval: dict, q: float) -> dict:
    """{'low', 'median', 'high'} scaled about the median by q (see the module docstring)."""
    m = interval["median"]
    return {"low": m * (interval["low"] / m) ** q, "median": m, "high": m * (interval["high"] / m) ** q}


def scale_rows(iv: np.ndarray, q: float) -> np.ndarray:
    med = iv[:, 1:2]
    return np.concatenate([med * (iv[:, 0:1] / med) ** q, med, med * (iv[:, 2:3] / med) ** q], axis=1)


@dataclass(frozen=True)
class IntervalScale:
    """The shipped q of one evidence set and quantity, with what it was fitted on."""
    evidence_set: str
    quantity: str
    q: float
    rows: int
    source: str

    def to_dict(self) -> dict:
        return {"evidence_set": self.evidence_set, "quantity": self.quantity, "q": self.q, "fit_rows": self.rows,
                "source": self.source}


def shipped(evidence: str, quantity: str) -> IntervalScale | None:
    """The q shipped for (evidence set, quantity); None when the file has none (the posterior's own interval)."""
    from tokenmath.specs.catalog import shipped as load
    try:
        iv = load("deduce_calibration.toml").get("interval", {})
    except FileNotFoundError:
        return None
    row = iv.get(evidence, {})
    if quantity not in row:
        return None
    return IntervalScale(evidence, quantity, float(row[quantity]), int(iv.get("rows", 0)),
                         f"data/deduce_calibration.toml [interval.\"{evidence}\"], {iv.get('source', '')}")


def calibrate(summary: dict, obs) -> dict:
    """The summary with active and total params' intervals scaled by the shipped q of obs's evidence set; the
    posterior's own intervals kept as '<quantity>_posterior', and 'interval_calibration' saying what was done."""
    ev = evidence_set(obs)
    extra = [k for k in ("cached_input_price", "long_input_price", "long_output_price", "batch_discount",
                         "context_window") if getattr(obs, k, None) is not None]
    done = {}
    for k in QUANTITIES:
        sc = shipped(ev, k)
        if sc is None or not np.isfinite(sc.q):
            continue
        summary[f"{k}_posterior"] = summary[k]
        summary[k] = scale(summary[k], sc.q)
        done[k] = sc.to_dict()
    summary["interval_calibration"] = {
        "evidence_set": ev, "scales": done, "coverage": COVERAGE,
        "note": ("the 80% interval is the posterior's scaled about its median so that 80% of held-out endpoints "
                 "are covered (analyses/inverse/interval_calibration.py)"
                 + (f"; the endpoints behind q had no {', '.join(extra)}: scaled as the '{ev}' set" if extra else ""))
        if done else "no calibration shipped: the posterior's own 10th-90th percentiles"}
    return summary
