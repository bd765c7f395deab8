"""`tokenmath export`: an answer as the commands that run it. infer's answer to the options given, or a saved `plan` /
`fleet` / `infer` answer (--answer FILE, `-` for standard input; the options its "question" echo records are written as
the same options given here would be): each server pool's engine launch command, a Kubernetes
manifest for NVIDIA Dynamo or llm-d (--stack), the `vllm bench serve` command that measures the deployment and the
figures tokenmath expects it to print. The output is a shell script: comments, commands and here-documents.
Formatting only (analyses/benchmarks/export.py)."""
from __future__ import annotations

import click

from tokenmath.faces.commands.common import count, emit_json, guarded
from tokenmath.faces.commands.question_options import question_options

MAX_ANSWER_BYTES = 64_000_000     # a plan answer with every frontier point is a few MB


@click.command()
@question_options("infer")
@click.option("--answer", "answer_file", metavar="FILE|-", type=click.Path(dir_okay=False, allow_dash=True),
              help="Export a saved `tokenmath plan --json`, `fleet --json` or `infer --json` answer instead of "
                   "infer's, with the options its question recorded (the question's options are then not used, and "
                   "refused if given).")
@click.option("--disaggregated/--colocated", "disaggregated", default=None,
              help="With --answer: deploy its prefill and decode pools, or its colocated servers (default: a plan's "
                   "own choice, a fleet's continuously batched servers).")
@click.option("--stack", type=click.Choice(["dynamo", "llm-d"]), default=None,
              help="Also write the Kubernetes manifest: an NVIDIA Dynamo DynamoGraphDeployment, or the values of "
                   "llm-d's modelservice Helm chart; validated against its published schema.")
@click.option("--image", metavar="IMAGE", default=None, help="Container image of the manifest's workers (default: the "
              "pinned stack example's).")
@click.option("--gpus-per-node", type=count(1, 64), default=None,
              help="GPUs in one Kubernetes node (default: the catalog system's node, when it is at most 8).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the commands (argv lists and lines), files, "
              "manifest, expected figures, pinned parser sources and the answer's own figures.")
@guarded
def export(deployment, workload, answer_file, disaggregated, stack, image, gpus_per_node, as_json):
    """The engine launch commands for an answer, the benchmark that checks it, and the numbers to expect."""
    from tokenmath.analyses.benchmarks.export import export as run, export_answer
    if answer_file is not None:
        _refuse_question_options()
        e = export_answer(_read_answer(answer_file), disaggregated=disaggregated, stack=stack, image=image,
                          gpus_per_node=gpus_per_node)
    else:
        if disaggregated is not None:
            from tokenmath.base.errors import InputError
            raise InputError("disaggregated", "chooses between a saved answer's pools", "use it with --answer FILE")
        e = run(deployment, workload, stack=stack, image=image, gpus_per_node=gpus_per_node)
    if as_json:
        emit_json(e)
        return e
    _print(e)
    return e


def _refuse_question_options() -> None:
    from click.core import ParameterSource

    from tokenmath.base.errors import InputError
    from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
    from tokenmath.specs.question.workload import WORKLOAD_FIELDS
    ctx = click.get_current_context()
    given = [f.option for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS
             if ctx.get_parameter_source(f.name) == ParameterSource.COMMANDLINE]
    if given:
        raise InputError("answer", f"a saved answer already holds its deployment and workload, so {', '.join(given)} "
                         "would be ignored", "ask the question again with them, then export its --json answer")


def _read_answer(path: str) -> dict:
    import json

    from tokenmath.base.errors import InputError
    try:
        with click.open_file(path, "rb") as fh:
            raw = fh.read(MAX_ANSWER_BYTES + 1)
    except OSError as e:
        raise InputError("answer", f"cannot read {path}: {e.strerror}", "a file `tokenmath plan --json` wrote") \
            from None
    if len(raw) > MAX_ANSWER_BYTES:
        raise InputError("answer", f"is over {MAX_ANSWER_BYTES:,} bytes", "the JSON of one plan or fleet answer")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError("answer", f"is not JSON ({getattr(e, 'msg', 'not UTF-8')})",
                         "the JSON `tokenmath plan --json` or `tokenmath fleet --json` prints") from None


def _print(e: dict) -> None:
    x = e["expected"]
    k = 1
    click.echo(f"# {e['model']} on {e['chips']} x {e['hardware']} ({e['question']}'s answer, {e['engine']})")
    for p in e["pools"]:
        where = f", spanning {p['nodes_per_server']} nodes each" if p["nodes_per_server"] > 1 else ""
        role = {"both": "server", "prefill": "prefill server", "decode": "decode server"}[p["role"]]
        n = p["replicas"]
        running = "" if p["max_running"] is None else f"; {p['max_running']:,} running" + (
            f", {p['max_running_per_rank']:,} per rank" if p["ranks"] > 1 else "")
        attn = f", attention by {p['attention_sharding']}" if p["tp"] > 1 else ""     # inside a TP group only
        click.echo(f"# {k}. {n} {role}{'s' if n > 1 else ''} of {p['chips_per_server']} chips{where} (tp {p['tp']}, "
                   f"pp {p['pp']}, ep {p['ep']}{attn}{running})")
        for name, text in p["files"].items():
            click.echo(f"cat > {name} <<'EOF'")
            click.echo(text.rstrip("\n"))
            click.echo("EOF")
        click.echo(p["serve_line"])
        k += 1
    click.echo("#    (flags from " + "; ".join(f"{t}: {_src(s)}" for t, s in e["sources"].items()
                                               if t != "vllm bench serve") + ")")
    m = e["manifest"]
    if m is not None:
        what = "NVIDIA Dynamo DynamoGraphDeployment" if m["stack"] == "dynamo" else "llm-d modelservice Helm values"
        click.echo(f"# {k}. Kubernetes: {what} ({m['gpus_per_node']} GPUs per node; validated against its schema)")
        if m["stack"] == "dynamo":
            click.echo("kubectl apply -f - <<'EOF'")
        else:
            click.echo("cat > values.yaml <<'EOF'")
        click.echo(m["yaml"].rstrip("\n"))
        click.echo("EOF")
        k += 1
    click.echo(f"# {k}. benchmark {e['benchmarked_unit']} (flags from {_src(e['sources']['vllm bench serve'])})")
    click.echo(e["bench_line"])
    click.echo(f"# {k + 1}. tokenmath expects the benchmark to print:")
    click.echo(f"#    Output token throughput (tok/s): {x['output_tokens_per_s']:,.0f}")
    click.echo(f"#    Mean TTFT (ms):                  {x['mean_ttft_s'] * 1e3:,.1f}")
    click.echo(f"#    Mean TPOT (ms):                  {x['mean_tpot_s'] * 1e3:,.2f}")
    click.echo(f"#    ({x['requests_in_flight']:,.1f} requests in flight)")
    if e["calibrate_line"]:
        click.echo(f"# {k + 2}. then fit tokenmath to what it measured:")
        click.echo(e["calibrate_line"])
    for n in e["notes"]:
        click.echo(f"# note: {n}")


def _src(s: dict) -> str:
    return f"{s['repo']} {s['path']} @ {s['commit'][:12]}"
