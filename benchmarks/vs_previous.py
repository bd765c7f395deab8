#!/usr/bin/env python
"""Speed of this checkout beside the previous release, as ratios (issue 39 item 12), in one command:

    python benchmarks/vs_previous.py                      # against PREVIOUS (the last commit of the previous round)
    python benchmarks/vs_previous.py --previous REF       # any commit, tag or branch, or the path of a checkout
    python benchmarks/vs_previous.py --runs 21 --json vs_previous.json
    python benchmarks/vs_previous.py --instructions       # also the instructions each figure executes (valgrind)

A git ref is checked out once into a worktree of its own under the temporary folder (git worktree add --detach;
this checkout is never touched) and imported from its src/ (PYTHONPATH), with this python and its packages. Both
trees first run once with bytecode writing on, so their .pyc files exist, as after `pip install`.

Figures, each the median of --runs (the two trees alternate run by run, so a busy minute slows both alike):

  first sweep call   a fresh process: numpy imported first (a notebook has it), then `import tokenmath` and one
                     tokenmath.sweep of 24 configurations; the time of the import and the call (numpy excluded)
  ... with numpy     the same, numpy's import included (what a script pays from its first line)
  ... from source    numpy excluded, tokenmath's modules compiled from source (no .pyc: PYTHONDONTWRITEBYTECODE
                     on a fresh checkout, as in this project's containers)
  warm sweeps        one process per tree and run, the CPU time of a call after a warm-up, for small products (1, 24 and
                     24 MoE configurations, 1,000 dense): the median per case and their geometric mean
  infer start        `tokenmath infer` (defaults) in a fresh process, start to exit

Wall times are printed with the CPU time beside them: on a shared machine the CPU time is the steadier figure,
and the instruction counts (--instructions, valgrind's callgrind: one run each) steadier still. The ratio is this
tree / the previous one (below 1: faster now). Targets (issue 39): first call <= 100 ms, infer start <= 0.2 s,
warm sweeps no slower than the previous release. Nothing here is asserted by the tests (wall clock is not a test).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the previous release: the last commit of the round before issue 39 (2026-12-02); no tags are kept
PREVIOUS = "2207e3c010bf038d787e6505639c4ec8211ce2ec"
FIRST_TARGET_S = 0.100
INFER_TARGET_S = 0.2

SWEEP = ('tm.sweep("llama-3.1-70b", "h100-sxm", batch=[1, 8, 64], input_len=[512, 2048], output_len=[128], '
         'tp=[1, 2, 4, 8])')
FIRST = """
import sys, time, resource
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t0, c0 = time.perf_counter(), cpu()
import numpy
t1, c1 = time.perf_counter(), cpu()
import tokenmath as tm
cols = SWEEP
t2, c2 = time.perf_counter(), cpu()
assert len(cols) == 24 and tm.__file__.startswith(TREE), tm.__file__
print(t2 - t1, c2 - c1, t2 - t0, c2 - c0)
"""
WARM_CASES = {
    "1 dense": ("llama-3.1-70b", "h100-sxm", dict(batch=[8], input_len=[512], output_len=[128], tp=[8])),
    "24 dense": ("llama-3.1-70b", "h100-sxm", dict(batch=[1, 8, 64], input_len=[512, 2048], output_len=[128],
                                                   tp=[1, 2, 4, 8])),
    "24 moe": ("deepseek-v3", "h200", dict(batch=[1, 8, 64], input_len=[512, 2048], output_len=[128], tp=[8],
                                           ep=[1, 8, 16, 32])),
    "1000 dense": ("llama-3.1-70b", "h100-sxm", dict(batch=list(range(1, 51)), input_len=[512, 2048],
                                                     output_len=[128, 512], tp=[1, 2, 4, 8, 16])),
}
WARM = """
import json, statistics, sys, time
import tokenmath as tm
assert tm.__file__.startswith(TREE), tm.__file__
out = {}
for name, (m, h, ax) in CASES.items():
    tm.sweep(m, h, **ax)
    cpu = []
    for _ in range(REPEAT):
        c0 = time.process_time()
        tm.sweep(m, h, **ax)
        cpu.append(time.process_time() - c0)
    out[name] = statistics.median(cpu)
print(json.dumps(out))
"""
INFER = ("import sys\nfrom tokenmath.faces.cli import main\nimport tokenmath\n"
         "assert tokenmath.__file__.startswith(TREE), tokenmath.__file__\n"
         "sys.argv[0] = 'tokenmath'\nsys.exit(main())")


def tree_of(spec: str) -> Path:
    """The checkout to import the previous release from: a path as it is, else a worktree of the ref (made once)."""
    p = Path(spec)
    if (p / "src" / "tokenmath").is_dir():
        return p.resolve()
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{spec}^{{commit}}"], check=True,
                         capture_output=True, text=True).stdout.strip()
    wt = Path(tempfile.gettempdir()) / f"tokenmath-prev-{sha[:12]}"
    if not (wt / "src" / "tokenmath").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(wt), sha], check=True,
                       capture_output=True)
    return wt


def env_for(tree: Path, source: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(tree / "src"), OPENBLAS_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    if source:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def code(template: str, tree: Path, **subs) -> str:
    out = template.replace("TREE", repr(str(tree / "src")))
    for k, v in subs.items():
        out = out.replace(k, v)
    return out


def child_cpu(cmd, env) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one child process, and its stdout."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, out


def instructions(cmd, env) -> int | None:
    vg = shutil.which("valgrind")
    if vg is None:
        return None
    err = subprocess.run([vg, "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], env=env,
                         capture_output=True, text=True).stderr
    m = re.search(r"Collected : (\d+)", err)
    return int(m.group(1)) if m else None


def measure(trees: dict, runs: int, repeat: int, count: bool) -> dict:
    py = sys.executable
    first = {n: code(FIRST, t, SWEEP=SWEEP) for n, t in trees.items()}
    # a copy of each tree's src/ without __pycache__, run with PYTHONDONTWRITEBYTECODE: compiled on every start
    scratch = Path(tempfile.mkdtemp(prefix="tokenmath-vs-previous-"))
    bare = {n: scratch / n for n in trees}
    for n, t in trees.items():
        shutil.copytree(t / "src", bare[n] / "src", ignore=shutil.ignore_patterns("__pycache__"))
    first_src = {n: code(FIRST, bare[n], SWEEP=SWEEP) for n in trees}
    warm = {n: code(WARM, t, CASES=repr(WARM_CASES), REPEAT=str(repeat)) for n, t in trees.items()}
    infer = {n: code(INFER, t) for n, t in trees.items()}
    for n, t in trees.items():            # write each tree's .pyc (and the parsed-catalog cache) once
        subprocess.run([py, "-c", first[n]], env=env_for(t), check=True, capture_output=True)
        subprocess.run([py, "-c", infer[n], "infer"], env=env_for(t), check=True, capture_output=True)
    rows = {n: {"first": [], "first_with_numpy": [], "first_source": [], "infer": []} for n in trees}
    warm_rows = {n: [] for n in trees}
    for i in range(runs):
        for n, t in (trees.items() if i % 2 == 0 else reversed(list(trees.items()))):
            _, _, out = child_cpu([py, "-c", first[n]], env_for(t))
            w, c, w_all, c_all = (float(x) for x in out.split())
            rows[n]["first"].append((w, c))
            rows[n]["first_with_numpy"].append((w_all, c_all))
            _, _, out = child_cpu([py, "-c", first_src[n]], env_for(bare[n], source=True))
            w, c = (float(x) for x in out.split()[:2])
            rows[n]["first_source"].append((w, c))
            w, c, _ = child_cpu([py, "-c", infer[n], "infer"], env_for(t))
            rows[n]["infer"].append((w, c))
            # the in-process warm figures: each a median of `repeat` calls, then the median over the runs
            warm_rows[n].append(json.loads(child_cpu([py, "-c", warm[n]], env_for(t))[2]))
    shutil.rmtree(scratch, ignore_errors=True)
    out = {}
    for n in trees:
        fig = {k: {"wall_s": statistics.median(w for w, _ in v), "cpu_s": statistics.median(c for _, c in v)}
               for k, v in rows[n].items()}
        fig["warm_cpu_s"] = {case: statistics.median(r[case] for r in warm_rows[n]) for case in WARM_CASES}
        out[n] = fig
    if count:
        for n, t in trees.items():
            ins = {"first": instructions([py, "-c", first[n]], env_for(t)),
                   "infer": instructions([py, "-c", infer[n], "infer"], env_for(t)),
                   "numpy": instructions([py, "-c", "import numpy"], env_for(t))}
            out[n]["instructions"] = ins
    return out


def report(res: dict, prev: Path, now: Path, runs: int) -> None:
    p, c = res["previous"], res["now"]
    print(f"this tree {now} vs previous {prev}: medians of {runs} fresh processes each (python "
          f"{sys.version.split()[0]}); ratio = now / previous")
    print(f"{'figure':44s} {'previous':>17s} {'now':>17s} {'ratio':>11s}  target")

    def line(label, a, b, target=None):
        ok = "" if target is None else (f"<= {target * 1e3:.0f} ms: " + ("met" if b["wall_s"] <= target else "MISSED")
                                        + " by wall, " + ("met" if b["cpu_s"] <= target else "MISSED") + " by CPU")
        print(f"{label:44s} {a['wall_s'] * 1e3:7.1f} ({a['cpu_s'] * 1e3:5.1f} cpu) "
              f"{b['wall_s'] * 1e3:7.1f} ({b['cpu_s'] * 1e3:5.1f} cpu) "
              f"{b['wall_s'] / a['wall_s']:5.2f} ({b['cpu_s'] / a['cpu_s']:4.2f})  {ok}")
    line("first sweep call, ms (numpy excluded)", p["first"], c["first"], FIRST_TARGET_S)
    line("first sweep call, ms (numpy import included)", p["first_with_numpy"], c["first_with_numpy"],
         FIRST_TARGET_S)
    line("first sweep call, ms (compiled from source)", p["first_source"], c["first_source"], FIRST_TARGET_S)
    line("tokenmath infer start, ms", p["infer"], c["infer"], INFER_TARGET_S)
    ratios = []
    for case in WARM_CASES:
        a, b = p["warm_cpu_s"][case], c["warm_cpu_s"][case]
        ratios.append(b / a)
        print(f"{'warm sweep, ' + case + ', ms CPU':44s} {a * 1e3:17.2f} {b * 1e3:17.2f} {b / a:11.2f}")
    gm = math.exp(statistics.fmean(math.log(r) for r in ratios))
    print(f"{'warm small sweeps, geometric mean':44s} {'':17s} {'':17s} {gm:11.2f}  no slower than previous: "
          f"{'met' if gm <= 1.0 else 'MISSED'}")
    if "instructions" in c and c["instructions"]["first"]:
        pi, ci = p["instructions"], c["instructions"]
        for k, label in (("first", "first sweep call incl. numpy, M instructions"),
                         ("infer", "tokenmath infer start, M instructions")):
            print(f"{label:44s} {pi[k] / 1e6:17.0f} {ci[k] / 1e6:17.0f} {ci[k] / pi[k]:11.2f}")
        k = "first"
        a, b = pi[k] - pi["numpy"], ci[k] - ci["numpy"]
        print(f"{'first sweep call, numpy excluded, M instr.':44s} {a / 1e6:17.0f} {b / 1e6:17.0f} {b / a:11.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--previous", default=PREVIOUS, help="commit, tag or branch, or a checkout's path")
    ap.add_argument("--runs", type=int, default=11, help="fresh processes per figure and tree (median reported)")
    ap.add_argument("--repeat", type=int, default=60, help="warm calls per sweep case (median reported)")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args(argv)
    prev = tree_of(a.previous)
    res = measure({"previous": prev, "now": ROOT}, a.runs, a.repeat, a.instructions)
    report(res, prev, ROOT, a.runs)
    if a.json:
        Path(a.json).write_text(json.dumps({"previous": str(prev), "now": str(ROOT), **res}, indent=2))
    return res


if __name__ == "__main__":
    main()
