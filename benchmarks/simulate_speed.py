#!/usr/bin/env python
"""Simulator speed: seconds to simulate 100,000 requests on one core (issue 17, part 4).

    python benchmarks/simulate_speed.py                  # best of 3 runs per case
    taskset -c 0 python benchmarks/simulate_speed.py     # pinned to one core
    python benchmarks/simulate_speed.py --requests 20000 --repeat 5 --json simulate_speed.json

Cases (Llama 3.1 8B on one H100, vLLM profile, 100,000 requests each):
  fixed      closed loop, concurrency 64, 1024 in / 256 out (the `tokenmath simulate` default workload)
  uniform    closed loop, concurrency 64, input uniform 512-1536, output uniform 128-384 (requests desynchronize:
             about one prefill step and one decode run per request)
  open       open loop, Poisson 12 req/s, 1024 / 256 (every arrival also ends a decode run)
The figure is the best of --repeat runs of tokenmath.simulate (tables, workload, loop and metrics), wall time and
this process's CPU time (time.process_time: other programs sharing the core do not inflate it). The per-turn cost
is printed too: a turn is one prefill step or one run of decode steps priced in closed form, so the time is the
number of events (arrivals, completions, prefill steps) x the Python work per event, whatever the decode steps.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

try:
    import tokenmath as tm
except ImportError:   # a clean checkout run with any python that has numpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import tokenmath as tm

CASES = [
    ("fixed", {"concurrency": 64, "input_len": 1024, "output_len": 256}),
    ("uniform", {"concurrency": 64, "input_len": "uniform:512-1536", "output_len": "uniform:128-384"}),
    ("open", {"arrival_rate": 12.0, "input_len": 1024, "output_len": 256}),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the figures to this JSON file")
    a = ap.parse_args(argv)
    tm.simulate(requests=1000)                       # warm-up: imports, catalogs
    rows = []
    for name, kw in CASES:
        wall, cpu = [], []
        for _ in range(a.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            r = tm.simulate("llama-3.1-8b", "h100-sxm", engine="vllm", requests=a.requests, **kw)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        steps = sum(s.steps for s in r.steps)
        rows.append({"case": name, "requests": a.requests, "wall_s": min(wall), "cpu_s": min(cpu),
                     "steps": steps, "output_tokens_per_s": r.output_tokens_per_s})
        print(f"{name:8s} {a.requests:,} requests: {min(wall):.2f} s wall, {min(cpu):.2f} s CPU "
              f"({steps:,} steps simulated, {min(cpu) / a.requests * 1e6:.1f} us CPU per request)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
