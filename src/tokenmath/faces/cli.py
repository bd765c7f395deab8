"""The `tokenmath` command: a thin face over the analyses (no physics here).

Subcommands live one per module in tokenmath/commands and are imported only when used, so `--help` stays quick.
To add one: write commands/<name>.py with a click command and add a line to COMMANDS.
"""
from __future__ import annotations

import importlib
import json
import os
import sys

import click

COMMANDS = {
    "infer": ("tokenmath.faces.commands.infer:infer", "How fast and how expensive: TTFT, decode step, $/Mtok, memory, bottleneck."),
    "hyperbola": ("tokenmath.faces.commands.hyperbola:hyperbola", "Decode cost per token and latency against batch size."),
    "slowmode": ("tokenmath.faces.commands.serving:slowmode", "Cheapest cost for a latency budget; where waiting stops helping."),
    "pareto": ("tokenmath.faces.commands.serving:pareto", "Throughput per chip vs tokens/s per user: the frontier, with $/Mtok."),
    "prices": ("tokenmath.faces.commands.serving:prices", "Cost of input vs output tokens across contexts; cached input."),
    "context": ("tokenmath.faces.commands.serving:context", "KV bytes, max context/batch, where KV reads equal weight reads."),
    "simulate": ("tokenmath.faces.commands.simulate:simulate", "Simulate an engine serving a workload: throughput, TTFT/ITL percentiles, goodput."),
    "scenarios": ("tokenmath.faces.commands.scenarios:scenarios", "Sweep scenarios (models x hardware x layouts x engines x workloads) locally or on a Dask cluster."),
    "sensitivity": ("tokenmath.faces.commands.sensitivity:sensitivity", "Which hardware figure or efficiency moves an answer most: +-20% each, ranked (tornado)."),
    "fleet": ("tokenmath.faces.commands.serving:fleet", "Chips, racks, MW and $/year to serve a demand in tokens/s."),
    "chinchilla": ("tokenmath.faces.commands.chinchilla:chinchilla", "Chinchilla loss L(N, D) and the compute-optimal N, D for a budget."),
    "overtrain": ("tokenmath.faces.commands.overtrain:overtrain", "Train smaller and longer: minimise training + lifetime inference cost."),
    "deduce": ("tokenmath.faces.commands.deduce:deduce", "Deduce active params, KV bytes, batch regime from API prices."),
    "price": ("tokenmath.faces.commands.deduce:price", "What serving a model costs per Mtok, and the price at a margin."),
    "validate": ("tokenmath.faces.commands.validate:validate", "Predict every published measurement: error by regime, calibrated."),
    "plan": ("tokenmath.faces.commands.parallel:plan", "Best layout (TP/EP/PP/DP, batch) on a system for $/Mtok and latency targets."),
    "moe": ("tokenmath.faces.commands.parallel:moe", "MoE vs the rack: fit in one domain, all-to-all inside/across, TP vs EP vs PP."),
    "systems": ("tokenmath.faces.commands.parallel:systems", "List the systems catalog (domains, topology, links; sourced)."),
    "models": ("tokenmath.faces.commands.catalog:models", "List the model catalog with parameter counts."),
    "hardware": ("tokenmath.faces.commands.catalog:hardware", "List the hardware catalog (dense peaks, memory, links, price)."),
    "train": ("tokenmath.faces.commands.train:train", "Training step time, MFU, memory per chip, run cost; --search ranks layouts."),
    "measure": ("tokenmath.faces.commands.local:measure", "Measure this machine: memory bandwidth, matmul FLOP/s, overhead -> hardware file."),
    "verify": ("tokenmath.faces.commands.local:verify", "Run a real transformers model here; measured vs predicted decode step per batch."),
    "agents": ("tokenmath.faces.commands.agents:agents", "Concurrent agent sessions per GPU, kW, $/h and system at a speed target; binding constraint; KV offload what-if."),
    "kvcache": ("tokenmath.faces.commands.kvcache:kvcache", "A trace's prefix-cache hit rate by capacity and KV tier (HBM, DRAM, SSD), reload load, cost of a hit."),
    "schema": ("tokenmath.faces.commands.schema:schema", "JSON Schema of a question's Deployment and Workload (bounds, units, defaults)."),
    "calibrate": ("tokenmath.faces.commands.calibrate:calibrate", "Fit a profile to your vllm bench serve / SGLang bench_serving results; held-out error."),
    "export": ("tokenmath.faces.commands.export:export", "The vllm serve command for infer's layout, the vllm bench serve that checks it, expected figures."),
    "serve": ("tokenmath.faces.commands.web:serve", "Local web page + JSON API (offline): roofline, hyperbola, Pareto, KV, deduce, training."),
}


# --help lists what a question is about first and the ways of re-asking it last
_FIRST = ("model", "hardware")
_LAST = ("what_if", "set", "vary")


def _options_in_reading_order(cmd: click.Command) -> click.Command:
    """The options as --help lists them: model and hardware first, --set and --vary last, the rest as declared
    (positional arguments keep their place; click parses options in any order)."""
    rank = lambda p: (0 if p.name in _FIRST else 2 if p.name in _LAST else 1) if isinstance(p, click.Option) else 1  # noqa: E731
    cmd.params.sort(key=rank)     # stable: the declared order within each rank
    return cmd


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        mod, fn = COMMANDS[name][0].split(":")
        return _options_in_reading_order(getattr(importlib.import_module(mod), fn))

    def format_commands(self, ctx, formatter):
        rows = [(n, COMMANDS[n][1]) for n in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            if args and not args[0].startswith("-"):
                from tokenmath.base.errors import closest
                near = closest(args[0], self.list_commands(ctx))
                if near:
                    raise click.UsageError(f"No such command {args[0]!r}. Did you mean {', '.join(near)}?") from None
            raise


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="tokenmath")
def cli():
    """Roofline math for LLM serving and training: cost per token, bottlenecks, memory, layouts.

    Start with:  tokenmath infer --model llama-3.1-70b --hardware h100-sxm --chips 8 --explain
    """


# commands that may time or run matrix products (BLAS threads matter there); the others are elementwise napkin math
_BLAS_COMMANDS = {"measure", "verify", "serve"}


def _lean_numpy(args) -> None:
    """Load numpy with one BLAS thread for the napkin-math commands, which never call BLAS: OpenBLAS sets up a
    thread pool and per-thread buffers when numpy loads, tens of ms of start-up for nothing. Only for a command run
    from the command line, only when the user has not set OPENBLAS_NUM_THREADS, and the variable is removed again
    once numpy is loaded (child processes see the user's environment). Results do not change: no BLAS call."""
    if (not args or args[0].startswith("-") or args[0] not in COMMANDS or args[0] in _BLAS_COMMANDS
            or "-h" in args or "--help" in args or "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def main(argv=None):
    """Entry point: usage errors also come back as a JSON "error" object when --json was asked for."""
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None:
        _lean_numpy(args)
    try:
        cli.main(args=args, prog_name="tokenmath", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.UsageError as e:
        if "--json" in args:
            field = e.param.name if isinstance(e, click.BadParameter) and e.param is not None else None
            click.echo(json.dumps({"error": {"field": field, "problem": e.format_message(),
                                             "valid": "see tokenmath --help"}}, indent=2))
        e.show()
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
