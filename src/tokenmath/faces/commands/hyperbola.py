import click

from tokenmath.faces.commands.common import MAX_TOKENS, count, emit_json, guarded, positive, with_plot
from tokenmath.faces.commands.question_options import question_options


@click.command()
@question_options("hyperbola")
@click.option("--context", type=count(1, MAX_TOKENS), default=2048, show_default=True, callback=positive,
              help="Tokens in each sequence's KV cache during decode.")
@with_plot
@guarded
def hyperbola(deployment, workload, context, as_json, explain, plot_file):
    """Decode cost per output token and step latency against batch size (the batch/cost hyperbola)."""
    from tokenmath.analyses.ask import hyperbola as run
    h = run(deployment, workload, context=context)
    if plot_file:
        from tokenmath.faces.plots import hyperbola_plot
        hyperbola_plot(h, plot_file)
    if as_json:
        emit_json(h.to_dict())
        return h
    if explain:
        from tokenmath.faces.explain_serving import explain_hyperbola
        click.echo(explain_hyperbola(h))
    else:
        from tokenmath.faces.tables import hyperbola_table
        hyperbola_table(h)
        if plot_file:
            click.echo(f"chart written to {plot_file}")
    if h.speculative is not None:
        from tokenmath.faces.explain_speculative import explain_speculative, speculative_text
        click.echo(explain_speculative(h.speculative) if explain else speculative_text(h.speculative))
    return h
