"""The command line's options for a serving question, generated from the declarations (specs/question/deployment.py,
specs/question/workload.py): one option per field, its help, unit and default from the one declaration. The command gets
`deployment` and `workload`, built and validated once (Deployment.of, Workload.of); a bad value exits 2 naming the
field and what would be valid (the closest names for a typo), as everywhere else.

`--set FIELD=VALUE` is the Deployment's what_if field (repeatable); `--vary FIELD=v1,v2,...` asks the question once per
value of a hardware figure or of any of these fields (faces/commands/whatif.py), each time through the command's own
function, which returns its result."""
from __future__ import annotations

import contextlib
import functools
import io
import sys

import click

from tokenmath.analyses.serving.work import WEIGHED
from tokenmath.faces.commands.common import ANSWERING, run_guarded
from tokenmath.faces.commands.whatif import as_dict, run_vary, vary_option, what_if_text
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS, SERVING, Deployment
from tokenmath.specs.question.fields import Field
from tokenmath.specs.question.workload import WORKLOAD_FIELDS, Workload

_METAVAR = {"int": "N", "float": "X", "text": "NAME", "batch": "N|max", "imbalance": "X|routing|eplb",
            "length": "TOKENS|SPEC"}


def _help(f: Field) -> str:
    h = f.help[:1].upper() + f.help[1:]
    if f.unit and f.unit not in h:
        h += f"; in {f.unit}"
    return h


def field_option(f: Field, default=None):
    """The click option of one declared field (values stay text: Deployment.of / Workload.of validate them)."""
    names = [f.option] + ([f.short] if f.short else [])
    if f.kind == "bool":
        return click.option(*names, f.name, is_flag=True, default=None, help=_help(f))
    if f.kind == "overrides":
        return click.option(*names, f.name, multiple=True, metavar="FIELD=VALUE", help=_help(f))
    shown = f.default if default is None else default
    return click.option(*names, f.name, type=str, default=None, metavar=_METAVAR.get(f.kind, "|".join(f.choices)),
                        help=_help(f) + (f" (default: {shown})" if shown is not None else ""))


class _Tee:
    """Standard output as it is (a terminal keeps its width and colours), with a copy of what is written."""

    def __init__(self, stream):
        self._stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self._stream.write(text)

    def getvalue(self) -> str:
        return self.copy.getvalue()

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def shown_text():
    """What a command prints inside, passed on to standard output as it is written and kept (getvalue())."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee


def _notes_of(result) -> tuple[list, list]:
    """(an answer's notes, the chips and models its text names them by): a result's notes, a wrapped result's dict's
    (fleet, price) or a dict answer's (export)."""
    inner = result if isinstance(result, dict) else getattr(result, "result", None)
    notes = getattr(result, "notes", None)
    if notes is None and isinstance(inner, dict):
        notes = inner.get("notes")
    su = getattr(result, "setup", None)
    holder = su if su is not None else (inner if isinstance(inner, dict) else result)
    get = holder.get if isinstance(holder, dict) else (lambda k: getattr(holder, k, None))
    return list(notes or ()), [x for x in (get("hardware"), get("model")) if isinstance(x, str) or hasattr(x, "id")]


def unshown_notes(result, text: str) -> list[str]:
    """The answer's notes its text left out, each as a 'note:' line. A field a question does not use is named in the
    notes: a text that omits them drops the option silently (pareto, slowmode, fleet, price, hyperbola and others
    printed none or some of theirs; issue 40, found by benchmarks/fuzz_cli.py)."""
    from tokenmath.faces.names import name_ids
    from tokenmath.faces.plain_table import wrapped
    if result is None:
        return []
    notes, specs = _notes_of(result)
    flat = " ".join(text.split())
    out = []
    for n in notes:
        if not isinstance(n, str) or n.startswith("engine: "):      # the engine's defaults: each text shows its
            continue                                                 # engine its own way (a table row, a line)
        shown = name_ids(n, *specs)             # as the text names chips and models
        if " ".join(n.split()) not in flat and " ".join(shown.split()) not in flat:
            out.append(wrapped("note: ", shown))
    return out


OWN_WEIGHED = ("allow_pp", "max_chips", "requests", "concurrency", "runner_ups")   # own options the estimate reads


def announce(question: str, dep, wl, kw: dict) -> None:
    """A question estimated to run over 10 s says so on stderr before it starts, with its estimate (the progress
    rules: a terminal or TOKENMATH_PROGRESS=1, never with --quiet or --json); the heartbeat then shows it working."""
    from tokenmath.faces.progress import reporter
    say = None if kw.get("as_json") else reporter(bool(kw.get("quiet")))
    if say is None:
        return
    from tokenmath.analyses.serving.work import weigh
    from tokenmath.base.errors import InputError
    try:
        w = weigh(question, dep, wl, **{k: kw[k] for k in OWN_WEIGHED if kw.get(k) is not None})
    except InputError:
        return                  # the question refuses it itself
    if w is not None and w.seconds > 10:
        say(f"tokenmath {question}: {w.what}; estimated at most ~{w.seconds:,.0f} s and {w.peak_bytes / 1e9:,.1f} GB")


def _answers(question: str) -> bool:
    """Whether the running command answers `question` itself, so its --json answer carries that question's schema id
    and echo: not a command that only borrows its options (export's infer, deduce's price)."""
    ctx = click.get_current_context(silent=True)
    return question in SERVING and (ctx is None or ctx.info_name in (None, question))


def question_options(question: str, *, skip: tuple[str, ...] = (), defaults: dict | None = None):
    """Decorator: every Deployment and Workload field as an option (minus `skip`, which the command declares its own
    way), and the command called with deployment= and workload= instead of them. defaults: a question's own default
    for a field beyond specs/question/defaults.QUESTION_DEFAULTS (the table Python's keyword form applies too), shown in
    --help and applied when the option is absent."""
    from tokenmath.specs.question.defaults import question_defaults
    defaults = {**question_defaults(question), **(defaults or {})}
    decl = [f for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS if f.name not in skip]
    dep_names = {f.name for f in DEPLOYMENT_FIELDS}

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, vary=None, no_budget=False, **kw):
            if no_budget:       # this machine's budget on the question's work off (analyses/serving/work_budget.py)
                from tokenmath.analyses.serving.work_budget import unbounded
                with unbounded():
                    return wrapper(*args, vary=vary, **kw)
            raw = {f.name: kw.pop(f.name) for f in decl}
            as_json = bool(kw.get("as_json"))

            def build(raw):
                given = {k: v for k, v in raw.items() if v not in (None, ())}
                given = {**{k: v for k, v in defaults.items() if k not in given}, **given}
                dep = Deployment.of(**{k: v for k, v in given.items() if k in dep_names})
                wl = Workload.of(**{k: v for k, v in given.items() if k not in dep_names})
                return dep, wl
            if vary:
                def call(dep, wl, quiet_json, explain):
                    plot = {"plot_file": None} if "plot_file" in kw else {}
                    shown = {"explain": explain} if "explain" in kw else {}     # export has no --explain
                    return fn(*args, deployment=dep, workload=wl, **{**kw, "as_json": quiet_json, **shown, **plot})
                options = {f.name: f.option for f in decl if f.kind != "overrides"}
                return run_guarded(lambda: run_vary(vary, raw, options, build, call, as_json, bool(kw.get("explain")),
                                                    question if _answers(question) else None), as_json)
            dep, wl = run_guarded(lambda: build(raw), as_json)
            if question in WEIGHED:
                announce(question, dep, wl, kw)
            if as_json:
                token = ANSWERING.set((question, dep, wl)) if _answers(question) else None
                try:
                    result = fn(*args, deployment=dep, workload=wl, **kw)
                finally:
                    if token is not None:
                        ANSWERING.reset(token)
            else:                   # the text, then the answer's notes it left out
                with shown_text() as text:
                    result = fn(*args, deployment=dep, workload=wl, **kw)
                for n in unshown_notes(result, text.getvalue()):
                    click.echo(n)
            if dep.what_if and not as_json and result is not None:
                what = as_dict(result).get("what_if")      # an answer that does not echo it: as it was asked
                click.echo("what-if hardware (not a catalog chip): " + (what_if_text(what) if what else
                                                                       ", ".join(f"{k}={v}" for k, v in dep.what_if)))
            return result
        for f in reversed(decl):
            wrapper = field_option(f, defaults.get(f.name))(wrapper)
        if question in WEIGHED:
            wrapper = click.option("--no-budget", "no_budget", is_flag=True,
                                   help="Run even when the estimated work is over this machine's budget (half the "
                                        "memory it has free, 10 minutes): the question is weighed before it runs "
                                        "and refused beyond it otherwise.")(wrapper)
        return vary_option(wrapper)
    return deco
