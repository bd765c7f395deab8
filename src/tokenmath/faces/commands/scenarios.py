"""scenarios: a sweep of simulations (or steady states) over models x hardware x layouts x engines x workloads, in
local processes or on a Dask cluster."""
import click

from tokenmath.faces.commands.axes import names, numbers
from tokenmath.faces.commands.common import MAX_REQUESTS, count, emit_json, guarded, number, positive, positive_float

LENGTH_HELP = 'Tokens, or "uniform:LO-HI", "lognormal:MEDIAN,SIGMA".'


def _layouts(ctx, param, value):
    """--layout "tp=4,dp=2" (repeatable) -> [{"tp": 4, "dp": 2}, ...]."""
    out = []
    for spec in value or ():
        d = {}
        for part in (p for p in spec.split(",") if p.strip()):
            k, sep, v = part.partition("=")
            k = k.strip().lower()
            if not sep or k not in ("chips", "tp", "pp", "ep", "dp"):
                raise click.BadParameter(f"{part.strip()!r} in {spec!r} is not KEY=N (keys chips, tp, pp, ep, dp)")
            try:
                d[k] = int(v)
            except ValueError:
                raise click.BadParameter(f"{part.strip()!r} in {spec!r}: {v.strip()!r} is not a whole number") from None
            if d[k] < 1:
                raise click.BadParameter(f"{part.strip()!r} in {spec!r}: must be at least 1")
        out.append(d)
    return out


@click.command()
@click.option("--file", "path", type=click.Path(dir_okay=False),
              help="Scenario file (.toml or .json): lists under models, hardware, layouts, engines, workloads "
                   "(see tokenmath.analyses.serving.scenarios). The options below replace what it sets.")
@click.option("--method", type=click.Choice(["simulate", "steady"]),
              help="simulate (default): the step-by-step simulator; steady: the closed form (closed loops only).")
@click.option("--model", "-m", callback=names, help="Models, comma-separated (default llama-3.1-8b).")
@click.option("--hardware", "-H", callback=names,
              help="Chips or systems, comma-separated (a system is sized to each layout's chips; default h100-sxm).")
@click.option("--engine", callback=names, help="Engine profiles, comma-separated (default vllm).")
@click.option("--chips", callback=numbers(int), help="Chip counts, comma-separated: one layout each (the default spread).")
@click.option("--layout", "layouts", multiple=True, callback=_layouts,
              help='A layout, e.g. "chips=8,tp=4,dp=2"; repeat for more (added to --chips).')
@click.option("--concurrency", callback=numbers(int),
              help="Closed-loop workloads: users, comma-separated (default 64).")
@click.option("--arrival-rate", callback=numbers(float, 1e-6, 1e7),
              help="Open-loop workloads: requests/s, comma-separated.")
@click.option("--burstiness", type=number(1e-3, 1e3), callback=positive_float, help="Open loop: gamma shape (1 = Poisson).")
@click.option("--requests", type=count(1, MAX_REQUESTS), callback=positive, help="Requests per simulation (default 1000).")
@click.option("--input-len", help="Prompt tokens (default 1024). " + LENGTH_HELP)
@click.option("--output-len", help="Generated tokens (default 256). " + LENGTH_HELP)
@click.option("--seed", type=count(0, 2 ** 32 - 1), help="Random seed of every workload (default 0).")
@click.option("--ttft-ms", type=number(1e-3, 1e9, "ms"), callback=positive_float, help="Goodput target: time to first token (default 2000).")
@click.option("--itl-ms", type=number(1e-3, 1e9, "ms"), callback=positive_float, help="Goodput target: time per output token (default 200).")
@click.option("--workers", type=count(1, 1024), callback=positive, help="Local processes (default: every core).")
@click.option("--cluster", metavar="ADDRESS",
              help="Run on the Dask scheduler at ADDRESS (tcp://host:port) instead of local processes; needs "
                   "the cluster extra here (pip install '.[cluster]' in the source checkout) and tokenmath on every worker.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: a row per scenario and a summary, SI units.")
@guarded
def scenarios(path, method, model, hardware, engine, chips, layouts, concurrency, arrival_rate, burstiness, requests,
              input_len, output_len, seed, ttft_ms, itl_ms, workers, cluster, as_json):
    """Sweep scenarios (models x hardware x layouts x engines x workloads): one row per scenario, and a summary."""
    from tokenmath.analyses.serving.scenarios import read_scenarios, run_scenarios, scenario_set
    from tokenmath.base.errors import InputError
    from tokenmath.faces.explain_scenarios import scenarios_table
    if seed is not None and seed < 0:
        raise InputError("seed", f"{seed} is negative", "an integer from 0 to 4,294,967,295")
    spec = read_scenarios(path, "file").to_dict() if path else {}
    fields = {"models": "file.models", "hardware": "file.hardware", "engines": "file.engines"} if path else {}
    for axis, value, opt in (("models", model, "model"), ("hardware", hardware, "hardware"),
                             ("engines", engine, "engine")):
        if value is not None:
            spec[axis], fields[axis] = value, opt
    if method:
        spec["method"] = method
    if chips is not None or layouts:
        spec["layouts"] = [{"chips": c} for c in chips or ()] + list(layouts)
    if concurrency is not None or arrival_rate is not None:
        spec["workloads"] = ([{"concurrency": c} for c in concurrency or ()]
                             + [{"arrival_rate": r} for r in arrival_rate or ()])
    given = {"requests": requests, "input_len": input_len, "output_len": output_len,
             "seed": seed, "ttft_ms": ttft_ms, "itl_ms": itl_ms}
    given = {k: v for k, v in given.items() if v is not None}
    if given or burstiness is not None:
        spec["workloads"] = [{**w, **given} for w in spec.get("workloads", [{"concurrency": 64}])]
    if burstiness is not None:      # the shape of arrival gaps: the open loops' (a closed loop has none)
        if not any(isinstance(w, dict) and w.get("arrival_rate") is not None for w in spec["workloads"]):
            raise InputError("burstiness", "given with no open-loop workload (users in a closed loop send their "
                             "next request when one completes: no arrival gaps to shape)",
                             "--arrival-rate (or an arrival_rate workload in --file) with it, or leave it out")
        spec["workloads"] = [{**w, "burstiness": burstiness} if isinstance(w, dict) and w.get("arrival_rate")
                             is not None else w for w in spec["workloads"]]
    s = scenario_set(spec, "file" if path else "scenarios")
    if cluster:
        from tokenmath.local.cluster import DaskCluster
        with DaskCluster(cluster) as runner:
            sweep = run_scenarios(s, runner=runner, fields=fields)
    else:
        sweep = run_scenarios(s, workers=workers, fields=fields)
    if as_json:
        emit_json(sweep.to_dict())
    else:
        click.echo(scenarios_table(sweep))
