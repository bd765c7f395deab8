"""plan, moe, systems: parallelism across the scale-up boundary."""
import click

from tokenmath.faces.commands.question_options import question_options

from tokenmath.faces.commands.axes import concurrency_option
from tokenmath.faces.commands.common import (MAX_CHIPS, MAX_TOKENS, answering, count, emit_json, guarded, positive,
                                             with_plot)

DEFAULT_SYSTEM = "hgx-h200"      # the default model (DeepSeek-V3, fp8) fits on one 8-GPU H200 node, not on 8 H100s


def _system_option(f):
    return click.option("--system", "-S", "--hardware", "system", default=DEFAULT_SYSTEM, show_default=True,
                        help="System id (hgx-h100, hgx-h200, hgx-b200, gb200-nvl72, gb300-nvl72, tpu-v5p, tpu-v6e, "
                             "mi300x-node), a chip id (that chip in its usual domain) or a file.")(f)


@click.command()
@question_options("plan", skip=("hardware", "concurrency"))
@_system_option
@click.option("--disaggregated", is_flag=True, help="Also size separate prefill and decode pools for this traffic mix.")
@concurrency_option
@with_plot
@guarded
def plan(deployment, workload, system, disaggregated, concurrency, as_json, explain, plot_file):
    """Best layout (TP, EP, PP, DP, batch) on a system: cheapest $/Mtok meeting the targets, runner-ups, frontier."""
    from dataclasses import replace

    from tokenmath.analyses.ask import plan as run
    from tokenmath.faces.explain_concurrency import plan_concurrency_text
    from tokenmath.faces.explain_parallel import explain_plan, plan_text
    r = run(answering(replace(deployment, hardware=system)), workload, disaggregated=disaggregated,
            concurrency=concurrency)
    if plot_file:
        from tokenmath.faces.plots_parallel import plan_plot
        plan_plot(r, plot_file)
    if as_json:
        emit_json(r.to_dict())
    else:
        click.echo((explain_plan(r) if explain else plan_text(r)) + plan_concurrency_text(r))
        if plot_file:
            click.echo(f"chart written to {plot_file}")
    return r


@click.command()
@question_options("moe", skip=("hardware",))
@_system_option
@click.option("--context", type=count(1, MAX_TOKENS), default=4096, show_default=True, callback=positive,
              help="Tokens per sequence held in KV (prompt + output; the last --output-len of them generated).")
@with_plot
@guarded
def moe(deployment, workload, system, context, as_json, explain, plot_file):
    """Expert layers vs the rack: fit in one domain, all-to-all inside vs across, TP vs EP vs PP side by side."""
    from dataclasses import replace

    from tokenmath.analyses.ask import moe as run
    from tokenmath.faces.explain_parallel import explain_moe, moe_text
    r = run(answering(replace(deployment, hardware=system)), workload, context=context)
    if plot_file:
        from tokenmath.faces.plots_parallel import moe_plot
        moe_plot(r, plot_file)
    if as_json:
        emit_json(r.to_dict())
    else:
        click.echo(explain_moe(r) if explain else moe_text(r))
        if plot_file:
            click.echo(f"chart written to {plot_file}")
    return r


@click.command()
@click.option("--chips", type=count(1, MAX_CHIPS), callback=positive, help="Size each system for this many chips.")
@click.option("--json", "as_json", is_flag=True, help="One JSON list (GB/s and microseconds, as in the catalog).")
@guarded
def systems(chips, as_json):
    """List the systems catalog: chip, domain size, topology, scale-up and scale-out links (sourced)."""
    from tokenmath.specs.systems import get_system, system_ids
    rows = []
    for sid in system_ids():
        try:
            rows.append(get_system(sid, chips).describe())
        except Exception as e:  # a chip count that is not a slice of a TPU: say so in that row
            rows.append({"id": sid, "error": str(e)})
    if as_json:
        emit_json(rows)
        return
    click.echo(f"{'id':<13} {'chip':<13} {'chips':>6} {'domain':>7} {'topology':<8} {'scale-up GB/s':>13} "
               f"{'scale-out GB/s':>14} {'lat us (in/+out)':>16} {'node kW/chips':>13}  torus")
    for r in rows:
        if "error" in r:
            click.echo(f"{r['id']:<13} {r['error']}")
            continue
        out = f"{r['scaleout_gbs']:g}" if r["scaleout_gbs"] is not None else "n/a"
        node = f"{r['node_kw']:g}/{r['node_chips']}" if r.get("node_kw") is not None else "n/a"
        click.echo(f"{r['id']:<13} {r['chip']:<13} {r['chips']:>6} {r['domain_size']:>7} {r['topology']:<8} "
                   f"{r['scaleup_gbs']:>13g} {out:>14} {r['scaleup_latency_us']:>8g}/{r['scaleout_latency_us']:<7g} "
                   f"{node:>13}  {'x'.join(map(str, r['torus'])) if r['torus'] else ''}")
