"""What a chart of the page needs and an analysis' dict leaves out: thinned curves and the roofline of infer's ops.
Every value passes through tokenmath.base.validators.finite (NaN/inf become None)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tokenmath.base.validators import finite

if TYPE_CHECKING:
    from tokenmath.analyses.serving.infer import InferResult
    from tokenmath.analyses.serving.pareto import Pareto
    from tokenmath.analyses.training.overtrain import OvertrainResult

CURVE_POINTS = 160                 # points of a long array kept for a chart
PARETO_POINTS = 600                # points of a Pareto frontier kept for its chart


def thin(n: int, keep: int = CURVE_POINTS) -> np.ndarray:
    """Indices of up to `keep` evenly spaced points of an array of n (first and last included)."""
    if n <= keep:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, keep)).astype(int))


def overtrain_chart(r: OvertrainResult) -> dict[str, list[float | None]]:
    """Each array of the cost curve (parameters, tokens, $) thinned to CURVE_POINTS points, as floats (None for
    NaN/inf)."""
    idx = thin(len(r.curve["params"]))
    return {k: [finite(x) for x in np.asarray(v)[idx]] for k, v in r.curve.items()}


def pareto_chart(p: Pareto) -> dict[str, list]:
    """Every (layout, batch) that fits as points [output tokens/s per user, output tokens/s per chip], thinned to
    PARETO_POINTS, and beside them (same order) which point each is: [layout, batch, $/Mtok output of the whole
    request or None], for the page's readout."""
    idx = thin(len(p.points), PARETO_POINTS)
    pts = [p.points[i] for i in idx]
    return {"points": [[q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"]] for q in pts],
            "labels": [[q["layout"], q["batch"], q.get("cost_per_mtok_output_request_usd")] for q in pts]}


def roofline(r: InferResult) -> dict:
    """Each operation of prefill and decode as a point of the roofline: arithmetic intensity (FLOPs / HBM bytes, per
    occurrence per chip, from the engine) and the FLOP/s it attains (FLOPs / its own max(compute, memory, comm)
    time), with the chip's roofs: the dense peak of each compute dtype the ops use and the HBM bandwidth (an op whose
    ceiling is its kernel's at its shape, flops_dtype "kernel", adds no roof)."""
    from tokenmath.specs.hardware import FLOP_KEYS
    hw, eff = r.hardware, r.efficiency
    roofs: dict[str, float] = {}

    def label(achievable: float) -> tuple[str, float]:
        peak = achievable / eff.flops if eff.flops else achievable
        for k in FLOP_KEYS:
            v = hw.flops.get(k)
            if v and abs(v - peak) <= 1e-6 * peak:
                return k, v
        # a shape-aware kernel's own ceiling (tile and wave quantization at this op's shape): the op's, not a roof
        return "kernel", peak

    passes = {}
    for name, pc in (("prefill", r.prefill), ("decode", r.decode)):
        if pc is None:
            continue
        ops = []
        for op in pc.ops.values():
            fl, by = finite(op.flops) or 0.0, finite(op.bytes) or 0.0
            c, m, k = finite(op.compute_s) or 0.0, finite(op.memory_s) or 0.0, finite(op.comm_s) or 0.0
            t = max(c, m, k)
            key, peak = label(float(op.peak_flops)) if op.peak_flops else ("peak", 0.0)
            if fl > 0 and peak and key != "kernel":
                roofs[key] = peak
            ops.append({"name": op.name, "count": finite(op.count), "flops": fl, "bytes": by,
                        "intensity": fl / by if fl > 0 and by > 0 else None,
                        "attained_flops_per_s": fl / t if fl > 0 and t > 0 else None,
                        "compute_s": c, "memory_s": m, "comm_s": k, "total_s": finite(op.total_s),
                        "bound": "communication" if k > max(c, m) else ("compute" if c >= m else "memory"),
                        "flops_dtype": key, "peak_flops": peak or None,
                        "ridge": peak / hw.memory_bw if peak else None})
        passes[name] = {"ops": ops, "time_s": finite(pc.time_s), "bottleneck": str(pc.bottleneck)}
    wkey = hw.flops_key(r.precision.weight.compute)
    wpeak = hw.peak_flops(r.precision.weight.compute)
    roofs.setdefault(wkey, wpeak)
    return {"memory_bw": hw.memory_bw, "memory_bw_achievable": hw.memory_bw * eff.memory_bw,
            "flops_efficiency": eff.flops,
            "roofs": [{"dtype": k, "peak_flops": v, "achievable_flops": v * eff.flops, "ridge": v / hw.memory_bw}
                      for k, v in sorted(roofs.items(), key=lambda kv: -kv[1])],
            "ridge_point": wpeak / hw.memory_bw, "ridge_dtype": wkey, "passes": passes,
            "per": "one occurrence of each op, per chip"}
