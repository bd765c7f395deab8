#!/usr/bin/env python
"""Start-up time of the `tokenmath` command (issue 10, part 3): median wall time of fresh processes.

    python benchmarks/startup.py                 # 7 runs per command, the tokenmath next to this python
    python benchmarks/startup.py --runs 15 --json startup.json
    python benchmarks/startup.py --no-bytecode   # also count compiling every module from source on each start
    python benchmarks/startup.py --instructions  # also the instructions each start executes (valgrind callgrind)

Commands timed (each a new process, output discarded): `tokenmath --help`, `tokenmath infer` on a catalog model
(the default table) and the same with --json. Target (issue 23): `tokenmath infer` with defaults in <= 0.2 s. Each figure is also given as a
ratio to `python -c pass` timed in the same run, and with its CPU time (steadier on a shared machine).

Bytecode: `pip install` compiles the package's .pyc files once, at install time. When PYTHONDONTWRITEBYTECODE is set
(an editable install in a container, say), every start would compile tokenmath from source instead; this script
then clears the variable for its children, so one warm-up run writes the __pycache__ files (ignored by git) that
an installed package would have, and the compiled methods of tokenmath's dataclasses that every later start reads
from the user's cache folder (tokenmath/base/dataclass_cache.py; like the .pyc files, not written under
PYTHONDONTWRITEBYTECODE). --no-bytecode keeps the variable and measures that slower case too.

--instructions runs each command once more under valgrind's callgrind and prints the instructions it executed, with
`python -c pass` and the lean `import numpy` of the napkin-math commands beside them: a count that another program
sharing the machine does not move (the times above moved by up to 2x from minute to minute on the issue-23 VM), for
comparing two versions of tokenmath; skipped when valgrind is not installed.

It also checks that `tokenmath --help` and `tokenmath infer --json` import none of the heavy optional packages
(rich, matplotlib, pandas, torch, transformers, web frameworks, tokenmath's own web server).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ["--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8"]
COMMANDS = {
    "tokenmath --help": ["--help"],
    "tokenmath infer (defaults)": ["infer"],
    "tokenmath infer (table)": ["infer", *MODEL],
    "tokenmath infer --json": ["infer", *MODEL, "--json"],
}
HEAVY = ("rich", "matplotlib", "pandas", "torch", "transformers", "fastapi", "flask", "starlette", "uvicorn",
         "aiohttp", "tornado", "django", "bottle", "http.server", "tokenmath.faces.web", "scipy")
LEAN = ("tokenmath --help", "tokenmath infer (defaults)", "tokenmath infer --json")
TARGET_S = 0.2          # issue 23 item 9: `tokenmath infer` with defaults starts in <= 0.2 s


def tokenmath_cmd() -> list[str]:
    exe = Path(sys.executable).parent / ("tokenmath.exe" if os.name == "nt" else "tokenmath")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("tokenmath")
    if found:
        return [found]
    sys.exit("no `tokenmath` command next to this python or on PATH: pip install . (or -e .) first")


def timed(cmd, env, runs):
    """Wall seconds and CPU seconds (user + system of the child) of each run. On a shared machine the CPU time is
    the steadier figure: wall time also counts the time other programs hold the cores."""
    import resource
    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return walls, cpus


def heavy_imports(args, env) -> list[str]:
    """Modules from HEAVY that running `tokenmath ARGS` imports (in a fresh interpreter)."""
    code = ("import sys\nfrom tokenmath.faces.cli import main\nsys.argv = ['tokenmath'] + sys.argv[1:]\n"
            "import io, contextlib\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    try:\n        main()\n    except SystemExit:\n        pass\n"
            f"heavy = {HEAVY!r}\n"
            "print(' '.join(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy))))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return out.stdout.split()


def instructions(cmd, env) -> int | None:
    """Instructions executed by `cmd` (valgrind --tool=callgrind), or None without valgrind."""
    import re
    vg = shutil.which("valgrind")
    if vg is None:
        return None
    out = subprocess.run([vg, "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], capture_output=True,
                         text=True, env=env)
    m = re.search(r"Collected : (\d+)", out.stderr)
    return int(m.group(1)) if m else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per command (median reported)")
    ap.add_argument("--no-bytecode", action="store_true", help="also time with PYTHONDONTWRITEBYTECODE=1")
    ap.add_argument("--instructions", action="store_true", help="also count each start's instructions (valgrind)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args(argv)
    tm = tokenmath_cmd()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    variants = {"bytecode cached": env}
    if a.no_bytecode:
        variants["no bytecode (compile each start)"] = dict(env, PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([*tm, "infer", *MODEL], stdout=subprocess.DEVNULL, env=env, check=True)   # writes the .pyc
    print(f"start-up of {tm[0]}: median of {a.runs} fresh processes (python {sys.version.split()[0]})")
    out = {}
    for vname, venv in variants.items():
        if len(variants) > 1:
            print(f"-- {vname}")
        base, _ = timed([sys.executable, "-c", "pass"], venv, a.runs)    # the interpreter alone: the baseline
        b = statistics.median(base)
        print(f"{'python -c pass (baseline)':26s} median {b:.3f} s")
        for name, args in COMMANDS.items():
            walls, cpus = timed([*tm, *args], venv, a.runs)
            med, cpu = statistics.median(walls), statistics.median(cpus)
            out.setdefault(vname, {})[name] = {"median_s": med, "min_s": min(walls), "median_cpu_s": cpu,
                                               "runs_s": walls, "baseline_python_s": b}
            print(f"{name:26s} median {med:.3f} s  (min {min(walls):.3f}, max {max(walls):.3f}; CPU {cpu:.3f} s; "
                  f"{med / b:.1f} x python -c pass)  {'under' if med <= TARGET_S else 'OVER'} {TARGET_S} s by wall time, "
                  f"{'under' if cpu <= TARGET_S else 'OVER'} by CPU time")
    if a.instructions:
        lean = dict(env, OPENBLAS_NUM_THREADS="1")      # as faces/cli.py loads numpy for napkin-math commands
        counts = {"python -c pass": instructions([sys.executable, "-c", "pass"], env),
                  "python -c 'import numpy'": instructions([sys.executable, "-c", "import numpy"], lean)}
        for name, args in COMMANDS.items():
            counts[name] = instructions([*tm, *args], env)
        if counts["python -c pass"] is None:
            print("instructions: valgrind not found, skipped")
        else:
            for name, c in counts.items():
                print(f"{name:26s} {c / 1e6:7.0f} M instructions (callgrind)")
            out["instructions"] = counts
    for name in LEAN:
        mods = heavy_imports(COMMANDS[name], env)
        out.setdefault("heavy_imports", {})[name] = mods
        print(f"{name} imports {'none of the heavy packages' if not mods else 'HEAVY: ' + ', '.join(mods)}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
