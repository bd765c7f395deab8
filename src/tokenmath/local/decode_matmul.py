"""Decode-shaped matmuls and the fraction of the roofline they reach.

M = 1..64 rows of activations times a stack of 2048 x 2048 fp32 weight matrices (4096 x 4096 on CUDA) as large as
the bandwidth arrays: a decode step reads every weight once for a batch of M tokens. A framework's small-M matmul can
stream weights far below STREAM bandwidth (torch on a 2-core CPU: ~1/3 at M = 2-16), which a roofline on the
headline figures does not know; decode_efficiency() turns the timings into that fraction per M, and efficiency_at()
reads it at any batch.
"""
from __future__ import annotations

import itertools
import math
import statistics

import numpy as np

from tokenmath.local.timing import device_sync, times

DECODE_ROWS = (1, 2, 4, 8, 16, 32, 64)
DECODE_ROWS_QUICK = (1, 4, 16, 64)

DecodeTable = dict[str, dict[str, float | int | str]]   # "m<rows>" -> one decode_row()


def decode_matmul(nbytes: int, reps: int, quick: bool, device: str, with_torch: bool) -> DecodeTable:
    """Decode-shaped fp32 matmuls: M rows of activations times a stack of k x k weight matrices that together
    exceed the caches (as a decode step reads every weight once). Per M: time, weight bytes and FLOPs, from which
    the achievable fraction of the headline figures at that batch follows (decode_efficiency)."""
    k = 4096 if device == "cuda" else 2048
    per = k * k * 4
    count = max(2, math.ceil(nbytes / per))
    rows = DECODE_ROWS_QUICK if quick else DECODE_ROWS
    out = {}
    if with_torch:
        import torch
        dev = torch.device(device)
        sync = device_sync(device)
        g = torch.Generator(device=dev).manual_seed(0)
        ws = [torch.randn((k, k), generator=g, device=dev) for _ in range(count)]
        impl = f"torch.nn.functional.linear ({device})"
        with torch.inference_mode():
            for m in rows:
                x = torch.randn((m, k), generator=g, device=dev)
                t = times(lambda x=x: [torch.nn.functional.linear(x, w) for w in ws], reps, sync)
                out[f"m{m}"] = decode_row(m, k, count, t, impl)
    else:
        rng = np.random.default_rng(0)
        ws = [rng.standard_normal((k, k), dtype=np.float32) for _ in range(count)]
        for m in rows:
            x = rng.standard_normal((m, k), dtype=np.float32)
            t = times(lambda x=x: [x @ w for w in ws], reps)
            out[f"m{m}"] = decode_row(m, k, count, t, "numpy matmul")
    return out


def decode_row(m: int, k: int, count: int, seconds: list[float], impl: str) -> dict[str, float | int | str]:
    """One row count's entry: weight bytes, FLOPs, best and median seconds, best GB/s and GFLOP/s."""
    wb = float(count * k * k * 4)
    fl = float(2 * m * k * k * count)
    best, med = min(seconds), statistics.median(seconds)
    return {"rows": m, "weight_bytes": wb, "flops": fl, "best_s": best, "median_s": med,
            "best_gbs": wb / best / 1e9, "best_gflops": fl / best / 1e9, "shape": f"{m} x {k} @ {k} x {k}, {count} matrices",
            "impl": impl}


def decode_efficiency(table: DecodeTable | None, memory_bw: float, peak_flops: float) -> dict[int, float]:
    """rows -> achievable fraction of the roofline: max(FLOPs / peak, bytes / bandwidth) / best time, capped at 1.
    memory_bw in bytes/s, peak_flops in FLOP/s. Applied to both the FLOP/s and bandwidth of a prediction, it
    reproduces the decode-shaped matmul's own time. Entries that cannot be read are skipped."""
    out = {}
    for r in (table or {}).values():
        try:
            t = float(r["best_s"])
            roof = max(float(r["flops"]) / peak_flops, float(r["weight_bytes"]) / memory_bw)
            out[int(r["rows"])] = min(1.0, roof / t) if t > 0 else None
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
    return {k: v for k, v in sorted(out.items()) if v}


def efficiency_at(eff: dict[int, float], rows: int) -> float | None:
    """Interpolated in log(rows) between the measured row counts; the nearest end outside them."""
    if not eff:
        return None
    ks = sorted(eff)
    if rows <= ks[0]:
        return eff[ks[0]]
    if rows >= ks[-1]:
        return eff[ks[-1]]
    x = math.log(rows)
    for a, b in itertools.pairwise(ks):
        if a <= rows <= b:
            f = (x - math.log(a)) / (math.log(b) - math.log(a))
            return eff[a] + f * (eff[b] - eff[a])
    return None
