"""Over-training: choose N and D minimising training cost + lifetime inference cost at a target loss.

Sardana, Portes, Doubov, Frankle 2023, "Beyond Chinchilla-Optimal" (arXiv:2401.00448, ICML 2024) minimise
6 N D_tr + 2 N D_inf FLOPs subject to L(N, D_tr) = l. On the loss constraint D_tr is a function of N,
    D_tr(N) = (B / (l - E - A/N^alpha))^(1/beta),   N > N_min = (A/(l - E))^(1/alpha),
so the problem is one-dimensional in N; it is solved here on a dense log grid of N (numpy, vectorized).

Costs in USD (SI units inside: FLOPs, tokens, USD, seconds):
- training: 6 N D FLOPs at the hardware's dense bf16 peak x MFU, priced at its $/chip-hour:
      $/FLOP = price / 3600 / (peak_bf16 x MFU).
  MFU default 0.40: PaLM 540B trained at 46.2% MFU (Chowdhery et al. 2022, Table 3 / App. B) and Llama 3 405B at
  38-43% (Llama 3 paper, Table 4); 6ND over reported H100-hours gives ~35% for Llama 3 405B
  (reference/scaling_laws.md Sec. 7), so 0.40 is the middle of the published range for large dense runs.
- inference, engine-based (default): the cost of a token from the serving engine, not 2N FLOPs. For each N a
  dense Llama-3-style model is built (see `dense_model`), and `tokenmath.analyses.serving.infer.infer` prices it: chips
  are powers of two from the smallest that holds the weights and one sequence, tensor-parallel inside the scale-up
  domain and pipeline-parallel across domains beyond it; for each chip count every power-of-two batch up to the
  largest that fits (and that largest itself) is tried, and the cheapest $/output token whose decode step meets
  the per-user speed target wins. Output tokens are priced by the decode step, input tokens by prefill; lifetime
  inference tokens split input:output by `input_output_ratio`; RL rollout tokens are generated tokens, priced as
  output (decode) tokens (their prompts are not counted).
  The engine runs at a set of model sizes (nodes) and log(cost/token) is interpolated linearly in log N between
  them; the Chinchilla point and every reported optimum are nodes, so every reported figure is an engine run.
- inference, FLOP-only (`flop_only=True`): 2N FLOPs per token (input or output) at the same $/FLOP as training,
  which is Sardana et al.'s compute version; minimising $ then minimises FLOPs, so it reproduces their numbers.

The target: a loss, or a training budget C whose compute-optimal loss becomes the target (what C buys at
Chinchilla-optimal). The Chinchilla point is the cheapest-to-train model at the target loss (closed form).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.analyses.training.scaling_laws import (
    FLOPS_PER_PARAM_TOKEN,
    Fit,
    check_loss,
    compute_optimal,
    get_fit,
    loss,
    min_params_for_loss,
    optimal_for_loss,
    positive_number,
    tokens_for_loss,
)

DEFAULT_MFU = 0.40
MFU_SOURCE = ("0.40: PaLM 540B 46.2% MFU (Chowdhery et al. 2022, App. B); Llama 3 405B 38-43% MFU on H100 "
              "(Llama 3 paper, Table 4)")
DEFAULT_MIN_TPS = 20.0          # tokens/s per user: a reading-speed floor for chat
DEFAULT_OUTPUT_LEN = 512        # generated tokens per request in the serving workload
DEFAULT_DEMAND_FACTORS = (0.1, 1.0, 10.0, 100.0)
ZERO_DEMAND_SWEEP = (1e10, 1e11, 1e12, 1e13)  # absolute demands when the base demand is 0
EXTREME_TOKENS_PER_PARAM = 1000.0
MIN_ENGINE_PARAMS = 3e8     # below this a 128256-token vocabulary is most of the model

# ---- the architecture rule -------------------------------------------------------------------------------------
# A dense Llama-3-style decoder (Llama 3 paper, Table 3; HF LlamaForCausalLM): head_dim 128, GQA with 8 KV heads,
# SwiGLU FFN width 3.5 d_model rounded to 256 (Llama 3 8B/70B: 14336 = 3.5 x 4096, 28672 = 3.5 x 8192),
# vocab 128256, untied embeddings, RMSNorm.
# Shape: d_model ~= 128 x n_layers (Llama 3 8B: 4096/32 = 128; 405B: 16384/126 = 130; 70B: 8192/80 = 102). Kaplan
# et al. 2020 (Sec. 3.1, Fig. 5) found the loss changes by only a few percent over a wide range of aspect ratios,
# so the scaling law does not depend on the choice; serving does (KV bytes per token grow with n_layers).
# The rule, monotone in N: for each n_layers solve params(n_layers, d) = N for a continuous d; keep the n_layers
# whose d is closest to 128 n_layers (log ratio); round d to a multiple of 128 (the count closest to N among the
# neighbours). n_heads = d_model/128 rounded to a multiple of the 8 KV heads (so the query width n_heads x 128 is
# within 512 of d_model, as in Qwen3/Gemma where it differs). The count is exact (tokenmath.specs.params), within ~3%
# of N above ~1B parameters; below that the 128256-token embeddings dominate.
HEAD_DIM = 128
KV_HEADS = 8
VOCAB = 128256
ASPECT = 128.0
FFN_RATIO = 3.5
_D_STEP = 128
_L_CHOICES = np.arange(1, 1025, dtype=float)


def _ffn_width(d):
    return np.maximum(np.round(FFN_RATIO * np.asarray(d, dtype=float) / 256.0), 1) * 256


def _heads(d):
    return np.maximum(np.round(np.asarray(d, dtype=float) / (HEAD_DIM * KV_HEADS)), 1) * KV_HEADS


def dense_params(n_layers, d_model):
    """Parameter count of the rule's architecture (the same terms as tokenmath.specs.params.count_params), vectorized:
    per layer q and o (d x n_heads x 128 each), k and v (d x 8 x 128 each), SwiGLU 3 x d x ffn, two RMSNorms (2d);
    plus embeddings and lm_head (vocab x d each) and the final norm (d)."""
    L = np.asarray(n_layers, dtype=float)
    d = np.asarray(d_model, dtype=float)
    per_layer = 2 * d * _heads(d) * HEAD_DIM + 2 * d * KV_HEADS * HEAD_DIM + 3 * d * _ffn_width(d) + 2 * d
    return L * per_layer + 2 * VOCAB * d + d


def dense_shape(N: float) -> tuple[int, int, float]:
    """(n_layers, d_model, exact params) of the rule's architecture for a target parameter count N."""
    # continuous d for each layer count: L (12.5 d^2 + 2050 d) + (2V + 1) d = N  (q,o ~ 2d^2, SwiGLU 10.5 d^2)
    a2 = 12.5 * _L_CHOICES
    a1 = 2050.0 * _L_CHOICES + 2 * VOCAB + 1
    d_cont = (-a1 + np.sqrt(a1 * a1 + 4 * a2 * N)) / (2 * a2)
    i = int(np.argmin(np.abs(np.log(d_cont / (ASPECT * _L_CHOICES)))))
    L = _L_CHOICES[i]
    base = max(round(d_cont[i] / _D_STEP), 1) * _D_STEP
    cands = np.array([d for d in (base - _D_STEP, base, base + _D_STEP) if d >= _D_STEP], dtype=float)
    P = dense_params(L, cands)
    j = int(np.argmin(np.abs(np.log(P / N))))
    return int(L), int(cands[j]), float(P[j])


def dense_model(N: float):
    """A tokenmath Model of about N parameters by the rule above (its parameter count is exact, not N)."""
    from tokenmath.specs.model import Model
    L, d, _ = dense_shape(N)
    return Model(id=f"dense-{L}x{d}", name=f"dense {L} layers x d_model {d} (Llama-3-style)", n_layers=L,
                 d_model=d, n_heads=int(_heads(d)), n_kv_heads=KV_HEADS, head_dim=HEAD_DIM, vocab_size=VOCAB,
                 ffn_intermediate=int(_ffn_width(d)), ffn_gated=True, max_context=131072,
                 source="tokenmath.analyses.training.overtrain architecture rule")


# ---- inference cost per token from the serving engine ----------------------------------------------------------

@dataclass(frozen=True)
class Serving:
    """The cheapest way found to serve one architecture at the latency target."""
    n_layers: int
    d_model: int
    params: float
    feasible: bool
    chips: int = 0
    tp: int = 0
    pp: int = 0
    batch: int = 0
    max_batch: int = 0
    decode_step_s: float = math.inf
    usd_per_output_token: float = math.inf
    usd_per_input_token: float = math.inf
    bottleneck_decode: str = ""
    reason: str = ""

    def to_dict(self) -> dict:
        fin = lambda x: x if math.isfinite(x) else None
        return {"n_layers": self.n_layers, "d_model": self.d_model, "params": self.params, "feasible": self.feasible,
                "chips": self.chips, "tp": self.tp, "pp": self.pp, "batch": self.batch, "max_batch": self.max_batch,
                "decode_step_s": fin(self.decode_step_s),
                "output_tokens_per_s_per_user": fin(1.0 / self.decode_step_s) if self.feasible else None,
                "usd_per_mtok_output": fin(self.usd_per_output_token * 1e6),
                "usd_per_mtok_input": fin(self.usd_per_input_token * 1e6),
                "bottleneck_decode": self.bottleneck_decode, "reason": self.reason}


_SERVE_CACHE: dict = {}
MAX_CHIPS = 4096


def _largest_fast_batch(m, hw, chips, tp, pp, bmax, r_max, min_tps, input_len, output_len, weight_dtype, kv_dtype):
    """(batch, its infer result): the largest of the powers of two up to bmax (and bmax) whose decode step gives
    >= min_tps tokens/s per user; (0, the batch-1 result) when even batch 1 is too slow.

    The decode step grows with the batch, and $/token = chips x price x step / batch falls with it (every op's
    max(FLOPs, bytes) time is affine in the batch with a non-negative intercept), so the cheapest batch meeting the
    speed target is the largest one that meets it: a binary search."""
    from tokenmath.analyses.serving.infer import infer
    batches = sorted({2 ** k for k in range(int(math.log2(bmax)) + 1)} | {bmax})
    runs = {bmax: r_max}

    def fast(b):
        if b not in runs:
            runs[b] = infer(m, hw, chips=chips, tp=tp, pp=pp, batch=b, input_len=input_len, output_len=output_len,
                            weight_dtype=weight_dtype, kv_dtype=kv_dtype)
        return 1.0 / runs[b].decode_step_s >= min_tps

    if not fast(batches[0]):
        return 0, runs[batches[0]]
    lo, hi = 0, len(batches) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fast(batches[mid]):
            lo = mid
        else:
            hi = mid - 1
    return batches[lo], runs[batches[lo]]


def serve_cost(N: float, hw, min_tps: float, input_len: int, output_len: int, weight_dtype=None,
               kv_dtype=None) -> Serving:
    """Cheapest $/output token for the rule's model of ~N params on `hw` at >= min_tps tokens/s per user."""
    from tokenmath.analyses.serving.infer import infer
    L, d, P = dense_shape(N)
    key = (L, d, repr(hw), float(min_tps), int(input_len), int(output_len), weight_dtype, kv_dtype)
    if key in _SERVE_CACHE:
        return _SERVE_CACHE[key]
    m = dense_model(N)
    heads = m.n_heads
    dom = hw.scaleup_domain
    best = None
    reason = ""
    chips, fitted_at = 1, None
    while chips <= MAX_CHIPS:
        # tensor-parallel inside the scale-up domain (a power of two dividing the heads), pipeline beyond it
        tp = 1
        while tp * 2 <= min(chips, dom) and heads % (tp * 2) == 0:
            tp *= 2
        pp = chips // tp
        if pp > m.n_layers:
            reason = reason or f"needs more pipeline stages than its {m.n_layers} layers"
            break
        r = infer(m, hw, chips=chips, tp=tp, pp=pp, batch="max", input_len=input_len, output_len=output_len,
                  weight_dtype=weight_dtype, kv_dtype=kv_dtype)
        bmax = int(r.batch) if r.fits else 0
        if bmax >= 1:
            fitted_at = fitted_at or chips
            b, rb = _largest_fast_batch(m, hw, chips, tp, pp, bmax, r, min_tps, input_len, output_len,
                                        weight_dtype, kv_dtype)
            if b:
                usd_s = chips * hw.price_usd_per_hour / 3600.0
                out = usd_s * rb.decode_step_s / b
                if best is None or out < best.usd_per_output_token:
                    best = Serving(L, d, P, True, chips, tp, pp, b, bmax, float(rb.decode_step_s), float(out),
                                   float(usd_s * rb.ttft_s / (b * input_len)), str(rb.decode.bottleneck))
            elif chips >= dom:
                # more chips beyond the domain add pipeline stages, which do not shorten a decode step
                reason = (f"batch 1 decodes at {1.0 / rb.decode_step_s:,.1f} tokens/s per user on {chips} x "
                          f"{hw.id}, below the {min_tps:g} tokens/s target")
                break
        if fitted_at is not None and chips >= max(dom, 2 * fitted_at):
            break  # up to the larger of the scale-up domain and twice the first fit (more HBM, larger batch)
        chips *= 2
    if best is None:
        best = Serving(L, d, P, False, reason=reason or f"does not fit on up to {MAX_CHIPS} x {hw.id}")
    _SERVE_CACHE[key] = best
    return best


# ---- the optimisation --------------------------------------------------------------------------------------------

@dataclass
class Point:
    """One (N, D) on the loss constraint with its costs."""
    params: float
    tokens: float
    training_usd: float
    inference_usd: float
    training_flops: float
    inference_flops: float
    serving: Serving | None = None

    @property
    def total_usd(self) -> float:
        return self.training_usd + self.inference_usd

    def to_dict(self) -> dict:
        fin = lambda x: x if math.isfinite(x) else None
        d = {"params": self.params, "tokens": self.tokens, "tokens_per_param": self.tokens / self.params,
             "training_usd": fin(self.training_usd), "inference_usd": fin(self.inference_usd),
             "total_usd": fin(self.total_usd), "training_flops": self.training_flops,
             "inference_flops": self.inference_flops}
        if self.serving is not None:
            d["serving"] = self.serving.to_dict()
        return d


@dataclass
class OvertrainResult:
    fit: Fit
    target_loss: float
    target_from_compute: float | None
    inference_tokens: float
    rl_rollout_tokens: float
    input_output_ratio: float
    flop_only: bool
    hardware: object
    mfu: float
    min_tokens_per_s_per_user: float
    input_len: int
    output_len: int
    usd_per_flop: float
    optimum: Point
    chinchilla: Point
    params_min: float
    curve: dict                      # N grid and cost arrays (for plots)
    nodes: list                      # engine evaluations (Serving), ascending N
    demand_sweep: list
    notes: list[str] = field(default_factory=list)

    @property
    def saving_usd(self) -> float:
        return self.chinchilla.total_usd - self.optimum.total_usd

    @property
    def saving_fraction(self) -> float:
        return self.saving_usd / self.chinchilla.total_usd

    def to_dict(self) -> dict:
        fin = lambda x: x if (x is not None and math.isfinite(x)) else None
        hw = self.hardware
        opt = self.optimum.to_dict()
        return {
            "fit": self.fit.name, "fit_constants": self.fit.constants(), "target_loss": self.target_loss,
            "target_from_compute": self.target_from_compute,
            "inference_tokens": self.inference_tokens, "rl_rollout_tokens": self.rl_rollout_tokens,
            "input_output_ratio": self.input_output_ratio,
            "inference_model": "flop-only" if self.flop_only else "engine",
            "hardware": hw.id, "price_usd_per_chip_hour": hw.price_usd_per_hour,
            "peak_bf16_flops": hw.peak_flops("bf16"), "mfu": self.mfu, "mfu_source": MFU_SOURCE,
            "usd_per_training_flop": self.usd_per_flop,
            "min_tokens_per_s_per_user": self.min_tokens_per_s_per_user,
            "input_len": self.input_len, "output_len": self.output_len,
            "params_min": self.params_min,
            # the optimum, flat (the headline keys) and in full
            "params": opt["params"], "tokens": opt["tokens"], "tokens_per_param": opt["tokens_per_param"],
            "training_usd": opt["training_usd"], "inference_usd": opt["inference_usd"], "total_usd": opt["total_usd"],
            "optimum": opt, "chinchilla": self.chinchilla.to_dict(),
            "saving_usd": fin(self.saving_usd), "saving_fraction": fin(self.saving_fraction),
            "demand_sweep": self.demand_sweep,
            "engine_nodes": [s.to_dict() for s in self.nodes],
            "notes": self.notes,
        }


def _nonneg(v, field: str) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a number", "a number of tokens >= 0, e.g. 1e12")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", "a number of tokens >= 0, e.g. 1e12") from None
    if not math.isfinite(x) or x < 0:
        raise InputError(field, f"{v!r} must be a finite number >= 0", "a number of tokens >= 0, e.g. 1e12")
    return x


class _Costs:
    """Cost of a (N, D) pair: training and inference (engine nodes interpolated, or FLOP-only)."""

    def __init__(self, hw, usd_per_flop, flop_only, min_tps, input_len, output_len, weight_dtype, kv_dtype):
        self.hw, self.usd_per_flop, self.flop_only = hw, usd_per_flop, flop_only
        self.min_tps, self.input_len, self.output_len = min_tps, input_len, output_len
        self.weight_dtype, self.kv_dtype = weight_dtype, kv_dtype
        self.nodes: dict[float, Serving] = {}

    def add_node(self, N: float) -> Serving:
        if N not in self.nodes:
            self.nodes[N] = serve_cost(N, self.hw, self.min_tps, self.input_len, self.output_len,
                                       self.weight_dtype, self.kv_dtype)
        return self.nodes[N]

    def per_token(self, N):
        """(usd per output token, usd per input token) at N (arrays), inf where no node can serve it."""
        N = np.asarray(N, dtype=float)
        if self.flop_only:
            c = 2.0 * N * self.usd_per_flop
            return c, c
        ks = sorted(self.nodes)
        lx = np.log(ks)
        res = []
        for attr in ("usd_per_output_token", "usd_per_input_token"):
            y = np.array([getattr(self.nodes[k], attr) for k in ks])
            okm = np.isfinite(y)
            out = np.full(N.shape, np.inf)
            if okm.any():
                xs, ys = lx[okm], np.log(y[okm])
                ln = np.log(N)
                inside = (ln >= xs[0] - 1e-12) & (ln <= xs[-1] + 1e-12)
                out = np.where(inside, np.exp(np.interp(ln, xs, ys)), np.inf)
            res.append(out)
        return res[0], res[1]

    def point(self, N: float, D: float, out_tokens: float, in_tokens: float) -> Point:
        c_out, c_in = (float(x) for x in self.per_token(N))
        tr = FLOPS_PER_PARAM_TOKEN * N * D
        inf_usd = float(_inference_usd(out_tokens, c_out, in_tokens, c_in, N))
        return Point(N, D, tr * self.usd_per_flop, inf_usd, tr, 2.0 * N * (out_tokens + in_tokens),
                     None if self.flop_only else self.nodes.get(N))


def _inference_usd(out_tok, c_out, in_tok, c_in, like):
    """out x $/out + in x $/in, where no tokens cost nothing (even where a size cannot serve: 0 x inf is 0)."""
    total = np.zeros(np.shape(like))
    if out_tok:
        total = total + out_tok * c_out
    if in_tok:
        total = total + in_tok * c_in
    return total


def _unique_arch(nodes: list) -> list:
    seen, out = set(), []
    for s in nodes:
        if (s.n_layers, s.d_model) not in seen:
            seen.add((s.n_layers, s.d_model))
            out.append(s)
    return sorted(out, key=lambda s: s.params)


def _split(inference_tokens, rl_tokens, ratio):
    """(output tokens, input tokens): lifetime tokens split input:output = ratio:1; RL rollouts are all output."""
    out = inference_tokens / (1.0 + ratio) + rl_tokens
    return out, inference_tokens - inference_tokens / (1.0 + ratio)


def overtrain(target_loss=None, compute=None, inference_tokens=0.0, rl_rollout_tokens=0.0, fit="epoch",
              hardware="h100-sxm", mfu=DEFAULT_MFU, flop_only=False,
              min_tokens_per_s_per_user=DEFAULT_MIN_TPS, input_output_ratio=1.0, output_len=DEFAULT_OUTPUT_LEN,
              weight_dtype=None, kv_dtype=None, demand_factors=DEFAULT_DEMAND_FACTORS, grid_points=4000,
              engine_points=24) -> OvertrainResult:
    """Minimise training + lifetime inference cost (USD) at a target loss.

    target_loss: nats/token under `fit`; or compute: a training budget (FLOPs) whose compute-optimal loss is the
    target. inference_tokens: lifetime tokens served (input + output, split by input_output_ratio = input per
    output token); rl_rollout_tokens: generated RL tokens (priced as output). See the module doc for the costs.
    """
    from tokenmath.specs.hardware import get_hardware
    f = get_fit(fit)
    if (target_loss is None) == (compute is None):
        raise InputError("target_loss", "give exactly one of a target loss or a training compute budget",
                         "--target-loss L (nats/token) or --compute C (FLOPs)")
    C_target = None
    if compute is not None:
        C_target = positive_number(compute, "compute", "FLOPs")
        if C_target < 1e6:
            raise InputError("compute", f"{C_target:g} FLOPs is not a training budget", "e.g. 1e24")
        n0, d0 = compute_optimal(C_target, f)
        ell = float(loss(n0, d0, f))
    else:
        ell = check_loss(target_loss, f, "target_loss")
    D_inf = _nonneg(inference_tokens, "inference_tokens")
    D_rl = _nonneg(rl_rollout_tokens, "rl_rollout_tokens")
    mfu = positive_number(mfu, "mfu")
    if mfu > 1:
        raise InputError("mfu", f"{mfu:g} exceeds 1 (100% of peak)", "a fraction in (0, 1], e.g. 0.4")
    min_tps = positive_number(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", "tokens/s")
    ratio = _nonneg(input_output_ratio, "input_output_ratio")
    if ratio > 1e4:
        raise InputError("input_output_ratio", f"{ratio:g} input tokens per output token", "a number in [0, 10000]")
    if (isinstance(output_len, bool) or not isinstance(output_len, (int, float)) or not math.isfinite(output_len)
            or output_len != int(output_len) or not 1 <= output_len <= 1_000_000):
        raise InputError("output_len", f"{output_len!r} is not a token count", "an integer from 1 to 1,000,000")
    output_len = int(output_len)
    input_len = max(1, round(ratio * output_len))
    hw = get_hardware(hardware)
    if hw.price_usd_per_hour is None or hw.price_usd_per_hour <= 0:
        raise InputError("hardware", f"{hw.id} has no price", "a catalog chip with a price, or a file with "
                         "price_usd_per_hour")
    # check the dtypes once, up front, in both modes: a bad option is an error even where it goes unused
    from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
    if weight_dtype is not None:
        get_dtype(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    if kv_dtype is not None:
        get_dtype(kv_dtype, "kv_dtype", KV_DTYPES)
    usd_per_flop = hw.price_usd_per_hour / 3600.0 / (hw.peak_flops("bf16") * mfu)

    n_chin, d_chin = (float(x) for x in optimal_for_loss(ell, f))
    n_min = float(min_params_for_loss(ell, f))
    if n_chin < 1e6:
        raise InputError("compute" if C_target else "target_loss", f"loss {ell:.4g} is reached by a "
                         f"{n_chin:,.0f}-parameter model; too small to price as an LLM",
                         "a larger budget" if C_target else "a lower loss, closer to E")
    hi = 3.0 * n_chin
    lo = n_min * (1 + 1e-4)
    grid = np.unique(np.concatenate([np.geomspace(lo, hi, grid_points), [n_chin]]))
    D_grid = tokens_for_loss(grid, ell, f)

    costs = _Costs(hw, usd_per_flop, flop_only, min_tps, input_len, output_len, weight_dtype, kv_dtype)
    notes: list[str] = []
    if not flop_only:
        e_lo = max(lo, MIN_ENGINE_PARAMS)
        if e_lo >= n_chin:
            raise InputError("target_loss", f"the Chinchilla model for loss {ell:.4g} has {n_chin:,.0f} parameters, "
                             f"below the smallest model the engine prices ({MIN_ENGINE_PARAMS:,.0f}; with a "
                             f"{VOCAB:,}-token vocabulary the embeddings dominate)", "a lower loss, or --flop-only")
        for N in np.geomspace(e_lo, hi, engine_points):
            costs.add_node(float(N))
        costs.add_node(n_chin)
        if e_lo > lo:
            notes.append(f"the engine prices models from {e_lo:,.3g} parameters up (smaller ones are mostly "
                         f"{VOCAB:,}-token embeddings); the search starts there")

    train = FLOPS_PER_PARAM_TOKEN * grid * D_grid * usd_per_flop

    def argmin(out_tok, in_tok) -> int:
        c_out, c_in = costs.per_token(grid)
        inf_ = _inference_usd(out_tok, c_out, in_tok, c_in, grid)
        total = train + inf_
        i = int(np.argmin(total))
        if not math.isfinite(total[i]):
            raise InputError("min_tokens_per_s_per_user", f"no model reaching loss {ell:.4g} can be served at "
                             f"{min_tps:g} tokens/s per user on {hw.id}", "a lower speed target or faster hardware")
        return i

    out_tok, in_tok = _split(D_inf, D_rl, ratio)
    if D_inf + D_rl > 0:
        sweep_demands = [(k * D_inf, k * D_rl, k) for k in demand_factors]
    else:
        sweep_demands = [(x, 0.0, None) for x in ZERO_DEMAND_SWEEP]
    splits = [(out_tok, in_tok)] + [_split(di, dr, ratio) for di, dr, _ in sweep_demands]
    if not flop_only:
        # every reported optimum must be an engine run, not an interpolation: add a node where the interpolated
        # curve puts an optimum and solve again, until all optima (main and sweep) sit on nodes. All demands then
        # share one cost curve, so the comparisons between them are exact.
        for _ in range(12):
            new_nodes = [float(grid[argmin(o, i_)]) for o, i_ in splits]
            new_nodes = [n for n in new_nodes if n not in costs.nodes]
            if not new_nodes:
                break
            for n in new_nodes:
                costs.add_node(n)

    def best(o, i_):
        k = argmin(o, i_)
        p, c = costs.point(float(grid[k]), float(D_grid[k]), o, i_), costs.point(n_chin, d_chin, o, i_)
        return (c if p.total_usd > c.total_usd else p), c   # the grid never loses to the closed-form point

    opt, chin = best(out_tok, in_tok)
    sweep = []
    for (di, dr, k), (o, i_) in zip(sweep_demands, splits[1:]):
        pk, ck = best(o, i_)
        sweep.append({"factor": k, "inference_tokens": di, "rl_rollout_tokens": dr, "params": pk.params,
                      "tokens": pk.tokens, "tokens_per_param": pk.tokens / pk.params,
                      "training_usd": pk.training_usd, "inference_usd": pk.inference_usd, "total_usd": pk.total_usd,
                      "chinchilla_total_usd": ck.total_usd if math.isfinite(ck.total_usd) else None,
                      "saving_fraction": (1 - pk.total_usd / ck.total_usd) if math.isfinite(ck.total_usd) else None})

    # the curve for plots, on the final set of nodes
    c_out, c_in = costs.per_token(grid)
    inf_ = _inference_usd(out_tok, c_out, in_tok, c_in, grid)
    fl_inf = 2.0 * grid * (out_tok + in_tok) * usd_per_flop
    curve = {"params": grid, "tokens": D_grid, "training_usd": train, "inference_usd": inf_,
             "total_usd": train + inf_, "total_usd_flop_only": train + fl_inf}

    if opt.tokens / opt.params > EXTREME_TOKENS_PER_PARAM:
        notes.append(f"the optimum trains {opt.tokens / opt.params:,.0f} tokens/param: beyond ~1000 Sardana et al. "
                     "found the Chinchilla D-term over-optimistic; treat it as indicative")
    if not math.isfinite(chin.total_usd):
        notes.append(f"the Chinchilla-optimal model ({n_chin:,.3g} params) cannot be served at {min_tps:g} "
                     f"tokens/s per user on {hw.id}: no saving can be stated")
    if not flop_only:
        notes.append("inference $/token from the serving engine (static batches, bf16 weights unless "
                     "weight_dtype is set), interpolated log-log between engine runs; output tokens priced by decode, "
                     "input tokens by prefill; RL rollouts as output tokens")
    else:
        notes.append("FLOP-only: 2N FLOPs per inference token at the training MFU (Sardana et al. 2023)")
    return OvertrainResult(f, ell, C_target, D_inf, D_rl, ratio, flop_only, hw, mfu, min_tps, input_len, output_len,
                           usd_per_flop, opt, chin, n_min, curve, _unique_arch(list(costs.nodes.values())), sweep, notes)


# ---- faces helpers -----------------------------------------------------------------------------------------------

def explain_overtrain(r: OvertrainResult) -> str:
    from tokenmath.base import units as u
    f, hw = r.fit, r.hardware
    o, c = r.optimum, r.chinchilla
    pk = hw.peak_flops("bf16")
    L = [f"Over-training: minimise training + lifetime inference cost at loss {r.target_loss:.4f} "
         f"(fit {f.name!r}: E={f.E:.4g}, A={f.A:.6g}, B={f.B:.6g}, alpha={f.alpha:.5g}, beta={f.beta:.5g})", ""]
    L.append("1. Target")
    if r.target_from_compute:
        L.append(f"  budget C = {r.target_from_compute:.4g} FLOPs at Chinchilla-optimal gives l = {r.target_loss:.4f}")
    x = (r.target_loss - f.E) * f.beta / (f.alpha + f.beta)
    L.append(f"  Chinchilla point (alpha A/N^alpha = beta B/D^beta): A/N^alpha = (l-E) beta/(alpha+beta) = {x:.4f}"
             f" -> N = {u.count(c.params)}, D = {u.count(c.tokens)} ({c.tokens / c.params:.1f} tokens/param)")
    L.append(f"  on the constraint D(N) = (B / (l - E - A/N^alpha))^(1/beta); N must exceed "
             f"(A/(l-E))^(1/alpha) = {u.count(r.params_min)}")
    L.append("")
    L.append("2. Training cost")
    L.append(f"  $/FLOP = ${hw.price_usd_per_hour:g}/h / 3600 / ({u.rate(pk, 'FLOP/s')} bf16 x MFU {r.mfu:g})"
             f" = ${r.usd_per_flop * 1e18:.4g} per EFLOP")
    L.append(f"  MFU {MFU_SOURCE}")
    L.append("")
    out_tok, in_tok = _split(r.inference_tokens, r.rl_rollout_tokens, r.input_output_ratio)
    L.append("3. Inference demand")
    L.append(f"  {r.inference_tokens:.4g} lifetime tokens at {r.input_output_ratio:g} input per output token"
             f" + {r.rl_rollout_tokens:.4g} RL rollout tokens (decode) = {out_tok:.4g} output + {in_tok:.4g} input tokens")
    if r.flop_only:
        L.append(f"  FLOP-only: cost/token = 2N x $/FLOP = 2N x {r.usd_per_flop:.4g} (same for input and output)")
    else:
        L.append(f"  engine: dense Llama-3-style model per N (d_model ~ {ASPECT:g} x layers, heads of {HEAD_DIM}, "
                 f"{KV_HEADS} KV heads, SwiGLU {FFN_RATIO:g} d_model, vocab {VOCAB:,}), bf16 unless set, "
                 f"{r.input_len} in / {r.output_len} out per request, >= {r.min_tokens_per_s_per_user:g} tokens/s per user")
        L.append(f"  {'N':>9} {'arch':>12} {'chips':>5} {'tp x pp':>7} {'batch':>6} {'tok/s/user':>10} "
                 f"{'$/Mtok out':>10} {'$/Mtok in':>10} {'2N-FLOP $/Mtok':>14}")
        for s in r.nodes:
            fl = 2 * s.params * r.usd_per_flop * 1e6
            if s.feasible:
                L.append(f"  {u.count(s.params):>9} {f'{s.n_layers}x{s.d_model}':>12} {s.chips:>5} "
                         f"{f'{s.tp}x{s.pp}':>7} {s.batch:>6} {1 / s.decode_step_s:>10.1f} "
                         f"{s.usd_per_output_token * 1e6:>10.4g} {s.usd_per_input_token * 1e6:>10.4g} {fl:>14.4g}")
            else:
                L.append(f"  {u.count(s.params):>9} {f'{s.n_layers}x{s.d_model}':>12}  cannot serve: {s.reason}")
    L.append("")
    L.append("4. Minimise total(N) = 6 N D(N) x $/FLOP + inference $ over a log grid of N")

    def row(name, p):
        return (f"  {name:<12} N = {u.count(p.params):>7}  D = {u.count(p.tokens):>7}  "
                f"({p.tokens / p.params:,.0f} tok/param)  train ${p.training_usd:,.4g} + inference "
                f"${p.inference_usd:,.4g} = ${p.total_usd:,.4g}")
    L.append(row("optimum", o))
    L.append(row("Chinchilla", c))
    if math.isfinite(r.saving_usd):
        L.append(f"  saving = ${r.saving_usd:,.4g} ({100 * r.saving_fraction:.1f}% of the Chinchilla total)")
    if o.serving is not None and o.serving.feasible:
        s = o.serving
        L.append(f"  optimum served as {s.n_layers} layers x d_model {s.d_model} ({u.count(s.params)} params) on "
                 f"{s.chips} x {hw.id} (tp {s.tp}, pp {s.pp}) at batch {s.batch}: "
                 f"{1 / s.decode_step_s:.1f} tokens/s per user, decode {s.bottleneck_decode}-bound")
    L.append("")
    L.append("5. As demand grows")
    for row_ in r.demand_sweep:
        sv = row_["saving_fraction"]
        L.append(f"  demand {row_['inference_tokens']:.3g} (+RL {row_['rl_rollout_tokens']:.3g}): N = "
                 f"{u.count(row_['params'])}, {row_['tokens_per_param']:,.0f} tok/param, total ${row_['total_usd']:,.4g}"
                 + (f", saving {100 * sv:.1f}%" if sv is not None else ""))
    if r.notes:
        L += ["", *("note: " + n for n in r.notes)]
    return "\n".join(L)


def plot_overtrain(r: OvertrainResult, path: str) -> str:
    """Total, training and inference cost vs N (log-log), Chinchilla point and optimum marked."""
    from tokenmath.faces.plots import pyplot, save_figure
    plt = pyplot()   # the charts' shared setup: Agg backend, a clear error when matplotlib is missing
    cv = r.curve
    N = cv["params"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ok = np.isfinite(cv["total_usd"])
    ax.plot(N[ok], cv["total_usd"][ok], lw=2, color="k", label="total")
    ax.plot(N, cv["training_usd"], color="C0", label="training (6ND at MFU)")
    if np.any(cv["inference_usd"][ok] > 0):
        ax.plot(N[ok], cv["inference_usd"][ok], color="C1",
                label="inference (2N FLOPs)" if r.flop_only else "inference (serving engine)")
        if not r.flop_only:
            ax.plot(N, cv["total_usd_flop_only"], ls="--", color="grey", lw=1, label="total, FLOP-only inference")
    o, c = r.optimum, r.chinchilla
    ax.plot([o.params], [o.total_usd], "o", color="C3", ms=8,
            label=f"optimum: {o.params / 1e9:.3g}B params, {o.tokens / o.params:,.0f} tok/param")
    if math.isfinite(c.total_usd):
        ax.plot([c.params], [c.total_usd], "s", color="C2", ms=8,
                label=f"Chinchilla: {c.params / 1e9:.3g}B params, {c.tokens / c.params:,.0f} tok/param")
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = np.nanmax(cv["total_usd"][ok]) if ok.any() else 1
    ax.set_ylim(max(o.total_usd / 20, 1e-9), min(top, o.total_usd * 30))
    from matplotlib.ticker import FuncFormatter
    billions = FuncFormatter(lambda x, _: f"{x / 1e9:.3g}")
    ax.xaxis.set_major_formatter(billions)
    ax.xaxis.set_minor_formatter(billions)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("model parameters N (billions)")
    ax.set_ylabel("cost (USD)")
    ax.set_title(f"loss {r.target_loss:.4f} ({r.fit.name} fit), {r.inference_tokens + r.rl_rollout_tokens:.3g} "
                 f"inference tokens, {r.hardware.id}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
