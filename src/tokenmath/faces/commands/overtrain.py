import math

import click

from tokenmath.faces.commands.common import DEFAULT_HARDWARE, dtype_options, guarded, with_plot


@click.command()
@click.option("--target-loss", "-l", type=float, help="Target loss (nats/token, under --fit).")
@click.option("--compute", "-C", type=float,
              help="Or a training budget (FLOPs): the target is the loss it buys at Chinchilla-optimal.")
@click.option("--inference-tokens", type=float, default=0.0, show_default=True,
              help="Lifetime tokens served (input + output).")
@click.option("--rl-rollout-tokens", type=float, default=0.0, show_default=True,
              help="RL rollout tokens generated (priced as output/decode tokens).")
@click.option("--fit", default="epoch", show_default=True, help="epoch, hoffmann or hoffmann-rounded.")
@click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True,
              help="Catalog id or hardware file; its bf16 peak and $/chip-hour price training and inference.")
@click.option("--mfu", type=float, default=0.4, show_default=True,
              help="Training model-FLOPs utilisation (PaLM 46.2%; Llama 3 405B 38-43%).")
@click.option("--flop-only", is_flag=True,
              help="Inference = 2N FLOPs per token at the training MFU (Sardana et al. 2023) instead of the engine.")
@click.option("--min-tokens-per-s-per-user", type=float, default=20.0, show_default=True,
              help="Decode speed each user must get (the serving batch is the cheapest that meets it).")
@click.option("--input-output-ratio", type=float, default=1.0, show_default=True,
              help="Input (prompt) tokens per output token, for the lifetime mix and the request shape.")
@click.option("--output-len", type=int, default=512, show_default=True, help="Generated tokens per request.")
@dtype_options
@with_plot
@guarded
def overtrain(target_loss, compute, inference_tokens, rl_rollout_tokens, fit, hardware, mfu, flop_only,
              min_tokens_per_s_per_user, input_output_ratio, output_len, weight_dtype, kv_dtype, as_json, explain,
              plot_file):
    """Train smaller and longer: minimise training + lifetime inference cost at a target loss."""
    from tokenmath.base import units as u
    from tokenmath.analyses.training.overtrain import overtrain as run
    from tokenmath.faces.commands.common import plot_then_json
    from tokenmath.faces.explain_training import explain_overtrain
    from tokenmath.faces.plots_training import plot_overtrain
    r = run(target_loss=target_loss, compute=compute, inference_tokens=inference_tokens,
            rl_rollout_tokens=rl_rollout_tokens, fit=fit, hardware=hardware, mfu=mfu, flop_only=flop_only,
            min_tokens_per_s_per_user=min_tokens_per_s_per_user, input_output_ratio=input_output_ratio,
            output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if plot_then_json(r, as_json, plot_file, plot_overtrain):
        return
    if explain:
        click.echo(explain_overtrain(r))
    else:
        o, c = r.optimum, r.chinchilla

        def usd(x):
            return u.usd(x) if math.isfinite(x) else "n/a (cannot serve)"
        click.echo(f"Over-training at loss {r.target_loss:.4f} (fit {r.fit.name!r}), {r.inference_tokens:.3g} inference"
                   f" + {r.rl_rollout_tokens:.3g} RL tokens, {r.hardware.id}, MFU {r.mfu:g}, inference "
                   + ("2N FLOPs/token" if r.flop_only else f"from the engine at >= {r.min_tokens_per_s_per_user:g} tok/s/user"))
        click.echo(f"  {'':<11} {'params':>8} {'tokens':>8} {'tok/param':>9} {'training':>12} {'inference':>12} {'total':>12}")
        for name, p in (("optimum", o), ("Chinchilla", c)):
            click.echo(f"  {name:<11} {u.count(p.params):>8} {u.count(p.tokens):>8} {p.tokens / p.params:>9,.0f} "
                       f"{usd(p.training_usd):>12} {usd(p.inference_usd):>12} {usd(p.total_usd):>12}")
        if math.isfinite(r.saving_fraction):
            click.echo(f"  saving {usd(r.saving_usd)} ({100 * r.saving_fraction:.1f}%)")
        if o.serving is not None and o.serving.feasible:
            s = o.serving
            click.echo(f"  optimum served as {s.n_layers} layers x d_model {s.d_model} on {s.chips} x {r.hardware.id}"
                       f" at batch {s.batch}: {1 / s.decode_step_s:.1f} tok/s/user, "
                       f"${s.usd_per_mtok_output:.3g}/Mtok out, ${s.usd_per_mtok_input:.3g}/Mtok in")
        click.echo("  as demand grows:")
        for row in r.demand_sweep:
            sv = row["saving_fraction"]
            click.echo(f"    {row['inference_tokens'] + row['rl_rollout_tokens']:>8.3g} tokens -> N {u.count(row['params']):>7},"
                       f" {row['tokens_per_param']:>7,.0f} tok/param, total {usd(row['total_usd'])}"
                       + (f", saving {100 * sv:.1f}%" if sv is not None else ""))
        for n in r.notes:
            click.echo(f"  note: {n}")
    if plot_file:
        click.echo(f"plot written to {plot_file}", err=True)
