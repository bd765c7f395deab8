"""Deduce what hides behind an API price: active parameters, KV bytes per token, total parameters, batch regime.

Providers price near cost, so a price is cost / (utilization x (1 - margin)). What a provider does not publish
(hardware, its $/hour, margin, utilization, batch, dtype, context mix) are explicit priors below; every sample of
them plus a hypothetical model (active params, total params, KV bytes) predicts the prices through the engine's
closed form (engine/closed_form.py). Samples are weighted by how well they reproduce the observed prices (log-normal
price noise), and the answer is the weighted 10th/50th/90th percentiles: an 80% interval and a median.

What each price constrains:
- input price: prefill is compute-bound, so it measures 2 x active params per token at the chip's FLOP/s;
- output price: decode cost per token = weight fetch / batch + per-token FLOPs and KV reads: with the input
  price it pins the batch regime;
- cached-input price: holding a prompt's KV in HBM until reuse: KV bytes per token;
- long-context tier: the extra price per token above a threshold pays for KV reads: KV bytes per token;
- output speed: one decode step must read all weights within 1 / speed: bounds total params.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tokenmath.analyses.inverse.priors import (PRICE_NOISE, PRIOR_RANGES, SAMPLES, Priors, attention_prior,  # noqa: F401
                                                attn_flops_per_kv_byte, catalog_kv_coef,
                                                catalog_mla_attn_flops_per_kv_byte, check_priors, loguni,
                                                shipped_cost_scale)
from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.analyses.inverse import forward_model as fm
from tokenmath.engine.closed_form import decode_chip_s_per_token
from tokenmath.engine.economics import chip_s_of_usd, per_token, usd_per_s
from tokenmath.specs.hardware import get_hardware

_shipped_cost_scale = shipped_cost_scale   # the name tests and older callers use
ADAPTIVE_MAX = 1_600_000                   # most samples an under-weighted deduction retries with (about 1 GB)
# effective samples wanted before the weighted percentiles are trusted: with fewer, the 80% interval comes out too
# narrow (synthetic recovery, tests/test_deduce_evidence.py); below 30 the deduction is refused
ESS_WANTED = 100


def wquantile(x, w, qs):
    o = np.argsort(x)
    cw = np.cumsum(w[o])
    cw /= cw[-1]
    return [float(x[o][np.searchsorted(cw, q)]) for q in qs]


@dataclass
class Observed:
    input_price: float
    output_price: float
    cached_input_price: float | None = None
    long_threshold: float | None = None
    long_input_price: float | None = None
    long_output_price: float | None = None
    output_speed: float | None = None
    ttft_s: float | None = None
    ttft_prompt_tokens: float | None = None
    batch_discount: float | None = None
    context_window: float | None = None
    ttft_curve: tuple | None = None       # ((prompt tokens, TTFT s), ...), shortest first: prefill_evidence.py


@dataclass
class Deduction:
    observed: Observed
    priors: Priors
    summary: dict
    scenario: dict = field(default_factory=dict)

    def to_dict(self):
        return self.summary


def _check_price(v, field, required=True):
    if v is None:
        if required:
            raise InputError(field, "missing", "a price in $ per million tokens, greater than 0")
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", "a price in $ per million tokens") from None
    if not math.isfinite(f) or f <= 0:
        raise InputError(field, f"{v!r} is not a usable price", "a price in $ per million tokens, greater than 0")
    return f


def _check_threshold(v, field="long_context_threshold"):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", "tokens, e.g. 200000") from None
    if not (math.isfinite(f) and 1 <= f <= MAX_TOKENS):
        raise InputError(field, f"{v!r} is out of range", f"tokens from 1 to {MAX_TOKENS:,}")
    return f


def _check_positive(v, field, valid):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", valid) from None
    if not math.isfinite(f) or f <= 0:
        raise InputError(field, f"{v!r} is out of range", valid)
    return f


def _check_evidence(obs: Observed, ttft_s, ttft_prompt_tokens, batch_discount, context_window) -> None:
    obs.ttft_s = _check_positive(ttft_s, "ttft_s", "seconds to the first token, greater than 0")
    obs.ttft_prompt_tokens = _check_threshold(ttft_prompt_tokens, "ttft_prompt_tokens")
    if (obs.ttft_s is None) != (obs.ttft_prompt_tokens is None):
        raise InputError("ttft_prompt_tokens", "a time to first token needs the prompt length it was measured with",
                         "both --ttft and --ttft-prompt-tokens, or neither")
    obs.batch_discount = _check_positive(batch_discount, "batch_discount", "batch price / standard price in (0, 1]")
    if obs.batch_discount is not None and obs.batch_discount > 1:
        raise InputError("batch_discount", f"{batch_discount!r} is above 1", "batch price / standard price in (0, 1]")
    obs.context_window = _check_threshold(context_window, "context_window")


def deduce(input_price, output_price, *, cached_input_price=None, long_context_threshold=None, long_input_price=None,
           long_output_price=None, output_speed=None, ttft_s=None, ttft_prompt_tokens=None, batch_discount=None,
           context_window=None, ttft_curve=None, priors: Priors | None = None, hardware=None,
           calibrated: bool = True) -> Deduction:
    """Prices in $ per million tokens; output_speed in tokens/s per user; ttft_s in seconds for a prompt of
    ttft_prompt_tokens; batch_discount = batch price / standard price; context_window in tokens; ttft_curve: TTFTs
    at several prompt lengths, ((tokens, s), ...): how the TTFT grows with the prompt is the prefill rate (the
    shortest point is also the one-sided TTFT bound when ttft_s is not given). hardware: an id or list narrows the
    prior. Noise models: analyses/inverse/forward_model.py. calibrated: the 80% intervals of active and total params
    scaled so that 80% of held-out endpoints are covered (interval_calibration.py); False: the posterior's own."""
    pr = priors or Priors()
    if hardware:
        ids = [hardware] if isinstance(hardware, str) else list(hardware)
        pr = replace(pr, hardware=tuple((h, 1.0 / len(ids)) for h in ids))
    check_priors(pr)
    obs = Observed(_check_price(input_price, "input_price"), _check_price(output_price, "output_price"),
                   _check_price(cached_input_price, "cached_input_price", False),
                   _check_threshold(long_context_threshold),
                   _check_price(long_input_price, "long_input_price", False),
                   _check_price(long_output_price, "long_output_price", False),
                   _check_price(output_speed, "output_speed", False))
    _check_evidence(obs, ttft_s, ttft_prompt_tokens, batch_discount, context_window)
    if ttft_curve is not None:
        from tokenmath.analyses.inverse.prefill_evidence import check_curve
        obs.ttft_curve = check_curve(ttft_curve)
        if obs.ttft_s is None:
            obs.ttft_prompt_tokens, obs.ttft_s = obs.ttft_curve[0]
    if obs.long_threshold and (obs.long_output_price is None and obs.long_input_price is None):
        raise InputError("long_output_price", "a long-context threshold needs the prices above it",
                         "--long-input-price and/or --long-output-price")
    if obs.long_threshold is None and (obs.long_output_price is not None or obs.long_input_price is not None):
        raise InputError("long_context_threshold", "missing: a long-context price applies above a threshold",
                         "--long-context-threshold TOKENS, e.g. 200000")
    hws = [get_hardware(h) for h, _ in pr.hardware]
    for h in hws:
        if h.price_usd_per_hour is None:
            raise InputError("hardware", f"{h.id} has no $/chip-hour in the catalog", "a chip listed with a price")
    obsd = fm.observed_values(obs)
    n = int(pr.samples)
    while True:
        s = fm.draw(pr, hws, np.random.default_rng(pr.seed), n, obs)
        preds = fm.predict(s, obs, pr)
        ll = sum(fm.loglik_terms(preds, obsd, pr).values())
        w = np.exp(ll - ll.max())
        ess = float(w.sum() ** 2 / (w ** 2).sum())
        # many constraints together can leave too few samples to weight: draw 4x more, twice at most
        if ess >= ESS_WANTED or n >= min(ADAPTIVE_MAX, 16 * pr.samples) or ll.max() < -0.5 * 9 * len(preds):
            break
        n = min(4 * n, ADAPTIVE_MAX)
    if ess < 30 or ll.max() < -0.5 * 9 * len(preds):
        raise _inconsistent(preds, obsd)
    summary = summarize(s, w, obs, pr, hws, preds, ess)
    if calibrated:
        from tokenmath.analyses.inverse.interval_calibration import calibrate
        summary = calibrate(summary, obs)
    return Deduction(obs, pr, summary, _scenario(obs, pr, hws))


def summarize(s: dict, w, obs: Observed, pr: Priors, hws, preds: dict, ess: float) -> dict:
    """Weighted 10th/50th/90th percentiles of what the scenarios hide, and the posterior of chip and MoE."""
    qs = (0.1, 0.5, 0.9)

    def iv(x, scale=1.0):
        lo, med, hi_ = wquantile(x / scale, w, qs)
        return {"low": lo, "median": med, "high": hi_}

    kv_inf = [k for k in ("cached_input_price", "long_output_price", "long_input_price", "output_speed",
                          "context_window") if k in preds]
    kv_inf += [k for k in preds if k.startswith("prefill_") and int(k.rsplit("_", 1)[1]) > 10_000]
    mem_bound = (s["Nt"] * s["q"] / s["W"]) > (2 * s["Na"] * s["B"] / s["F"])
    hw_post = {h.id: float(w[s["hi"] == i].sum() / w.sum()) for i, h in enumerate(hws)}
    summary = {"observed": {k: v for k, v in obs.__dict__.items() if v is not None},
               "active_params_b": iv(s["Na"], 1e9), "total_params_b": iv(s["Nt"], 1e9),
               "kv_bytes_per_token": iv(s["K"]) if kv_inf else None, "kv_informed_by": kv_inf,
               "batch": iv(s["B"]), "p_moe": float(w[s["moe"]].sum() / w.sum()),
               "p_decode_memory_bound": float(w[mem_bound].sum() / w.sum()),
               "hardware_posterior": dict(sorted(hw_post.items(), key=lambda kv: -kv[1])),
               "samples": int(len(w)), "effective_samples": ess,
               "priors": {"hardware": [h for h, _ in pr.hardware], "margin": pr.margin, "utilization": pr.utilization,
                          "chip_cost_factor": pr.chip_cost_factor, "batch": pr.batch, "weight_dtype": s["dnames"],
                          "price_noise": pr.price_noise, "speed_noise": pr.speed_noise,
                          "prefill_noise": pr.prefill_noise,
                          "active_params": pr.active_params,
                          "attn_flops_per_kv_byte": {"mha_gqa": pr.attn_flops_per_kv_byte, "mla": pr.mla_range(),
                                                     "mla_share": pr.mla_share},
                          "cost_scale": pr.cost_scale}}
    if "chips" in s:
        summary["replica_chips"] = iv(s["chips"])
    if obs.ttft_curve:
        from tokenmath.analyses.inverse.prefill_evidence import pairs
        summary["ttft_curve_left_out"] = list(pairs(obs.ttft_curve)[1])
    # the posterior of active params on a log grid over the prior's range, for the chart of --explain
    edges = np.geomspace(*pr.active_params, 25)
    h, _ = np.histogram(s["Na"], bins=edges, weights=w)
    summary["active_params_posterior"] = {"edges_b": [float(e / 1e9) for e in edges],
                                          "weights": [float(x) for x in h / h.sum()]}
    return summary


def _inconsistent(preds, obsd) -> InputError:
    for k, pv in preds.items():
        lo, hi = np.percentile(pv, [0.5, 99.5])
        if obsd[k] < lo:
            return InputError(k, f"{obsd[k]:g} is below what any sampled provider could charge "
                                 f"(0.5th percentile {lo:.3g})",
                              "it contradicts the priors: selling below cost (margin < 0), chips cheaper than the "
                              "--chip-cost range, or a model below the active-params range; widen them")
        if obsd[k] > hi:
            return InputError(k, f"{obsd[k]:g} is above what the priors can produce (99.5th percentile {hi:.3g})",
                              "a margin or model beyond the priors' ranges; widen --margin or the params range")
    return InputError("output_price", "the prices are inconsistent with each other under the priors "
                      "(no sampled provider reproduces all of them)",
                      "check the units ($ per million tokens) or widen the priors (e.g. --noise)")


def _scenario(obs: Observed, pr: Priors, hws) -> dict:
    """The napkin inversion at the priors' middles, for --explain."""
    from tokenmath.specs.dtypes import get_dtype
    h = hws[int(np.argmax([w for _, w in pr.hardware]))]
    d = get_dtype(pr.weight_dtype[int(np.argmax([w for _, w in pr.weight_dtype]))][0])
    mid = lambda r: float(np.sqrt(r[0] * r[1])) if r[0] > 0 else (r[0] + r[1]) / 2  # noqa: E731
    cf, m, ut = mid(pr.chip_cost_factor), (pr.margin[0] + pr.margin[1]) / 2, (pr.utilization[0] + pr.utilization[1]) / 2
    fe, be, B = (pr.flops_eff[0] + pr.flops_eff[1]) / 2, (pr.bw_eff[0] + pr.bw_eff[1]) / 2, mid(pr.batch)
    usd_s = usd_per_s(1, h.price_usd_per_hour * cf)
    cs_in = chip_s_of_usd(per_token(obs.input_price) * (1 - m) * ut, usd_s) / pr.cost_scale
    cs_out = chip_s_of_usd(per_token(obs.output_price) * (1 - m) * ut, usd_s) / pr.cost_scale
    peak = h.peak_flops(d.compute)
    na = cs_in * peak * fe / 2
    pred_out = float(decode_chip_s_per_token(na, na, d.bytes, 0.0, 0.0, B, peak * fe, h.memory_bw * be))
    return {"hardware": h.id, "usd_per_hour": h.price_usd_per_hour, "cost_factor": cf, "margin": m, "utilization": ut,
            "usd_per_chip_s": usd_s, "chip_s_in": cs_in, "chip_s_out": cs_out, "peak": peak, "flops_eff": fe,
            "n_active_from_input": na, "batch": B, "chip_s_out_pred": pred_out}
