"""`tokenmath measure` and `tokenmath verify`: this machine's own roofline, checked against a real model."""
from __future__ import annotations

import click

from tokenmath.faces.commands.common import PLOT_OPTION, count, emit_json, force_option, guarded, output_path


def _progress(enabled: bool):
    """Progress lines on stderr (faces/progress.py: off with --quiet and when stderr is not a terminal)."""
    from tokenmath.faces.progress import reporter
    return reporter(not enabled)


@click.command()
@click.option("--device", type=click.Choice(["cpu", "cuda"], case_sensitive=False), default="cpu", show_default=True,
              help="What to measure (cuda needs torch with a GPU).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), callback=output_path("out", (".toml", ".json")),
              help="Write the hardware file here (.toml or .json, catalog schema): usable as --hardware FILE. "
                   "Checked before measuring.")
@force_option
@click.option("--quick", is_flag=True, help="Small arrays and few repetitions (seconds; for tests).")
@click.option("--accept-noisy", is_flag=True,
              help="Write --out even when repetitions spread past 25% (other programs loading the machine); the file "
                   "records the spreads and every answer using it says it is noisy.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr (they are shown only on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="The raw results and the hardware record as one JSON object.")
@guarded
def measure(device, out_file, quick, accept_noisy, quiet, as_json):
    """Measure this machine: sustained memory bandwidth (STREAM copy/triad), matmul FLOP/s per dtype, the GEMM
    efficiency curve (1-256 rows on model-sized weights), per-call overhead.

    Writes a hardware file in the catalog's schema with --out; its [kernels] section is this machine's kernel model,
    which infer --hardware FILE and verify use by default (--peak: the pure roofline of the measured figures).
    A figure whose repetitions spread past 25% is measured again; still noisy, the file is refused (exit 2) unless
    --accept-noisy."""
    from tokenmath.local.measure import measure as run
    m = run(device=device.lower(), quick=quick, progress=_progress(not quiet))
    written = m.write(out_file, accept_noisy=accept_noisy) if out_file else None
    if as_json:
        d = m.to_dict()
        d["written"] = written
        emit_json(d)
        return
    from tokenmath.faces.tables_local import measure_table
    measure_table(m, written)


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="A Hugging Face config.json (default: a built-in ~200M-parameter Llama-style model).")
@click.option("--batches", default=",".join(map(str, (1, 2, 4, 8, 16, 32, 64))), show_default=True,
              help="Comma-separated batch sizes.")
@click.option("--context", type=count(1, 1_000_000), default=256, show_default=True, help="Prompt tokens prefilled before the timed decode steps.")
@click.option("--device", type=click.Choice(["cpu", "cuda"], case_sensitive=False), default="cpu", show_default=True,
              help="Where the real model runs: this machine's CPU or its CUDA GPU.")
@click.option("--hardware", "-H", help="Hardware file from `tokenmath measure --out` (default: measure now).")
@click.option("--steps", type=count(1, 1000), default=8, show_default=True, help="Timed decode steps per batch (the median is used).")
@click.option("--warmup", type=count(1, 1000), default=2, show_default=True, help="Untimed decode steps first.")
@click.option("--threads", type=count(1, 4096), help="torch CPU threads (default: torch's own, one per core).")
@click.option("--quick", is_flag=True, help="Measure the machine with `measure --quick` when no --hardware is given.")
@click.option("--plot", "plot_file", **PLOT_OPTION, help="Chart of measured vs predicted (.png or .svg).")
@force_option
@click.option("--quiet", is_flag=True, help="No progress lines on stderr (they are shown only on a terminal).")
@click.option("--explain", is_flag=True, help="The prediction's terms per batch, with numbers and units.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (rows: batch, measured_step_s, predicted_step_s, error).")
@guarded
def verify(config_file, batches, context, device, hardware, steps, warmup, threads, quick, plot_file, quiet, explain,
           as_json):
    """Run a real Hugging Face transformers model (random weights, nothing downloaded) and compare its decode step
    per batch size with tokenmath's prediction on this machine's measured figures.

    Needs torch and transformers, the verify extra: the CPU build of torch first
    (pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu), then pip install '.[verify]' in
    the source checkout."""
    # inputs are checked first (named fields), then torch and transformers are looked for (exit 2 with the
    # install line when missing), before anything slow
    from tokenmath.local.verify import verify as run
    v = run(config_file, batches=batches, context=context, device=device.lower(), hardware=hardware, warmup=warmup,
            steps=steps, threads=threads, quick_measure=quick, progress=_progress(not quiet))
    if plot_file:
        from tokenmath.faces.plots_local import verify_plot
        verify_plot(v, plot_file)
    if as_json:
        d = v.to_dict()
        d["plot"] = plot_file
        emit_json(d)
        return
    if explain:
        from tokenmath.faces.explain_verify import explain as verify_text
        click.echo(verify_text(v))
        return
    from tokenmath.faces.tables_local import verify_table
    verify_table(v)
    if plot_file:
        click.echo(f"chart written to {plot_file}")

