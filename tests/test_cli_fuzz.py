"""Every option of every command given hostile values (issue 40 item 6): a refusal exits 2 naming the option, an
answer exits 0; never exit 1 with an internal error, never a traceback, never a printed 0 chips, 0 us or nan, never
a numpy warning on stderr.

Two levels. Parsing (fast, every command including measure, verify, validate and serve): click's own conversion and
callbacks of each option (faces/commands/common.Bounded, axes.numbers, ...) refuse with a usage error or accept;
nothing else escapes. Running (the whole command, in-process): the cheap commands in the default set, the rest in
the slow set (tests/conftest.py SLOW). measure, verify, validate, serve and calibrate are parsed only: running them
measures this machine, scores every catalog row, starts a server or needs benchmark result files (their files are
fuzzed in test_fuzz_loaders.py and test_safe_file_writes.py).
"""
from __future__ import annotations

import re
import signal
import warnings

import click
import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import COMMANDS, cli, main
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
from tokenmath.specs.question.workload import WORKLOAD_FIELDS

BIG = "1" + "0" * 400
HOSTILE = (BIG, "-" + BIG, "nan", "inf", "-inf", "-1", "0", "1e-308", "5e-324", "", "\u0661\u0662", "\uff11\uff12",
           "1e400")
NAMES = ("", "nan", "\u0661\u0662")          # names (model, hardware, engine, ...): the numbers make no sense there
PARSED_ONLY = {"measure", "verify", "validate", "serve", "calibrate"}      # calibrate: needs benchmark result files
FAST_RUN = ("hardware", "chinchilla", "infer", "context")      # ~1-3 s each on 2 cores
SLOW_RUN = tuple(sorted(set(COMMANDS) - PARSED_ONLY - set(FAST_RUN)))
MEANINGLESS = (re.compile(r"(?<![\d.,])0 chips"), re.compile(r"(?<![\d.,])0 (us|µs)\b"),
               re.compile(r"(?<![\w'\"=])nan(?![\w'\"])", re.I))      # not an echo: 'nan', input_len=nan
_TEXT_FIELDS = {f.name for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS if f.kind in ("text", "choice", "overrides")}


def _command(name: str) -> click.Command:
    return cli.get_command(click.Context(cli), name)


def _options(name: str):
    """(option flag, is a name/text option) for every option that takes a value."""
    for p in _command(name).params:
        if isinstance(p, click.Option) and not p.is_flag and p.opts:
            text = p.name in _TEXT_FIELDS or (p.name not in {f.name for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS}
                                              and isinstance(p.type, click.types.StringParamType)
                                              and p.callback is None)
            yield p.opts[0], p.name in ("model", "hardware", "system", "engine", "draft"), text


def run_main(args: list[str], limit_s: int = 120) -> tuple[object, str, str]:
    """tokenmath.faces.cli:main in-process: (exit code, stdout, stderr); an escaped exception is its name."""
    def alarm(*_):
        raise TimeoutError(f"over {limit_s} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(limit_s)
    with CliRunner().isolation() as (out, err, _), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")         # whatever PYTHONWARNINGS says: a numpy warning is a finding
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # noqa: BLE001 - the test reports it
            code = f"escaped {type(e).__name__}: {e}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        shown = "".join(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n" for w in caught
                        if issubclass(w.category, RuntimeWarning))
        return code, out.getvalue().decode(errors="replace"), shown + err.getvalue().decode(errors="replace")


# what a command needs to answer at all, so that each other option is fuzzed on an answering question
BASE_ARGS = {"fleet": ["--demand", "1000"], "deduce": ["--input-price", "0.6", "--output-price", "2.4"],
             "simulate": ["--requests", "50"], "scenarios": ["--requests", "20"], "plan": ["--chips", "8"],
             "pareto": ["--chips", "8"], "moe": ["--chips", "8"],
             "kvcache": ["--trace", "tests/fixtures/mooncake/synthetic_trace.jsonl.gz"]}


def _counts(text: str) -> list[int]:
    return [len(pat.findall(text)) for pat in MEANINGLESS]


def problems_of(args: list[str], value: str, text_option: bool, baseline: list[int] | None = None) -> list[str]:
    """What is wrong with one run: an exit other than 0 or 2, an internal error or traceback, a warning, or (exit 0)
    more 0 chips / 0 us / nan than the command prints without the hostile option (`baseline`: a dense model's
    training step prints 0 us of expert all-to-all, rightly)."""
    code, out, err = run_main(args)
    found = []
    if code not in (0, 2):
        found.append(f"exit {code}")
    if "Traceback" in out + err or "internal error" in out + err:
        found.append("internal error: " + (err.strip().splitlines() or [""])[-1][:200])
    if "Warning" in err:
        found.append("warning on stderr: " + next(x for x in err.splitlines() if "Warning" in x)[:200])
    if code == 0:
        for pat, n, before in zip(MEANINGLESS, _counts(out), baseline or [0] * len(MEANINGLESS)):
            m = pat.search(out)
            if n > before and not (text_option and value.lower() == "nan" and m.group(0).lower() == "nan"):
                found.append(f"printed {m.group(0)!r}")
    return [f"tokenmath {' '.join(a[:20] for a in args)}: {p}" for p in found]


def fuzz_command(name: str) -> list[str]:
    base = BASE_ARGS.get(name, [])
    code, out, err = run_main([name, *base])
    assert code == 0, f"tokenmath {name} {' '.join(base)} does not answer: {err[-300:]}"
    baseline = _counts(out)
    found = []
    for opt, is_name, text in _options(name):
        for v in NAMES if is_name else HOSTILE:
            args = [name, *(base if opt not in base else []), opt, v]
            found += problems_of(args, v, text, baseline)
    return found


# ---- parsing: every option of every command ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_parses_or_is_refused_as_a_usage_error(name):
    """click's conversion of every hostile value: accepted, or a usage error (exit 2) naming the option."""
    cmd = _command(name)
    bad = []
    for opt, is_name, _ in _options(name):
        for v in NAMES if is_name else HOSTILE:
            try:
                cmd.make_context(name, [opt, v], resilient_parsing=False).close()
            except click.UsageError as e:
                if opt not in e.format_message() and "Missing " not in e.format_message():
                    bad.append(f"{name} {opt} {v[:12]!r}: the refusal does not name the option: {e.format_message()}")
            except click.exceptions.Exit:
                pass
            except Exception as e:  # noqa: BLE001
                bad.append(f"{name} {opt} {v[:12]!r}: {type(e).__name__}: {e}")
    assert not bad, "\n".join(bad)


def test_every_number_option_is_bounded():
    """No int or float option of any command is a bare click.INT / click.FLOAT (unbounded: 400 digits reach the
    analysis as an int too large for a float); each is a Bounded type, a range or a checked list."""
    bare = [f"{n} {p.opts[0]}" for n in sorted(COMMANDS) for p in _command(n).params
            if isinstance(p, click.Option) and p.type in (click.INT, click.FLOAT)]
    assert not bare, bare


# ---- running: the whole command -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAST_RUN)
def test_hostile_values_run_to_an_answer_or_a_refusal(name):
    found = fuzz_command(name)
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_RUN)
def test_hostile_values_run_to_an_answer_or_a_refusal_slow_commands(name):
    found = fuzz_command(name)
    assert not found, "\n".join(found)


def test_the_checker_notices_a_meaningless_answer(monkeypatch):
    """Not vacuous: a command printing '0 chips' with exit 0, or exiting 1 with an internal error, is reported."""
    import tokenmath.faces.commands.catalog as catalog_cmd
    monkeypatch.setattr(catalog_cmd, "models", click.command("models")(lambda: click.echo("replicas 0 chips")))
    monkeypatch.setitem(COMMANDS, "models", ("tokenmath.faces.commands.catalog:models", ""))
    assert any("printed '0 chips'" in p for p in problems_of(["models"], "", False))
    monkeypatch.setattr(catalog_cmd, "models", click.command("models")(
        lambda: click.echo("internal error: boom", err=True) or (_ for _ in ()).throw(SystemExit(1))))
    assert {p.split(": ", 1)[1].split(":")[0] for p in problems_of(["models"], "", False)} >= {"exit 1",
                                                                                                "internal error"}
