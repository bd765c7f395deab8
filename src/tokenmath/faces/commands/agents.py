"""`tokenmath agents`: the most concurrent agent sessions each system keeps at a speed target, per GPU, kW, $/hour
and system, with the binding constraint and the offload what-if (HBM only, + host DRAM, + NVMe)."""
import click

from tokenmath.faces.commands.common import emit_json, guarded, number, count, output_options, positive_float
from tokenmath.faces.commands.question_options import question_options

# analyses/serving/agents.DEFAULTS, repeated so --help needs no numpy (tests/test_agents.py holds them equal)
# fields the question has no use for (it searches the layout and compares --systems): no option at all
UNUSED = ("hardware", "chips", "tp", "pp", "ep", "dp", "cp", "attention_sharding", "input_len", "batch", "concurrency",
          "arrival_rate", "draft", "spec_k", "acceptance", "mtp", "turns")
# the turn's own option (--tool-gap-s is the declared field, its default in specs/question/defaults.py)
TURN_DEFAULTS = {"context_len": 27_000, "output_len": "150", "prefix_hit": "0.86"}
# analyses/serving/agent_capacity.LAYOUTS and MAX_LAYOUTS, repeated for the same reason (tests/test_agents.py)
LAYOUTS, MAX_LAYOUTS = 10, 64


@click.command()
@question_options("agents", skip=UNUSED)    # its own defaults: specs/question/defaults.py
@click.option("--systems", default="hgx-h100,hgx-h200,hgx-b200,gb200-nvl72,mi355x", show_default=True,
              help="Systems to compare, comma-separated (tokenmath systems; a chip id: that chip in its usual node).")
@click.option("--context-len", type=count(2, 10_000_000, "tokens"), default=TURN_DEFAULTS["context_len"],
              show_default=True, help="Prompt tokens of one agent turn, cached and new (AA-AgentPerf: mean ~27K).")
@click.option("--offload", type=click.Choice(["hbm", "dram", "nvme"]), default="hbm", show_default=True,
              help="Where idle sessions' prefixes may wait for the headline figures: HBM only, + host DRAM, "
                   "+ host DRAM + NVMe (every row also shows all three).")
@click.option("--pue", type=number(0.5, 5.0), default=1.0, show_default=True, callback=positive_float,
              help="Facility power / IT power: kW = node kW x PUE.")
@click.option("--layouts", type=count(1, MAX_LAYOUTS), default=LAYOUTS, show_default=True,
              help="Most replica layouts traced per level of each system (the best-bounded of each TP degree first; "
                   "a domain wider than 8 GPUs searches its 8-GPU replicas first, then the whole domain).")
@output_options
@guarded
def agents(deployment, workload, systems, context_len, offload, pue, layouts, as_json, explain):
    """Concurrent agent sessions per GPU, per kW, per $/hour and per system at a speed target, the binding constraint,
    and the offload what-if."""
    from tokenmath.analyses.ask import agents as run
    from tokenmath.faces.tables_agents import agents_text, explain_agents
    r = run(deployment, workload, systems=systems, context_len=context_len, offload=offload, pue=pue,
            layouts=layouts)
    if as_json:
        emit_json(r.to_dict())
    else:
        click.echo(explain_agents(r) if explain else agents_text(r))
    return r
