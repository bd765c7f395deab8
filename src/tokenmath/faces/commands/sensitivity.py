"""`tokenmath sensitivity`: which hardware figure or efficiency moves an answer most (a tornado)."""
import click

from tokenmath.faces.commands.common import emit_json, guarded, number, with_plot
from tokenmath.faces.commands.question_options import question_options

METRIC_NAMES = ("cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "cost_per_mtok_input_usd",
                "decode_step_s", "ttft_s", "output_tokens_per_s_per_user", "output_tokens_per_s")


@click.command()
@question_options("sensitivity")
@click.option("--metric", type=click.Choice(METRIC_NAMES), default="cost_per_mtok_output_usd", show_default=True,
              help="The answer whose sensitivity is ranked.")
@click.option("--delta", type=number(0.01, 0.9), default=0.2, show_default=True, help="Relative move of each input (0.2 = +-20%).")
@with_plot
@guarded
def sensitivity(deployment, workload, metric, delta, as_json, explain, plot_file):
    """Move each hardware figure and efficiency +-20%: which moves the answer most (table, JSON, tornado chart)."""
    from tokenmath.analyses.ask import sensitivity as run
    r = run(deployment, workload, metric=metric, delta=delta)
    if plot_file:
        from tokenmath.faces.plots_sensitivity import tornado_plot
        tornado_plot(r, plot_file)
    if as_json:
        d = r.to_dict()
        if plot_file:
            d["plot"] = plot_file
        emit_json(d)
        return r
    from tokenmath.faces.explain_sensitivity import explain_sensitivity, sensitivity_text
    click.echo(explain_sensitivity(r) if explain else sensitivity_text(r))
    if plot_file:
        click.echo(f"chart written to {plot_file}")
    return r
