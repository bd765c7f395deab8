"""The serving cost of a candidate model of N parameters: the cheapest $/token the serving engine finds for it.

For each N a dense Llama-3-style model is built (the architecture rule below), and
`tokenmath.analyses.serving.infer.infer` prices it: chips are powers of two from the smallest that holds the weights
and one sequence, tensor-parallel inside the scale-up domain and pipeline-parallel across domains beyond it; for
each chip count every power-of-two batch up to the largest that fits (and that largest itself) is tried, and the
cheapest $/output token whose decode step meets the per-user speed target wins. Output tokens are priced by the
decode step, input tokens by prefill (tokenmath.engine.economics). Seconds, USD.

The architecture rule: a dense Llama-3-style decoder (Llama 3 paper, Table 3; HF LlamaForCausalLM): head_dim 128,
GQA with 8 KV heads, SwiGLU FFN width 3.5 d_model rounded to 256 (Llama 3 8B/70B: 14336 = 3.5 x 4096,
28672 = 3.5 x 8192), vocab 128256, untied embeddings, RMSNorm.
Shape: d_model ~= 128 x n_layers (Llama 3 8B: 4096/32 = 128; 405B: 16384/126 = 130; 70B: 8192/80 = 102). Kaplan
et al. 2020 (Sec. 3.1, Fig. 5) found the loss changes by only a few percent over a wide range of aspect ratios,
so the scaling law does not depend on the choice; serving does (KV bytes per token grow with n_layers).
The rule, monotone in N: for each n_layers solve params(n_layers, d) = N for a continuous d; keep the n_layers
whose d is closest to 128 n_layers (log ratio); round d to a multiple of 128 (the count closest to N among the
neighbours). n_heads = d_model/128 rounded to a multiple of the 8 KV heads (so the query width n_heads x 128 is
within 512 of d_model, as in Qwen3/Gemma where it differs). The count is exact (tokenmath.specs.params), within ~3%
of N above ~1B parameters; below that the 128256-token embeddings dominate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.analyses.serving.infer import InferResult, infer
from tokenmath.base.validators import finite
from tokenmath.engine.economics import decode_cost_per_mtok, per_token, prefill_cost_per_mtok, usd_per_s
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

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


def dense_arch(n_layers: int, d_model: int) -> Model:
    """The rule's Model of n_layers x d_model (heads, KV heads, FFN width and vocabulary from the rule)."""
    L, d = int(n_layers), int(d_model)
    return Model(id=f"dense-{L}x{d}", name=f"dense {L} layers x d_model {d} (Llama-3-style)", n_layers=L,
                 d_model=d, n_heads=int(_heads(d)), n_kv_heads=KV_HEADS, head_dim=HEAD_DIM, vocab_size=VOCAB,
                 ffn_intermediate=int(_ffn_width(d)), ffn_gated=True, max_context=131072,
                 source="tokenmath.analyses.training.inference_cost architecture rule")


def dense_shape(N: float) -> tuple[int, int, float]:
    """(n_layers, d_model, exact params) of the rule's architecture for a target parameter count N."""
    # continuous d for each layer count: L (12.5 d^2 + 2050 d) + (2V + 1) d = N  (q,o ~ 2d^2, SwiGLU 10.5 d^2)
    a2 = 12.5 * _L_CHOICES
    a1 = 2050.0 * _L_CHOICES + 2 * VOCAB + 1
    d_cont = (-a1 + np.sqrt(a1 * a1 + 4 * a2 * N)) / (2 * a2)
    i = int(np.argmin(np.abs(np.log(d_cont / (ASPECT * _L_CHOICES)))))
    L = int(_L_CHOICES[i])
    base = max(round(d_cont[i] / _D_STEP), 1) * _D_STEP
    cands = [int(d) for d in (base - _D_STEP, base, base + _D_STEP) if d >= _D_STEP]
    P = np.array([count_params(dense_arch(L, d)).total for d in cands], dtype=float)
    j = int(np.argmin(np.abs(np.log(P / N))))
    return L, cands[j], float(P[j])


def dense_model(N: float) -> Model:
    """A tokenmath Model of about N parameters by the rule above (its parameter count is exact, not N)."""
    L, d, _ = dense_shape(N)
    return dense_arch(L, d)


@dataclass(frozen=True)
class ServingCost:
    """The cheapest way found to serve one architecture at the latency target (seconds, USD per million tokens)."""
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
    usd_per_mtok_output: float = math.inf     # the decode step's chip time shared by the batch
    usd_per_mtok_input: float = math.inf      # the prefill's chip time per prompt token
    bottleneck_decode: str = ""
    reason: str = ""

    @property
    def usd_per_output_token(self) -> float:
        return per_token(self.usd_per_mtok_output)

    @property
    def usd_per_input_token(self) -> float:
        return per_token(self.usd_per_mtok_input)

    def to_dict(self) -> dict:
        fin = finite
        return {"n_layers": self.n_layers, "d_model": self.d_model, "params": self.params, "feasible": self.feasible,
                "chips": self.chips, "tp": self.tp, "pp": self.pp, "batch": self.batch, "max_batch": self.max_batch,
                "decode_step_s": fin(self.decode_step_s),
                "output_tokens_per_s_per_user": fin(1.0 / self.decode_step_s) if self.feasible else None,
                "usd_per_mtok_output": fin(self.usd_per_mtok_output),
                "usd_per_mtok_input": fin(self.usd_per_mtok_input),
                "bottleneck_decode": self.bottleneck_decode, "reason": self.reason}


_SERVE_CACHE: dict[tuple, ServingCost] = {}


def _largest_fast_batch(m: Model, hw: Hardware, chips: int, tp: int, pp: int, bmax: int, r_max: InferResult,
                        min_tps: float, input_len: int, output_len: int, weight_dtype, kv_dtype
                        ) -> tuple[int, InferResult]:
    """(batch, its infer result): the largest of the powers of two up to bmax (and bmax) whose decode step gives
    >= min_tps tokens/s per user; (0, the batch-1 result) when even batch 1 is too slow.

    The decode step grows with the batch, and $/token = chips x price x step / batch falls with it (every op's
    max(FLOPs, bytes) time is affine in the batch with a non-negative intercept), so the cheapest batch meeting the
    speed target is the largest one that meets it: a binary search."""
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


def serve_cost(N: float, hw: Hardware, min_tps: float, input_len: int, output_len: int, weight_dtype=None,
               kv_dtype=None) -> ServingCost:
    """Cheapest $/output token for the rule's model of ~N params on `hw` at >= min_tps tokens/s per user."""
    L, d, P = dense_shape(N)
    key = (L, d, repr(hw), float(min_tps), int(input_len), int(output_len), weight_dtype, kv_dtype)
    if key in _SERVE_CACHE:
        return _SERVE_CACHE[key]
    m = dense_arch(L, d)
    heads = m.n_heads
    dom = hw.scaleup_domain
    best = None
    reason = ""
    chips, fitted_at = 1, None
    while chips <= MAX_SEARCH_CHIPS:
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
                usd_s = usd_per_s(chips, hw.price_usd_per_hour)
                out = decode_cost_per_mtok(usd_s, rb.decode_step_s, b)
                if best is None or out < best.usd_per_mtok_output:
                    best = ServingCost(n_layers=L, d_model=d, params=P, feasible=True, chips=chips, tp=tp, pp=pp,
                                       batch=b, max_batch=bmax, decode_step_s=float(rb.decode_step_s),
                                       usd_per_mtok_output=float(out),
                                       usd_per_mtok_input=float(prefill_cost_per_mtok(usd_s, rb.ttft_s, b, input_len)),
                                       bottleneck_decode=str(rb.decode.bottleneck))
            elif chips >= dom:
                # more chips beyond the domain add pipeline stages, which do not shorten a decode step
                reason = (f"batch 1 decodes at {1.0 / rb.decode_step_s:,.1f} tokens/s per user on {chips} x "
                          f"{hw.id}, below the {min_tps:g} tokens/s target")
                break
        if fitted_at is not None and chips >= max(dom, 2 * fitted_at):
            break  # up to the larger of the scale-up domain and twice the first fit (more HBM, larger batch)
        chips *= 2
    if best is None:
        best = ServingCost(n_layers=L, d_model=d, params=P, feasible=False,
                           reason=reason or f"does not fit on up to {MAX_SEARCH_CHIPS} x {hw.id}")
    _SERVE_CACHE[key] = best
    return best
