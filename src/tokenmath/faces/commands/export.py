"""`tokenmath export`: infer's layout as the `vllm serve` command that runs it, the `vllm bench serve` command that
measures it and the figures tokenmath expects that benchmark to print. Formatting only (analyses/benchmarks/export.py)."""
from __future__ import annotations

import click

from tokenmath.faces.commands.common import emit_json, guarded
from tokenmath.faces.commands.question_options import question_options


@click.command()
@question_options("infer")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the commands (argv lists and lines), the "
              "expected figures, the pinned parser sources and infer's answer.")
@guarded
def export(deployment, workload, as_json):
    """The engine launch command for infer's layout, the benchmark that checks it, and the numbers to expect."""
    from tokenmath.analyses.benchmarks.export import export as run
    engine = deployment.engine if isinstance(deployment.engine, str) else getattr(deployment.engine, "id", "vllm")
    e = run(deployment, workload, engine)
    if as_json:
        emit_json(e)
        return e
    x, lay = e["expected"], e["layout"]
    click.echo(f"# {lay['chips']} chips: tp {lay['tp']}, pp {lay['pp']}, ep {lay['ep']}, dp {lay['dp']}")
    click.echo("# 1. serve (flags from " + _src(e["sources"]["vllm serve"]) + ")")
    click.echo(e["serve_line"])
    click.echo("# 2. benchmark it (flags from " + _src(e["sources"]["vllm bench serve"]) + ")")
    click.echo(e["bench_line"])
    click.echo("# 3. tokenmath expects the benchmark to print:")
    click.echo(f"#    Output token throughput (tok/s): {x['output_tokens_per_s']:,.0f}")
    click.echo(f"#    Mean TTFT (ms):                  {x['mean_ttft_s'] * 1e3:,.1f}")
    click.echo(f"#    Mean TPOT (ms):                  {x['mean_tpot_s'] * 1e3:,.2f}")
    click.echo(f"#    ({x['requests_in_flight']:,.1f} requests in flight)")
    click.echo("# 4. then fit tokenmath to what it measured:")
    click.echo(e["calibrate_line"])
    for n in e["notes"]:
        click.echo(f"# note: {n}")
    return e


def _src(s: dict) -> str:
    return f"{s['repo']} {s['path']} @ {s['commit'][:12]}"
