"""The `tokenmath` command: a thin face over the analyses (no physics here)."""
from __future__ import annotations

import json
import os
import sys

import click

DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_HARDWARE = "h100-sxm"


def _fail(err, as_json: bool) -> None:
    from .errors import InputError
    if isinstance(err, InputError):
        if as_json:
            click.echo(json.dumps(err.to_dict(), indent=2))
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    raise err


def _run(fn, as_json: bool):
    from .errors import InputError
    try:
        return fn()
    except InputError as e:
        _fail(e, as_json)
    except click.exceptions.Exit:
        raise
    except Exception as e:  # never a traceback for a user; TOKENMATH_DEBUG=1 shows it
        if os.environ.get("TOKENMATH_DEBUG"):
            raise
        msg = {"error": {"field": None, "problem": f"internal error: {type(e).__name__}: {e}",
                         "valid": "please report this with the command line"}}
        if as_json:
            click.echo(json.dumps(msg, indent=2))
        click.echo(f"internal error: {type(e).__name__}: {e} (set TOKENMATH_DEBUG=1 for details)", err=True)
        sys.exit(1)


class _Group(click.Group):
    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            if args and not args[0].startswith("-"):
                from .errors import closest
                near = closest(args[0], self.list_commands(ctx))
                if near:
                    raise click.UsageError(f"No such command {args[0]!r}. Did you mean {', '.join(near)}?") from None
            raise e


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="tokenmath")
def cli():
    """Roofline math for LLM serving and training: cost per token, bottlenecks, memory, layouts.

    Start with:  tokenmath infer --model llama-3.1-70b --hardware h100-sxm --chips 8 --explain
    """


def _batch(ctx, param, value):
    if value is None:
        return 1
    if str(value).lower() == "max":
        return "max"
    try:
        v = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an integer or 'max'") from None
    if v < 1:
        raise click.BadParameter(f"{v} must be at least 1 (or 'max')")
    return v


def _pos(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"{value} must be at least 1")
    return value


@cli.command()
@click.option("--model", "-m", default=DEFAULT_MODEL, show_default=True, help="Catalog id or path to a config.json.")
@click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True, help="Catalog id or hardware file (.toml/.json).")
@click.option("--chips", type=int, callback=_pos, help="Total chips; must equal tp x pp x ep x dp.")
@click.option("--tp", type=int, callback=_pos, help="Tensor-parallel degree (default: chips / (pp x ep x dp)).")
@click.option("--pp", type=int, callback=_pos, help="Pipeline stages.")
@click.option("--ep", type=int, callback=_pos, help="Expert-parallel degree (MoE; attention data-parallel over ep groups).")
@click.option("--dp", type=int, callback=_pos, help="Independent replicas.")
@click.option("--batch", "-b", callback=_batch, default="1", show_default=True, help="Concurrent sequences, or 'max'.")
@click.option("--input-len", type=int, default=1024, show_default=True, callback=_pos, help="Prompt tokens per sequence.")
@click.option("--output-len", type=int, default=256, show_default=True, callback=_pos, help="Generated tokens per sequence.")
@click.option("--weight-dtype", help="bf16, fp16, fp8, int8, int4, fp4, mxfp4, nvfp4 (default: the checkpoint's).")
@click.option("--kv-dtype", help="bf16, fp16, fp8, int8 (default bf16).")
@click.option("--peak", is_flag=True, help="Pure roofline: 100% of every peak instead of the achievable fractions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, SI units.")
@click.option("--explain", is_flag=True, help="The derivation, step by step, with numbers and units.")
def infer(model, hardware, chips, tp, pp, ep, dp, batch, input_len, output_len, weight_dtype, kv_dtype, peak,
          as_json, explain):
    """How fast and how expensive: prefill (TTFT), decode step, throughput, $/Mtok, memory, bottleneck."""
    def go():
        from .analyses.infer import infer as run
        from .efficiency import PEAK
        r = run(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, batch=batch, input_len=input_len,
                output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=PEAK if peak else None)
        if as_json:
            click.echo(json.dumps(r.to_dict(), indent=2))
            return
        if explain:
            from .analyses.explain import explain as ex
            click.echo(ex(r))
            return
        from .faces.tables import infer_table
        infer_table(r)
    _run(go, as_json)


@cli.command("models")
@click.option("--json", "as_json", is_flag=True)
def models_cmd(as_json):
    """List the model catalog with parameter counts."""
    def go():
        from .faces.tables import models_table
        models_table(as_json)
    _run(go, as_json)


@cli.command("hardware")
@click.option("--json", "as_json", is_flag=True)
def hardware_cmd(as_json):
    """List the hardware catalog (dense peaks, memory, links, price)."""
    def go():
        from .faces.tables import hardware_table
        hardware_table(as_json)
    _run(go, as_json)


def main(argv=None):
    """Entry point: usage errors also come back as a JSON "error" object when --json was asked for."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.main(args=args, prog_name="tokenmath", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.UsageError as e:
        if "--json" in args:
            field = None
            if isinstance(e, click.BadParameter) and e.param is not None:
                field = e.param.name
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
