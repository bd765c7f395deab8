import click

from tokenmath.faces.commands.common import (attention_option, dtype_options, engine_option, guarded, layout_options,
                                             model_hardware, positive, positive_float, with_plot)
from tokenmath.faces.commands.common import prefix_hit_option
from tokenmath.faces.commands.speculation import grid_speculation_options
from tokenmath.faces.commands.whatif import whatif_options

LENGTH_HELP = 'Tokens, or "uniform:LO-HI", "lognormal:MEDIAN,SIGMA", "fit:TRACE".'


@click.command()
@whatif_options
@model_hardware
@layout_options
@engine_option
@click.option("--concurrency", type=int, callback=positive,
              help="Closed loop: this many users, each sending the next request when one completes (default 64).")
@click.option("--arrival-rate", type=float, callback=positive_float, help="Open loop: requests per second.")
@click.option("--burstiness", type=float, default=1.0, show_default=True, callback=positive_float,
              help="Open loop: gamma shape of the gaps between arrivals (1 = Poisson, < 1 burstier).")
@click.option("--trace", type=click.Path(dir_okay=False),
              help="CSV or JSONL trace: arrival_s, input_tokens, output_tokens[, prefix_id, prefix_tokens].")
@click.option("--requests", type=int, default=1000, show_default=True, callback=positive, help="Requests to serve.")
@click.option("--input-len", default="1024", show_default=True, help="Prompt tokens. " + LENGTH_HELP)
@click.option("--output-len", default="256", show_default=True, help="Generated tokens. " + LENGTH_HELP)
@click.option("--ttft-ms", type=float, callback=positive_float, help="Goodput target: time to first token (default 2000).")
@click.option("--itl-ms", type=float, callback=positive_float,
              help="Goodput target: time per output token of a request (default 200).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the workload.")
@prefix_hit_option
@attention_option
@click.option("--prefix-cache-share", type=float, metavar="SHARE",
              help="Share of the KV cache kept for cached prefixes (what-if; default: none kept, idle prefixes are "
                   "evicted least recently used first when running requests need the room).")
@dtype_options
@with_plot
@guarded
@grid_speculation_options(footer=False)
def simulate(model, hardware, chips, tp, pp, ep, dp, engine, concurrency, arrival_rate, burstiness, trace, requests,
             input_len, output_len, ttft_ms, itl_ms, seed, prefix_hit, attention_sharding, prefix_cache_share,
             weight_dtype, kv_dtype, plot_file, as_json, explain, speculation=None):
    """Simulate a serving engine step by step: throughput, TTFT/ITL percentiles, goodput, queue, KV."""
    from tokenmath.analyses.serving.simulation.simulate import simulate as run
    from tokenmath.faces.commands.common import plot_then_json
    from tokenmath.faces.explain_simulation import explain_simulation, simulation_table
    r = run(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, engine=engine, concurrency=concurrency,
            arrival_rate=arrival_rate, burstiness=burstiness, trace=trace, requests=requests, input_len=input_len,
            output_len=output_len, ttft_ms=ttft_ms, itl_ms=itl_ms, seed=seed, weight_dtype=weight_dtype,
            kv_dtype=kv_dtype, prefix_hit=prefix_hit, speculation=speculation, prefix_cache_share=prefix_cache_share,
            attention_sharding=attention_sharding)

    def plot(res, path):
        from tokenmath.faces.plots_simulation import simulation_plot
        simulation_plot(res, path)
    if plot_then_json(r, as_json, plot_file, plot):
        return
    click.echo(explain_simulation(r) if explain else simulation_table(r))
    if plot_file:
        click.echo(f"plot: {plot_file}")
