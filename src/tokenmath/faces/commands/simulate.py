import click

from tokenmath.faces.commands.common import MAX_REQUESTS, count, guarded, number, positive, positive_float, with_plot
from tokenmath.faces.commands.question_options import question_options


# what a trace file sets itself (each row's arrival and lengths, the number of rows): given with --trace, these were
# silently ignored (issue 40); now refused, naming the option. --concurrency, --arrival-rate and --prefix-hit with a
# trace are refused by the analysis (analyses/serving/simulation/workload.make_workload).
TRACE_CARRIES = {"requests": "its rows", "input_len": "its input_tokens column",
                 "output_len": "its output_tokens column", "burstiness": "its arrival_s column"}


def _refuse_what_a_trace_carries(ctx) -> None:
    from click.core import ParameterSource

    from tokenmath.base.errors import InputError
    for name, carried in TRACE_CARRIES.items():
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            raise InputError(name, f"given with --trace, which sets it from {carried}",
                             f"leave --{name.replace('_', '-')} out with a trace, or drop --trace to generate the "
                             "workload")


@click.command()
@question_options("simulate", skip=("batch",))
@click.option("--burstiness", type=number(1e-3, 1e3), default=1.0, show_default=True, callback=positive_float,
              help="Open loop: gamma shape of the gaps between arrivals (1 = Poisson, < 1 burstier).")
@click.option("--trace", type=click.Path(dir_okay=False),
              help="CSV or JSONL trace: arrival_s, input_tokens, output_tokens[, prefix_id, prefix_tokens].")
@click.option("--requests", type=count(1, MAX_REQUESTS), default=1000, show_default=True, callback=positive, help="Requests to serve.")
@click.option("--itl-ms", type=number(1e-3, 1e9, "ms"), callback=positive_float,
              help="Goodput target: time per output token of a request (default 200).")
@click.option("--seed", type=count(0, 2 ** 32 - 1), default=0, show_default=True, help="Random seed of the workload.")
@click.option("--prefix-cache-share", type=number(0.0, 0.95), metavar="SHARE",
              help="Share of the KV cache kept for cached prefixes (what-if; default: none kept, idle prefixes are "
                   "evicted least recently used first when running requests need the room).")
@with_plot
@guarded
def simulate(deployment, workload, burstiness, trace, requests, itl_ms, seed, prefix_cache_share, plot_file, as_json,
             explain):
    """Simulate a serving engine step by step: throughput, TTFT/ITL percentiles, goodput, queue, KV."""
    if trace is not None:
        _refuse_what_a_trace_carries(click.get_current_context())
    from tokenmath.analyses.ask import simulate as run
    from tokenmath.faces.commands.common import plot_then_json
    from tokenmath.faces.explain_simulation import explain_simulation, simulation_table
    r = run(deployment, workload, burstiness=burstiness, trace=trace, requests=requests, itl_ms=itl_ms, seed=seed,
            prefix_cache_share=prefix_cache_share)

    def plot(res, path):
        from tokenmath.faces.plots_simulation import simulation_plot
        simulation_plot(res, path)
    if plot_then_json(r, as_json, plot_file, plot):
        return r
    click.echo(explain_simulation(r) if explain else simulation_table(r))
    if plot_file:
        click.echo(f"plot: {plot_file}")
    return r
