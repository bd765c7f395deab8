"""This machine's GEMM efficiency curve: matmuls of M = 1..256 rows on weight shapes like a model's, and the share
of the roofline each reaches. It becomes the hardware file's [kernels] section (specs.kernels_measured.measured_model),
which the engine reads in place of tile and wave quantization (engine/kernels.measured_share).

For every weight shape K x N (4 MiB to 256 MiB of fp32; 4 to 64 MiB with --quick) a stack of 256 MiB (64 MiB
quick) of such matrices is multiplied by M rows of activations, one call per matrix, as a decode step reads each
weight once; at large M the stack is cut to a FLOP budget (those calls are compute-bound: the weights' traffic is
small beside their FLOPs). The points are timed round-robin (gemm_curve); best and median seconds are kept.

efficiency = max(FLOPs / peak, bytes / bandwidth) / (median seconds per call - the per-call overhead), <= 1: the
engine's time for that GEMM, t0 + max(FLOPs / (peak e), bytes / (bandwidth e)), is then the median measured time
whatever peak and bandwidth it is relative to (they only cap it at 1), as verify's measured step is a median; the
overhead subtracted, because the engine adds it back as each kernel's fixed time. A framework's small-M matmul can stream
weights far below STREAM bandwidth (torch on a 2-core CPU: ~1/3 at M = 2-16), which the headline figures do not know.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from tokenmath.local.timing import device_sync

CURVE_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# (K, N): 4, 16, 64 and 256 MiB of fp32 weights (a 1B-8B model's q/o, qkv, gate_up/lm_head, an 8B FFN)
CURVE_SHAPES = ((1024, 1024), (1024, 4096), (2048, 8192), (4096, 16384))
CURVE_SHAPES_QUICK = CURVE_SHAPES[:3]
STACK_BYTES, STACK_BYTES_QUICK = 256 << 20, 64 << 20
FLOP_BUDGET, FLOP_BUDGET_QUICK = 4e9, 1e9     # FLOPs of one timed call at large M (fewer matrices)
# seconds of timed passes over all the points, after the warm-up pass (issue 23: the whole default `measure` in
# <= 30 s on a 2-core machine; 12 s here made it 29-153 s)
PASSES_S, PASSES_S_QUICK = 5.0, 1.5
MIN_PASSES = 3                                # the median of 3 passes over one burst of load

CurveTable = dict[str, dict]   # "KxN" -> {"k", "n", "rows", "matrices", "best_s", "median_s", "reps", "impl"}


def gemm_curve(reps: int, quick: bool, device: str, with_torch: bool, cache_bytes: int | None = None) -> CurveTable:
    """fp32 matmuls of M rows times stacks of K x N weights, per shape and M: seconds per call of the stack (best and
    median) and the number of matrices in it. The points are timed round-robin, one pass over all of them per
    repetition (a warm-up pass first; at least MIN_PASSES and at most `reps`, fewer when they would pass PASSES_S), so
    a burst of load from other processes spreads over every point instead of bending the curve. Consecutive points
    read different stacks, and before a stack is read again at least 2 x cache_bytes (the last-level cache) have
    streamed since (the other stacks, else an untimed read of a buffer), so that, as in a decode step that reads
    each weight once, no weight comes from the cache (on a 2-core VM with a 300 MiB L3, a 256 MiB stack read twice
    in a row streams ~15% faster)."""
    shapes = CURVE_SHAPES_QUICK if quick else CURVE_SHAPES
    stack, budget, passes_s = ((STACK_BYTES_QUICK, FLOP_BUDGET_QUICK, PASSES_S_QUICK) if quick
                               else (STACK_BYTES, FLOP_BUDGET, PASSES_S))
    sync = device_sync(device if with_torch else "cpu")
    stacks, out = [], {}
    for k, n in shapes:
        count = max(1, math.ceil(stack / (4 * k * n)))
        stacks.append((k, n, count, *_stack(k, n, count, device, with_torch)))
        out[f"{k}x{n}"] = {"k": k, "n": n, "rows": list(CURVE_ROWS), "matrices": [], "impl": stacks[-1][-1]}
    points = []                                    # (stack index, bytes read, call), rows outer: stacks alternate
    for m in CURVE_ROWS:
        for si, (k, n, count, ws, rows_of, call, _) in enumerate(stacks):
            c = min(count, max(1, math.ceil(budget / (2.0 * m * k * n))))
            out[f"{k}x{n}"]["matrices"].append(c)
            points.append((si, 4.0 * k * n * c, lambda x=rows_of(m), ws=ws[:c], call=call: call(x, ws)))
    evict = _evictor(2 * (cache_bytes or 0), device, with_torch)
    since = [0.0] * len(stacks)                    # bytes streamed since each stack was last read

    def run(i: int) -> float:
        si, nbytes, fn = points[i]
        since[si] = evict(since[si], since)
        t0 = time.perf_counter()
        fn()
        sync()
        dt = time.perf_counter() - t0
        since[:] = [b + nbytes for b in since]
        since[si] = 0.0
        return dt
    warm = sum(run(i) for i in range(len(points)))
    n_pass = max(MIN_PASSES, min(reps, int(passes_s / max(warm, 1e-9))))
    secs: list[list[float]] = [[] for _ in points]
    for _ in range(n_pass):
        for i in range(len(points)):
            secs[i].append(run(i))
    for k, n, *_ in stacks:                        # per shape, in the order of CURVE_ROWS
        for (si, _, _), t in zip(points, secs):
            if stacks[si][:2] == (k, n):
                for name, v in (("best_s", min(t)), ("median_s", statistics.median(t)), ("reps", len(t))):
                    out[f"{k}x{n}"].setdefault(name, []).append(v)
    return out


def _evictor(nbytes: int, device: str, with_torch: bool):
    """evict(streamed, since) -> streamed after reading (untimed) what is missing of `nbytes` from a buffer, adding
    it to every entry of `since`; a no-op when nbytes is 0 or already streamed."""
    if nbytes <= 0:
        return lambda streamed, since: streamed
    if with_torch:
        import torch
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device=torch.device(device))
    else:
        buf = np.ones(nbytes // 4, dtype=np.float32)

    def evict(streamed, since):
        missing = int(nbytes - streamed) // 4
        if missing <= 0:
            return streamed
        float(buf[:missing].sum())
        since[:] = [b + 4.0 * missing for b in since]
        return streamed + 4.0 * missing
    return evict


def _stack(k: int, n: int, count: int, device: str, with_torch: bool):
    """(count weight matrices of K x N fp32, rows_of(m) -> activations, call(x, ws), impl)."""
    if with_torch:
        import torch
        dev = torch.device(device)
        g = torch.Generator(device=dev).manual_seed(0)
        # uniform, not normal: the values do not change a float matmul's time, and torch's normal sampler took
        # seconds for a 1 GiB set of stacks on a 2-core machine
        ws = [torch.rand((n, k), generator=g, device=dev) for _ in range(count)]

        def call(x, ws):
            with torch.inference_mode():
                for w in ws:
                    torch.nn.functional.linear(x, w)
        return ws, lambda m: torch.randn((m, k), generator=g, device=dev), call, f"torch.nn.functional.linear ({device})"
    rng = np.random.default_rng(0)
    ws = [rng.random((k, n), dtype=np.float32) for _ in range(count)]

    def call_np(x, ws):
        for w in ws:
            x @ w
    return ws, lambda m: rng.standard_normal((m, k), dtype=np.float32), call_np, "numpy matmul"


def curve_efficiency(table: CurveTable | None, memory_bw: float, peak_flops: float,
                     per_call_s: float = 0.0) -> tuple[tuple[int, ...], tuple[int, ...], list[list[float]]]:
    """(rows, weight elements N K per shape, efficiency[row][shape]): max(FLOPs / peak, bytes / bandwidth) of one
    call / (its median seconds - per_call_s), in (0, 1]; bytes = fp32 weights + activations in and out. memory_bw in
    B/s, peak_flops in FLOP/s. Shapes whose rows differ from the first's, or any unreadable entry: left out."""
    shapes = []
    for r in (table or {}).values():
        try:
            k, n = int(r["k"]), int(r["n"])
            pts = list(zip(r["rows"], r["matrices"], r["median_s"], strict=True))
            shapes.append((k * n, k, n, pts))
        except (KeyError, TypeError, ValueError):
            continue
    if not shapes:
        return (), (), []
    shapes.sort()
    rows = tuple(int(m) for m, _, _ in shapes[0][3])
    shapes = [s for s in shapes if tuple(int(m) for m, _, _ in s[3]) == rows]
    eff = [[0.0] * len(shapes) for _ in rows]
    for j, (_, k, n, pts) in enumerate(shapes):
        for i, (m, c, t) in enumerate(pts):
            roof = max(2.0 * m * k * n / peak_flops, 4.0 * (k * n + m * (k + n)) / memory_bw)
            per = float(t) / int(c) - per_call_s
            eff[i][j] = min(1.0, roof / per) if per > 0 else 1.0
    return rows, tuple(s[0] for s in shapes), eff

