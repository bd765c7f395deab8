"""`tokenmath calibrate RESULT_FILES... [--profile NAME]`: read benchmark result files (vllm bench serve, SGLang
bench_serving, AIPerf, GuideLLM reports, llm-d benchmark reports), fit the few bounded residuals on half of the runs,
show the held-out error before and after, and save the fit as a named profile that every serving question applies
with `--profile NAME`. Formatting only: the work is in analyses/benchmarks."""
from __future__ import annotations

import click

from tokenmath.faces.commands.common import emit_json, guarded
from tokenmath.faces.commands.question_options import field_option
from tokenmath.specs.question.deployment import field

_DEPLOYMENT = ("model", "hardware", "chips", "tp", "pp", "ep", "dp", "engine")
_METRIC = {"decode_step_s": ("TPOT", "ms", 1e3), "ttft_s": ("TTFT", "ms", 1e3),
           "output_tokens_per_s": ("output tok/s", "", 1.0)}


def _deployment_options(fn):
    for name in reversed(_DEPLOYMENT):
        fn = field_option(field(name))(fn)
    return fn


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _given(raw: dict) -> dict:
    """The deployment fields the user gave, validated by the one declaration (Deployment.of)."""
    from tokenmath.specs.question.deployment import Deployment
    given = {k: v for k, v in raw.items() if v is not None}
    dep = Deployment.of(**given)
    return {k: getattr(dep, k) for k in given}


@click.command()
@click.argument("result_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--profile", "profile", metavar="NAME", default=None,
              help="Save the fit under this name (in the tokenmath folder, profiles/NAME.toml) for --profile NAME "
                   "on infer. Without it, nothing is saved.")
@_deployment_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object: runs, assumptions, fit, held-out errors.")
@guarded
def calibrate(result_files, profile, as_json, **raw):
    """Calibrate to your own benchmark runs: the runs' workload, the fitted residuals and the held-out error."""
    from tokenmath.analyses.benchmarks.calibrate import calibrate as run, check_given
    from tokenmath.analyses.benchmarks.readers import read_files
    from tokenmath.base.errors import InputError
    given = check_given(_given(raw))             # bad names and values are refused before any work
    if profile is not None:
        from tokenmath.analyses.benchmarks.profiles import profile_path
        profile_path(profile)
    if not result_files:
        raise InputError("RESULT_FILES", "no result files given", "files saved by `vllm bench serve --save-result`, "
                         "`python -m sglang.bench_serving --output-file`, AIPerf, `guidellm benchmark --output-path` "
                         "or llm-d-benchmark (benchmark report v0.1)")
    runs = read_files(result_files)
    r = run(runs, given)
    saved = None
    if profile is not None and not r["refused"]:
        from tokenmath.analyses.benchmarks.profiles import save_profile
        saved = save_profile(profile, r, list(result_files))
    if as_json:
        emit_json({**r, "profile": profile, "saved": saved})
    else:
        _text(r, profile, saved)
    if r["refused"]:
        raise SystemExit(1)


def _text(r: dict, profile, saved) -> None:
    from tokenmath.faces.plain_table import box_table, wrapped
    d = r["deployment"]
    click.echo(f"deployment: {d['model']} on {d['hardware']}, engine {d['engine']}, "
               + ", ".join(f"{k} {d[k]}" for k in ("chips", "tp", "pp", "ep", "dp") if k in d))
    rows = [[x["where"], x["split"], str(x["request_rate"]), str(x["concurrency"]), f"{x['input_len']}/{x['output_len']}"]
            for x in r["runs"]]
    click.echo(box_table("runs", ["run (file:line)", "used to", "rate req/s", "in flight", "tokens in/out"], rows, right=(3,)))
    for x in r["runs"][:1]:
        for a in x["assumed"]:
            click.echo(wrapped("assumed: ", a))
    if len({tuple(x["assumed"]) for x in r["runs"]}) > 1:
        click.echo("  (each run's own assumptions: --json)")
    prm = {p["name"]: p for p in r["parameters"]}
    vrows = []
    for k, v in r["values"].items():
        p = prm.get(k)
        b = f"[{p['bounds'][0]:g}, {p['bounds'][1]:g}]" if p else "held at 0"
        edge = (" <- at its bound" if p and p.get("at_edge") else "")
        vrows.append([k, f"{r['default_terms'][k]:g}", f"{v:g}{edge}", b])
    click.echo(box_table("fitted residuals", ["parameter", "tokenmath default", "fitted", "bounds"], vrows))
    ho = r["heldout"]
    mrows = [[_METRIC[m][0], str(e["rows"]), _pct(e["default"]), _pct(e["calibrated"])]
             for m, e in ho["by_metric"].items()]
    mrows.append(["fitted metrics", str(ho["rows"]), _pct(ho["default_median_ape"]), _pct(ho["calibrated_median_ape"])])
    click.echo(box_table("held-out runs: median |predicted - measured| / measured", ["metric", "rows", "default", "calibrated"],
              mrows, right=(1, 2, 3)))
    side = []
    for x in r["rows"]:
        if x["split"] != "held-out":
            continue
        name, unit, k = _METRIC[x["metric"]]
        f = (lambda v: f"{v * k:,.1f}{(' ' + unit) if unit else ''}")
        side.append([x["id"].rsplit(":", 1)[0], name, f(x["measured"]), f(x["default"]), f(x["calibrated"])])
    click.echo(box_table("held-out runs, side by side", ["run", "metric", "measured", "default", "calibrated"], side,
              right=(2, 3, 4)))
    click.echo(wrapped("note: ", "TTFT is predicted and shown, never fitted: a client's TTFT also holds the HTTP "
                       "path, tokenization, a gateway's routing and queueing, which the engine model does not contain"))
    if r["refused"]:
        click.echo(wrapped("refused: ", r["refused"] + ("; no profile saved" if profile else "")))
    elif saved:
        click.echo(f"profile {profile!r} saved to {saved}; every serving question takes it: tokenmath infer "
                   f"--profile {profile} --hardware {d['hardware']} ... (or plan, fleet, price, simulate, ...)")
    else:
        click.echo("not saved (give --profile NAME to keep it)")


def side_by_side(r0, r, profile: str) -> str:
    """infer's answer without and with a profile, the figures each already holds (no arithmetic here)."""
    from tokenmath.faces.plain_table import box_table

    def figs(x):
        ld = x.load
        if ld is not None:
            return {"TTFT": ld.ttft_s * 1e3, "TPOT": ld.tpot_s * 1e3, "output tok/s": ld.output_tokens_per_s}
        return {"TTFT": x.ttft_s * 1e3, "TPOT": x.decode_step_s * 1e3, "output tok/s": x.output_tokens_per_s}
    a, b = figs(r0), figs(r)
    unit = {"TTFT": " ms", "TPOT": " ms", "output tok/s": ""}
    rows = [[k, f"{a[k]:,.1f}{unit[k]}", f"{b[k]:,.1f}{unit[k]}"] for k in a]
    rows.append(["$/Mtok output", f"${r0.cost_per_mtok_output_usd:.4g}", f"${r.cost_per_mtok_output_usd:.4g}"])
    return box_table(f"uncalibrated vs profile {profile!r}", ["", "tokenmath default", f"profile {profile}"], rows,
                     right=(1, 2))
