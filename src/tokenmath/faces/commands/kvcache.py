"""`tokenmath kvcache`: a trace's prefix reuse on a deployment, by cache capacity and KV tier."""
from __future__ import annotations

import json

import click

from tokenmath.faces.commands.common import run_guarded
from tokenmath.faces.commands.question_options import field_option
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS

# the Deployment fields this question reads (declared once in specs/question/deployment.py)
USED = ("model", "hardware", "chips", "tp", "pp", "ep", "dp", "weight_dtype", "kv_dtype", "engine")


def _options(fn):
    for f in reversed([f for f in DEPLOYMENT_FIELDS if f.name in USED]):
        fn = field_option(f)(fn)
    return fn


@click.command()
@click.option("--trace", "trace", required=True, metavar="FILE",
              help="A JSONL trace with prefix-block hashes (Mooncake's format: timestamp, input_length, output_length, "
                   "hash_ids; .jsonl or .jsonl.gz).")
@_options
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
def kvcache(trace, as_json, **raw):
    """How much of a trace's prompts the KV cache serves: the hit rate by capacity, in HBM alone, with host DRAM and
    with local SSD, each tier's reload load and the provider's cost of a hit."""
    from tokenmath.specs.question.deployment import Deployment

    def run():
        from tokenmath.analyses.serving.kv_offload import kv_offload
        dep = Deployment.of(**{k: v for k, v in raw.items() if v is not None})
        return kv_offload(dep.model, dep.hardware, trace, chips=dep.chips, tp=dep.tp, pp=dep.pp, ep=dep.ep, dp=dep.dp,
                          weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, engine=dep.engine)
    r = run_guarded(run, as_json)
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=2))
        return
    from tokenmath.faces.tables_kv_offload import kv_offload_text
    click.echo(kv_offload_text(r))
