"""The forward model of `tokenmath deduce`: draw hypothetical (model, provider) pairs from the priors, predict every
observable of an API through the engine's closed form, and score each prediction by its stated noise model.

One draw is a whole scenario: active and total params, KV bytes per token, attention FLOPs per KV byte (g), weight
dtype, chip, its $/h, margin, utilization, batch, context, prompt length, and (when speed, TTFT or a context window
is observed) the chips of one replica. Every observable of the same draw comes from the same scenario, so the
inference is joint: the batch that reproduces the output/input price ratio is the batch at which the decode step
must also reproduce the measured speed.

Noise models (log-space; sd = standard deviation of log(observed / predicted)):
- prices: two-sided, Priors.price_noise (0.30: rounding and pricing strategy);
- output speed: two-sided, Priors.speed_noise (0.5: independent measurements of one endpoint spread by up to ~3x,
  data/api_evidence.toml, e.g. GPT-4o 31.7 vs 45 t/s, DeepSeek 21 vs 50 t/s); the step it inverts is the roofline
  step plus a per-step CPU time the roofline leaves out (Priors.step_overhead_s: the serving engines' 0-5 ms);
- time to first token: one-sided, SPEED's sd: the prefill of the benchmark prompt on one replica cannot take longer
  than the TTFT (queueing and network only add to it), a penalty only when the prediction exceeds it;
- batch (asynchronous) discount: one-sided, price_noise: the batch price covers the compute floor (decode at an
  unbounded batch, every paid chip-second busy: utilization 1) with the provider's margin;
- context window: one-sided, price_noise: weights plus the KV of one full window fit in the replica's HBM;
- TTFT against prompt length (ttft_curve): how much the TTFT grows between two prompt lengths is the prefill of the
  extra tokens on one replica, two-sided, Priors.prefill_noise (prefill_evidence.py states and tests it).
"""
from __future__ import annotations

import numpy as np

from tokenmath.analyses.inverse import prefill_evidence as pe
from tokenmath.analyses.inverse.priors import attention_prior, catalog_kv_coef, loguni
from tokenmath.engine.closed_form import decode_chip_s_per_token, decode_step_s, prefill_chip_s_per_token
from tokenmath.engine.economics import (cost_per_mtok, holding_cost_per_token, per_mtok, usd_of_chip_s,
                                        usd_per_byte_s_of, usd_per_s)

FLOOR_BATCH = 1e6        # "unbounded" batch of the compute floor: weight fetches amortized to nothing
PRICE_KINDS = ("input_price", "output_price", "cached_input_price", "long_output_price", "long_input_price")
ONE_SIDED = ("ttft_s", "batch_output_price", "context_window")


def needs_chips(obs) -> bool:
    return any(getattr(obs, k, None) is not None for k in ("output_speed", "ttft_s", "context_window", "ttft_curve"))


def draw(pr, hws, rng, n: int, obs) -> dict:
    """n scenarios from the priors, as arrays. The order of the random draws is fixed (a price-only deduction
    draws exactly what it drew before speed, TTFT and context windows existed, so its answer is unchanged)."""
    from tokenmath.specs.dtypes import get_dtype
    p = np.array([w for _, w in pr.hardware], float)
    hi = rng.choice(len(hws), size=n, p=p / p.sum())
    dnames = [d for d, _ in pr.weight_dtype]
    dp = np.array([w for _, w in pr.weight_dtype], float)
    di = rng.choice(len(dnames), size=n, p=dp / dp.sum())
    dts = [get_dtype(d) for d in dnames]
    peak = np.array([[h.peak_flops(d.compute) for d in dts] for h in hws])[hi, di]
    s = {"hi": hi, "dnames": dnames, "peak": peak, "q": np.array([d.bytes for d in dts])[di],
         "hbm": np.array([h.memory_bytes for h in hws])[hi]}
    bw = np.array([h.memory_bw for h in hws])[hi]
    s["usd_h"] = np.array([h.price_usd_per_hour for h in hws])[hi] * loguni(rng, *pr.chip_cost_factor, n)
    s["margin"] = rng.uniform(*pr.margin, n)
    s["util"] = rng.uniform(*pr.utilization, n)
    s["F"] = peak * rng.uniform(*pr.flops_eff, n)
    s["W"] = bw * rng.uniform(*pr.bw_eff, n)
    s["B"] = loguni(rng, *pr.batch, n)
    s["ctx"] = loguni(rng, *pr.context, n)
    s["L"] = loguni(rng, *pr.prompt_len, n)
    s["Na"] = loguni(rng, *pr.active_params, n)
    s["moe"] = rng.random(n) < pr.moe_share
    s["Nt"] = s["Na"] * np.where(s["moe"], loguni(rng, *pr.moe_ratio, n), 1.0)
    kc = pr.kv_coef or catalog_kv_coef()
    s["g"], kv_scale = attention_prior(pr, rng, n)
    s["K"] = loguni(rng, *kc, n) * np.sqrt(s["Na"]) * kv_scale
    if obs.cached_input_price is not None:
        s["ttl"] = loguni(rng, *pr.cache_ttl_s, n)
    if needs_chips(obs):
        # tensor-parallel replica: a power of two up to the chip's scale-up domain (capped at chips_max)
        dom = np.array([min(h.scaleup_domain, pr.chips_max) for h in hws])[hi]
        s["chips"] = np.minimum(2.0 ** np.floor(rng.uniform(0, np.log2(np.maximum(dom, 1)) + 1, n)), dom)
        # drawn last, so every earlier draw (and a deduction without speed) is what it was without it
        s["t0"] = rng.uniform(*pr.step_overhead_s, n)
    return s


def predict(s: dict, obs, pr) -> dict:
    """Every observable that `obs` carries, predicted for each scenario of `s` (prices in $/Mtok, cost_scale
    applied; speed in tokens/s; TTFT in s; context window as the bytes one full window needs)."""
    Na, Nt, q, K, g, F, W, B = (s[k] for k in ("Na", "Nt", "q", "K", "g", "F", "W", "B"))
    usd_s = usd_per_s(1, s["usd_h"])                       # $ per chip-second (engine/economics: every $ figure)
    eff_usd_s = usd_s / (s["util"] * (1 - s["margin"]))   # $ per chip-second of useful serving, margin included
    out = {"input_price": cost_per_mtok(prefill_chip_s_per_token(Na, Nt, q, K, s["L"], B, F, W, g), eff_usd_s),
           "output_price": cost_per_mtok(decode_chip_s_per_token(Na, Nt, q, K, s["ctx"], B, F, W, g), eff_usd_s)}
    if obs.cached_input_price is not None:
        out["cached_input_price"] = per_mtok(holding_cost_per_token(K, s["ttl"], usd_per_byte_s_of(usd_s, s["hbm"]))
                                             / (s["util"] * (1 - s["margin"])))
    if obs.long_threshold:
        lc = 1.5 * obs.long_threshold      # a long request's context sits between the threshold and ~2x it
        if obs.long_output_price is not None:
            out["long_output_price"] = cost_per_mtok(decode_chip_s_per_token(Na, Nt, q, K, np.maximum(s["ctx"], lc),
                                                                             B, F, W, g), eff_usd_s)
        if obs.long_input_price is not None:
            out["long_input_price"] = cost_per_mtok(prefill_chip_s_per_token(Na, Nt, q, K, np.maximum(s["L"], lc),
                                                                             B, F, W, g), eff_usd_s)
    if obs.batch_discount is not None:
        floor = decode_chip_s_per_token(Na, Nt, q, K, s["ctx"], FLOOR_BATCH, F, W, g)
        out["batch_output_price"] = per_mtok(usd_of_chip_s(floor, usd_s) / (1 - s["margin"]))
    for k in PRICE_KINDS + ("batch_output_price",):
        if k in out:
            out[k] = out[k] * pr.cost_scale
    if obs.output_speed is not None:
        out["output_speed"] = 1.0 / (decode_step_s(Na, Nt, q, K, s["ctx"], B, F, W, s["chips"], g) + s["t0"])
    if obs.ttft_s is not None:
        Lb = obs.ttft_prompt_tokens
        out["ttft_s"] = prefill_chip_s_per_token(Na, Nt, q, K, Lb, 1.0, F, W, g) * Lb / s["chips"]
    if obs.context_window is not None:
        out["context_window"] = (Nt * q + K * obs.context_window) / (s["chips"] * s["hbm"])
    out.update(pe.predict(s, obs, pr.prefill_scale))
    return out


def observed_values(obs) -> dict:
    """What each prediction is compared with (the one-sided ones: the bound it must not exceed)."""
    v = {k: getattr(obs, k) for k in PRICE_KINDS + ("output_speed", "ttft_s")}
    if obs.batch_discount is not None:
        v["batch_output_price"] = obs.batch_discount * obs.output_price
    if obs.context_window is not None:
        v["context_window"] = 1.0     # the bytes of weights + one window over the replica's HBM: at most 1
    v.update(pe.observed(obs))
    return {k: x for k, x in v.items() if x is not None}


def noise(kind: str, pr) -> float:
    if pe.is_prefill(kind):
        return pr.prefill_noise
    return pr.speed_noise if kind in ("output_speed", "ttft_s") else pr.price_noise


def loglik_terms(preds: dict, obsd: dict, pr) -> dict:
    """Log-likelihood of each observable for each scenario: Gaussian in log space, one-sided for ONE_SIDED (no
    penalty while the prediction stays within the bound)."""
    out = {}
    for k, pv in preds.items():
        x = np.log(pv / obsd[k])
        if k in ONE_SIDED or pe.is_bound(k):
            x = np.maximum(x, 0.0)
        out[k] = -0.5 * (x / noise(k, pr)) ** 2
    return out
