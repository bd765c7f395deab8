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


def as_floats(x, shape) -> list:
    return list(map(float, np.broadcast_to(np.asarray(x, float), shape)))


def capped_share(prior: float, n: float, k: int) -> float:
    """Share of a chunk's causal pairs left when each query reads at most k keys, at the mean chunk (n tokens after
    `prior` cached ones): a window of k in chunk_geometry, as engine/sparse_attention.selected prices one pass."""
    full, capped, _, _ = chunk_geometry(prior, n, k)
    return capped / full if full > 0 else 1.0


def attention_op(p):
    return next(p.ops[k] for k in ATTENTION_OPS if k in p.ops)
