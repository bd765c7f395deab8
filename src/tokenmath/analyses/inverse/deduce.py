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

from tokenmath.engine.closed_form import decode_chip_s_per_token, decode_step_s, prefill_chip_s_per_token
from tokenmath.engine.forward import pair_flops
from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kv_cache import kv_values_per_token_per_layer


@dataclass(frozen=True)
class Priors:
    """Documented defaults; each range is uniform unless marked log-uniform."""
    # assumed mix of inference fleets (chips with a catalog price); --hardware replaces it
    hardware: tuple = (("h100-sxm", 0.30), ("h200", 0.25), ("b200", 0.15), ("gb200-nvl72", 0.10),
                       ("mi300x", 0.10), ("tpu-v5p", 0.10))
    # providers own or reserve capacity below on-demand rental: multiplier on the catalog $/h (log-uniform)
    chip_cost_factor: tuple = (0.4, 1.2)
    margin: tuple = (0.0, 0.75)          # gross margin: price = cost / (1 - margin)
    utilization: tuple = (0.3, 0.8)      # share of paid chip time that serves at the planned batch
    flops_eff: tuple = (0.3, 0.7)        # achieved fraction of peak FLOP/s in prefill and compute-bound decode
    bw_eff: tuple = (0.5, 0.9)           # achieved fraction of HBM bandwidth in decode
    weight_dtype: tuple = (("fp8", 0.55), ("bf16", 0.30), ("fp4", 0.15))
    batch: tuple = (4.0, 512.0)          # concurrent sequences per replica (log-uniform)
    context: tuple = (500.0, 16000.0)    # mean tokens in the KV cache while decoding (log-uniform)
    prompt_len: tuple = (500.0, 8000.0)  # prompt tokens per request (log-uniform)
    active_params: tuple = (3e8, 3e12)   # log-uniform
    moe_share: float = 0.5               # probability that the model is a MoE
    moe_ratio: tuple = (2.0, 50.0)       # total / active params of a MoE (log-uniform)
    kv_coef: tuple | None = None         # KV bytes per token / sqrt(active params), bf16; None: from the catalog
    kv_fp8_share: float = 0.5            # probability the KV cache is stored in fp8 (half the bytes, so twice the g)
    # g in engine/closed_form.py: attention FLOPs per byte of bf16 KV read (attn_flops_per_kv_byte below). MHA 1,
    # GQA the query heads per KV head (Llama 3.1 70B: 8; the catalog's GQA models span 2-16), log-uniform
    attn_flops_per_kv_byte: tuple = (1.0, 16.0)
    # MLA (DeepSeek-V2/V3, Kimi K2) reads a compressed latent shared by all heads: DeepSeek-V3's g is 241.8.
    # mla_share: probability the attention is MLA (21 of the 93 open-weight rows of data/api_prices.toml are MLA
    # models); mla_attn_flops_per_kv_byte: its g range, None = the catalog's MLA models widened 1.5x (log-uniform)
    mla_share: float = 0.2
    mla_attn_flops_per_kv_byte: tuple | None = None
    cache_ttl_s: tuple = (60.0, 3600.0)  # how long a cached prompt's KV waits in HBM (log-uniform)
    chips_max: int = 72                  # largest replica considered for the speed bound
    price_noise: float = 0.30            # log-sd between a price and cost/(u(1-m)): rounding and strategy
    # list price / the closed form's cost at the priors: fitted on the shipped open-weight prices with
    # leave-one-provider-out validation (calibrate.calibrate_cost_scale; data/deduce_calibration.toml); 1.0 = uncalibrated
    cost_scale: float = field(default_factory=lambda: _shipped_cost_scale())
    samples: int = 200_000
    seed: int = 0

    def mla_range(self) -> tuple[float, float]:
        return self.mla_attn_flops_per_kv_byte or catalog_mla_attn_flops_per_kv_byte()


def _shipped_cost_scale() -> float:
    from tokenmath.specs.catalog import shipped
    try:
        return float(shipped("deduce_calibration.toml").get("cost_scale", 1.0))
    except FileNotFoundError:
        return 1.0


def catalog_kv_coef() -> tuple[float, float]:
    """Range of KV bytes per token / sqrt(active params) over the catalog (bf16 KV), widened 1.5x each way."""
    from tokenmath.specs.kv_cache import kv_bytes_per_token
    from tokenmath.specs.model_catalog import get_model, model_ids
    from tokenmath.specs.params import count_params
    r = [kv_bytes_per_token(m, 2.0) / math.sqrt(count_params(m).active) for m in map(get_model, model_ids())]
    return min(r) / 1.5, max(r) * 1.5


def attn_flops_per_kv_byte(m, kv_bytes: float = 2.0) -> float:
    """Decode attention FLOPs per byte of KV read (g of engine/closed_form.py): the engine's FLOPs per (query, cached
    token) pair of one layer over the KV bytes that token holds in that layer."""
    return pair_flops(m, "decode") / (kv_values_per_token_per_layer(m) * kv_bytes)


def catalog_mla_attn_flops_per_kv_byte() -> tuple[float, float]:
    """Range of g (bf16 KV) over the catalog's MLA models, widened 1.5x each way (as catalog_kv_coef)."""
    from tokenmath.specs.model_catalog import get_model, model_ids
    r = [attn_flops_per_kv_byte(m) for m in map(get_model, model_ids()) if m.is_mla]
    return min(r) / 1.5, max(r) * 1.5


def attention_prior(pr: "Priors", rng, n):
    """(g, kv_scale) per sample: g from the MLA range with probability mla_share, else from the MHA/GQA range, at
    bf16 KV; with probability kv_fp8_share the KV is fp8: half the bytes per token (kv_scale 0.5), so twice the g."""
    mla = rng.random(n) < pr.mla_share
    g = np.where(mla, _loguni(rng, *pr.mla_range(), n), _loguni(rng, *pr.attn_flops_per_kv_byte, n))
    kv_scale = np.where(rng.random(n) < pr.kv_fp8_share, 0.5, 1.0)
    return g / kv_scale, kv_scale


# Physical ranges of the priors and options (check_priors): outside them the answer means nothing.
PRIOR_RANGES = {
    "margin": (0.0, 0.95, "a gross margin: fractions LOW,HIGH within [0, 0.95] (0.95 = price 20x cost)"),
    "utilization": (0.01, 1.0, "fractions LOW,HIGH within [0.01, 1] of paid chip time serving at the planned batch"),
    "batch": (1.0, 1e5, "concurrent sequences per replica, LOW,HIGH within [1, 100000]"),
    "chip_cost_factor": (0.01, 100.0, "multipliers LOW,HIGH on the catalog $/chip-hour within [0.01, 100]"),
    "context": (1.0, float(MAX_TOKENS), f"tokens LOW,HIGH within [1, {MAX_TOKENS:,}]"),
    "prompt_len": (1.0, float(MAX_TOKENS), f"tokens LOW,HIGH within [1, {MAX_TOKENS:,}]"),
    "active_params": (1e6, 1e15, "parameters LOW,HIGH within [1e6, 1e15]"),
    "moe_ratio": (1.0, 1e4, "total / active parameters LOW,HIGH within [1, 10000]"),
    "attn_flops_per_kv_byte": (0.1, 1e4, "FLOPs per KV byte LOW,HIGH within [0.1, 10000]"),
    "cache_ttl_s": (1.0, 1e7, "seconds LOW,HIGH within [1, 1e7]"),
}
PRICE_NOISE = (0.01, 3.0)   # log-sd: 1% (price rounding) to a factor e^3 = 20 per sd (prices carry no information)
SAMPLES = (1_000, 2_000_000)


def check_priors(pr: "Priors") -> None:
    """Every range inside its physical bounds (PRIOR_RANGES), or an InputError naming the prior."""
    hw = pr.hardware
    if not hw or any(not (isinstance(w, (int, float)) and w > 0) for _, w in hw):
        raise InputError("hardware", f"{hw!r} is not a hardware prior", "one or more catalog chip ids with a price, "
                         "e.g. h100-sxm,h200 (each with a positive weight)")
    for name, (lo, hi, valid) in PRIOR_RANGES.items():
        v = getattr(pr, name)
        try:
            a, b = (float(x) for x in v)
        except (TypeError, ValueError):
            raise InputError(name, f"{v!r} is not a range LOW,HIGH", valid) from None
        if not (math.isfinite(a) and math.isfinite(b) and lo <= a <= b <= hi):
            raise InputError(name, f"{a:g},{b:g} is outside the physical range", valid)
    for name, v in (("moe_share", pr.moe_share), ("mla_share", pr.mla_share), ("kv_fp8_share", pr.kv_fp8_share)):
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise InputError(name, f"{v!r} is not a probability", "a number in [0, 1]")
    if not (isinstance(pr.price_noise, (int, float)) and PRICE_NOISE[0] <= pr.price_noise <= PRICE_NOISE[1]):
        raise InputError("price_noise", f"{pr.price_noise!r} is out of range",
                         f"a log-sd from {PRICE_NOISE[0]:g} (prices known to 1%) to {PRICE_NOISE[1]:g} (a factor "
                         "e^3 = 20 per sd; beyond it the prices are ignored and the answer is the prior)")
    if not (isinstance(pr.cost_scale, (int, float)) and 0.01 <= pr.cost_scale <= 100):
        raise InputError("cost_scale", f"{pr.cost_scale!r} is out of range", "a factor in [0.01, 100]")
    if isinstance(pr.samples, bool) or not isinstance(pr.samples, int) or not SAMPLES[0] <= pr.samples <= SAMPLES[1]:
        raise InputError("samples", f"{pr.samples!r} is out of range",
                         f"an integer from {SAMPLES[0]:,} (fewer cannot weight the priors) to {SAMPLES[1]:,} "
                         "(memory: about 1 GB)")


def _loguni(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


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


def _check_threshold(v):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError("long_context_threshold", f"{v!r} is not a number", "tokens, e.g. 200000") from None
    if not (math.isfinite(f) and 1 <= f <= MAX_TOKENS):
        raise InputError("long_context_threshold", f"{v!r} is out of range", f"tokens from 1 to {MAX_TOKENS:,}")
    return f


def deduce(input_price, output_price, *, cached_input_price=None, long_context_threshold=None, long_input_price=None,
           long_output_price=None, output_speed=None, priors: Priors | None = None, hardware=None) -> Deduction:
    """Prices in $ per million tokens; output_speed in tokens/s per user. hardware: an id or list narrows the prior."""
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
    rng = np.random.default_rng(pr.seed)
    n = int(pr.samples)
    p = np.array([w for _, w in pr.hardware], float)
    hi = rng.choice(len(hws), size=n, p=p / p.sum())
    dnames = [d for d, _ in pr.weight_dtype]
    dp = np.array([w for _, w in pr.weight_dtype], float)
    di = rng.choice(len(dnames), size=n, p=dp / dp.sum())
    from tokenmath.specs.dtypes import get_dtype
    dts = [get_dtype(d) for d in dnames]
    peak_tab = np.array([[h.peak_flops(d.compute) for d in dts] for h in hws])
    peak = peak_tab[hi, di]
    q = np.array([d.bytes for d in dts])[di]
    bw = np.array([h.memory_bw for h in hws])[hi]
    hbm = np.array([h.memory_bytes for h in hws])[hi]
    usd_h = np.array([h.price_usd_per_hour for h in hws])[hi] * _loguni(rng, *pr.chip_cost_factor, n)
    margin = rng.uniform(*pr.margin, n)
    util = rng.uniform(*pr.utilization, n)
    F = peak * rng.uniform(*pr.flops_eff, n)
    W = bw * rng.uniform(*pr.bw_eff, n)
    B = _loguni(rng, *pr.batch, n)
    ctx = _loguni(rng, *pr.context, n)
    L = _loguni(rng, *pr.prompt_len, n)
    Na = _loguni(rng, *pr.active_params, n)
    moe = rng.random(n) < pr.moe_share
    Nt = Na * np.where(moe, _loguni(rng, *pr.moe_ratio, n), 1.0)
    kc = pr.kv_coef or catalog_kv_coef()
    g, kv_scale = attention_prior(pr, rng, n)
    K = _loguni(rng, *kc, n) * np.sqrt(Na) * kv_scale
    eff_usd_s = usd_h / 3600.0 / (util * (1 - margin))     # $ per chip-second of useful serving, margin included

    preds = {"input_price": prefill_chip_s_per_token(Na, Nt, q, K, L, B, F, W, g) * eff_usd_s * 1e6,
             "output_price": decode_chip_s_per_token(Na, Nt, q, K, ctx, B, F, W, g) * eff_usd_s * 1e6}
    if obs.cached_input_price is not None:
        ttl = _loguni(rng, *pr.cache_ttl_s, n)
        preds["cached_input_price"] = K * ttl * (usd_h / 3600.0 / hbm) / (util * (1 - margin)) * 1e6
    if obs.long_threshold:
        lc = 1.5 * obs.long_threshold      # a long request's context sits between the threshold and ~2x it
        if obs.long_output_price is not None:
            preds["long_output_price"] = decode_chip_s_per_token(Na, Nt, q, K, np.maximum(ctx, lc), B, F, W, g) * eff_usd_s * 1e6
        if obs.long_input_price is not None:
            preds["long_input_price"] = prefill_chip_s_per_token(Na, Nt, q, K, np.maximum(L, lc), B, F, W, g) * eff_usd_s * 1e6
    if obs.output_speed is not None:
        dom = np.array([min(h.scaleup_domain, pr.chips_max) for h in hws])[hi]
        chips = np.minimum(2.0 ** np.floor(rng.uniform(0, np.log2(np.maximum(dom, 1)) + 1, n)), dom)
        preds["output_speed"] = 1.0 / decode_step_s(Na, Nt, q, K, ctx, B, F, W, chips, g)
    obsd = {k: getattr(obs, {"input_price": "input_price", "output_price": "output_price",
                             "cached_input_price": "cached_input_price", "long_output_price": "long_output_price",
                             "long_input_price": "long_input_price", "output_speed": "output_speed"}[k]) for k in preds}
    for k in preds:
        if k != "output_speed":
            preds[k] = preds[k] * pr.cost_scale
    ll = np.zeros(n)
    for k, pv in preds.items():
        ll += -0.5 * (np.log(pv / obsd[k]) / pr.price_noise) ** 2
    w = np.exp(ll - ll.max())
    ess = float(w.sum() ** 2 / (w ** 2).sum())
    if ess < 30 or ll.max() < -0.5 * 9 * len(preds):
        raise _inconsistent(preds, obsd)
    qs = (0.1, 0.5, 0.9)

    def iv(x, scale=1.0):
        lo, med, hi_ = wquantile(x / scale, w, qs)
        return {"low": lo, "median": med, "high": hi_}

    kv_inf = [k for k in ("cached_input_price", "long_output_price", "long_input_price", "output_speed") if k in preds]
    mem_bound = (Nt * q / W) > (2 * Na * B / F)
    hw_post = {h.id: float(w[hi == i].sum() / w.sum()) for i, h in enumerate(hws)}
    summary = {"observed": {k: v for k, v in obs.__dict__.items() if v is not None},
               "active_params_b": iv(Na, 1e9), "total_params_b": iv(Nt, 1e9),
               "kv_bytes_per_token": iv(K) if kv_inf else None, "kv_informed_by": kv_inf,
               "batch": iv(B), "p_moe": float(w[moe].sum() / w.sum()),
               "p_decode_memory_bound": float(w[mem_bound].sum() / w.sum()),
               "hardware_posterior": dict(sorted(hw_post.items(), key=lambda kv: -kv[1])),
               "samples": n, "effective_samples": ess,
               "priors": {"hardware": [h for h, _ in pr.hardware], "margin": pr.margin, "utilization": pr.utilization,
                          "chip_cost_factor": pr.chip_cost_factor, "batch": pr.batch, "weight_dtype": dnames,
                          "price_noise": pr.price_noise, "active_params": pr.active_params,
                          "attn_flops_per_kv_byte": {"mha_gqa": pr.attn_flops_per_kv_byte, "mla": pr.mla_range(),
                                                     "mla_share": pr.mla_share},
                          "cost_scale": pr.cost_scale}}
    return Deduction(obs, pr, summary, _scenario(obs, pr, hws))


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
    usd_s = h.price_usd_per_hour * cf / 3600
    cs_in = obs.input_price / 1e6 * (1 - m) * ut / usd_s / pr.cost_scale
    cs_out = obs.output_price / 1e6 * (1 - m) * ut / usd_s / pr.cost_scale
    peak = h.peak_flops(d.compute)
    na = cs_in * peak * fe / 2
    pred_out = float(decode_chip_s_per_token(na, na, d.bytes, 0.0, 0.0, B, peak * fe, h.memory_bw * be))
    return {"hardware": h.id, "usd_per_hour": h.price_usd_per_hour, "cost_factor": cf, "margin": m, "utilization": ut,
            "usd_per_chip_s": usd_s, "chip_s_in": cs_in, "chip_s_out": cs_out, "peak": peak, "flops_eff": fe,
            "n_active_from_input": na, "batch": B, "chip_s_out_pred": pred_out}
