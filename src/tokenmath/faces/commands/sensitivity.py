"""`tokenmath sensitivity`: which hardware figure or efficiency moves an answer most (a tornado)."""
import click

from tokenmath.faces.commands.common import (batch_arg, dtype_options, emit_json, engine_option, guarded, layout_options,
                                             model_hardware, positive, with_plot)
from tokenmath.faces.commands.whatif import whatif_options

METRIC_NAMES = ("cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "cost_per_mtok_input_usd",
                "decode_step_s", "ttft_s", "output_tokens_per_s_per_user", "output_tokens_per_s")


@click.command()
@whatif_options
@model_hardware
@layout_options
@click.option("--batch", "-b", callback=batch_arg, default="max", show_default=True,
              help="Concurrent sequences, or 'max' (re-solved at each point, so HBM capacity shows its effect).")
@click.option("--input-len", type=int, default=1024, show_default=True, callback=positive)
@click.option("--output-len", type=int, default=256, show_default=True, callback=positive)
@click.option("--metric", type=click.Choice(METRIC_NAMES), default="cost_per_mtok_output_usd", show_default=True,
              help="The answer whose sensitivity is ranked.")
@click.option("--delta", type=float, default=0.2, show_default=True, help="Relative move of each input (0.2 = +-20%).")
@dtype_options
@engine_option
@with_plot
@guarded
def sensitivity(model, hardware, chips, tp, pp, ep, dp, batch, input_len, output_len, metric, delta, weight_dtype,
                kv_dtype, engine, as_json, explain, plot_file):
    """Move each hardware figure and efficiency +-20%: which moves the answer most (table, JSON, tornado chart)."""
    from tokenmath.analyses.serving.sensitivity import sensitivity as run
    r = run(model, hardware, metric=metric, delta=delta, batch=batch, engine=engine, chips=chips, tp=tp, pp=pp, ep=ep,
            dp=dp, input_len=input_len, output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if plot_file:
        from tokenmath.faces.plots_sensitivity import tornado_plot
        tornado_plot(r, plot_file)
    if as_json:
        d = r.to_dict()
        if plot_file:
            d["plot"] = plot_file
        emit_json(d)
        return
    from tokenmath.faces.explain_sensitivity import explain_sensitivity, sensitivity_text
    click.echo(explain_sensitivity(r) if explain else sensitivity_text(r))
    if plot_file:
        click.echo(f"chart written to {plot_file}")
