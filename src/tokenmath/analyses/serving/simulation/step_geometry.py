"""The geometry of a simulated step's attention: a prefill chunk's causal pairs and cached reads (full and sliding
layers), which ops grow with the context, and the small helpers the step tables share (step_cost.py,
verify_steps.py)."""
from __future__ import annotations

import math

import numpy as np

ATTENTION_OPS = ("attention", "attention_local")
CONTEXT_OPS = ATTENTION_OPS + ("indexer",)   # ops whose cost grows with the context a step attends
PROBE = 1e6                  # pairs / cached tokens of the probes that read alpha and beta


def chunk_geometry(prior: float, n: float, window: int = 0) -> tuple[float, float, float, float]:
    """A prefill chunk of n tokens after `prior` cached ones: (causal pairs in a full layer, pairs in a sliding
    layer of `window`, cached tokens read in a full layer, in a sliding layer)."""
    pairs = n * prior + n * (n + 1) / 2
    if not window:
        return pairs, pairs, prior, prior

    def upto(length):            # pairs of positions 1..length with a window: sum of min(p, window)
        k = min(length, window)
        return k * (k + 1) / 2 + (length - k) * window
    return pairs, upto(prior + n) - upto(prior), prior, min(prior, window)


def busiest(total: float, passes: float) -> float:
    """What the busiest of `passes` passes holds of a step's `total` whole tokens (or sequences, or rows): the
    step waits on it, ceil(total / passes), as engine/static_batch.py splits a batch over its attention groups and
    micro-batches (ceil(batch / (dp x ep)), then ceil over the micro-batches). Shared by the fast path and the
    engine-call reference (step_cost.py, verify_steps.py) so both price the same whole-token shape: a kernel model
    pads GEMM rows to tiles, so a fractional mean share (e.g. 512.6 rows) is no shape any pass runs. One pass
    (passes = 1) keeps `total` as given, whole in the simulator or a mean in the closed form (steady_state.py)."""
    if passes <= 1:
        return total
    return float(math.ceil(total / passes - 1e-9))


# ops that run on the rows a rank's experts receive from every attention group (pooled by the EP all-to-all): under
# attention data-parallel they take the step's even share, whatever group holds a prompt
EXPERT_SIDE_OPS = ("experts", "moe_permute", "moe_down_quant", "moe_unpermute")


def prefill_holder(chunks: float, replicas: int, coupled: int) -> float:
    """Chunks of a step's `chunks` prefill chunks that its busiest attention group holds. A prompt is prefilled on
    the one attention group that will keep its KV (attention data-parallel: TensorRT-LLM tech blog 10, "ADP Balance
    Strategy"; SGLang's DP attention and vLLM's data-parallel engines schedule the same way), so of the `coupled`
    groups the EP all-to-all synchronises, the busiest holds ceil(n / coupled) of a replica's n whole chunks
    (round-robin), or all of them when there is less than one; independent replicas (dp) share the chunks evenly.
    coupled 1: the even share chunks / replicas."""
    if chunks <= 0:
        return 0.0
    c = chunks / replicas
    if coupled <= 1:
        return c
    return min(float(math.ceil(max(round(c), 1) / coupled - 1e-9)), c)


def busiest_prefill_factor(prompts_per_step: float, coupled: int) -> float:
    """E[chunks the busiest of `coupled` groups holds] / E[their even share] over steps that admit M ~
    Poisson(prompts_per_step) whole prompts (prefill_holder's rule at each M): how much longer a cycle's
    data-parallel prefill work takes than when every prompt is split evenly over the groups. 1 for one group."""
    m = float(prompts_per_step)
    if coupled <= 1 or m <= 0:
        return 1.0
    ks = np.arange(0, int(m + 10 * math.sqrt(m) + 12) + 1)
    pmf = np.exp(ks * math.log(m) - m - np.array([math.lgamma(k + 1) for k in ks]))
    held = np.array([prefill_holder(float(k), 1, coupled) for k in ks])
    return float(np.sum(pmf * held) / (m / coupled))


def interpolate_at(table, v: float) -> float:
    """table (a list per integer) linearly interpolated at v >= 0, exact at integers."""
    i = int(v)
    f = v - i
    return table[i] + f * (table[i + 1] - table[i]) if f else table[i]


def as_floats(x, shape) -> list:
    return list(map(float, np.broadcast_to(np.asarray(x, float), shape)))


def capped_share(prior: float, n: float, k: int) -> float:
    """Share of a chunk's causal pairs left when each query reads at most k keys, at the mean chunk (n tokens after
    `prior` cached ones): a window of k in chunk_geometry, as engine/sparse_attention.selected prices one pass."""
    full, capped, _, _ = chunk_geometry(prior, n, k)
    return capped / full if full > 0 else 1.0


def attention_op(p):
    return next(p.ops[k] for k in ATTENTION_OPS if k in p.ops)
