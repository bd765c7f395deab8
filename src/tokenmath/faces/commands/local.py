"""`tokenmath measure` and `tokenmath verify`: this machine's own roofline, checked against a real model."""
from __future__ import annotations

import sys

import click

from tokenmath.faces.commands.common import emit_json, guarded


def _progress(enabled: bool):
    """Progress lines on stderr (stdout stays clean for --json and tables)."""
    if not enabled:
        return None

    def say(msg: str) -> None:
        click.echo(f"  .. {msg}", err=True)
    return say


@click.command()
@click.option("--device", type=click.Choice(["cpu", "cuda"], case_sensitive=False), default="cpu", show_default=True,
              help="What to measure (cuda needs torch with a GPU).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False),
              help="Write the hardware file here (.toml or .json, catalog schema): usable as --hardware FILE.")
@click.option("--quick", is_flag=True, help="Small arrays and few repetitions (seconds; for tests).")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="The raw results and the hardware record as one JSON object.")
@guarded
def measure(device, out_file, quick, quiet, as_json):
    """Measure this machine: sustained memory bandwidth (STREAM copy/triad), matmul FLOP/s per dtype, per-call overhead.

    Writes a hardware file in the catalog's schema with --out. Its figures are sustained, not peaks: predictions
    meant to match this machine use them at 100% (--peak)."""
    from tokenmath.local.measure import measure as run
    from tokenmath.base.units import seconds
    m = run(device=device.lower(), quick=quick, progress=_progress(not quiet))
    written = m.write(out_file) if out_file else None
    if as_json:
        d = m.to_dict()
        d["written"] = written
        emit_json(d)
        return
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
            t.add_row(f"matmul {k}", "n/a", "n/a", v["error"][:60])
        else:
            t.add_row(f"matmul {k}", f"{v['best'] * 1e3:,.3g} GFLOP/s", f"{v['median'] * 1e3:,.3g} GFLOP/s",
                      f"{v['n']} x {v['n']} x {v['n']}")
    for k, v in m.overhead.items():
        t.add_row(f"per-call overhead {k}", seconds(v["best_us"] * 1e-6), seconds(v["median_us"] * 1e-6), v["op"])
    t.add_row("memory", f"{m.memory_bytes / 1e9:,.1f} GB", "", "total" + (" (MemTotal)" if m.device == "cpu" else ""))
    c.print(t)
    rec = m.record()
    c.print(f"hardware file: memory_bw_tbs = {rec['memory_bw_tbs']:.4g} (best {m.headline_bw_kernel}), tflops = "
            + ", ".join(f"{k} {v:.4g}" for k, v in rec["tflops"].items()))
    for n in m.notes:
        c.print(f"[dim]note: {n}[/]")
    if written:
        c.print(f"written to {written}: use it as --hardware {written}")
    else:
        c.print("[dim]--out FILE writes it as a hardware file[/]")


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="A Hugging Face config.json (default: a built-in ~200M-parameter Llama-style model).")
@click.option("--batches", default=",".join(map(str, (1, 2, 4, 8, 16, 32, 64))), show_default=True,
              help="Comma-separated batch sizes.")
@click.option("--context", type=int, default=256, show_default=True, help="Prompt tokens prefilled before the timed decode steps.")
@click.option("--device", type=click.Choice(["cpu", "cuda"], case_sensitive=False), default="cpu", show_default=True)
@click.option("--hardware", "-H", help="Hardware file from `tokenmath measure --out` (default: measure now).")
@click.option("--steps", type=int, default=8, show_default=True, help="Timed decode steps per batch (the median is used).")
@click.option("--warmup", type=int, default=2, show_default=True, help="Untimed decode steps first.")
@click.option("--threads", type=int, help="torch CPU threads (default: torch's own, one per core).")
@click.option("--quick", is_flag=True, help="Measure the machine with `measure --quick` when no --hardware is given.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Chart of measured vs predicted (.png or .svg).")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--explain", is_flag=True, help="The prediction's terms per batch, with numbers and units.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (rows: batch, measured_step_s, predicted_step_s, error).")
@guarded
def verify(config_file, batches, context, device, hardware, steps, warmup, threads, quick, plot_file, quiet, explain,
           as_json):
    """Run a real Hugging Face transformers model (random weights, nothing downloaded) and compare its decode step
    per batch size with tokenmath's prediction on this machine's measured figures.

    Needs torch and transformers: pip install 'tokenmath[verify]'."""
    # inputs are checked first (named fields), then torch and transformers are looked for (exit 2 with the
    # install line when missing), before anything slow
    from tokenmath.local.verify import verify as run
    if plot_file:
        from pathlib import Path

        from tokenmath.base.errors import InputError
        p = Path(plot_file)
        if p.suffix.lower() not in (".png", ".svg"):
            raise InputError("plot", f"unsupported file type {p.suffix or '(none)'!r}", "a .png or .svg path")
    v = run(config_file, batches=batches, context=context, device=device.lower(), hardware=hardware, warmup=warmup,
            steps=steps, threads=threads, quick_measure=quick, progress=_progress(not quiet))
    if plot_file:
        verify_plot(v, plot_file)
    if as_json:
        d = v.to_dict()
        d["plot"] = plot_file
        emit_json(d)
        return
    if explain:
        click.echo(v.explain())
        return
    verify_table(v)
    if plot_file:
        click.echo(f"chart written to {plot_file}")


def _wide_console():
    """A terminal keeps its own width; a pipe or file gets 150 columns so the table is not folded."""
    from rich.console import Console
    c = Console()
    return c if c.is_terminal else Console(width=150)


def verify_table(v) -> None:
    from rich.table import Table
    c = _wide_console()
    hw = v.hardware
    c.print(f"[bold]{v.model_name}[/]: {v.params_total / 1e6:,.0f}M params, {v.weights_bytes / 1e9:.3g} GB fp32, "
            f"KV {v.kv_bytes_per_token / 1e3:.3g} kB/token; transformers {v.versions['transformers']}, "
            f"torch {v.versions['torch']} on {v.device} ({v.threads} threads)")
    c.print(f"prediction: tokenmath engine on {hw.name} ({v.hardware_source}) at 100%: "
            f"{hw.memory_bw / 1e9:.3g} GB/s, fp32 {hw.peak_flops('fp32') / 1e9:.3g} GFLOP/s, "
            f"+ overhead {v.overhead_per_layer_s * 1e6:.0f} us/layer x {v.n_layers} layers = "
            f"{v.overhead_per_layer_s * v.n_layers * 1e3:.3g} ms/step (measured by a tiny-width probe)")
    t = Table(title=f"decode step at context {v.context} (median of {v.steps} steps after {v.warmup} warm-up)",
              header_style="bold")
    kern = any(r.predicted_kernel_step_s is not None for r in v.rows)
    cols = ["batch", "measured", "predicted", "= roofline", "+ overhead", "error", "measured /token",
            "predicted /token", "bound"]
    if kern:
        cols += ["matmul eff.", "predicted (eff.)", "error (eff.)"]
    for col in cols:
        t.add_column(col, justify="right")

    def pct(e):
        if e is None:
            return "n/a"
        colour = "green" if abs(e) <= 0.25 else ("yellow" if abs(e) <= 0.5 else "red")
        return f"[{colour}]{e:+.1%}[/]"
    for r in v.rows:
        cells = [str(r.batch), f"{r.measured_step_s * 1e3:.2f} ms", f"{r.predicted_step_s * 1e3:.2f} ms",
                 f"{r.predicted_roofline_s * 1e3:.2f} ms", f"{r.predicted_overhead_s * 1e3:.2f} ms", pct(r.error),
                 f"{r.measured_step_s / r.batch * 1e3:.3g} ms", f"{r.predicted_step_s / r.batch * 1e3:.3g} ms",
                 r.bottleneck]
        if kern:
            cells += [f"{r.kernel_efficiency:.0%}" if r.kernel_efficiency else "n/a",
                      f"{r.predicted_kernel_step_s * 1e3:.2f} ms" if r.predicted_kernel_step_s else "n/a",
                      pct(r.kernel_error)]
        t.add_row(*cells)
    c.print(t)
    s = v.summary()
    c.print(f"error (predicted - measured) / measured, at 100% of the hardware file: median |error| "
            f"{s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}; {s['within_25pct']} of {s['rows']} batches "
            "within 25%")
    if "kernel_median_abs_error" in s:
        c.print(f"with the decode-shaped matmul efficiency `measure` recorded (same engine, its FLOP/s and bandwidth "
                f"scaled by that fraction at each batch): median |error| {s['kernel_median_abs_error']:.1%}, "
                f"max {s['kernel_max_abs_error']:.1%}; {s['kernel_within_25pct']} of {s['rows']} within 25%")
    if s["measured_knee_batch"] and s["predicted_knee_batch"]:
        c.print(f"hyperbola flattens (step(1) / floor per token) at batch ~{s['measured_knee_batch']:.3g} measured, "
                f"~{s['predicted_knee_batch']:.3g} predicted (ratio {s['knee_ratio']:.2f})"
                + (f", ~{s['kernel_knee_batch']:.3g} with the matmul efficiency" if s.get("kernel_knee_batch") else "")
                + (f"; engine's critical batch (weight matmuls compute-bound) {v.critical_batch}" if v.critical_batch else ""))
    for n in v.notes:
        c.print(f"[dim]note: {n}[/]")


def verify_plot(v, path) -> str:
    """Step time and time per token (the cost hyperbola) against batch: measured points, predicted lines."""
    from tokenmath.faces.plots import pyplot, save_figure
    plt = pyplot()
    b = [r.batch for r in v.rows]
    ms = [r.measured_step_s * 1e3 for r in v.rows]
    ps = [r.predicted_step_s * 1e3 for r in v.rows]
    pr = [r.predicted_roofline_s * 1e3 for r in v.rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    a1.plot(b, ps, "-", color="C0", lw=2, label="predicted (roofline + overhead)")
    a1.plot(b, pr, "--", color="C0", alpha=0.6, label="predicted roofline alone")
    pk = [r.predicted_kernel_step_s * 1e3 if r.predicted_kernel_step_s else None for r in v.rows]
    has_k = all(x is not None for x in pk)
    if has_k:
        a1.plot(b, pk, "-", color="C2", lw=1.5, label="predicted with measured matmul efficiency")
    a1.plot(b, ms, "o", color="C3", ms=7, label="measured (median)")
    lo = [r.measured_min_s * 1e3 for r in v.rows]
    a1.plot(b, lo, "x", color="C3", alpha=0.5, label="measured (fastest step)")
    a1.set_xlabel("batch size (concurrent sequences)")
    a1.set_ylabel("decode step time (ms)")
    a1.set_title("decode step")
    a2.plot(b, [p / x for p, x in zip(ps, b)], "-", color="C0", lw=2, label="predicted")
    a2.plot(b, [p / x for p, x in zip(pr, b)], "--", color="C0", alpha=0.6, label="predicted roofline alone")
    if has_k:
        a2.plot(b, [p / x for p, x in zip(pk, b)], "-", color="C2", lw=1.5, label="predicted with matmul efficiency")
    a2.plot(b, [m / x for m, x in zip(ms, b)], "o", color="C3", ms=7, label="measured")
    a2.set_xlabel("batch size (concurrent sequences)")
    a2.set_ylabel("time per output token = step / batch (ms)")
    a2.set_title("cost per token: the batching hyperbola")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    plain = FuncFormatter(lambda x, _: f"{x:g}")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.xaxis.set_major_locator(FixedLocator(b))
        a.xaxis.set_major_formatter(plain)
        a.xaxis.set_minor_formatter(NullFormatter())
        a.set_yscale("log")
        a.yaxis.set_major_formatter(plain)
        a.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:g}" if f"{y:.1g}"[0] in "25" else ""))
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    s = v.summary()
    fig.suptitle(f"{v.model_name}, fp32, context {v.context}, transformers {v.versions['transformers']} on "
                 f"{v.hardware.name}\nmedian |error| {s['median_abs_error']:.0%} at 100% of the measured figures"
                 + (f", {s['kernel_median_abs_error']:.0%} with the measured matmul efficiency"
                    if "kernel_median_abs_error" in s else ""), fontsize=9)
    return save_figure(fig, path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
