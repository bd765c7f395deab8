"""Terminal tables (rich) for `tokenmath measure` and `tokenmath verify`, built from their results only."""
from __future__ import annotations

from tokenmath.base.units import seconds
from tokenmath.local.measurement import Measurement
from tokenmath.local.verify_result import Verification


def escape(text: str) -> str:
    """Text with its square brackets shown, not read as rich markup ("[kernels] section")."""
    from rich.markup import escape as rich_escape
    return rich_escape(text)


def _wide_console():
    """A terminal keeps its own width; a pipe or file gets 150 columns so the table is not folded."""
    from rich.console import Console
    c = Console()
    return c if c.is_terminal else Console(width=150)


def measure_table(m: Measurement, written: str | None) -> None:
    """Every figure (best and median), the hardware file's headline figures, the notes, and where it was written."""
    from rich.table import Table
    c = _wide_console()
    t = Table(title=f"{m.name}: measured {m.date}", header_style="bold")
    for col, j in (("figure", "left"), ("best", "right"), ("median", "right"), ("how", "left")):
        t.add_column(col, justify=j)
    for k, v in m.bandwidth.items():
        t.add_row(f"bandwidth {k}", f"{v['best']:,.1f} GB/s", f"{v['median']:,.1f} GB/s",
                  f"{v['kernel']}; arrays of {v['array_bytes'] / 2**20:,.0f} MiB")
    for k, v in m.matmul.items():
        if v.get("error"):
            t.add_row(f"matmul {k}", "n/a", "n/a", v["error"])
        else:
            t.add_row(f"matmul {k}", f"{v['best'] * 1e3:,.3g} GFLOP/s", f"{v['median'] * 1e3:,.3g} GFLOP/s",
                      f"{v['n']} x {v['n']} x {v['n']}")
    for k, v in m.overhead.items():
        t.add_row(f"per-call overhead {k}", seconds(v["best_us"] * 1e-6), seconds(v["median_us"] * 1e-6), v["op"])
    t.add_row("memory", f"{m.memory_bytes / 1e9:,.1f} GB", "", "total" + (" (MemTotal)" if m.device == "cpu" else ""))
    c.print(t)
    rows, els, eff = m.curve()
    if rows:
        g = Table(title="GEMM efficiency: share of max(FLOPs / peak, bytes / bandwidth) after the per-call overhead "
                        "(the file's \\[kernels] curve)", header_style="bold")
        g.add_column("rows", justify="right")
        for r in m.gemm_curve.values():
            g.add_column(f"{r['k']} x {r['n']} ({4 * r['k'] * r['n'] / 2**20:,.0f} MiB)", justify="right")
        for i, mrows in enumerate(rows):
            g.add_row(str(mrows), *(f"{x:.0%}" for x in eff[i]))
        c.print(g)
    rec = m.record()
    c.print(f"hardware file: memory_bw_tbs = {rec['memory_bw_tbs']:.4g} (best {m.headline_bw_kernel}), tflops = "
            + ", ".join(f"{k} {v:.4g}" for k, v in rec["tflops"].items()))
    for n in m.notes:
        c.print(f"[dim]note: {escape(n)}[/]")
    if written:
        c.print(f"written to {written}: use it as --hardware {written}")
    else:
        c.print("[dim]--out FILE writes it as a hardware file[/]")


def _pct(e: float | None) -> str:
    """A signed error in percent, green within 25%, yellow within 50%, red beyond."""
    if e is None:
        return "n/a"
    colour = "green" if abs(e) <= 0.25 else ("yellow" if abs(e) <= 0.5 else "red")
    return f"[{colour}]{e:+.1%}[/]"


def _span(v: Verification) -> str:
    """The per-step overhead of the rows, one figure or lowest-highest, in ms."""
    lo, hi = (f(r.predicted_overhead_s for r in v.rows) * 1e3 for f in (min, max))
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}-{hi:.3g}"


def verify_table(v: Verification) -> None:
    """The model and prediction in a line each, measured vs predicted per batch, the error summary, the notes."""
    from rich.table import Table
    c = _wide_console()
    hw = v.hardware
    c.print(f"[bold]{v.model_name}[/]: {v.params_total / 1e6:,.0f}M params, {v.weights_bytes / 1e9:.3g} GB fp32, "
            f"KV {v.kv_bytes_per_token / 1e3:.3g} kB/token; transformers {v.versions['transformers']}, "
            f"torch {v.versions['torch']} on {v.device} ({v.threads} threads)")
    how = ("with this machine's measured kernel model (GEMM efficiency curve, per-call times)"
           if v.efficiency.kernels is not None else "at 100% (the file has no [kernels] section)")
    c.print(f"prediction: tokenmath engine on {hw.name} ({v.hardware_source}), {hw.memory_bw / 1e9:.3g} GB/s, fp32 "
            f"{hw.peak_flops('fp32') / 1e9:.3g} GFLOP/s, {how}, + framework overhead {_span(v)} ms/step over "
            f"{v.n_layers} layers (tiny-width probe)")
    t = Table(title=f"decode step at context {v.context} (median of {v.steps} steps after {v.warmup} warm-up)",
              header_style="bold")
    flat = any(r.flat_step_s is not None for r in v.rows)
    cols = ["batch", "measured", "predicted", "= ops", "+ overhead", "error", "measured /token",
            "predicted /token", "bound"]
    if flat:
        cols += ["GEMM eff.", "at 100%", "error (100%)"]
    for col in cols:
        t.add_column(col, justify="right")
    for r in v.rows:
        cells = [str(r.batch), f"{r.measured_step_s * 1e3:.2f} ms", f"{r.predicted_step_s * 1e3:.2f} ms",
                 f"{r.predicted_roofline_s * 1e3:.2f} ms", f"{r.predicted_overhead_s * 1e3:.2f} ms", _pct(r.error),
                 f"{r.measured_step_s / r.batch * 1e3:.3g} ms", f"{r.predicted_step_s / r.batch * 1e3:.3g} ms",
                 r.bottleneck]
        if flat:
            cells += [f"{r.gemm_efficiency:.0%}" if r.gemm_efficiency else "n/a",
                      f"{r.flat_step_s * 1e3:.2f} ms" if r.flat_step_s else "n/a", _pct(r.flat_error)]
        t.add_row(*cells)
    c.print(t)
    s = v.summary()
    c.print(f"error (predicted - measured) / measured: median |error| {s['median_abs_error']:.1%}, max "
            f"{s['max_abs_error']:.1%}; {s['within_25pct']} of {s['rows']} batches within 25%")
    if "flat_median_abs_error" in s:
        c.print(f"at 100% of the file's headline figures without its kernel model (+ the probe's whole step): median "
                f"|error| {s['flat_median_abs_error']:.1%}, max {s['flat_max_abs_error']:.1%}; "
                f"{s['flat_within_25pct']} of {s['rows']} within 25%")
    if s["measured_knee_batch"] and s["predicted_knee_batch"]:
        c.print(f"hyperbola flattens (step(1) / floor per token) at batch ~{s['measured_knee_batch']:.3g} measured, "
                f"~{s['predicted_knee_batch']:.3g} predicted (ratio {s['knee_ratio']:.2f})"
                + (f", ~{s['flat_knee_batch']:.3g} at 100%" if s.get("flat_knee_batch") else "")
                + (f"; engine's critical batch (weight matmuls compute-bound) {v.critical_batch}" if v.critical_batch else ""))
    for n in v.notes:
        c.print(f"[dim]note: {escape(n)}[/]")
