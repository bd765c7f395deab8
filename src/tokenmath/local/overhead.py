"""Per-call framework overhead: the latency of a tiny elementwise op on 1-element arrays, what a framework adds to
every kernel whatever its size (numpy ufunc dispatch; torch eager dispatch; on CUDA, back-to-back launches).
Every entry: best and median microseconds per call over 5 rounds of `calls` calls, the call count and the op."""
from __future__ import annotations

import statistics
import time

import numpy as np

from tokenmath.local.timing import device_sync

ROUNDS = 5

OverheadTable = dict[str, dict[str, float | int | str]]   # impl -> {"best_us", "median_us", "calls", "op"}


def call_overhead(calls: int, device: str, with_torch: bool) -> OverheadTable:
    """numpy on the CPU; torch on `device` when with_torch."""
    out = {}
    if device == "cpu":
        a = np.ones(1)
        o = np.empty(1)
        per = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            for _ in range(calls):
                np.add(a, a, out=o)
            per.append((time.perf_counter() - t0) / calls)
        out["numpy"] = {"best_us": min(per) * 1e6, "median_us": statistics.median(per) * 1e6, "calls": calls * ROUNDS,
                        "op": "np.add on 1-element arrays"}
    if with_torch:
        import torch
        dev = torch.device(device)
        x = torch.ones(1, device=dev)
        sync = device_sync(device)
        per = []
        for _ in range(ROUNDS):
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.add(x, x)
            sync()
            per.append((time.perf_counter() - t0) / calls)
        out["torch"] = {"best_us": min(per) * 1e6, "median_us": statistics.median(per) * 1e6, "calls": calls * ROUNDS,
                        "op": f"torch.add on 1-element tensors ({device}{', back-to-back launches' if device == 'cuda' else ''})"}
    return out
