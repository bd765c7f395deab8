#!/usr/bin/env python
"""Fuzz every option of every command (issue 40): hostile values must exit 0 (an answer) or 2 (a refusal naming the
option), never 1 (an internal error), a traceback, a numpy warning or a printed 0 chips / 0 us / nan; and no option
may be accepted and silently ignored.

    python benchmarks/fuzz_cli.py                      # both passes, every command, 2 processes
    python benchmarks/fuzz_cli.py --pass hostile --commands infer,simulate --jobs 1 --json

Pass "hostile": tests/test_cli_fuzz.py's generator run whole (the default test set runs only its cheap commands):
each option of each command given each of its hostile values (400 digits, nan, inf, -1, 0, 1e-308, 5e-324, empty,
non-ASCII digits, 1e400; names get empty, nan and Arabic-Indic digits) on the command's own answering question
(BASE_ARGS there). measure, verify, validate, serve and calibrate are parsed only (click's conversion and callbacks):
running them measures this machine, scores every catalog row, serves, or needs result files (benchmarks/fuzz_files.py
feeds calibrate its files).

Pass "ignored": each option given a valid value other than its default (two values for a number, its low and high
end) beside the command's answering question. An option is a candidate "silently ignored" when every value it was
given exits 0 with the same standard output as the question without it, and the output does not name it (a field a
question does not use is named in the answer's notes). Each candidate is then judged by hand: a value that rightly
changes nothing here (a seed of a deterministic answer, a cap that does not bind) is listed as such in the report.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_FLAGS = {"--json", "--explain", "--help", "--quiet", "--force", "--no-budget", "--check"}

# a valid value other than the default for the options whose type does not say one (names, what-ifs, specs)
VALUES = {
    "--model": ["qwen3-8b"], "--hardware": ["h200"], "--engine": ["sglang"], "--weight-dtype": ["int4"],
    "--kv-dtype": ["fp8"], "--draft": ["llama-3.2-1b"], "--efficiency": ["peak"], "--ep-comm": ["fp8"],
    "--ep-imbalance": ["1.5"], "--attention-sharding": ["batch"], "--set": ["memory_bw_tbs=2"],
    "--vary": ["batch=1,2"], "--system": ["hgx-b200"], "--systems": ["hgx-h200"], "--offload": ["dram"],
    "--input-len": ["100", "4000"], "--output-len": ["20", "900"], "--batch": ["3", "max"],
    "--fit": ["hoffmann"], "--metric": ["ttft"], "--method": ["steady"], "--layout": ["chips=2,tp=2"],
    "--contexts": ["512,2048"], "--chips": ["2", "16"], "--ttft-curve": ["1000:0.5,10000:2"],
    "--table-model": ["deepseek-v3"], "--api-model": ["gpt-4o"], "--provider": ["together"],
    "--evidence": ["prices"], "--margin": ["0.1,0.3"], "--utilization": ["0.3,0.5"], "--chip-cost": ["1,2"],
    "--recompute": ["full"], "--zero": ["3"], "--dtype": ["fp8"], "--act-storage": ["fp8"], "--budget-ms": ["5,50"],
    "--question": ["simulate"], "--cluster": ["tcp://127.0.0.1:1"], "--rl-reward-params": ["1e9"],
    "--inferencex-basis": ["x"], "--trace": [], "--file": [], "--profile": ["fuzz"], "--config": [], "--out": [],
    "--write-calibration": [], "--device": ["cuda"], "--batches": ["1,2"], "--host": [], "--port": [],
}


def _inputs() -> dict:
    """Files for the file-reading options of the "ignored" pass (a small trace, a scenario file), in a temp folder."""
    d = Path(tempfile.mkdtemp(prefix="tokenmath-fuzz-cli-"))
    (d / "trace.csv").write_text("arrival_s,input_tokens,output_tokens\n0,512,64\n0.5,1024,32\n1,300,100\n")
    (d / "scenarios.toml").write_text('models = ["llama-3.1-8b"]\nhardware = ["h100-sxm"]\n'
                                      '[[workloads]]\nconcurrency = 4\nrequests = 20\n')
    # a profile for the base question's chip and engine (infer's defaults: h100-sxm, vllm), away from the shipped fit
    os.environ["TOKENMATH_CACHE_DIR"] = str(d / "cache")
    (d / "cache" / "profiles").mkdir(parents=True)
    (d / "cache" / "profiles" / "fuzz.toml").write_text(
        "# tokenmath calibration profile written by `tokenmath calibrate`\nname = \"fuzz\"\nruns = 4\n"
        "model = \"llama-3.1-8b\"\nhardware = \"h100-sxm\"\nengine = \"vllm\"\nchips = 1\n[values]\n"
        "compute_scale = 0.8\nbw_scale = 0.7\nstep_cpu_s = 0.002\nlayer_overhead_s = 1e-05\nstep_cpu_per_seq_s = 1e-06\n")
    return {"--trace": [str(d / "trace.csv")], "--file": [str(d / "scenarios.toml")],
            "kvcache --trace": [str(ROOT / "tests" / "fixtures" / "mooncake" / "conversation_trace.jsonl.gz")]}


def _load_tests():
    spec = importlib.util.spec_from_file_location("tokenmath_cli_fuzz_tests", ROOT / "tests" / "test_cli_fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


T = None


def _t():
    global T
    if T is None:
        os.chdir(ROOT)            # BASE_ARGS name fixtures relative to the checkout
        sys.path.insert(0, str(ROOT / "tests"))
        T = _load_tests()
    return T


def _valid_values(p) -> list[str]:
    """Valid values other than the default for one click option (empty: none known: reported as unchecked)."""
    import click
    flag = p.opts[0]
    if flag in VALUES:
        return [v for v in VALUES[flag] if v != str(p.default)]
    ty = p.type
    if isinstance(ty, click.Choice):
        return [c for c in ty.choices if str(c) != str(p.default)][:1]
    lo, hi = getattr(ty, "lo", None), getattr(ty, "hi", None)
    kind = getattr(ty, "kind", None)
    if kind is None and p.name in _fields():
        f = _fields()[p.name]
        kind, lo, hi = f.kind, f.lo, f.hi
        if kind == "choice":
            return [c for c in f.choices if c != f.default][:1]
    if kind in ("int", "float"):      # its low end and a modest value above it
        lo_ = lo if lo is not None else (1 if kind == "int" else 0.0)
        up = max(lo_ * 4, 8 if kind == "int" else 1.0)
        up = min(up, hi) if hi is not None else up
        cands = [int(lo_), int(up)] if kind == "int" else [float(f"{lo_:.6g}"), float(f"{up:.6g}")]
        return [str(x) for x in dict.fromkeys(cands) if str(x) != str(p.default)]
    return []


_FIELDS = None


def _fields():
    global _FIELDS
    if _FIELDS is None:
        from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
        from tokenmath.specs.question.workload import WORKLOAD_FIELDS
        _FIELDS = {f.name: f for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS}
    return _FIELDS


def _tasks(passes, commands) -> list[tuple]:
    import click
    t = _t()
    out = []
    for name in commands:
        cmd = t._command(name)
        base = t.BASE_ARGS.get(name, [])
        if name == "agents":          # one system, one layout: the question is its own, each run a second or two
            base = ["--systems", "hgx-h100", "--layouts", "1"]
        if "hostile" in passes:
            for opt, is_name, text in t._options(name):
                for v in t.NAMES if is_name else t.HOSTILE:
                    args = [name, *(_without(base, opt)), opt, v]
                    out.append(("hostile", name, opt, v, args, text, name in t.PARSED_ONLY))
        if "ignored" in passes and name not in t.PARSED_ONLY:
            files = _inputs()
            out.append(("baseline", name, "", "", [name, *base], False, False))
            for p in cmd.params:
                if not isinstance(p, click.Option) or not p.opts or p.opts[0] in OUTPUT_FLAGS:
                    continue
                opt = p.opts[0]
                if p.is_flag and p.default is True and p.secondary_opts:     # --overlap/--no-overlap: the other
                    opt, values = p.secondary_opts[0], [None]
                elif p.is_flag:
                    values = [None]
                else:
                    values = files.get(f"{name} {opt}") or files.get(opt) or _valid_values(p)
                    if opt in ("--plot",):
                        values = [os.path.join(tempfile.gettempdir(), f"tokenmath-fuzz-{name}.svg")]
                if not values:
                    out.append(("unchecked", name, opt, "", [], False, False))
                for v in values:
                    own = [] if opt == "--trace" and name == "simulate" else _without(base, opt)   # a trace sets them
                    args = [name, *own, opt] + ([] if v is None else [v])
                    out.append(("valid", name, opt, v, args, False, False))
    return out


def _without(base: list[str], opt: str) -> list[str]:
    """The base question without `opt` (and its value) when the fuzzed option is one of them."""
    out, skip = [], False
    for i, a in enumerate(base):
        if skip:
            skip = False
            continue
        if a == opt:
            skip = True
            continue
        out.append(a)
    return out


_BASE: dict[str, list[int]] = {}


def _baseline(name: str) -> list[int]:
    """How many 0 chips / 0 us / nan the command prints on its own question (a dense model's training step prints 0 us
    of expert all-to-all, rightly): tests/test_cli_fuzz.fuzz_command's baseline."""
    if name not in _BASE:
        t = _t()
        _BASE[name] = t._counts(t.run_main([name, *t.BASE_ARGS.get(name, [])])[1])
    return _BASE[name]


def _one(task) -> dict:
    kind, name, opt, v, args, text, parse_only = task
    t = _t()
    r = {"kind": kind, "command": name, "option": opt, "value": (v or "")[:40], "args": [a[:40] for a in args]}
    if kind == "unchecked":
        return r
    t0 = time.perf_counter()
    if parse_only:
        import click
        try:
            t._command(name).make_context(name, args[1:], resilient_parsing=False).close()
            r["code"] = 0
        except click.UsageError:
            r["code"] = 2
        except click.exceptions.Exit:
            r["code"] = 0
        except Exception as e:  # noqa: BLE001 - reported
            r["code"], r["problems"] = 1, [f"{type(e).__name__}: {e}"[:200]]
        r["seconds"] = round(time.perf_counter() - t0, 2)
        return r
    if kind == "hostile":
        r["problems"] = t.problems_of(args, v, text, _baseline(name))
        code, out, err = t.run_main(args)
    else:
        plot = args[args.index("--plot") + 1] if "--plot" in args else None
        if plot and os.path.exists(plot):
            os.remove(plot)
        code, out, err = t.run_main(args)
        r["wrote"] = bool(plot and os.path.exists(plot))
        r["problems"] = []
        if code not in (0, 2):
            r["problems"].append(f"exit {code}: {(err.strip().splitlines() or [''])[-1][:200]}")
    r["code"] = code if isinstance(code, int) else 1
    r["out"] = _normal(out)
    r["err_tail"] = err.strip()[-300:]
    if kind == "hostile":
        r.pop("out")
    elif r["code"] == 0 and _has_json(name) and "--plot" not in args:   # the JSON answer too: text may leave a
        jcode, jout, _ = t.run_main(args + ["--json"])                  # used figure out (moe prints no $)
        r["json"] = _json_key(jout) if jcode == 0 else None
    r["seconds"] = round(time.perf_counter() - t0, 2)
    return r


def _has_json(name: str) -> bool:
    import click
    return any(isinstance(p, click.Option) and "--json" in p.opts for p in _t()._command(name).params)


def _json_key(text: str) -> str | None:
    """The JSON answer without what changes between identical runs (a search's own time)."""
    try:
        d = json.loads(text)
    except ValueError:
        return None

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("search_s",)}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return json.dumps(strip(d), sort_keys=True)


def _normal(text: str) -> str:
    """Output with what changes between identical runs masked (a search's own time)."""
    return re.sub(r"searched in [\d.]+ s|in [\d.]+ s\b|\d+(\.\d+)? s elapsed", "<time>", text)


def _named(out: str, opt: str) -> bool:
    words = {opt, opt.lstrip("-"), opt.lstrip("-").replace("-", "_")}
    return any(w in out for w in words)


def report(results: list[dict]) -> dict:
    codes = collections.Counter()
    internal, problems = [], []
    base = {r["command"]: r for r in results if r["kind"] == "baseline"}
    by_opt: dict[tuple, list[dict]] = collections.defaultdict(list)
    unchecked = []
    for r in results:
        if r["kind"] == "unchecked":
            unchecked.append(f"{r['command']} {r['option']}")
            continue
        if r["kind"] == "hostile":
            codes[str(r["code"])] += 1
        for p in r.get("problems") or []:
            problems.append(f"{' '.join(r['args'])}: {p}")
            if p.startswith("exit 1") or "internal error" in p or "Traceback" in p or p.startswith("escaped"):
                internal.append(f"{' '.join(r['args'])}: {p}")
        if r["kind"] == "valid":
            by_opt[(r["command"], r["option"])].append(r)
    ignored, text_only = [], []
    for (cmd, opt), rs in sorted(by_opt.items()):
        b = base.get(cmd)
        if b is None or b.get("code") != 0:
            continue
        if all(r.get("code") == 0 and r.get("out") == b.get("out") and not _named(r.get("out", ""), opt)
               and not r.get("wrote") for r in rs):
            line = f"{cmd} {opt} {' / '.join(str(r['value']) for r in rs)}"
            if any(r.get("json") is not None and r.get("json") != b.get("json") for r in rs):
                text_only.append(line)      # used: the JSON answer moved; the text does not show what moved
            else:
                ignored.append(line)
    hostile = [r for r in results if r["kind"] == "hostile"]
    return {"hostile_cases": len(hostile), "hostile_exit_codes": dict(sorted(codes.items())),
            "valid_cases": sum(len(v) for v in by_opt.values()), "internal_errors": len(internal),
            "problems": len(problems), "ignored_candidates": len(ignored), "unchecked_options": unchecked,
            "ignored": ignored, "used_json_only": text_only, "internal": internal[:50], "problem_list": problems[:80],
            "slowest": sorted(((r.get("seconds", 0), " ".join(r["args"])[:120]) for r in results),
                              reverse=True)[:8]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pass", dest="passes", default="hostile,ignored", help="hostile, ignored or both (default)")
    ap.add_argument("--commands", help="comma-separated commands (default: every command)")
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--json", action="store_true", help="the report as one JSON object")
    ap.add_argument("--save", help="write every result (JSON lines) here")
    ap.add_argument("--src", default=str(ROOT / "src"),
                    help="the source tree to fuzz (default this checkout's src/; e.g. an exported earlier commit)")
    a = ap.parse_args(argv)
    sys.path.insert(0, a.src)
    os.environ["PYTHONPATH"] = a.src + os.pathsep + os.environ.get("PYTHONPATH", "")     # the worker processes
    t = _t()
    commands = a.commands.split(",") if a.commands else sorted(t.COMMANDS)
    tasks = _tasks(set(a.passes.split(",")), commands)
    t0 = time.perf_counter()
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            results = list(ex.map(_one, tasks, chunksize=4))
    else:
        results = [_one(x) for x in tasks]
    rep = {"seconds": round(time.perf_counter() - t0), "commands": len(commands), **report(results)}
    if a.save:
        with open(a.save, "w") as fh:
            for r in results:
                fh.write(json.dumps(r) + "\n")
    if a.json:
        print(json.dumps(rep, indent=2))
    else:
        print(f"{rep['commands']} commands in {rep['seconds']} s: {rep['hostile_cases']:,} hostile cases "
              f"(exit codes {rep['hostile_exit_codes']}), {rep['valid_cases']:,} valid values")
        print(f"  internal errors: {rep['internal_errors']}   other problems: {rep['problems'] - rep['internal_errors']}"
              f"   silently ignored (candidates): {rep['ignored_candidates']}   options with no valid value to "
              f"try: {len(rep['unchecked_options'])}")
        for x in rep["problem_list"]:
            print("  - " + x)
        for x in rep["ignored"]:
            print("  ignored? " + x)
        for x in rep["used_json_only"]:
            print("  used (its JSON answer moves; the text does not show it): " + x)
        if rep["unchecked_options"]:
            print("  unchecked: " + ", ".join(rep["unchecked_options"]))
    return 1 if rep["problems"] or rep["ignored_candidates"] else 0


if __name__ == "__main__":
    sys.exit(main())
