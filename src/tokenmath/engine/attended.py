"""How much context a step attends: the mean tokens a decode step reads, and the (query, key) pairs of a causal
prefill, for full layers and for layers that attend at most `window` tokens (a sliding window, or the top-k tokens a
sparse-attention indexer selects)."""
from __future__ import annotations

import numpy as np


def decode_context(input_len, output_len, window: int = 0):
    """Mean tokens attended per decode step while the context grows from input_len+1 to input_len+output_len,
    for a full layer and for a sliding layer of `window` tokens (exact mean of min(c, window))."""
    a = np.asarray(input_len, float)
    n = np.maximum(np.asarray(output_len, float), 1.0)
    full = a + (n + 1) / 2
    if not window:
        return full, full
    w = float(window)
    kk = np.clip(w - a, 0, n)              # steps whose context is still inside the window
    total = kk * (a + 1 + a + kk) / 2 + (n - kk) * w
    return full, total / n


def prefill_pairs(input_len, window: int = 0):
    """Causal (query, key) pairs in a prompt of L tokens: L(L+1)/2, or with a window sum of min(p, w)."""
    L = np.asarray(input_len, float)
    full = L * (L + 1) / 2
    if not window:
        return full, full
    k = np.minimum(L, window)
    return full, k * (k + 1) / 2 + (L - k) * window
