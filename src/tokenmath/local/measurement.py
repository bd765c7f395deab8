"""The result of `tokenmath measure`: the raw tables, the headline figures read from them, and the hardware record
(catalog schema, humane units) they make."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from tokenmath.local.bandwidth import BandwidthTable
from tokenmath.local.decode_matmul import CurveTable, curve_efficiency
from tokenmath.local.hardware_file import write_hardware_file
from tokenmath.local.noise import headline_triad, notes as noise_notes, overhead_kernel, refusal
from tokenmath.local.matmul import MIN_TFLOPS, MatmulTable
from tokenmath.local.overhead import OverheadTable


@dataclass(frozen=True)
class Measurement:
    """Figures in the units of their tables: GB/s (1e9 bytes/s), TFLOP/s, microseconds; memory in bytes."""
    device: str                       # "cpu" or "cuda"
    name: str
    memory_bytes: float
    bandwidth: BandwidthTable         # kernel -> {"best" GB/s, "median" GB/s, "array_bytes", "traffic_bytes", ...}
    matmul: MatmulTable               # impl_dtype -> {"best" TFLOP/s, "median", "n", "dtype", ...}
    overhead: OverheadTable           # impl -> {"best_us", "median_us", "calls"}
    gemm_curve: CurveTable            # "KxN" -> matmuls of 1..256 rows on that weight shape (decode_matmul.gemm_curve)
    cache_bytes: int | None
    threads: int
    date: str                         # ISO 8601, local time with its offset
    versions: dict[str, str]
    quick: bool
    seconds: float = 0.0              # wall time of the whole measurement
    notes: tuple[str, ...] = ()
    # the repetitions' spread per figure the file uses (local.noise.summary: spread_limit, spread, noisy,
    # remeasured); empty for a Measurement made without the check
    noise: dict = field(default_factory=dict)

    # headline figures ------------------------------------------------------------------------------------------
    @property
    def headline_bw_kernel(self) -> str:
        return headline_triad(self.bandwidth) or next(iter(self.bandwidth))

    @property
    def memory_bw(self) -> float:
        """bytes/s: the best triad of any implementation."""
        return self.bandwidth[self.headline_bw_kernel]["best"] * 1e9

    @property
    def flops(self) -> dict[str, float]:
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
        k = overhead_kernel(self.overhead)
        return self.overhead[k]["median_us"] * 1e-6 if k else None

    def curve(self) -> tuple[tuple[int, ...], tuple[int, ...], list[list[float]]]:
        """(rows, weight elements per shape, efficiency[row][shape]): the share of this file's roofline (best triad,
        best fp32 square matmul) each fp32 GEMM reached after the per-call overhead (decode_matmul.curve_efficiency)."""
        fp32 = self.flops.get("fp32")
        if not fp32 or not self.gemm_curve:
            return (), (), []
        return curve_efficiency(self.gemm_curve, self.memory_bw, fp32, self.overhead_s or 0.0)

    def kernels_section(self) -> dict | None:
        """The hardware file's [kernels] section: this machine's kernel model (specs.kernels_measured.measured_model reads
        it). None when no fp32 matmul or no curve was measured."""
        rows, els, eff = self.curve()
        if not rows:
            return None
        shapes = ", ".join(f"{r['k']}x{r['n']}" for r in self.gemm_curve.values())
        return {"how": "measured", "date": self.date,
                "src": (f"tokenmath measure: {next(iter(self.gemm_curve.values()))['impl']} fp32, K x N = {shapes}, "
                        f"rows {rows[0]}-{rows[-1]}; efficiency = max(FLOPs / gemm_peak_tflops, bytes / stream_gbs) / "
                        "(median s per call - per_call_s)"),
                "stream_gbs": self.memory_bw / 1e9, "gemm_peak_tflops": self.flops["fp32"] / 1e12,
                "gemm_dtype": "fp32", "per_call_s": self.overhead_s or 0.0, "rows": list(rows),
                "weight_elements": list(els),
                "efficiency": [[max(1e-4, float(f"{x:.4g}")) for x in row] for row in eff]}

    # the hardware file -----------------------------------------------------------------------------------------
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
                      f"peaks; the [kernels] section is this machine's kernel model (GEMM efficiency vs rows and shape, "
                      f"per-call overhead), used by default; --peak is the pure roofline of these figures. Bandwidth = best {kern} ({self.bandwidth[kern]['best']:.3g} GB/s, "
                      f"median {self.bandwidth[kern]['median']:.3g}); matmul: {mm}."
                      + (" --quick: small arrays and few repetitions." if self.quick else "")
                      + "".join(f" {n}." for n in noise_notes(self.noise) if n.startswith("NOISY"))),
            "sources": {
                "memory": "tokenmath measure: " + ("/proc/meminfo MemTotal" if self.device == "cpu"
                                                   else "torch.cuda.get_device_properties().total_memory"),
                "bandwidth": f"tokenmath measure: STREAM-style {kern}, best of {self.bandwidth[kern]['reps']} reps",
                "flops": "tokenmath measure: best square matmul per dtype (numpy / torch)",
            },
            "measured": self.measured_table(),
        }
        ks = self.kernels_section()
        if ks:
            rec["kernels"] = ks
            rec["sources"]["kernels"] = ("tokenmath measure: GEMM efficiency vs rows and shape, streaming fraction, "
                                         "per-call overhead (the [kernels] section)")
        return rec

    def measured_table(self) -> dict:
        """The record's [measured] section: every raw figure, so the file says how it was made."""
        t = {"date": self.date, "device": self.device, "quick": self.quick, "threads": self.threads,
             "seconds": round(self.seconds, 2), "versions": dict(self.versions)}
        if self.cache_bytes:
            t["cache_bytes"] = int(self.cache_bytes)
        t["bandwidth_gbs"] = {k: _clean(v) for k, v in self.bandwidth.items()}
        t["matmul_tflops"] = {k: _clean(v) for k, v in self.matmul.items()}
        t["overhead_us"] = {k: _clean(v) for k, v in self.overhead.items()}
        t["gemm_curve"] = {k: _clean(v) for k, v in self.gemm_curve.items()}
        if self.overhead_s is not None:
            t["per_call_overhead_s"] = self.overhead_s
        if self.noise:
            t["noise"] = self.noise
        return t

    @property
    def is_noisy(self) -> bool:
        """Whether a figure the file uses spread past local.noise.SPREAD_LIMIT over its repetitions."""
        return bool(self.noise.get("noisy"))

    def write(self, path: str | os.PathLike, accept_noisy: bool = False) -> str:
        """The hardware file at path (.toml or .json); returns the path written. A noisy measurement (local.noise) is
        refused with an InputError naming its worst figure, unless accept_noisy: then the file records the spreads
        in [measured.noise] and its notes say NOISY."""
        err = None if accept_noisy else refusal(self.noise)
        if err:
            raise err
        return write_hardware_file(self.record(), path)

    def to_dict(self) -> dict:
        return {"device": self.device, "name": self.name, "memory_bytes": self.memory_bytes,
                "memory_bw_bytes_per_s": self.memory_bw, "memory_bw_kernel": self.headline_bw_kernel,
                "flops_per_s": self.flops, "per_call_overhead_s": self.overhead_s,
                "bandwidth_gbs": self.bandwidth, "matmul_tflops": self.matmul, "overhead_us": self.overhead,
                "gemm_curve": self.gemm_curve,
                "cache_bytes": self.cache_bytes, "threads": self.threads, "date": self.date,
                "versions": self.versions, "quick": self.quick, "seconds": self.seconds, "notes": list(self.notes),
                "noise": self.noise,
                "hardware_record": self.record()}


def _clean(d: dict) -> dict:
    """Numpy floats as plain floats and None left out (TOML has no null)."""
    return {k: (float(v) if isinstance(v, float) else v) for k, v in d.items() if v is not None}
