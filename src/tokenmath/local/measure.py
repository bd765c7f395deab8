"""Measure this machine: sustained memory bandwidth, matmul FLOP/s, per-call framework overhead.

Writes a hardware file in the catalog's schema (data/hardware.toml), so `--hardware FILE` works everywhere.

What is measured (every figure: the best of several repetitions, with the median beside it):
- bandwidth, STREAM-style (McCalpin, "Memory bandwidth and machine balance", 1995) over arrays of
  max(4 x last-level cache, 256 MB) each (64 MB with --quick): copy (b = a; 2 arrays of traffic) and triad
  (a = b + s c; numpy runs it as two passes, c*s into a then a + b into a, so 5 arrays of traffic are counted;
  torch fuses it into one pass of 3). Bytes are counted the STREAM way: what the arrays carry, not the extra
  read-for-ownership a cache may add on a store. Numpy runs single-threaded, torch on all its threads.
  memory_bw_tbs is the best triad of any implementation (STREAM's headline kernel); copy is recorded beside it.
- matmul FLOP/s: square n x n products, 2 n^3 FLOP each, fp32 with numpy, and fp32/bf16/fp16 with torch when
  installed (n chosen so one product takes about a quarter of a second, up to 4096); tflops holds the best of
  every implementation for each dtype.
- decode-shaped matmuls: M = 1..64 rows of activations times a stack of 2048 x 2048 fp32 weight matrices as large
  as the bandwidth arrays (a decode step reads every weight once for a batch of M tokens). Recorded, with the
  fraction of max(FLOPs / fp32 peak, bytes / bandwidth) each M reaches (`measured.decode_matmul_efficiency`):
  a framework's small-M matmul can stream weights far below STREAM bandwidth (torch on a 2-core CPU: ~1/3 at
  M = 2-16), which a roofline on the headline figures does not know.
- per-call overhead: the latency of a tiny elementwise op (1-element arrays): what a framework adds to every
  kernel whatever its size (numpy ufunc dispatch; torch eager dispatch; on CUDA, back-to-back launches).

These are sustained figures, not datasheet peaks: a prediction meant to match this machine uses them at 100%
(`--peak`, or Efficiency(1, 1, 1)), since the achievable fractions in tokenmath.specs.efficiency are already inside them.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenmath.base.errors import InputError

MB = 1 << 20
DEFAULT_ARRAY_MIN = 256 * MB
QUICK_ARRAY = 64 * MB
MAX_MATMUL_N = 4096
TARGET_MATMUL_S = 0.25
MIN_TFLOPS = 1e-4          # hardware.from_record's lower bound for a tflops figure


def _noop(msg: str) -> None:
    pass


# ---- what the machine says about itself ----------------------------------------------------------------------
def meminfo() -> dict:
    """/proc/meminfo in bytes (empty where there is none)."""
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            k, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[k.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    except OSError:
        pass
    return out


def _parse_size(s: str) -> int | None:
    s = s.strip().upper().replace("IB", "").replace("B", "")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        if s and s[-1] in mult:
            return int(float(s[:-1]) * mult[s[-1]])
        return int(s)
    except ValueError:
        return None


def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache (L3 where there is one), from /sys, else lscpu; None when unknown."""
    best = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in sorted(base.glob("index*")):
            size = _parse_size((d / "size").read_text())
            if size and (best is None or size > best):
                best = size
    except OSError:
        pass
    if best:
        return best
    try:
        txt = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5, check=False).stdout
        for line in txt.splitlines():
            if line.startswith(("L3 cache", "L2 cache")):
                tok = line.split(":", 1)[1].split("(")[0].strip().replace(" ", "")
                size = _parse_size(tok)
                if size and (best is None or size > best):
                    best = size
    except (OSError, ValueError, subprocess.SubprocessError):  # lscpu is optional
        return best
    return best


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def torch_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def machine_busy() -> str | None:
    """A note when other processes already load the cores (timings then run slow and scatter)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    n = cpu_count()
    if load > 0.5 * n + 0.25:
        return (f"the machine was busy when this started (load average {load:.1f} on {n} cores): other processes "
                "share the cores, so measured times run slow and scatter (verify --threads 1 suffers least)")
    return None


# ---- timing --------------------------------------------------------------------------------------------------
def _times(fn: Callable[[], object], reps: int, sync: Callable[[], None] = lambda: None, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def _summary(work: float, times: list[float], unit_scale: float) -> dict:
    """work per call (bytes or FLOP) -> best and median rate in unit_scale units."""
    best, med = min(times), statistics.median(times)
    return {"best": work / best / unit_scale, "median": work / med / unit_scale, "reps": len(times),
            "best_s": best, "median_s": med}


# ---- results -------------------------------------------------------------------------------------------------
@dataclass
class Measurement:
    device: str                       # "cpu" or "cuda"
    name: str
    memory_bytes: float
    bandwidth: dict                   # kernel -> {"best" GB/s, "median" GB/s, "array_bytes", "traffic_bytes", ...}
    matmul: dict                      # impl_dtype -> {"best" TFLOP/s, "median", "n", "dtype", ...}
    overhead: dict                    # impl -> {"best_us", "median_us", "calls"}
    decode_matmul: dict               # "m<rows>" -> decode-shaped matmul timing (see _decode_matmul)
    cache_bytes: int | None
    threads: int
    date: str
    versions: dict
    quick: bool
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    # headline figures ------------------------------------------------------------------------------------------
    @property
    def headline_bw_kernel(self) -> str:
        triads = {k: v for k, v in self.bandwidth.items() if k.endswith("triad")}
        pool = triads or self.bandwidth
        return max(pool, key=lambda k: pool[k]["best"])

    @property
    def memory_bw(self) -> float:
        """bytes/s: the best triad of any implementation."""
        return self.bandwidth[self.headline_bw_kernel]["best"] * 1e9

    @property
    def flops(self) -> dict:
        """dtype -> best FLOP/s over implementations (figures below the schema's floor are left out)."""
        out: dict[str, float] = {}
        for r in self.matmul.values():
            v = r["best"] * 1e12
            if r["best"] >= MIN_TFLOPS and v > out.get(r["dtype"], 0.0):
                out[r["dtype"]] = v
        return out

    @property
    def overhead_s(self) -> float | None:
        """Per-call latency of a tiny op in the framework a model would run in (torch when measured, else numpy)."""
        for k in ("torch", "numpy"):
            if k in self.overhead:
                return self.overhead[k]["median_us"] * 1e-6
        return None

    def decode_efficiency(self) -> dict[int, float]:
        """rows -> fraction of this file's headline figures a decode-shaped fp32 matmul reaches."""
        fp32 = self.flops.get("fp32")
        return decode_efficiency(self.decode_matmul, self.memory_bw, fp32) if fp32 else {}

    def record(self) -> dict:
        """The hardware file (catalog schema, humane units)."""
        fl = self.flops
        kern = self.headline_bw_kernel
        mm = ", ".join(f"{d} {v / 1e12:.4g} TFLOP/s" for d, v in fl.items())
        rec = {
            "id": f"measured-{self.device}",
            "name": f"{self.name} (measured)",
            "kind": "cpu" if self.device == "cpu" else "gpu",
            "memory_gb": round(self.memory_bytes / 1e9, 3),
            "memory_bw_tbs": self.memory_bw / 1e12,
            "tflops": {d: v / 1e12 for d, v in fl.items()},
            "scaleup_domain": 1,
            "notes": (f"Measured on this machine by `tokenmath measure` on {self.date}: sustained figures, not datasheet "
                      f"peaks (use them at 100%: --peak). Bandwidth = best {kern} ({self.bandwidth[kern]['best']:.3g} GB/s, "
                      f"median {self.bandwidth[kern]['median']:.3g}); matmul: {mm}."
                      + (" --quick: small arrays and few repetitions." if self.quick else "")),
            "sources": {
                "memory": "tokenmath measure: " + ("/proc/meminfo MemTotal" if self.device == "cpu"
                                                   else "torch.cuda.get_device_properties().total_memory"),
                "bandwidth": f"tokenmath measure: STREAM-style {kern}, best of {self.bandwidth[kern]['reps']} reps",
                "flops": "tokenmath measure: best square matmul per dtype (numpy / torch)",
            },
            "measured": self.measured_table(),
        }
        return rec

    def measured_table(self) -> dict:
        t = {"date": self.date, "device": self.device, "quick": self.quick, "threads": self.threads,
             "seconds": round(self.seconds, 2), "versions": dict(self.versions)}
        if self.cache_bytes:
            t["cache_bytes"] = int(self.cache_bytes)
        t["bandwidth_gbs"] = {k: _clean(v) for k, v in self.bandwidth.items()}
        t["matmul_tflops"] = {k: _clean(v) for k, v in self.matmul.items()}
        t["overhead_us"] = {k: _clean(v) for k, v in self.overhead.items()}
        t["decode_matmul"] = {k: _clean(v) for k, v in self.decode_matmul.items()}
        eff = self.decode_efficiency()
        if eff:
            t["decode_matmul_efficiency"] = {f"m{k}": v for k, v in eff.items()}
        if self.overhead_s is not None:
            t["per_call_overhead_s"] = self.overhead_s
        return t

    def to_dict(self) -> dict:
        return {"device": self.device, "name": self.name, "memory_bytes": self.memory_bytes,
                "memory_bw_bytes_per_s": self.memory_bw, "memory_bw_kernel": self.headline_bw_kernel,
                "flops_per_s": self.flops, "per_call_overhead_s": self.overhead_s,
                "bandwidth_gbs": self.bandwidth, "matmul_tflops": self.matmul, "overhead_us": self.overhead,
                "decode_matmul": self.decode_matmul,
                "decode_matmul_efficiency": {str(k): v for k, v in self.decode_efficiency().items()},
                "cache_bytes": self.cache_bytes, "threads": self.threads, "date": self.date,
                "versions": self.versions, "quick": self.quick, "seconds": self.seconds, "notes": self.notes,
                "hardware_record": self.record()}

    def write(self, path: str | os.PathLike) -> str:
        p = Path(path)
        if p.suffix.lower() not in (".toml", ".json"):
            raise InputError("out", f"unsupported file type {p.suffix or '(none)'!r}", "a .toml or .json path")
        if p.parent and not p.parent.exists():
            raise InputError("out", f"folder {str(p.parent)!r} does not exist", "an existing folder")
        rec = self.record()
        if p.suffix.lower() == ".json":
            p.write_text(json.dumps(rec, indent=2) + "\n")
        else:
            p.write_text(to_toml(rec, header="tokenmath hardware file written by `tokenmath measure` "
                                             "(catalog schema; see src/tokenmath/data/hardware.toml)"))
        return str(p)


def _clean(d: dict) -> dict:
    return {k: (float(v) if isinstance(v, float) else v) for k, v in d.items() if v is not None}


# ---- a small TOML writer (tomllib only reads) ------------------------------------------------------------------
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("TOML has no place for NaN here")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)   # JSON's escapes are valid in a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    import re
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def to_toml(rec: dict, header: str = "") -> str:
    """Scalars and small tables inline at the top; nested tables (sources, measured) as [sections]."""
    lines = [f"# {header}"] if header else []
    inline_tables = ("tflops",)

    def emit(d: dict, prefix: str):
        scal = [(k, v) for k, v in d.items() if not isinstance(v, dict) or k in inline_tables and not prefix]
        subs = [(k, v) for k, v in d.items() if isinstance(v, dict) and not (k in inline_tables and not prefix)]
        if prefix and scal:
            lines.append("")
            lines.append(f"[{prefix}]")
        for k, v in scal:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for k, v in subs:
            emit(v, f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k))
    emit(rec, "")
    return "\n".join(lines) + "\n"


# ---- the benchmarks --------------------------------------------------------------------------------------------
def _array_bytes(quick: bool, cache: int | None, avail: int | None) -> int:
    size = QUICK_ARRAY if quick else max(4 * (cache or 0), DEFAULT_ARRAY_MIN)
    if avail:
        size = min(size, max(avail // 8, 16 * MB))   # three arrays (and torch's three) stay well inside free memory
    return int(size)


def _numpy_bandwidth(nbytes: int, reps: int) -> dict:
    n = nbytes // 8
    a = np.full(n, 1.0)
    b = np.full(n, 2.0)
    c = np.full(n, 0.5)
    s = 3.0
    out = {}
    t = _times(lambda: np.copyto(b, a), reps)
    out["numpy_copy"] = {**_summary(2 * n * 8, t, 1e9), "array_bytes": n * 8, "traffic_bytes": 2 * n * 8,
                         "kernel": "b = a (np.copyto)"}

    def triad():
        np.multiply(c, s, out=a)
        np.add(a, b, out=a)
    t = _times(triad, reps)
    out["numpy_triad"] = {**_summary(5 * n * 8, t, 1e9), "array_bytes": n * 8, "traffic_bytes": 5 * n * 8,
                          "kernel": "a = b + s*c as two passes (c*s -> a; a + b -> a): 5 arrays moved"}
    return out


def _torch_bandwidth(nbytes: int, reps: int, device: str) -> dict:
    import torch
    n = nbytes // 4
    dev = torch.device(device)
    a = torch.full((n,), 1.0, dtype=torch.float32, device=dev)
    b = torch.full((n,), 2.0, dtype=torch.float32, device=dev)
    c = torch.full((n,), 0.5, dtype=torch.float32, device=dev)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {}
    t = _times(lambda: b.copy_(a), reps, sync)
    out["torch_copy"] = {**_summary(2 * n * 4, t, 1e9), "array_bytes": n * 4, "traffic_bytes": 2 * n * 4,
                         "kernel": "b.copy_(a)"}
    t = _times(lambda: torch.add(b, c, alpha=3.0, out=a), reps, sync)
    out["torch_triad"] = {**_summary(3 * n * 4, t, 1e9), "array_bytes": n * 4, "traffic_bytes": 3 * n * 4,
                          "kernel": "torch.add(b, c, alpha=s, out=a): one fused pass"}
    a = b = c = None
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def _matmul_n(call_at: Callable[[int], float], quick: bool) -> int:
    """The smallest n (doubling from 256) whose product takes at least a quarter of TARGET_MATMUL_S (a sixteenth
    with --quick), up to MAX_MATMUL_N (1024 with --quick): big enough to reach the sustained rate, short enough
    for a slow dtype (bf16 on a CPU without a bf16 path runs near 1 GFLOP/s)."""
    hi = 1024 if quick else MAX_MATMUL_N
    floor = TARGET_MATMUL_S / (16 if quick else 4)
    n = 256
    while n < hi and call_at(n) < floor:
        n *= 2
    return n


def _numpy_matmul(reps: int, quick: bool) -> dict:
    def call_at(n):
        a = np.ones((n, n), np.float32)
        return min(_times(lambda: a @ a, 2, warmup=0))
    n = _matmul_n(call_at, quick)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t = _times(lambda: a @ b, reps)
    return {"numpy_fp32": {**_summary(2.0 * n ** 3, t, 1e12), "n": n, "dtype": "fp32"}}


def _torch_matmul(reps: int, quick: bool, device: str) -> dict:
    import torch
    dev = torch.device(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
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
                return min(_times(lambda: a @ a, 2, sync, warmup=0))
            try:
                n = _matmul_n(call_at, quick) if device == "cpu" else (2048 if quick else 8192)
                g = torch.Generator(device=dev).manual_seed(0)
                a = torch.randn((n, n), generator=g, device=dev).to(dt)
                b = torch.randn((n, n), generator=g, device=dev).to(dt)
                t = _times(lambda a=a, b=b: a @ b, reps, sync)
            except RuntimeError as e:     # a dtype this build or device cannot multiply
                out[f"torch_{key}"] = {"error": str(e).splitlines()[0][:200], "dtype": key, "best": 0.0, "median": 0.0}
                continue
            out[f"torch_{key}"] = {**_summary(2.0 * n ** 3, t, 1e12), "n": n, "dtype": key}
    finally:
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = prev
    return out


DECODE_ROWS = (1, 2, 4, 8, 16, 32, 64)
DECODE_ROWS_QUICK = (1, 4, 16, 64)


def _decode_matmul(nbytes: int, reps: int, quick: bool, device: str, with_torch: bool) -> dict:
    """Decode-shaped fp32 matmuls: M rows of activations times a stack of 2048 x 2048 weight matrices that together
    exceed the caches (as a decode step reads every weight once). Per M: time, weight bytes and FLOPs, from which
    the achievable fraction of the headline figures at that batch follows (Measurement.decode_efficiency)."""
    k = 4096 if device == "cuda" else 2048
    per = k * k * 4
    count = max(2, math.ceil(nbytes / per))
    rows = DECODE_ROWS_QUICK if quick else DECODE_ROWS
    out = {}
    if with_torch:
        import torch
        dev = torch.device(device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        g = torch.Generator(device=dev).manual_seed(0)
        ws = [torch.randn((k, k), generator=g, device=dev) for _ in range(count)]
        impl = f"torch.nn.functional.linear ({device})"
        with torch.inference_mode():
            for m in rows:
                x = torch.randn((m, k), generator=g, device=dev)
                t = _times(lambda x=x: [torch.nn.functional.linear(x, w) for w in ws], reps, sync)
                out[f"m{m}"] = _decode_row(m, k, count, t, impl)
    else:
        rng = np.random.default_rng(0)
        ws = [rng.standard_normal((k, k), dtype=np.float32) for _ in range(count)]
        for m in rows:
            x = rng.standard_normal((m, k), dtype=np.float32)
            t = _times(lambda x=x: [x @ w for w in ws], reps)
            out[f"m{m}"] = _decode_row(m, k, count, t, "numpy matmul")
    return out


def _decode_row(m: int, k: int, count: int, times: list[float], impl: str) -> dict:
    wb = float(count * k * k * 4)
    fl = float(2 * m * k * k * count)
    best, med = min(times), statistics.median(times)
    return {"rows": m, "weight_bytes": wb, "flops": fl, "best_s": best, "median_s": med,
            "best_gbs": wb / best / 1e9, "best_gflops": fl / best / 1e9, "shape": f"{m} x {k} @ {k} x {k}, {count} matrices",
            "impl": impl}


def decode_efficiency(table: dict, memory_bw: float, peak_flops: float) -> dict[int, float]:
    """rows -> achievable fraction of the roofline: max(FLOPs / peak, bytes / bandwidth) / best time, capped at 1.
    Applied to both the FLOP/s and bandwidth of a prediction, it reproduces the decode-shaped matmul's own time."""
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


def _overhead(calls: int, device: str, with_torch: bool) -> dict:
    out = {}
    if device == "cpu":
        a = np.ones(1)
        o = np.empty(1)
        per = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                np.add(a, a, out=o)
            per.append((time.perf_counter() - t0) / calls)
        out["numpy"] = {"best_us": min(per) * 1e6, "median_us": statistics.median(per) * 1e6, "calls": calls * 5,
                        "op": "np.add on 1-element arrays"}
    if with_torch:
        import torch
        dev = torch.device(device)
        x = torch.ones(1, device=dev)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        per = []
        for _ in range(5):
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.add(x, x)
            sync()
            per.append((time.perf_counter() - t0) / calls)
        out["torch"] = {"best_us": min(per) * 1e6, "median_us": statistics.median(per) * 1e6, "calls": calls * 5,
                        "op": f"torch.add on 1-element tensors ({device}{', back-to-back launches' if device == 'cuda' else ''})"}
    return out


def versions(with_torch: bool) -> dict:
    from tokenmath import __version__
    v = {"tokenmath": __version__, "python": platform.python_version(), "numpy": np.__version__,
         "platform": platform.platform()}
    if with_torch:
        import torch
        v["torch"] = torch.__version__
        if torch.cuda.is_available():
            v["cuda"] = str(torch.version.cuda)
    return v


def measure(device: str = "cpu", quick: bool = False, progress: Callable[[str], None] | None = None,
            use_torch: bool | None = None) -> Measurement:
    """Run the microbenchmarks on `device` ("cpu" or "cuda"). progress(msg) is told what runs next."""
    say = progress or _noop
    t_start = time.perf_counter()
    device = str(device).lower()
    if device not in ("cpu", "cuda"):
        raise InputError("device", f"unknown device {device!r}", "cpu or cuda")
    has_torch = torch_available() if use_torch is None else use_torch
    if device == "cuda":
        if not has_torch:
            raise InputError("device", "cuda needs torch, which is not installed", "pip install 'tokenmath[verify]'")
        import torch
        if not torch.cuda.is_available():
            raise InputError("device", "no CUDA device is visible to torch", "--device cpu")
    reps_bw = 3 if quick else 10
    reps_mm = 2 if quick else 5
    busy = machine_busy()
    notes = [busy] if busy else []
    if device == "cpu":
        info = meminfo()
        mem_total = float(info.get("MemTotal") or 0) or None
        avail = info.get("MemAvailable")
        cache = last_level_cache_bytes()
        name = f"{cpu_name()}, {cpu_count()} cores"
        if mem_total is None:
            mem_total = 8e9
            notes.append("total memory unknown (no /proc/meminfo): 8 GB assumed")
    else:
        import torch
        props = torch.cuda.get_device_properties(0)
        mem_total = float(props.total_memory)
        avail = int(torch.cuda.mem_get_info()[0])
        cache = int(getattr(props, "L2_cache_size", 0) or 0) or None
        name = torch.cuda.get_device_name(0)
    size = _array_bytes(quick, cache, avail)
    threads = 1
    if has_torch:
        import torch
        threads = torch.get_num_threads()

    bandwidth: dict = {}
    matmul: dict = {}
    if device == "cpu":
        say(f"bandwidth: numpy copy and triad over 3 arrays of {size / MB:,.0f} MiB, {reps_bw} repetitions")
        bandwidth.update(_numpy_bandwidth(size, reps_bw))
    if has_torch:
        say(f"bandwidth: torch copy and triad on {device} over 3 arrays of {size / MB:,.0f} MiB, {reps_bw} repetitions")
        bandwidth.update(_torch_bandwidth(size, reps_bw, device))
    if device == "cpu":
        say("matmul: numpy fp32")
        matmul.update(_numpy_matmul(reps_mm, quick))
    if has_torch:
        say(f"matmul: torch fp32, bf16, fp16 on {device}")
        matmul.update(_torch_matmul(reps_mm, quick, device))
    say(f"decode-shaped matmuls: 1 to 64 rows times {size / MB:,.0f} MiB of fp32 weights")
    decode = _decode_matmul(size, reps_mm, quick, device, has_torch)
    say("per-call overhead: tiny elementwise ops")
    overhead = _overhead(500 if quick else 5000, device, has_torch)
    if not has_torch:
        notes.append("torch is not installed: numpy only (fp32 matmul; no bf16/fp16); pip install 'tokenmath[verify]'")
    for k, v in matmul.items():
        if v.get("error"):
            notes.append(f"{k}: not measured ({v['error']})")
        elif v["best"] < MIN_TFLOPS:
            notes.append(f"{k}: {v['best'] * 1e3:.3g} GFLOP/s is below the file schema's floor; left out of tflops")
    m = Measurement(device, name, mem_total, bandwidth, matmul, overhead, decode, cache, threads,
                    _dt.datetime.now().astimezone().isoformat(timespec="seconds"), versions(has_torch), quick,
                    notes=notes)
    m.seconds = time.perf_counter() - t_start
    say(f"done in {m.seconds:.1f} s")
    return m
