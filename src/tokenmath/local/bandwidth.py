"""Sustained memory bandwidth, STREAM-style (McCalpin, "Memory bandwidth and machine balance", 1995).

Kernels over arrays of max(2 x last-level cache, 256 MiB) each (64 MiB with --quick), capped by free memory: copy (b = a; 2 arrays of
traffic) and triad (a = b + s c; numpy runs it as two passes, c*s into a then a + b into a, so 5 arrays of traffic
are counted; torch fuses it into one pass of 3). Bytes are counted the STREAM way: what the arrays carry, not the
extra read-for-ownership a cache may add on a store. Numpy runs single-threaded, torch on all its threads.
Every entry: best and median GB/s (1e9 bytes/s) over the repetitions, array and traffic bytes, the kernel.
"""
from __future__ import annotations

import numpy as np

from tokenmath.local.timing import device_sync, rate_summary, times

MB = 1 << 20
DEFAULT_ARRAY_MIN = 256 * MB
QUICK_ARRAY = 64 * MB

BandwidthTable = dict[str, dict[str, float | int | str]]   # kernel -> {"best" GB/s, "median" GB/s, ...}


CACHE_MULTIPLE = 2   # each array 2 x the last-level cache: a triad streams 3 of them (6 x the cache) per pass, so an
# LRU cache keeps nothing from one pass to the next. STREAM asks for 4 x; on a 2-core VM that reports its host's
# 300 MiB L3 that meant 1.2 GiB arrays and ~30 s for numpy's bandwidth alone (issue 23: the default `measure` in
# <= 30 s).


def array_bytes(quick: bool, cache: int | None, avail: int | None) -> int:
    """Bytes per array: CACHE_MULTIPLE x the last-level cache (at least 256 MiB; 64 MiB with --quick), capped by free
    memory."""
    size = QUICK_ARRAY if quick else max(CACHE_MULTIPLE * (cache or 0), DEFAULT_ARRAY_MIN)
    if avail:
        size = min(size, max(avail // 8, 16 * MB))   # three arrays (and torch's three) stay well inside free memory
    return int(size)


def numpy_bandwidth(nbytes: int, reps: int, budget_s: float | None = None) -> BandwidthTable:
    """budget_s: seconds of timed calls per kernel after which fewer than `reps` are run (timing.times)."""
    n = nbytes // 8
    a = np.full(n, 1.0)
    b = np.full(n, 2.0)
    c = np.full(n, 0.5)
    s = 3.0
    out = {}
    t = times(lambda: np.copyto(b, a), reps, budget_s=budget_s)
    out["numpy_copy"] = {**rate_summary(2 * n * 8, t, 1e9), "array_bytes": n * 8, "traffic_bytes": 2 * n * 8,
                         "kernel": "b = a (np.copyto)"}

    def triad():
        np.multiply(c, s, out=a)
        np.add(a, b, out=a)
    t = times(triad, reps, budget_s=budget_s)
    out["numpy_triad"] = {**rate_summary(5 * n * 8, t, 1e9), "array_bytes": n * 8, "traffic_bytes": 5 * n * 8,
                          "kernel": "a = b + s*c as two passes (c*s -> a; a + b -> a): 5 arrays moved"}
    return out


def torch_bandwidth(nbytes: int, reps: int, device: str, budget_s: float | None = None) -> BandwidthTable:
    import torch
    n = nbytes // 4
    dev = torch.device(device)
    a = torch.full((n,), 1.0, dtype=torch.float32, device=dev)
    b = torch.full((n,), 2.0, dtype=torch.float32, device=dev)
    c = torch.full((n,), 0.5, dtype=torch.float32, device=dev)
    sync = device_sync(device)
    out = {}
    t = times(lambda: b.copy_(a), reps, sync, budget_s=budget_s)
    out["torch_copy"] = {**rate_summary(2 * n * 4, t, 1e9), "array_bytes": n * 4, "traffic_bytes": 2 * n * 4,
                         "kernel": "b.copy_(a)"}
    t = times(lambda: torch.add(b, c, alpha=3.0, out=a), reps, sync, budget_s=budget_s)
    out["torch_triad"] = {**rate_summary(3 * n * 4, t, 1e9), "array_bytes": n * 4, "traffic_bytes": 3 * n * 4,
                          "kernel": "torch.add(b, c, alpha=s, out=a): one fused pass"}
    a = b = c = None   # free the arrays before the cache is emptied
    if device == "cuda":
        torch.cuda.empty_cache()
    return out
