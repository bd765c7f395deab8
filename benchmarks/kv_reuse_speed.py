#!/usr/bin/env python
"""Speed of the prefix-cache analysis (analyses/serving/kv_reuse.py) on a synthetic agent workload: N sessions of
T turns, each turn's prompt its session's previous prompt plus new blocks (multi-turn reuse), sessions interleaved.

    python benchmarks/kv_reuse_speed.py                  # 100,000 sessions x 4 turns
    python benchmarks/kv_reuse_speed.py --sessions 10000 --turns 10

Prints the requests, blocks, seconds for the whole hit-rate curve (every capacity at once) and the unbounded hit rate.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from tokenmath.analyses.serving.block_trace import BLOCK_TOKENS, BlockTrace
from tokenmath.analyses.serving.kv_reuse import reuse_curve

ap = argparse.ArgumentParser()
ap.add_argument("--sessions", type=int, default=100_000)
ap.add_argument("--turns", type=int, default=4)
ap.add_argument("--new-blocks", type=int, default=2, help="blocks each turn adds to its session's prompt")
ap.add_argument("--system-blocks", type=int, default=4, help="a system prompt every session shares")
args = ap.parse_args()

rng = np.random.default_rng(0)
S, T, k, sys_b = args.sessions, args.turns, args.new_blocks, args.system_blocks
offsets, hashes, nxt = [0], [], sys_b
prompts = [list(range(sys_b)) for _ in range(S)]
order = rng.permutation(np.repeat(np.arange(S), T))        # interleaved sessions, each in its turn order
for s in order:
    prompts[s] = prompts[s] + list(range(nxt, nxt + k))
    nxt += k
    hashes.extend(prompts[s])
    offsets.append(len(hashes))
n = len(offsets) - 1
lens = np.diff(offsets)
tr = BlockTrace("synthetic agents", np.arange(n, dtype=float) * 0.01, lens * BLOCK_TOKENS, np.full(n, 200),
                np.asarray(offsets, np.int64), np.asarray(hashes, np.int64))
t0 = time.perf_counter()
c = reuse_curve(tr)
dt = time.perf_counter() - t0
print(f"{S:,} sessions x {T} turns = {n:,} requests, {len(hashes):,} blocks: hit-rate curve in {dt:.2f} s; "
      f"unbounded hit rate {float(c.hit_rate(np.inf)):.1%}, at 1e6 tokens {float(c.hit_rate(1e6)):.1%}")
