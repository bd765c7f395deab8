"""`--draft MODEL --spec-k K --acceptance A` and `--mtp K`: on infer and hyperbola speculative decoding beside the
plain answer (analyses/serving/speculative.py; speculation_options), on pareto, plan, fleet and slowmode every point
decodes with it (analyses/serving/grid.py; grid_speculation_options). Without these options a command runs
unchanged."""
from __future__ import annotations

import functools
import json

import click

from tokenmath.faces.commands.common import emit_json, run_guarded


_OPTIONS = [
        ("--draft", dict(metavar="MODEL", help="Speculative decoding with this draft model (catalog id or "
                                               "config.json; same tokenizer as --model).")),
        ("--spec-k", dict(type=int, metavar="K", help="Tokens the draft proposes per verification step (default 4).")),
        ("--acceptance", dict(type=float, metavar="A", help="Chance a drafted token is accepted, 0-1 (required with "
                                                             "--draft; --mtp defaults to DeepSeek-V3's 0.875).")),
        ("--mtp", dict(type=int, metavar="K", help="Self-speculation with the model's own multi-token-prediction "
                                                   "head (DeepSeek-V3 style), K tokens per step.")),
]


def _with_options(wrapper):
    for name, opts in reversed(_OPTIONS):
        wrapper = click.option(name, **opts)(wrapper)
    return wrapper


def speculation_options(f):
    """Decorator (above the command's own options, below @whatif_options)."""
    @functools.wraps(f)
    def wrapper(*args, draft=None, spec_k=None, acceptance=None, mtp=None, **kw):
        if draft is None and spec_k is None and acceptance is None and mtp is None:
            return f(*args, **kw)
        return run_guarded(lambda: _run(f, args, kw, draft, spec_k, acceptance, mtp), bool(kw.get("as_json")))
    return _with_options(wrapper)


def grid_speculation_options(f=None, *, footer: bool = True):
    """Decorator right above the command function (below @guarded): the command gets `speculation` (a
    speculative.Speculation or None); with footer its text answer ends with a line saying what it decoded with
    (footer=False for a command whose text prints the result's notes, which say it)."""
    if f is None:
        return functools.partial(grid_speculation_options, footer=footer)

    @functools.wraps(f)
    def wrapper(*args, draft=None, spec_k=None, acceptance=None, mtp=None, **kw):
        from tokenmath.analyses.serving.speculative import speculation
        spec = speculation(draft, spec_k, acceptance, mtp)
        out = f(*args, speculation=spec, **kw)
        if footer and spec is not None and not kw.get("as_json"):
            from tokenmath.faces.explain_speculative import grid_speculation_text
            click.echo(grid_speculation_text(spec))
        return out
    return _with_options(wrapper)


def _batches(d: dict) -> list[int]:
    """The batch of an infer answer; for a hyperbola 1, 2, 4, ... up to its largest batch that fits."""
    if "points" not in d:
        return [int(d["batch"])]
    top = max(int(d.get("max_batch") or 1), 1)
    out = [1 << i for i in range(top.bit_length()) if 1 << i <= top]
    return out + ([top] if top not in out else [])


def _run(f, args, kw, draft, spec_k, acceptance, mtp):
    from tokenmath.analyses.serving.speculative import speculation, speculative
    from tokenmath.base.errors import InputError
    from tokenmath.faces.commands.whatif import capture
    spec = speculation(draft, spec_k, acceptance, mtp)
    for name in ("pp", "cp"):
        if (kw.get(name) or 1) > 1:
            raise InputError(name, "speculative decoding is modelled without pipeline or context parallelism",
                             f"leave --{name} out")
    out, code = capture(f, args, {**kw, "as_json": True, "explain": False,
                                   **({"plot_file": None} if "plot_file" in kw else {})})
    if code:
        if kw.get("as_json"):
            click.echo(out, nl=False)
        raise SystemExit(code)
    d = json.loads(out)
    eff = None
    if kw.get("peak") or kw.get("uncalibrated"):
        from tokenmath.specs.efficiency import DEFAULT, PEAK
        eff = PEAK if kw.get("peak") else DEFAULT
    if "context" in kw:        # a hyperbola: every sequence holds `context` tokens while it decodes
        lens = dict(input_len=max(int(kw["context"]) - 1, 1), output_len=1)
    else:
        lens = dict(input_len=kw["input_len"], output_len=kw["output_len"])
    r = speculative(kw["model"], kw["hardware"], spec, batches=_batches(d), chips=kw.get("chips"), tp=kw.get("tp"),
                    ep=kw.get("ep"), dp=kw.get("dp"), weight_dtype=kw.get("weight_dtype"),
                    kv_dtype=kw.get("kv_dtype"), efficiency=eff, engine=kw.get("engine"), **lens)
    if kw.get("as_json"):
        d["speculative"] = r.to_dict()
        emit_json(d)
        return
    f(*args, **kw)
    from tokenmath.faces.explain_speculative import explain_speculative, speculative_text
    click.echo(explain_speculative(r) if kw.get("explain") else speculative_text(r))
