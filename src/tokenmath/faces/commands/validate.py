import click

from tokenmath.faces.commands.common import emit_json, guarded


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Every row and the summary as JSON.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Predicted vs measured chart (.png/.svg).")
@click.option("--write-calibration", type=click.Path(dir_okay=False),
              help="Write the fitted efficiencies as TOML (ships as tokenmath/data/calibration.toml).")
@guarded
def validate(as_json, plot_file, write_calibration):
    """Predict every published measurement shipped with tokenmath: error by regime, roofline vs calibrated."""
    from tokenmath.analyses.calibration.validate import validate as run, write_calibration as write
    v = run()
    if write_calibration:
        write(v, write_calibration)
    if plot_file:
        from tokenmath.faces.plots import validation_plot
        validation_plot(v, plot_file)
    if as_json:
        emit_json({"summary": v.summary(), "calibration": v.calibration_table(), "rows": v.rows()})
        return
    from tokenmath.faces.tables import validation_table
    validation_table(v)
    if plot_file:
        click.echo(f"chart written to {plot_file}")
