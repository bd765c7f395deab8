#!/usr/bin/env python
"""Simulator speed with agent sessions (issue 38 item 1): 100,000 sessions of 4 turns through `tokenmath simulate`,
against the same 400,000 turns sent as independent requests, as a ratio.

    python benchmarks/simulate_sessions_speed.py                 # best of 3 runs per case
    taskset -c 0 python benchmarks/simulate_sessions_speed.py    # pinned to one core
    python benchmarks/simulate_sessions_speed.py --sessions 10000 --concurrency 128 --json sessions_speed.json

Llama 3.1 8B on one H100 SXM, vLLM profile, closed loop of --concurrency users. A turn sends 1,024 new tokens on top of
its session's history and generates 150 (AA-AgentPerf's median output, analyses/serving/agents.DEFAULTS), then waits
a tool gap of mean 3 s (agents.DEFAULTS' assumption) before the session's next turn. The baseline sends the same
number of requests of 1,024 in / 150 out, no sessions (the previous release's `simulate` has no sessions to time, so
this is the ratio that says what sessions cost: a returning turn is one more event than a completion, and a missed
history is prefilled again). Wall time and this process's CPU time (time.process_time) of the best run.

Measured on this project's 2-core machine (2026-12-07, best of 3; `python benchmarks/simulate_sessions_speed.py` and
`... --concurrency 128`):
  sessions     256 users, 100,000 sessions x 4 turns: 5.89 s wall, 5.30 s CPU (384,094 steps, hit rate 0.8% of
               prompt tokens, 14,316 preemptions: the running turns and the idle histories outgrow the 454,218-token
               KV cache, so histories are evicted before their next turn and prefilled again)
  independent  256 users, 400,000 requests: 2.55 s wall, 2.53 s CPU (234,531 steps)
  ratio        sessions / independent: 2.31x wall, 2.09x CPU
  at 128 users the histories fit (hit rate 55.6% of the 63.2% an unbounded cache finds, no preemption): sessions
  6.92 s wall, 6.87 s CPU (641,527 steps) against 4.04 s and 3.97 s, 1.71x wall, 1.73x CPU.
Nothing here is asserted by the tests (wall clock is not a test).
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

from tokenmath.analyses.serving.agents import DEFAULTS

TURNS = 4
NEW_TOKENS = 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the figures to this JSON file")
    a = ap.parse_args(argv)
    out_len, gap = DEFAULTS["output_len"][0], DEFAULTS["tool_gap_s"][0]
    requests = a.sessions * TURNS
    cases = [("sessions", {"turns": TURNS, "tool_gap_s": gap}), ("independent", {})]
    tm.simulate(requests=1000, turns=2)              # warm-up: imports, catalogs
    rows = []
    for name, kw in cases:
        wall, cpu = [], []
        for _ in range(a.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            r = tm.simulate("llama-3.1-8b", "h100-sxm", engine="vllm", concurrency=a.concurrency, requests=requests,
                            input_len=NEW_TOKENS, output_len=out_len, **kw)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        steps = sum(s.steps for s in r.steps)
        hit = r.prefix_cache["hit_rate_tokens"] if r.prefix_cache else None
        rows.append({"case": name, "requests": requests, "concurrency": a.concurrency, "wall_s": min(wall),
                     "cpu_s": min(cpu), "steps": steps, "hit_rate_tokens": hit, "preemptions": r.preemptions,
                     "output_tokens_per_s": r.output_tokens_per_s})
        what = f"{a.sessions:,} sessions x {TURNS} turns" if kw else f"{requests:,} requests"
        print(f"{name:12s} {a.concurrency} users, {what}: {min(wall):.2f} s wall, {min(cpu):.2f} s CPU "
              f"({steps:,} steps" + (f", hit rate {hit:.1%}" if hit is not None else "")
              + f", {r.preemptions:,} preemptions)")
    s, i = rows
    print(f"ratio        sessions / independent: {s['wall_s'] / i['wall_s']:.2f}x wall, {s['cpu_s'] / i['cpu_s']:.2f}x CPU")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
