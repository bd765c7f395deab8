"""Measure this machine: sustained memory bandwidth, matmul FLOP/s, per-call framework overhead.

The result (Measurement) writes a hardware file in the catalog's schema (data/hardware.toml), so `--hardware FILE`
works everywhere. Every figure is the best of several repetitions, with the median beside it:
- bandwidth, STREAM-style copy and triad (tokenmath.local.bandwidth); memory_bw_tbs is the best triad of any
  implementation (STREAM's headline kernel), copy is recorded beside it;
- matmul FLOP/s of square products per dtype (tokenmath.local.matmul); tflops holds the best of every
  implementation for each dtype;
- the GEMM efficiency curve: matmuls of 1 to 256 rows on weight shapes of 4 to 256 MiB, and the share of the
  roofline each reaches (tokenmath.local.decode_matmul);
- per-call overhead of a tiny elementwise op (tokenmath.local.overhead).

Each section is measured again when the repetitions of a figure the file uses spread too far (tokenmath.local.noise:
median vs best past 25%, a sign of other programs loading the machine), a bounded number of times; a measurement
still noisy is refused as a hardware file unless the user accepts it (Measurement.write(accept_noisy=True)).

These are sustained figures, not datasheet peaks. The file's [kernels] section holds this machine's kernel model
(streaming fraction = triad / memory_bw = 1.0, the curve, the per-call overhead as each kernel's fixed time;
specs.kernels_measured.measured_model), which `infer --hardware FILE` and `verify` use by default; `--peak` is the pure
roofline of the measured figures.
"""
from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable

from tokenmath.base.errors import InputError
from tokenmath.base.install import install_hint
from tokenmath.local import noise
from tokenmath.local.bandwidth import MB, array_bytes, numpy_bandwidth, torch_bandwidth
from tokenmath.local.decode_matmul import CURVE_ROWS, gemm_curve
from tokenmath.local.machine import (check_device, cpu_count, cpu_name, last_level_cache_bytes, load_average,
                                     machine_busy, meminfo, torch_available, versions)
from tokenmath.local.matmul import MIN_TFLOPS, numpy_matmul, torch_matmul
from tokenmath.local.measurement import Measurement
from tokenmath.local.overhead import call_overhead

ASSUMED_MEMORY = 8e9       # bytes, when the machine does not say (no /proc/meminfo)
# Seconds of timed calls per kernel (bandwidth) and per dtype (matmul) after which the repetitions stop early
# (timing.times; never fewer than 3): with the GEMM curve's PASSES_S the default run fits ~30 s on a 2-core machine
# whatever its caches make the arrays (issue 23: 29-153 s before), and --quick a few seconds.
BUDGET_BW_S, BUDGET_BW_QUICK_S = 1.0, 0.3
BUDGET_MM_S, BUDGET_MM_QUICK_S = 1.0, 0.2


def _memory_and_name(device: str, notes: list[str]) -> tuple[float, int | None, int | None, str]:
    """(total memory bytes, free memory bytes or None, last-level cache bytes or None, device name)."""
    if device == "cpu":
        info = meminfo()
        mem_total = float(info.get("MemTotal") or 0) or None
        if mem_total is None:
            mem_total = ASSUMED_MEMORY
            notes.append("total memory unknown (no /proc/meminfo): 8 GB assumed")
        return mem_total, info.get("MemAvailable"), last_level_cache_bytes(), f"{cpu_name()}, {cpu_count()} cores"
    import torch
    props = torch.cuda.get_device_properties(0)
    cache = int(getattr(props, "L2_cache_size", 0) or 0) or None
    return float(props.total_memory), int(torch.cuda.mem_get_info()[0]), cache, torch.cuda.get_device_name(0)


def measure(device: str = "cpu", quick: bool = False, progress: Callable[[str], None] | None = None,
            use_torch: bool | None = None) -> Measurement:
    """Run the microbenchmarks on `device` ("cpu" or "cuda"). progress(msg) is told what runs next."""
    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    device = check_device(device)
    has_torch = torch_available() if use_torch is None else use_torch
    if device == "cuda":
        if not has_torch:
            raise InputError("device", "cuda needs torch, which is not installed",
                             install_hint("verify", cpu_torch=False))
        import torch
        if not torch.cuda.is_available():
            raise InputError("device", "no CUDA device is visible to torch", "--device cpu")
    reps_bw = 3 if quick else 10
    reps_mm = 2 if quick else 5
    bw_s, mm_s = (BUDGET_BW_QUICK_S, BUDGET_MM_QUICK_S) if quick else (BUDGET_BW_S, BUDGET_MM_S)
    busy = machine_busy()
    notes = [busy] if busy else []
    mem_total, avail, cache, name = _memory_and_name(device, notes)
    size = array_bytes(quick, cache, avail)
    threads = 1
    if has_torch:
        say("loading torch")
        import torch
        threads = torch.get_num_threads()

    def run_bandwidth() -> dict:
        out: dict = {}
        if device == "cpu":
            say(f"bandwidth: numpy copy and triad over 3 arrays of {size / MB:,.0f} MiB, up to {reps_bw} repetitions")
            out.update(numpy_bandwidth(size, reps_bw, bw_s))
        if has_torch:
            say(f"bandwidth: torch copy and triad on {device} over 3 arrays of {size / MB:,.0f} MiB, up to {reps_bw} "
                "repetitions")
            out.update(torch_bandwidth(size, reps_bw, device, bw_s))
        return out

    def run_matmul() -> dict:
        out: dict = {}
        if device == "cpu":
            say("matmul: numpy fp32")
            out.update(numpy_matmul(reps_mm, quick, mm_s))
        if has_torch:
            say(f"matmul: torch fp32, bf16, fp16 on {device}")
            out.update(torch_matmul(reps_mm, quick, device, mm_s))
        return out

    def run_curve() -> dict:
        say(f"GEMM efficiency curve: {CURVE_ROWS[0]} to {CURVE_ROWS[-1]} rows on fp32 weight shapes of 4 to "
            f"{64 if quick else 256} MiB")
        # --quick (tests, a first look): no cache eviction between points, which re-read 2 x the last-level cache
        # per point and took ~20 of its ~30 s on a 2-core VM with a 300 MiB L3; its curve may then read some weights
        # from cache
        return gemm_curve(reps_mm, quick, device, has_torch, 0 if quick else min(cache or 0, 512 * MB))

    def run_overhead() -> dict:
        say("per-call overhead: tiny elementwise ops")
        return call_overhead(500 if quick else 5000, device, has_torch)

    # each section is measured again while the figures the file uses spread past noise.SPREAD_LIMIT (issue 39 item
    # 7: a file measured under load made verify 590% wrong), within one re-measuring budget for the whole run
    budget_s = noise.REMEASURE_BUDGET_QUICK_S if quick else noise.REMEASURE_BUDGET_S
    budget = noise.Budget(budget_s)
    tables, spreads, remeasured = {}, {}, {}
    for key, fn in (("bandwidth", run_bandwidth), ("matmul", run_matmul), ("gemm_curve", run_curve),
                    ("overhead", run_overhead)):
        tables[key], sp, remeasured[key] = noise.steady(key, fn, budget, say, MIN_TFLOPS)
        spreads.update(sp)
    bandwidth, matmul, decode, overhead = (tables[k] for k in ("bandwidth", "matmul", "gemm_curve", "overhead"))
    noise_table = noise.summary(spreads, {k: v for k, v in remeasured.items() if v}, load_average(),
                                budget_s=budget_s)
    if not has_torch:
        notes.append(f"torch is not installed: numpy only (fp32 matmul; no bf16/fp16); {install_hint('verify')}")
    for k, v in matmul.items():
        if v.get("error"):
            notes.append(f"{k}: not measured ({v['error']})")
        elif v["best"] < MIN_TFLOPS:
            notes.append(f"{k}: {v['best'] * 1e3:.3g} GFLOP/s is below the file schema's floor; left out of tflops")
    date = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    vers = versions(has_torch)
    seconds = time.perf_counter() - t_start
    notes.extend(noise.notes(noise_table))
    m = Measurement(device, name, mem_total, bandwidth, matmul, overhead, decode, cache, threads, date, vers, quick,
                    seconds=seconds, notes=tuple(notes), noise=noise_table)
    say(f"done in {m.seconds:.1f} s")
    return m
