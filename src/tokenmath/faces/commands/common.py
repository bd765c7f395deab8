"""Options shared by subcommands, and the wrapper that turns InputError into exit code 2 (+ JSON error)."""
from __future__ import annotations

import contextvars
import functools
import json
import os
import sys

import click

from tokenmath.specs.question.deployment import DEFAULT_ENGINE, DEFAULT_HARDWARE, DEFAULT_MODEL  # noqa: E402,F401 (one home)


def run_guarded(fn, as_json: bool):
    """Run fn(); an InputError exits 2 with its message (and a JSON error object under --json); no tracebacks."""
    from tokenmath.base.errors import InputError
    try:
        return fn()
    except InputError as e:
        if as_json:
            click.echo(json.dumps(e.to_dict(), indent=2))
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except BrokenPipeError:  # `tokenmath ... | head`: the reader left; stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except Exception as e:  # never a traceback for a user; TOKENMATH_DEBUG=1 shows it
        if os.environ.get("TOKENMATH_DEBUG"):
            raise
        if as_json:
            click.echo(json.dumps({"error": {"field": None, "problem": f"internal error: {type(e).__name__}: {e}",
                                             "valid": "please report this with the command line"}}, indent=2))
        click.echo(f"internal error: {type(e).__name__}: {e} (set TOKENMATH_DEBUG=1 for details)", err=True)
        sys.exit(1)


# the largest values of the number options (each the bound its analysis or the web page's parameter keeps; the
# analyses' own modules load numpy, so the figures are repeated here and tests/test_cli_refusals.py holds them equal)
MAX_TOKENS = 100_000_000           # base/validators.py
MAX_CHIPS = 1_000_000              # specs/systems.py
MAX_SEARCH_CHIPS = 4096            # mapping/candidates.py: the most chips a layout search walks
MAX_REQUESTS = 2_000_000           # analyses/serving/simulation/workload.py
MAX_TRAIN_CHIPS = 65_536           # chips or a parallel degree of a training run (faces/web/endpoints.py)


class Bounded(click.ParamType):
    """An int or float option's type with its valid range, checked as a declared field is (specs/question/fields.py
    as_int / as_float): 400 digits, nan, inf, non-ASCII digits and values out of [lo, hi] exit 2 naming the option
    and the range, before any work. Every number option of the command line has one (count, number)."""

    def __init__(self, kind: str, lo, hi, unit: str = ""):
        self.kind, self.lo, self.hi, self.unit = kind, lo, hi, unit
        self.name = "integer" if kind == "int" else "float"

    def get_metavar(self, param, ctx=None):
        return "N" if self.kind == "int" else "X"

    def convert(self, value, param, ctx):
        from tokenmath.base.errors import InputError
        from tokenmath.specs.question.fields import Field, as_float, as_int
        f = Field(param.name if param is not None else "value", self.kind, lo=self.lo, hi=self.hi)
        try:
            return as_int(value, f) if self.kind == "int" else as_float(value, f)
        except InputError as e:
            self.fail(e.problem + (f" ({e.valid}{' ' + self.unit if self.unit else ''})" if e.valid else ""),
                      param, ctx)


def count(lo: int = 1, hi: int = 100_000_000, unit: str = "") -> Bounded:
    """A whole number from lo to hi (default: a positive count of at most 10^8, tokens' bound)."""
    return Bounded("int", lo, hi, unit)


def number(lo: float, hi: float, unit: str = "") -> Bounded:
    """A finite number from lo to hi (lo > 0 where 0, or a value so small it rounds to 0, has no meaning)."""
    return Bounded("float", lo, hi, unit)


def positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"{value} must be at least 1")
    return value


def positive_float(ctx, param, value):
    import math
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise click.BadParameter(f"{value} must be a finite number greater than 0")
    return value


def nonneg_float(ctx, param, value):
    import math
    if value is not None and not (value >= 0 and math.isfinite(value)):
        raise click.BadParameter(f"{value} must be a finite number at least 0")
    return value


def model_hardware(f):
    """--model and --hardware."""
    f = click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True,
                     help="Catalog id or hardware file (.toml/.json).")(f)
    f = click.option("--model", "-m", default=DEFAULT_MODEL, show_default=True,
                     help="Catalog id or path to a config.json.")(f)
    return f




def engine_option(f):
    """--engine NAME|FILE: the serving engine whose defaults shape the step and the batch (default vLLM)."""
    return click.option("--engine", default=DEFAULT_ENGINE, show_default=True, metavar="NAME|FILE",
                        help="Serving engine profile: vllm, sglang, tensorrt-llm, llama.cpp, mlx, an engine file "
                             "(.toml/.json, the schema of data/engines.toml), or none (the engine-free step: no "
                             "scheduler limits, kernel-launch or per-step CPU costs).")(f)


def dtype_options(f):
    f = click.option("--kv-dtype", help="bf16, fp16, fp8, int8 (default bf16).")(f)
    f = click.option("--weight-dtype", help="bf16, fp16, fp8, int8, int4, fp4, mxfp4, nvfp4 (default: the checkpoint's).")(f)
    return f


FORCE = "tokenmath.force"            # ctx.meta key: --force was given


def _force(ctx, param, value):
    ctx.meta[FORCE] = bool(value)
    return value


def force_option(f):
    """--force (eager: known before the output paths are checked; not passed to the command)."""
    return click.option("--force", is_flag=True, is_eager=True, expose_value=False, callback=_force,
                        help="Replace an existing file tokenmath did not write, or a symbolic link (the link "
                             "itself, not its target).")(f)


def output_path(field: str, suffixes: tuple[str, ...]):
    """A click callback checking an output file before the command runs (tokenmath.base.files.check_destination:
    folder, name, link, FIFO, a file tokenmath did not write); a problem exits 2 naming the option."""
    def check(ctx, param, value):
        if value is None:
            return None
        from tokenmath.base.errors import InputError
        from tokenmath.base.files import check_destination
        try:
            return check_destination(value, field, suffixes, force=ctx.meta.get(FORCE, False))
        except InputError as e:
            raise click.BadParameter(e.problem + (f" ({e.valid})" if e.valid else ""), ctx=ctx, param=param) from None
    return check


PLOT_OPTION = {"type": click.Path(dir_okay=False), "callback": output_path("plot", (".png", ".svg"))}


def output_options(f, plot: bool = False):
    if plot:
        f = force_option(f)
        f = click.option("--plot", "plot_file", **PLOT_OPTION,
                         help="Write a chart (PNG or SVG by the file's extension).")(f)
    f = click.option("--explain", is_flag=True, help="The derivation, step by step, with numbers and units.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="One JSON object, SI units.")(f)
    return f


def with_plot(f):
    return output_options(f, plot=True)


def guarded(f):
    """Decorator: the command body runs under run_guarded, JSON errors when --json was given, with a progress line on
    stderr once it has run 2 s (faces/progress.heartbeat; commands with a --quiet report their own steps)."""
    @functools.wraps(f)
    def wrapper(*args, **kw):
        if "quiet" in kw:
            return run_guarded(lambda: f(*args, **kw), bool(kw.get("as_json")))
        from tokenmath.faces.progress import heartbeat
        ctx = click.get_current_context(silent=True)
        with heartbeat(f"tokenmath {ctx.info_name if ctx is not None else f.__name__}"):
            return run_guarded(lambda: f(*args, **kw), bool(kw.get("as_json")))
    return wrapper


# (question, deployment, workload) of the serving question a command is answering (question_options sets it): its
# `--json` answer then carries the versioned "schema" id and the "question" it answered (specs/question/answer_schema)
ANSWERING: contextvars.ContextVar = contextvars.ContextVar("answering", default=None)


def answering(deployment):
    """The command answers with this deployment (one it built from its own options, e.g. plan's --system): the
    deployment its `--json` answer echoes. Returns it."""
    asked = ANSWERING.get()
    if asked is not None:
        ANSWERING.set((asked[0], deployment, asked[2]))
    return deployment


def emit_json(obj) -> None:
    asked = ANSWERING.get()
    if asked is not None and isinstance(obj, dict) and "schema" not in obj:
        from tokenmath.specs.question.answer_schema import with_question
        obj = with_question(*asked, obj)
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


def plot_then_json(result, as_json: bool, plot_file, plot_fn) -> bool:
    """Write the chart if asked; under --json print the result (with the chart's path) and return True."""
    if plot_file:
        plot_fn(result, plot_file)
    if not as_json:
        return False
    d = result.to_dict()
    if plot_file:
        d["plot"] = plot_file
    emit_json(d)
    return True


def ep_transport_options(f):
    """--overlap-ep, --ep-comm and --ep-imbalance: how a MoE's expert-parallel all-to-all runs and how evenly the
    router loads its ranks (engine/expert_parallel.py)."""
    f = click.option("--ep-imbalance", default="1", show_default=True,
                     help="Busiest expert-parallel rank's routed tokens / the mean: a number >= 1 (1 = balanced), "
                          "'routing' (the measured skew of DeepSeek-R1's router, ~1.2-2.6x from EP 4 to 72) or "
                          "'eplb' (with redundant experts, ~1.1x).")(f)
    f = click.option("--overlap-ep", "ep_overlap", is_flag=True,
                     help="Overlap the EP all-to-all with compute (two micro-batches): only the part longer than "
                          "a layer's compute is exposed.")(f)
    f = click.option("--ep-comm", type=click.Choice(["bf16", "fp8", "deepep"]), default="bf16", show_default=True,
                     help="EP all-to-all: bf16 both ways, one copy per expert; fp8 dispatch + bf16 combine (DeepEP "
                          "low-latency); deepep: fp8 dispatch + bf16 combine, one copy per remote domain across "
                          "scale-out, group-limited routing honoured (DeepEP normal, DeepSeek-V3).")(f)
    return f
