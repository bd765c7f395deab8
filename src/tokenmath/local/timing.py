"""Timing a call the way every microbenchmark here does: warm-up, repetitions, wall seconds (time.perf_counter), with
the device synchronised so a GPU's asynchronous launch is not timed instead of its work."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def _no_sync() -> None:
    pass


def device_sync(device: str) -> Callable[[], None]:
    """torch.cuda.synchronize on CUDA (imports torch); a no-op on the CPU, whose calls return when done."""
    if device == "cuda":
        import torch
        return torch.cuda.synchronize
    return _no_sync


MIN_REPS = 3     # a best and a median need a few calls, whatever the time budget


def times(fn: Callable[[], object], reps: int, sync: Callable[[], None] = _no_sync, warmup: int = 1,
          budget_s: float | None = None) -> list[float]:
    """Seconds per call of fn, `reps` timed calls after `warmup` untimed ones; with budget_s, fewer once the timed
    calls add up to budget_s seconds (never fewer than MIN_REPS, or reps when that is smaller): `tokenmath measure`
    fits a time budget on a slow or busy machine instead of running every repetition."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
        if budget_s is not None and len(out) >= MIN_REPS and sum(out) >= budget_s:
            break
    return out


def rate_summary(work: float, seconds: list[float], unit_scale: float) -> dict[str, float | int]:
    """work per call (bytes or FLOP) -> best and median rate in unit_scale units (1e9: GB/s, 1e12: TFLOP/s),
    with the repetition count and the best and median seconds."""
    best, med = min(seconds), statistics.median(seconds)
    return {"best": work / best / unit_scale, "median": work / med / unit_scale, "reps": len(seconds),
            "best_s": best, "median_s": med}
