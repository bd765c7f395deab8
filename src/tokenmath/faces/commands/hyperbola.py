import click

from tokenmath.faces.commands.common import attention_option
from tokenmath.faces.commands.common import (dtype_options, emit_json, engine_option, guarded, layout_options, model_hardware,
                                             positive, with_plot)
from tokenmath.faces.commands.speculation import speculation_options
from tokenmath.faces.commands.whatif import whatif_options


@click.command()
@whatif_options
@speculation_options
@model_hardware
@layout_options
@click.option("--context", type=int, default=2048, show_default=True, callback=positive,
              help="Tokens in each sequence's KV cache during decode.")
@attention_option
@dtype_options
@engine_option
@with_plot
@guarded
def hyperbola(model, hardware, chips, tp, pp, ep, dp, context, attention_sharding, weight_dtype, kv_dtype, engine,
              as_json, explain, plot_file):
    """Decode cost per output token and step latency against batch size (the batch/cost hyperbola)."""
    from tokenmath.analyses.serving.hyperbola import hyperbola as run
    h = run(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, context=context, weight_dtype=weight_dtype,
            kv_dtype=kv_dtype, engine=engine, attention_sharding=attention_sharding)
    if plot_file:
        from tokenmath.faces.plots import hyperbola_plot
        hyperbola_plot(h, plot_file)
    if as_json:
        emit_json(h.to_dict())
        return
    if explain:
        from tokenmath.faces.explain_serving import explain_hyperbola
        click.echo(explain_hyperbola(h))
        return
    from tokenmath.faces.tables import hyperbola_table
    hyperbola_table(h)
    if plot_file:
        click.echo(f"chart written to {plot_file}")
