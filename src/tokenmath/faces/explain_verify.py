"""The --explain text of a verify result: the prediction's terms per batch, with numbers and units."""
from __future__ import annotations

from tokenmath.local.verify_result import Verification


def explain(v: Verification) -> str:
    hw, L = v.hardware, []
    L.append(f"Verify: {v.model_name} ({v.params_total / 1e6:,.0f}M params, {v.weights_bytes / 1e9:.3g} GB "
             f"fp32) decoding on {v.device}, context {v.context} tokens")
    L.append(f"  hardware ({v.hardware_source}): {hw.memory_bw / 1e9:.3g} GB/s, "
             + ", ".join(f"{k} {x / 1e9:.3g} GFLOP/s" for k, x in hw.flops.items())
             + (f"; kernels: {v.efficiency.kernels.source}" if v.efficiency.kernels is not None else ", used at 100%"))
    L.append(f"  weight read per step = {v.weights_bytes / 1e9:.3g} GB / {hw.memory_bw / 1e9:.3g} GB/s = "
             f"{v.weights_bytes / hw.memory_bw * 1e3:.3g} ms; FLOPs per token = "
             f"{v.rows[0].flops / v.rows[0].batch / 1e9:.3g} GFLOP at {hw.peak_flops('fp32') / 1e9:.3g} GFLOP/s")
    L.append("  overhead per step: " + ", ".join(f"{r.predicted_overhead_s * 1e3:.3g} ms at batch {r.batch}"
                                                 for r in v.rows)
             + " (a tiny-width probe of the same model: "
             + ("its step beyond the engine's prediction of it, linear in batch between the probed batches)"
                if v.efficiency.kernels is not None else "its fastest step)"))
    for r in v.rows:
        L.append(f"  B={r.batch:<4d} predicted {r.predicted_roofline_s * 1e3:8.2f} ms ops "
                 f"(weights {r.weight_bytes / 1e6:,.0f} MB, KV {r.kv_bytes / 1e6:,.1f} MB, {r.flops / 1e9:,.1f} GFLOP) "
                 f"+ {r.predicted_overhead_s * 1e3:.2f} ms overhead = {r.predicted_step_s * 1e3:8.2f} ms "
                 f"({r.bottleneck}); measured {r.measured_step_s * 1e3:8.2f} ms; error {r.error:+.0%}")
        if r.flat_step_s is not None:
            L.append(f"         GEMMs at {r.gemm_efficiency or 0:.0%} of their roofline by the measured curve; at 100% "
                     f"of the figures instead: {r.flat_step_s * 1e3:8.2f} ms, error {r.flat_error:+.0%}")
    for n in v.notes:
        L.append(f"  note: {n}")
    return "\n".join(L)
