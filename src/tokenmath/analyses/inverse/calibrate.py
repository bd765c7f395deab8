"""Deduce over the shipped API price rows (data/api_prices.toml): coverage of the 80% interval on open-weight models,
and the fit of Priors.cost_scale with leave-one-provider-out validation (data/deduce_calibration.toml)."""
from __future__ import annotations

import numpy as np

from tokenmath.analyses.inverse.deduce import Priors, deduce
from tokenmath.base.errors import InputError


def coverage(priors: Priors | None = None, rows=None) -> dict:
    """Run deduce over the shipped open-weight price rows: how often the true active params fall in the 80%
    interval, and the median error of the median (as a factor). Closed models: their deduced sizes."""
    from tokenmath.specs.catalog import shipped
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.params import count_params
    rows = rows if rows is not None else shipped("api_prices.toml").get("price", [])
    open_rows, closed_rows = [], []
    for r in rows:
        kw = dict(cached_input_price=r.get("cached_input_usd_per_mtok") or None,
                  long_context_threshold=r.get("long_context_threshold"),
                  long_input_price=r.get("long_input_usd_per_mtok"), long_output_price=r.get("long_output_usd_per_mtok"),
                  output_speed=r.get("output_tokens_per_s") or None, priors=priors)
        try:
            d = deduce(r["input_usd_per_mtok"], r["output_usd_per_mtok"], **kw).summary
        except InputError as e:
            d = {"error": str(e)}
        item = {"model": r["model"], "provider": r["provider"], "date": r.get("date"), "source": r.get("source"),
                "input_usd_per_mtok": r["input_usd_per_mtok"], "output_usd_per_mtok": r["output_usd_per_mtok"]}
        if "error" in d:
            item["error"] = d["error"]
        else:
            item["active_params_b"] = d["active_params_b"]
            item["total_params_b"] = d["total_params_b"]
        if r.get("open_weights") and r.get("catalog_id"):
            m = get_model(r["catalog_id"])
            true = count_params(m).active / 1e9
            item["true_active_params_b"] = true
            if "error" not in d:
                a = d["active_params_b"]
                item["inside_80"] = bool(a["low"] <= true <= a["high"])
                item["error_factor"] = float(max(a["median"], true) / min(a["median"], true))
            open_rows.append(item)
        elif not r.get("open_weights"):
            closed_rows.append(item)
    scored = [r for r in open_rows if "inside_80" in r]
    pr_used = priors or Priors()
    res = {"cost_scale": pr_used.cost_scale,
           "note": ("cost_scale was fitted on these open-weight rows, so their coverage here is in-sample; the "
                    "held-out figures (leave-one-provider-out) are in data/deduce_calibration.toml")
           if pr_used.cost_scale != 1.0 else "uncalibrated (cost_scale = 1)",
           "open_weight_rows": len(open_rows), "scored": len(scored),
           "coverage_80": (sum(r["inside_80"] for r in scored) / len(scored)) if scored else None,
           "median_error_factor": float(np.median([r["error_factor"] for r in scored])) if scored else None,
           "open": open_rows, "closed": closed_rows}
    return res


COST_SCALE_GRID = tuple(float(x) for x in np.geomspace(0.25, 8.0, 16))


def calibrate_cost_scale(rows=None, samples: int = 40_000) -> dict:
    """Fit Priors.cost_scale on the open-weight rows of data/api_prices.toml: for each candidate scale, deduce every
    row; choose the scale with the smallest median |log(median / true active params)|. Held-out figures come from
    leave-one-provider-out (each provider's rows are deduced with a scale fitted on the other providers)."""
    from tokenmath.specs.catalog import shipped
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.params import count_params
    rows = rows if rows is not None else shipped("api_prices.toml").get("price", [])
    rows = [r for r in rows if r.get("open_weights") and r.get("catalog_id")]
    truth = np.array([count_params(get_model(r["catalog_id"])).active / 1e9 for r in rows])
    med = np.full((len(rows), len(COST_SCALE_GRID)), np.nan)
    lo, hi = med.copy(), med.copy()
    for j, c in enumerate(COST_SCALE_GRID):
        pr = Priors(samples=samples, cost_scale=c)
        for i, r in enumerate(rows):
            try:
                a = deduce(r["input_usd_per_mtok"], r["output_usd_per_mtok"],
                           cached_input_price=r.get("cached_input_usd_per_mtok") or None,
                           long_context_threshold=r.get("long_context_threshold"),
                           long_input_price=r.get("long_input_usd_per_mtok"),
                           long_output_price=r.get("long_output_usd_per_mtok"),
                           output_speed=r.get("output_tokens_per_s") or None, priors=pr).summary["active_params_b"]
            except InputError:
                continue
            med[i, j], lo[i, j], hi[i, j] = a["median"], a["low"], a["high"]
    err = np.abs(np.log(med / truth[:, None]))

    def best(mask):
        e = np.nanmedian(err[mask], axis=0)
        return int(np.nanargmin(e))
    providers = sorted({r["provider"] for r in rows})
    prov = np.array([r["provider"] for r in rows])
    held_err, held_in = [], []
    for p in providers:
        j = best(prov != p)
        for i in np.nonzero(prov == p)[0]:
            if np.isfinite(med[i, j]):
                held_err.append(float(np.exp(err[i, j])))
                held_in.append(bool(lo[i, j] <= truth[i] <= hi[i, j]))
    j_all = best(np.ones(len(rows), bool))
    j1 = int(np.argmin(np.abs(np.array(COST_SCALE_GRID) - 1.0)))
    return {"cost_scale": COST_SCALE_GRID[j_all], "rows": len(rows), "providers": len(providers),
            "heldout_median_error_factor": float(np.median(held_err)), "heldout_coverage_80": float(np.mean(held_in)),
            "uncalibrated_median_error_factor": float(np.exp(np.nanmedian(err[:, j1]))),
            "uncalibrated_coverage_80": float(np.nanmean((lo[:, j1] <= truth) & (truth <= hi[:, j1])))}
