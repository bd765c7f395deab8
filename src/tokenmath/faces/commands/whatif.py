"""`--set FIELD=VALUE` (repeatable) and `--vary FIELD=v1,v2,...` on the serving commands: what-if hardware.

A thin wrapper around a command: it resolves --hardware once, applies the overrides (specs/overrides.py, checked
like a hardware file), and calls the command with the changed chip. --vary calls it once per value and answers with
one table (the figures that change) or one JSON object holding the list. No physics here.
"""
from __future__ import annotations

import contextlib
import functools
import io
import json

import click

from tokenmath.faces.commands.common import emit_json, run_guarded
from tokenmath.specs.question.deployment import field as declared

# columns a --vary table shows first when they are among the figures that change (any other changing scalar follows)
PREFERRED = ("layout", "batch", "output_tokens_per_s_per_user", "output_tokens_per_s_per_chip",
             "cost_per_mtok_output_request_usd", "cost_per_mtok_output_usd", "decode_step_s", "ttft_s",
             "cost_per_mtok_input_usd", "output_tokens_per_s", "max_batch", "fits", "bottleneck_decode", "bottleneck")
MAX_COLUMNS = 8
SKIP = ("what_if", "search_s")      # not answers: the overrides themselves, and how long the search took


def whatif_options(f):
    """Decorator (above the command's own options): adds --set and --vary; without them the command runs unchanged."""
    @functools.wraps(f)
    def wrapper(*args, set_fields=(), vary=None, **kw):
        if not set_fields and not vary:
            return f(*args, **kw)
        return run_guarded(lambda: _run(f, args, kw, set_fields, vary), bool(kw.get("as_json")))
    wrapper = click.option("--vary", metavar="FIELD=V1,V2,...",
                           help="Sweep one hardware figure (same fields as --set); one table or JSON list.")(wrapper)
    wrapper = click.option("--set", "set_fields", multiple=True, metavar="FIELD=VALUE",
                           help="What-if hardware: override a chip/system figure (hardware-file field names, humane "
                                "units: memory_bw_tbs=6.7, memory_gb=288, tflops.fp8=5000, scaleup_domain=576, "
                                "scaleup_gbs, scaleout_gbs, tdp_w, price_usd_per_hour; '2x' = twice the catalog "
                                "figure). Repeatable.")(wrapper)
    return wrapper


def resolve(spec, chips=None):
    """The chip or system --hardware names (a system id resolves as a System of `chips`)."""
    from tokenmath.specs.hardware import Hardware, get_hardware
    from tokenmath.specs.systems import catalog as systems, get_system
    if isinstance(spec, Hardware):
        return spec
    if isinstance(spec, str) and spec.lower() in systems():
        return get_system(spec, chips)
    return get_hardware(spec)


def _chips(v):
    """--chips as the command line gave it (text from the generated options, or an int): a whole number or None."""
    if v is None or isinstance(v, int):
        return v
    from tokenmath.specs.question.fields import coerce_basic
    return coerce_basic(declared("chips"), v)


def capture(f, args, kw) -> tuple[str, int]:
    """Run the command, returning what it printed and its exit code (an InputError exits 2 after printing)."""
    buf = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buf):
        try:
            f(*args, **kw)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return buf.getvalue(), code


def _run(f, args, kw, set_fields, vary):
    from tokenmath.specs.overrides import apply, parse_pairs, vary_values
    sets = parse_pairs(set_fields)
    key = "hardware" if "hardware" in kw else "system"        # plan and moe name it --system
    base = resolve(kw.get(key) or declared("hardware").default, _chips(kw.get("chips")))
    if not vary:
        hw, done = apply(base, sets)
        what = [o.to_dict() for o in done]
        if kw.get("as_json"):
            out, code = capture(f, args, {**kw, key: hw})
            if code:
                click.echo(out, nl=False)
                raise SystemExit(code)
            d = json.loads(out)
            d["what_if"] = what
            emit_json(d)
            return None
        click.echo("what-if hardware (not a catalog chip): " + "; ".join(o.text() for o in done))
        return f(*args, **{**kw, key: hw})
    field, values = vary_values(vary)
    if field in sets:
        from tokenmath.base.errors import InputError
        raise InputError(f"vary.{field}", "also given with --set", "sweep a field or set it, not both")
    runs = []
    for v in values:
        hw, done = apply(base, {**sets, field: v})
        out, code = capture(f, args, {**kw, key: hw, "as_json": True, "explain": False,
                                        **({"plot_file": None} if "plot_file" in kw else {})})
        if code:
            if kw.get("as_json"):
                click.echo(out, nl=False)
            click.echo(f"(at {field} = {done[-1].value:g} {done[-1].unit})", err=True)
            raise SystemExit(code)
        runs.append((done[-1].value, [o.to_dict() for o in done], json.loads(out)))
        if kw.get("explain") and not kw.get("as_json"):
            click.echo(f"==== {field} = {done[-1].value:g} {done[-1].unit} ====")
            click.echo("what-if hardware: " + "; ".join(o.text() for o in done))
            f(*args, **{**kw, key: hw, **({"plot_file": None} if "plot_file" in kw else {})})
    if kw.get("as_json"):
        emit_json({"vary": field, "values": [r[0] for r in runs], "set": [o for o in runs[0][1] if o["field"] != field],
                   "results": [{**r[2], "what_if": r[1]} for r in runs]})
        return None
    click.echo(vary_table(field, runs))
    return None


def _flat(d: dict) -> dict:
    """Top-level scalars, and one level of nested dicts as `key.sub` (lists are left out)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update({f"{k}.{s}": x for s, x in v.items() if isinstance(x, (int, float, str, bool)) or x is None})
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    return out


def vary_table(field: str, runs) -> str:
    """One row per value; the columns: the figures that change across the values (preferred ones first)."""
    flats = [_flat(r[2]) for r in runs]
    keys = [k for k in flats[0] if all(k in fl for fl in flats) and len({json.dumps(fl[k]) for fl in flats}) > 1
            and k.rsplit(".", 1)[-1] not in SKIP]
    rank = {p: i for i, p in enumerate(PREFERRED)}
    keys = sorted(keys, key=lambda k: (rank.get(k.rsplit(".", 1)[-1], len(rank)), k.count(".")))
    keys = keys[:MAX_COLUMNS]
    rows = [[field, *keys]] + [[f"{r[0]:g}", *(_cell(fl[k]) for k in keys)] for r, fl in zip(runs, flats)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    if not keys:
        lines.append(f"(no figure changes with {field} on this question)")
    return "\n".join(lines)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.4g}"
