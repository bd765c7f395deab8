"""The priors of `tokenmath deduce`: what a provider does not publish, as explicit ranges, and their physical bounds.

Every range is uniform unless marked log-uniform; check_priors refuses a range outside its physical bounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.engine.forward import pair_flops
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
    # per-step time the roofline leaves out (scheduling, sampling, detokenization), added to the decode step behind a
    # measured speed: the engines' bounds, specs/serving_engines.STEP_CPU_BOUNDS_S (0-5 ms; vLLM V0.5 spent 29% of a
    # ~13 ms step on CPU work, vLLM blog 2024-09-05), uniform
    step_overhead_s: tuple = field(default_factory=lambda: step_cpu_bounds())
    price_noise: float = 0.30            # log-sd between a price and cost/(u(1-m)): rounding and strategy
    # log-sd between a measured speed (or TTFT) and the decode step's prediction: independent measurements of one
    # endpoint spread by up to ~3x (data/api_evidence.toml; tests/test_deduce_evidence.py derives it)
    speed_noise: float = 0.5
    # log-sd between how much a measured TTFT grows with the prompt and the engine's prefill of the extra tokens on one
    # replica (prefill_evidence.py); chosen on the provider table's fit split (2026-05-31) only, by the median error
    # factor of the all-evidence median (what the calibrated interval's width follows, interval_calibration.py):
    # 0.8 / 1.2 / 1.6 / 2.4 / 3.2 -> 1.716 / 1.607 / 1.586 / 1.554 / 1.585x (price + speed alone: 1.586x). The curve
    # is weak evidence (a factor ~11 per sd): the replica's size cancels between prefill and decode speed, and a
    # benchmark's TTFT carries queueing and chunking the single-replica prefill does not see
    prefill_noise: float = 2.4
    # how much slower a benchmark request's prefill runs than alone on its replica (shared with other traffic): the
    # value of table_validation.SCALE_GRID best on the provider table's fit split (2026-05-31; 230 open-weight
    # endpoints), benchmarks/deduce_provider_table.py
    prefill_scale: float = 16.0
    # list price / the closed form's cost at the priors: fitted on the shipped open-weight prices with
    # leave-one-provider-out validation (calibrate.calibrate_cost_scale; data/deduce_calibration.toml); 1.0 = uncalibrated
    cost_scale: float = field(default_factory=lambda: shipped_cost_scale())
    samples: int = 200_000
    seed: int = 0

    def mla_range(self) -> tuple[float, float]:
        return self.mla_attn_flops_per_kv_byte or catalog_mla_attn_flops_per_kv_byte()


def step_cpu_bounds() -> tuple[float, float]:
    from tokenmath.specs.serving_engines import STEP_CPU_BOUNDS_S
    return tuple(float(x) for x in STEP_CPU_BOUNDS_S)


def shipped_cost_scale() -> float:
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
    g = np.where(mla, loguni(rng, *pr.mla_range(), n), loguni(rng, *pr.attn_flops_per_kv_byte, n))
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
    "step_overhead_s": (0.0, 1.0, "seconds LOW,HIGH within [0, 1] per decode step"),
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
    if not (isinstance(pr.speed_noise, (int, float)) and PRICE_NOISE[0] <= pr.speed_noise <= PRICE_NOISE[1]):
        raise InputError("speed_noise", f"{pr.speed_noise!r} is out of range",
                         f"a log-sd from {PRICE_NOISE[0]:g} to {PRICE_NOISE[1]:g}")
    if not (isinstance(pr.cost_scale, (int, float)) and 0.01 <= pr.cost_scale <= 100):
        raise InputError("cost_scale", f"{pr.cost_scale!r} is out of range", "a factor in [0.01, 100]")
    if isinstance(pr.samples, bool) or not isinstance(pr.samples, int) or not SAMPLES[0] <= pr.samples <= SAMPLES[1]:
        raise InputError("samples", f"{pr.samples!r} is out of range",
                         f"an integer from {SAMPLES[0]:,} (fewer cannot weight the priors) to {SAMPLES[1]:,} "
                         "(memory: about 1 GB)")


def loguni(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))
