#!/usr/bin/env python
"""A/B sweep speed of two checkouts of tokenmath, one at a time, on the cases of sweep_speed.py (dense decode and
MoE, 1,000,000 configurations each): median CPU time of --repeat sweeps after one warm-up.

    git worktree add /tmp/before <commit>
    for i in 1 2 3; do taskset -c 0 python benchmarks/ab_sweep.py /tmp/before; taskset -c 0 python benchmarks/ab_sweep.py .; done

Alternate the two checkouts: on a shared machine the speed moves between runs, so only neighbours compare.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("checkout", help="the root of a tokenmath checkout (its src/ is imported)")
ap.add_argument("--repeat", type=int, default=5)
args = ap.parse_args()
sys.path.insert(0, str(Path(args.checkout).resolve() / "src"))
import tokenmath as tm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_speed import CASES  # noqa: E402

out = []
for name, model, hardware, axes, opts in CASES:
    if name not in ("dense decode", "moe"):
        continue
    tm.sweep(model, hardware, **axes, **opts)
    cpu = []
    for _ in range(args.repeat):
        c0 = time.process_time()
        tm.sweep(model, hardware, **axes, **opts)
        cpu.append(time.process_time() - c0)
    out.append(f"{name} {statistics.median(cpu) * 1e3:.0f} ms")
print(Path(tm.__file__).resolve().parents[2], "|", " | ".join(out))
