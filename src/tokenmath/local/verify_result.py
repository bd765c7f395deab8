"""The result of `tokenmath verify`: measured vs predicted decode step per batch size (seconds), and its summary."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware


@dataclass(frozen=True)
class Row:
    """One batch size: the measured step (median, fastest, every one) beside the engine's prediction."""
    batch: int
    measured_step_s: float
    measured_min_s: float
    measured_steps_s: tuple[float, ...]
    predicted_step_s: float
    predicted_roofline_s: float      # the engine's ops (with the kernel model: curve + per-call times), no overhead
    predicted_overhead_s: float      # n_layers x layer_overhead_s
    bottleneck: str
    weight_bytes: float
    kv_bytes: float
    flops: float
    gemm_efficiency: float | None = None   # measured curve: the GEMMs' share of the pure roofline at this batch
    flat_step_s: float | None = None       # beside it: 100% of the file's figures + the probe's whole step

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_step_s - self.measured_step_s) / self.measured_step_s

    @property
    def flat_error(self) -> float | None:
        if self.flat_step_s is None:
            return None
        return (self.flat_step_s - self.measured_step_s) / self.measured_step_s

    def to_dict(self) -> dict:
        return {"batch": self.batch, "measured_step_s": self.measured_step_s,
                "predicted_step_s": self.predicted_step_s, "error": self.error,
                "measured_min_step_s": self.measured_min_s, "measured_steps_s": list(self.measured_steps_s),
                "predicted_roofline_s": self.predicted_roofline_s, "predicted_overhead_s": self.predicted_overhead_s,
                "measured_per_token_s": self.measured_step_s / self.batch,
                "predicted_per_token_s": self.predicted_step_s / self.batch,
                "gemm_efficiency": self.gemm_efficiency, "flat_step_s": self.flat_step_s,
                "flat_error": self.flat_error,
                "bottleneck": self.bottleneck, "weight_bytes_read": self.weight_bytes,
                "kv_bytes_read": self.kv_bytes, "flops": self.flops}


def knee_batch(batches, steps) -> float | None:
    """Where the hyperbola flattens: per-token time ~ step(1)/B + floor, with the floor read off the largest batch
    (step(Bmax)/Bmax); the 1/B term equals the floor at B = step(1) x Bmax / step(Bmax). None without batch 1."""
    b = list(batches)
    if 1 not in b or len(b) < 2:
        return None
    s1 = steps[b.index(1)]
    i = int(np.argmax(b))
    return float(s1 * b[i] / steps[i])


@dataclass(frozen=True)
class Verification:
    """Sizes in bytes and parameters, times in seconds; hardware and efficiency are what the prediction used."""
    config: dict
    model_name: str
    params_total: float
    weights_bytes: float
    kv_bytes_per_token: float
    n_layers: int
    device: str
    context: int
    warmup: int
    steps: int
    hardware: Hardware               # the Hardware used for the prediction (fp32 figure only)
    hardware_source: str
    efficiency: Efficiency
    probe_steps_s: dict[int, float]  # batch -> median probe step
    rows: tuple[Row, ...]
    critical_batch: int | None
    versions: dict[str, str]
    threads: int
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    flat_efficiency: Efficiency | None = None   # the flat comparison's (None: the prediction is the flat one)

    @property
    def overhead_per_layer_s(self) -> float:
        return float(self.efficiency.layer_overhead_s)

    @property
    def measured_knee(self) -> float | None:
        return knee_batch([r.batch for r in self.rows], [r.measured_step_s for r in self.rows])

    @property
    def predicted_knee(self) -> float | None:
        return knee_batch([r.batch for r in self.rows], [r.predicted_step_s for r in self.rows])

    def summary(self) -> dict:
        """|error| statistics over the batches (and, when every batch has one, of the flat column beside it)."""
        errs = [abs(r.error) for r in self.rows]
        mk, pk = self.measured_knee, self.predicted_knee
        out = {"median_abs_error": statistics.median(errs), "max_abs_error": max(errs),
               "within_25pct": sum(e <= 0.25 for e in errs), "rows": len(errs),
               "measured_knee_batch": mk, "predicted_knee_batch": pk,
               "knee_ratio": (pk / mk) if mk and pk else None}
        ferr = [abs(r.flat_error) for r in self.rows if r.flat_error is not None]
        if ferr and len(ferr) == len(self.rows):
            fk = knee_batch([r.batch for r in self.rows], [r.flat_step_s for r in self.rows])
            out.update(flat_median_abs_error=statistics.median(ferr), flat_max_abs_error=max(ferr),
                       flat_within_25pct=sum(e <= 0.25 for e in ferr), flat_knee_batch=fk,
                       flat_knee_ratio=(fk / mk) if mk and fk else None)
        return out

    def to_dict(self) -> dict:
        hw = self.hardware
        return {
            "model": {"name": self.model_name, "params_total": self.params_total, "weights_bytes": self.weights_bytes,
                      "kv_bytes_per_token": self.kv_bytes_per_token, "n_layers": self.n_layers,
                      "dtype": "fp32", "config": self.config},
            "device": self.device, "context": self.context, "warmup_steps": self.warmup, "timed_steps": self.steps,
            "hardware": {"id": hw.id, "name": hw.name, "source": self.hardware_source,
                         "memory_bw_bytes_per_s": hw.memory_bw, "flops_per_s": dict(hw.flops),
                         "memory_bytes": hw.memory_bytes},
            "efficiency": {"flops": self.efficiency.flops, "memory_bw": self.efficiency.memory_bw,
                           "link_bw": self.efficiency.link_bw, "layer_overhead_s": self.overhead_per_layer_s,
                           "source": self.efficiency.source,
                           "kernels": self.efficiency.kernels.to_dict() if self.efficiency.kernels else None},
            "flat_efficiency": None if self.flat_efficiency is None else {
                "layer_overhead_s": self.flat_efficiency.layer_overhead_s, "source": self.flat_efficiency.source},
            "overhead_probe_step_s": {str(k): v for k, v in self.probe_steps_s.items()},
            "rows": [r.to_dict() for r in self.rows],
            "critical_batch": self.critical_batch,
            "summary": self.summary(),
            "versions": self.versions, "threads": self.threads, "seconds": self.seconds, "notes": list(self.notes),
        }
