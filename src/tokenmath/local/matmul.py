"""Matmul FLOP/s: square n x n products, 2 n^3 FLOP each, fp32 with numpy, and fp32/bf16/fp16 (and tf32 on CUDA)
with torch. n doubles from 256 until one product takes a quarter of TARGET_MATMUL_S, up to MAX_MATMUL_N.
Every entry: best and median TFLOP/s (1e12 FLOP/s) over the repetitions, n and the dtype key."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokenmath.local.timing import device_sync, rate_summary, times

MAX_MATMUL_N = 4096
TARGET_MATMUL_S = 0.25
MIN_TFLOPS = 1e-4          # hardware.from_record's lower bound for a tflops figure

MatmulTable = dict[str, dict[str, float | int | str]]   # impl_dtype -> {"best" TFLOP/s, "median", "n", "dtype", ...}


def matmul_n(call_at: Callable[[int], float], quick: bool) -> int:
    """The smallest n (doubling from 256) whose product takes at least a quarter of TARGET_MATMUL_S (a sixteenth
    with --quick), up to MAX_MATMUL_N (1024 with --quick): big enough to reach the sustained rate, short enough
    for a slow dtype (bf16 on a CPU without a bf16 path runs near 1 GFLOP/s). call_at(n) -> seconds."""
    hi = 1024 if quick else MAX_MATMUL_N
    floor = TARGET_MATMUL_S / (16 if quick else 4)
    n = 256
    while n < hi and call_at(n) < floor:
        n *= 2
    return n


def numpy_matmul(reps: int, quick: bool, budget_s: float | None = None) -> MatmulTable:
    def call_at(n):
        a = np.ones((n, n), np.float32)
        return min(times(lambda: a @ a, 2, warmup=0))
    n = matmul_n(call_at, quick)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t = times(lambda: a @ b, reps, budget_s=budget_s)
    return {"numpy_fp32": {**rate_summary(2.0 * n ** 3, t, 1e12), "n": n, "dtype": "fp32"}}


def torch_matmul(reps: int, quick: bool, device: str, budget_s: float | None = None) -> MatmulTable:
    """budget_s: seconds of timed products per dtype (timing.times). A dtype this build or device cannot multiply gets an entry with "error" and best = median = 0."""
    import torch
    dev = torch.device(device)
    sync = device_sync(device)
    out = {}
    dts = [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
    if device == "cuda":
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False   # fp32 means fp32; tf32 is measured on its own below
        dts.append(("tf32", torch.float32))
    try:
        for key, dt in dts:
            if key == "tf32":
                torch.backends.cuda.matmul.allow_tf32 = True

            def call_at(n, dt=dt):
                a = torch.ones((n, n), dtype=dt, device=dev)
                return min(times(lambda: a @ a, 2, sync, warmup=0))
            try:
                n = matmul_n(call_at, quick) if device == "cpu" else (2048 if quick else 8192)
                g = torch.Generator(device=dev).manual_seed(0)
                a = torch.randn((n, n), generator=g, device=dev).to(dt)
                b = torch.randn((n, n), generator=g, device=dev).to(dt)
                t = times(lambda a=a, b=b: a @ b, reps, sync, budget_s=budget_s)
            except RuntimeError as e:     # a dtype this build or device cannot multiply
                out[f"torch_{key}"] = {"error": str(e).splitlines()[0][:200], "dtype": key, "best": 0.0, "median": 0.0}
                continue
            out[f"torch_{key}"] = {**rate_summary(2.0 * n ** 3, t, 1e12), "n": n, "dtype": key}
    finally:
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = prev
    return out
