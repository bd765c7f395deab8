import click

from tokenmath.faces.commands.common import PLOT_OPTION, emit_json, force_option, guarded, output_path


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Every row and the summary as JSON.")
@click.option("--plot", "plot_file", **PLOT_OPTION,
              help="Predicted vs measured chart (.png/.svg); with --inferencex one panel per chip, engine, engine "
                   "version, model family and technique.")
@click.option("--write-calibration", type=click.Path(dir_okay=False),
              callback=output_path("write_calibration", (".toml",)),
              help="Write the fitted efficiencies as TOML (ships as tokenmath/data/calibration.toml).")
@click.option("--inferencex", is_flag=True,
              help="Only the InferenceX report: every shipped InferenceX run (data/inferencex_runs.csv.gz) predicted "
                   "at its own chips, layout, engine, concurrency and lengths; medians by chip, engine, engine "
                   "version, model family and technique, held out by source, vendor, engine version and model; the "
                   "worst 20 runs with the term that dominates each; the runs not predicted, with why.")
@click.option("--inferencex-basis", type=click.Choice(("calibrated", "kernel")), default="calibrated",
              show_default=True, help="With --inferencex: the shipped calibration (fitted on other data), or the "
                                      "kernel model with no fitted constant.")
@force_option
@click.option("--quiet", is_flag=True, help="No progress lines on stderr (they are shown only on a terminal).")
@guarded
def validate(as_json, plot_file, write_calibration, inferencex, inferencex_basis, quiet):
    """Predict every published measurement shipped with tokenmath: held-out error by regime, MoE/dense and chip
    vendor (leave one source / regime / vendor / MoE-or-dense out), the pure-roofline check, the fitted parameters,
    the 20 rows furthest off with the term that dominates each;
    then, held out and never fitted, published throughput-per-GPU vs tok/s/user points (InferenceX curves) and MLPerf
    Inference Offline, Server and Interactive results."""
    from tokenmath.analyses.calibration.validate import validate as run, validate_flat, write_calibration as write
    from tokenmath.faces.progress import reporter
    say = reporter(quiet) or (lambda msg: None)
    if inferencex:
        return _inferencex(as_json, inferencex_basis, say, plot_file)
    say("measurements: fitting the physics set and holding out by source, regime, vendor and MoE / dense")
    v = run()                      # the physics set the serving commands ship with
    say("the flat per-family set, for comparison")
    flat = validate_flat()         # the flat per-family set, for comparison
    if write_calibration:
        write(v, write_calibration, flat=flat)
    if plot_file:
        from tokenmath.faces.plots import validation_plot
        validation_plot(v, plot_file)
    from tokenmath.analyses.training.validate_runs import validate_runs
    from tokenmath.analyses.calibration.interactivity import validate_interactivity
    from tokenmath.analyses.calibration.mlperf import validate_mlperf
    from tokenmath.analyses.calibration.mlperf_server import validate_server
    say("published training runs")
    runs = validate_runs()
    say("InferenceX interactivity curves")
    curves = validate_interactivity()
    say("MLPerf Offline")
    mlperf = validate_mlperf()
    say("MLPerf Server")
    server = validate_server(mlperf)
    say("MLPerf Interactive")
    interactive = validate_server(mlperf, "interactive")
    if as_json:
        extra = {k: x for k, x in flat.to_dict().items() if k != "rows"}
        emit_json({**v.to_dict(), "flat": extra, "training_runs": runs.to_dict(),
                   "interactivity": curves.to_dict(), "mlperf": {**mlperf.to_dict(), "server": server,
                                                                      "interactive": interactive}})
        return
    from tokenmath.faces.explain_training import training_runs_text
    from tokenmath.faces.tables import validation_table
    from tokenmath.faces.tables_interactivity import interactivity_table
    validation_table(v, flat)
    from tokenmath.faces.tables_worst import worst_table
    worst_table(v.worst())
    click.echo(training_runs_text(runs))
    interactivity_table(curves)
    from tokenmath.faces.tables_mlperf import mlperf_server_table, mlperf_table
    mlperf_table(mlperf)
    mlperf_server_table(server)
    mlperf_server_table(interactive)
    if plot_file:
        click.echo(f"chart written to {plot_file}")


def _inferencex(as_json, basis, say, plot_file=None):
    from tokenmath.analyses.calibration.inferencex_report import inferencex_report
    say(f"InferenceX runs: predicting each at its own configuration ({basis})")
    rep = inferencex_report(basis)
    if plot_file:
        from tokenmath.faces.plots_inferencex import inferencex_plot
        inferencex_plot(rep, plot_file)
    if as_json:
        emit_json(rep.to_dict())
        return
    from tokenmath.faces.tables_inferencex import inferencex_table
    inferencex_table(rep)
    if plot_file:
        click.echo(f"chart written to {plot_file}")
