import click

from tokenmath.faces.commands.common import guarded, number, with_plot


@click.command()
@click.option("--compute", "-C", type=number(None, 1e40, "FLOPs"), help="Training FLOPs (C = 6ND): the compute-optimal N and D.")
@click.option("--params", "-N", type=number(None, 1e20), help="Parameters N (with --tokens: the loss of that model).")
@click.option("--tokens", "-D", type=number(None, 1e25), help="Training tokens D.")
@click.option("--loss", "loss_target", type=number(None, None), help="Target loss (nats/token): the cheapest N, D reaching it.")
@click.option("--fit", default="epoch", show_default=True,
              help="epoch (Besiroglu et al. 2024), hoffmann (unrounded) or hoffmann-rounded (as printed).")
@with_plot
@guarded
def chinchilla(compute, params, tokens, loss_target, fit, as_json, explain, plot_file):
    """Chinchilla scaling law: loss L(N, D), compute-optimal N and D for a budget (C = 6ND)."""
    from tokenmath.base import units as u
    from tokenmath.analyses.training.scaling_laws import chinchilla as run
    from tokenmath.faces.commands.common import plot_then_json
    from tokenmath.faces.explain_training import explain_chinchilla
    from tokenmath.faces.plots_training import plot_chinchilla
    r = run(compute=compute, params=params, tokens=tokens, loss_target=loss_target, fit=fit)
    if plot_then_json(r, as_json, plot_file, plot_chinchilla):
        return
    if explain:
        click.echo(explain_chinchilla(r))
    else:
        t = r.loss_terms
        what = {"compute-optimal": "compute-optimal", "point": "the given model", "loss-target": "cheapest model at the loss"}
        click.echo(f"Chinchilla scaling law, fit {r.fit.name!r} ({what[r.mode]})")
        click.echo(f"  compute           {r.compute:.4g} FLOPs (6ND)")
        click.echo(f"  parameters N      {u.count(r.params)}")
        click.echo(f"  tokens D          {u.count(r.tokens)}  ({r.tokens_per_param:,.1f} tokens/param)")
        click.echo(f"  loss              {r.loss:.4f} nats/token = E {r.fit.E:.4f} + A/N^alpha {t['params_term']:.4f}"
                   f" + B/D^beta {t['data_term']:.4f}")
        if r.mode == "point":
            click.echo(f"  compute-optimal   N {u.count(r.optimum_params)}, D {u.count(r.optimum_tokens)} "
                       f"({r.optimum_tokens / r.optimum_params:.1f} tokens/param), loss {r.optimum_loss:.4f}")
        for n in r.notes:
            click.echo(f"  note: {n}")
    if plot_file:
        click.echo(f"plot written to {plot_file}", err=True)
