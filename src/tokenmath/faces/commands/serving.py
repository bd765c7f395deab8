"""slowmode, pareto, prices, context, fleet: the serving-economics questions."""
import click

from tokenmath.faces.commands.question_options import question_options

from tokenmath.faces.commands.axes import concurrency_option, numbers
from tokenmath.faces.commands.common import (MAX_SEARCH_CHIPS, MAX_TOKENS, count, emit_json, guarded, number,
                                             positive, positive_float, with_plot)


def _out(result, as_json, explain, plot_file, plot_fn, explain_fn, text_fn=None):
    """--json: the result's dict; --explain: explain_fn's text; else text_fn's (explain_fn's when there is none)."""
    if plot_file:
        plot_fn(result, plot_file)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(text_fn(result) if (text_fn and not explain) else explain_fn(result))
        if plot_file:
            click.echo(f"chart written to {plot_file}")


_floats = numbers(float)     # a comma-separated list of finite numbers > 0 (faces/commands/axes.py)
_budgets = numbers(float, 1e-3, 1e9)     # ms: below a microsecond a budget rounds to nothing (1e-308: a KeyError)


def _speculation_footer(deployment, as_json):
    """The line saying what every point decoded with, under a text answer of a grid question."""
    if deployment.speculating and not as_json:
        from tokenmath.analyses.ask import speculation_of
        from tokenmath.faces.explain_speculative import grid_speculation_text
        click.echo(grid_speculation_text(speculation_of(deployment)))


@click.command()
@question_options("slowmode")
@click.option("--budget-ms", callback=_budgets, help="Latency budgets, comma-separated (ms per output token, or per request).")
@click.option("--per-request", is_flag=True, help="Budgets are per request (TTFT + all decode steps).")
@click.option("--max-chips", type=count(1, MAX_SEARCH_CHIPS), callback=positive, help="Largest chip count to consider (default: the scale-up domain).")
@with_plot
@guarded
def slowmode(deployment, workload, budget_ms, per_request, max_chips, as_json, explain, plot_file):
    """Cheapest cost for a latency budget, across batch sizes and chip counts (and where waiting stops helping)."""
    from tokenmath.analyses.ask import slowmode as run
    from tokenmath.faces.explain_serving import explain_slowmode
    from tokenmath.faces.plots import slowmode_plot
    r = run(deployment, workload, budgets_s=[b / 1e3 for b in budget_ms] if budget_ms else None,
            per_request=per_request, max_chips=max_chips)
    _out(r, as_json, explain, plot_file, slowmode_plot, explain_slowmode)
    _speculation_footer(deployment, as_json)
    return r


@click.command()
@question_options("pareto", skip=("concurrency",))
@click.option("--allow-pp", is_flag=True, help="Also consider pipeline-parallel layouts.")
@concurrency_option
@with_plot
@guarded
def pareto(deployment, workload, allow_pp, concurrency, as_json, explain, plot_file):
    """Throughput per chip against tokens/s per user over batches and layouts: the Pareto frontier, with $/Mtok."""
    from tokenmath.analyses.ask import pareto as run
    from tokenmath.faces.explain_concurrency import pareto_concurrency_text
    from tokenmath.faces.explain_serving import explain_pareto, pareto_text
    from tokenmath.faces.plots import pareto_plot
    r = run(deployment, workload, allow_pp=allow_pp, concurrency=concurrency)
    _out(r, as_json, explain, plot_file, pareto_plot, lambda x: explain_pareto(x) + pareto_concurrency_text(x),
         lambda x: pareto_text(x) + pareto_concurrency_text(x))
    _speculation_footer(deployment, as_json)
    return r


@click.command()
@question_options("prices")
@click.option("--contexts", callback=_floats, help="Input lengths, comma-separated (default 256..131072).")
@click.option("--cache-ttl-s", type=number(1e-9, 1e9, "s"), default=300.0, show_default=True, callback=positive_float,
              help="How long a cached prompt's KV waits for its reuse (in HBM, host DRAM or local SSD).")
@with_plot
@guarded
def prices(deployment, workload, contexts, cache_ttl_s, as_json, explain, plot_file):
    """Cost per input vs output token across context lengths, their ratio, and a cached input token."""
    from tokenmath.analyses.ask import prices as run
    from tokenmath.faces.explain_serving import explain_prices
    from tokenmath.faces.plots import prices_plot
    r = run(deployment, workload, contexts=[int(c) for c in contexts] if contexts else None, cache_ttl_s=cache_ttl_s)
    _out(r, as_json, explain, plot_file, prices_plot, explain_prices)
    return r


@click.command()
@question_options("context")
@click.option("--context", type=count(1, MAX_TOKENS), default=8192, show_default=True, callback=positive,
              help="Tokens of context (prompt + output so far) at which the costs are read.")
@with_plot
@guarded
def context(deployment, workload, context, as_json, explain, plot_file):
    """KV bytes per token, max context/batch, and the context where KV reads equal weight reads."""
    from tokenmath.analyses.ask import context as run
    from tokenmath.faces.explain_serving import explain_context
    from tokenmath.faces.plots import context_plot
    r = run(deployment, workload, context=context)
    _out(r, as_json, explain, plot_file, context_plot, explain_context)
    return r


@click.command()
@question_options("fleet")
@click.option("--demand", type=number(1e-6, 1e15, "output tokens/s"), required=True, callback=positive_float, help="Output tokens per second to serve.")
@click.option("--max-chips", type=count(1, MAX_SEARCH_CHIPS), callback=positive, help="Largest replica (chips).")
@click.option("--pue", type=number(0.5, 5.0), default=1.0, show_default=True, callback=positive_float,
              help="Facility power / chip power (1.0 counts chip TDP only).")
@click.option("--decode-chips", type=count(1, MAX_SEARCH_CHIPS), callback=positive,
              help="Disaggregated sizing: chips per decode instance (every layout of exactly that many searched, wide "
                   "EP across nodes; DeepSeek's day-6 system: 144). With --prefill-chips.")
@click.option("--prefill-chips", type=count(1, MAX_SEARCH_CHIPS), callback=positive,
              help="Disaggregated sizing: chips per prefill instance (DeepSeek's: 32). With --decode-chips.")
@with_plot
@guarded
def fleet(deployment, workload, demand, max_chips, pue, decode_chips, prefill_chips, as_json, explain, plot_file):
    """Chips, racks, megawatts and $/year to serve a demand in tokens/s at a per-user speed."""
    from tokenmath.analyses.ask import fleet as run
    from tokenmath.faces.explain_serving import explain_fleet
    own = dict(max_chips=max_chips, pue=pue, decode_chips=decode_chips, prefill_chips=prefill_chips)
    r = run(deployment, workload, demand=demand, **own)
    if plot_file:
        from tokenmath.faces.plots import fleet_plot
        sweep = [run(deployment, workload, demand=demand * f, **own).to_dict() for f in (0.01, 0.1, 1, 10, 100)]
        fleet_plot(sweep, plot_file)
    _out(r, as_json, explain, None, None, explain_fleet)
    _speculation_footer(deployment, as_json)
    return r
