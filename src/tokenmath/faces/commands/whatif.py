"""`--vary FIELD=v1,v2,...` on the serving commands: one question asked at several values of one field, answered with
one table (the figures that change) or one JSON object holding the list of answers.

FIELD is a what-if hardware figure (the fields of --set, specs/overrides.py: memory_bw_tbs, scaleup_domain, tflops.fp8,
price_usd_per_hour, ...; each value joins the Deployment's `what_if`) or any declared Deployment or Workload field the
command takes (ep_imbalance, concurrency, engine, hardware, ...). Each value builds the typed Deployment and Workload
(validated as the options are: faces/commands/question_options.py), the command's own function answers it with its
printing suppressed and returns its result, and the table and the JSON are built from each result's to_dict(): no
printed output is parsed.

`--set` is not here: it is the Deployment's declared `what_if` field (specs/question/deployment.py), applied once where
the deployment's chip is resolved (analyses/setup.deployment_hardware), and every answer's JSON lists the changed
figures under `what_if`. Every command that takes --vary is a typed serving question. No physics here.
"""
from __future__ import annotations

import contextlib
import io
import json

import click

from tokenmath.base.errors import InputError, closest, show
from tokenmath.specs.overrides import ALIASES, FIELDS as HARDWARE_FIELDS, Override, canonical

# columns a --vary table shows first when they are among the figures that change (any other changing scalar follows)
PREFERRED = ("layout", "batch", "output_tokens_per_s_per_user", "output_tokens_per_s_per_chip",
             "cost_per_mtok_output_request_usd", "cost_per_mtok_output_usd", "decode_step_s", "ttft_s",
             "cost_per_mtok_input_usd", "output_tokens_per_s", "max_batch", "fits", "bottleneck_decode", "bottleneck")
MAX_COLUMNS = 8
MAX_VALUES = 64
SKIP = ("what_if", "search_s")      # not answers: the overrides themselves, and how long the search took


def vary_option(f):
    return click.option("--vary", metavar="FIELD=V1,V2,...",
                        help="Ask the question at each value of one field: a hardware figure (the fields of --set) "
                             "or any of this command's fields (e.g. ep_imbalance=1,1.5,2 or concurrency=8,64); "
                             "values comma-separated (semicolons when a value holds a comma). One table, or one "
                             "JSON object with the list of answers.")(f)


def what_if_text(what: list[dict]) -> str:
    """The overrides of an answer's `what_if` list, as one line."""
    return "; ".join(Override(o["field"], o["value"], o["catalog"], o["unit"]).text() for o in what)


def parse_vary(spec, names) -> tuple[str, str, list[str]]:
    """`FIELD=v1,v2,...` -> ("hardware" or "field", the field's name, [value texts]). names: the declared fields
    the command takes. A hardware figure's name wins where both mean one (price_usd_per_hour: the same figures)."""
    if "=" not in str(spec):
        raise InputError("vary", f"{show(spec)} is not FIELD=v1,v2,...", "e.g. scaleup_domain=8,72,144,576 or "
                         "ep_imbalance=1,1.5,2")
    name, vals = str(spec).split("=", 1)
    key = name.strip().lower().lstrip("-").replace("-", "_")
    sep = ";" if ";" in vals else ","
    values = [v.strip() for v in vals.split(sep) if v.strip()]
    if key in HARDWARE_FIELDS or key in ALIASES or key.startswith("tflops"):
        kind, field = "hardware", canonical(key)
    elif key in names:
        kind, field = "field", key
    else:
        near = closest(key, (*HARDWARE_FIELDS, *names))
        raise InputError(f"vary.{name.strip()}", "is neither a hardware figure nor a field of this command",
                         f"did you mean {', '.join(near)}?" if near else
                         f"a hardware figure ({', '.join(HARDWARE_FIELDS)}) or one of {', '.join(sorted(names))}")
    if not 1 <= len(values) <= MAX_VALUES:
        raise InputError(f"vary.{field}", f"{len(values)} values", f"1 to {MAX_VALUES} comma-separated values")
    return kind, field, values


def run_vary(spec, raw: dict, options: dict, build, call, as_json: bool, explain: bool, question: str | None = None):
    """Answer the question once per value of `spec` (--vary) and print one table or one JSON object.
    raw: the command's field options as given (None: absent); options: field name -> its option (for messages);
    build(raw) -> (Deployment, Workload); call(deployment, workload, as_json, explain) -> the command's result.
    question: the serving question the command answers (each JSON result then carries its schema id and the
    question it answered, as the answer asked alone does)."""
    kind, field, values = parse_vary(spec, set(options))
    sets = tuple(raw.get("what_if") or ())
    if kind == "hardware":
        from tokenmath.specs.question.deployment import field as declared
        from tokenmath.specs.question.fields import as_overrides
        if field in dict(as_overrides(sets, declared("what_if"))):
            raise InputError(f"vary.{field}", "also given with --set", "sweep a field or set it, not both")
    elif raw.get(field) not in (None, ()):
        raise InputError(f"vary.{field}", f"also given with {options[field]}", "sweep a field or set it, not both")
    text_explain = explain and not as_json
    runs = []
    for v in values:
        given = {**raw, "what_if": (*sets, f"{field}={v}")} if kind == "hardware" else {**raw, field: v}
        dep, wl = build(given)
        result, printed, code = _quietly(lambda: call(dep, wl, not text_explain, text_explain))
        if code:
            if as_json:
                click.echo(printed, nl=False)
            click.echo(f"(at {field} = {v})", err=True)
            raise SystemExit(code)
        d = as_dict(result)
        if question is not None:
            from tokenmath.specs.question.answer_schema import with_question
            d = with_question(question, dep, wl, d)
        what = list(d.get("what_if") or [])
        o = next((o for o in reversed(what) if o["field"] == field), None) if kind == "hardware" else None
        if kind == "hardware" and o is None:        # an answer that does not echo its what-if (export's)
            shown, unit = v, ""
        elif kind == "hardware":
            shown, unit = o["value"], o["unit"]
        else:
            shown, unit = _plain(getattr(dep if hasattr(dep, field) else wl, field)), ""
        runs.append((shown, what, d))
        if text_explain:
            click.echo(f"==== {field} = {_value(shown)}{' ' + unit if unit else ''} ====")
            if what:
                click.echo("what-if hardware: " + what_if_text(what))
            click.echo(printed, nl=False)
    if as_json:
        from tokenmath.faces.commands.common import emit_json
        emit_json({"vary": field, "values": [r[0] for r in runs],
                   "set": [o for o in runs[0][1] if o["field"] != field],
                   "results": [{**r[2], "what_if": r[1]} for r in runs]})
        return None
    click.echo(vary_table(field, runs))
    return None


def as_dict(result) -> dict:
    """A command's answer as a dict: its to_dict(), or the dict it already is (export's)."""
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def _quietly(fn):
    """fn()'s result, what it printed (kept to show under --explain, or an error object under --json) and its exit
    code (a command's InputError exits 2 after printing)."""
    buf = io.StringIO()
    result, code = None, 0
    with contextlib.redirect_stdout(buf):
        try:
            result = fn()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    if not code and result is None:
        raise AssertionError("a serving command must return its result for --vary")
    return result, buf.getvalue(), code


def _plain(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return getattr(v, "id", str(v))


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
    rows = [[field, *keys]] + [[_value(r[0]), *(_cell(fl[k]) for k in keys)] for r, fl in zip(runs, flats)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    if not keys:
        lines.append(f"(no figure changes with {field} on this question)")
    return "\n".join(lines)


def _value(v) -> str:
    """A varied value as the first column shows it (a number as %g, as it was given)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:g}"
    return _cell(v)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.4g}"
