"""How much of a trace's prompts a prefix cache of a given capacity serves, and from which tier: the hit rate as a
result of the workload and the capacity, not an input.

Model: one cache of whole blocks (BLOCK_TOKENS each) with least-recently-used eviction, as the engines' block
pools do (vLLM's free-block queue, SGLang's radix tree evicting leaves first). A request touches every block of its
prompt, the last first, so a prompt's leading blocks are its most recently used (an engine evicts a sequence's
tail before its head). A request finds cached the longest run of its leading blocks still held when it arrives.

Every capacity at once: with LRU a block is held iff fewer than C other distinct blocks were touched since its last
use (its stack distance, Mattson et al. 1970), so one pass (a Fenwick tree over the accesses) gives each block's
distance; a request's k-th block is a hit iff the largest distance among its first k + 1 blocks is below C.
Tiers (HBM, then host DRAM, then local SSD; specs/kv_tiers) stack inclusively: a hit at distance d is served by
the first tier whose cumulative capacity exceeds d, and what lower tiers serve is reload traffic over their links.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.analyses.serving.block_trace import BlockTrace


def stack_distances(tr: BlockTrace) -> np.ndarray:
    """(B,) per block of each prompt (prompt order): the LRU stack distance when its request arrives, in blocks (the
    distinct other blocks touched since this one's last use, before the request touches any); inf if never seen."""
    off = tr.offsets
    size = int(tr.hashes.size)
    tree = [0] * (size + 1)          # Fenwick tree over access positions: 1 at each block's latest access
    last: dict[int, int] = {}
    dist = np.full(size, np.inf)

    def marks_before(j):             # marks at positions [0, j)
        s = 0
        while j > 0:
            s += tree[j]
            j -= j & -j
        return s

    hashes = tr.hashes.tolist()
    for r in range(tr.requests):
        a, b = int(off[r]), int(off[r + 1])
        ids = hashes[a:b]
        # distances as the request finds the cache: marks between each block's last use and the request's start
        upto = marks_before(a)
        for k, h in enumerate(ids):
            p = last.get(h)
            if p is not None:
                dist[a + k] = upto - marks_before(p + 1)
        # then it touches its blocks, the last first (access positions a .. b-1 in that order); add() inlined:
        # this loop is the analysis' whole cost
        for pos, h in zip(range(a, b), reversed(ids)):
            p = last.get(h)
            if p is not None:
                j = p + 1
                while j <= size:
                    tree[j] -= 1
                    j += j & -j
            j = pos + 1
            while j <= size:
                tree[j] += 1
                j += j & -j
            last[h] = pos
    return dist


def prefix_max(tr: BlockTrace, d: np.ndarray) -> np.ndarray:
    """(B,) the largest distance among each block and the blocks before it in its prompt (a prefix hit needs all)."""
    if not d.size:
        return d.copy()
    # a segmented running maximum in one pass: lift each request's values above every earlier request's
    big = float(d[np.isfinite(d)].max(initial=0.0)) + 2.0          # stands for inf (never seen)
    seg = np.repeat(np.arange(tr.requests, dtype=float), np.diff(tr.offsets)) * (2.0 * big)
    run = np.maximum.accumulate(np.where(np.isfinite(d), d, big) + seg) - seg
    return np.where(run >= big, np.inf, run)


@dataclass(frozen=True)
class ReuseCurve:
    trace: BlockTrace
    need: np.ndarray        # (B,) blocks a cache must hold for each block to hit (prefix max distance + 1; inf: never)
    tokens: np.ndarray      # (B,) tokens in each block

    @property
    def input_tokens(self) -> int:
        return int(self.trace.input_tokens.sum())

    def hit_rate(self, capacity_tokens) -> np.ndarray:
        """Cached share of all prompt tokens at each capacity (tokens; inf: unbounded)."""
        cap = np.asarray(capacity_tokens, float) / self.trace.block_tokens
        o = np.argsort(self.need, kind="stable")
        need, w = self.need[o], np.cumsum(self.tokens[o])
        seen = int(np.isfinite(need).sum())           # a block never seen before misses at any capacity
        i = np.minimum(np.searchsorted(need, np.floor(cap), side="right"), seen)
        hit = np.where(i > 0, w[np.maximum(i - 1, 0)], 0.0)
        return hit / self.input_tokens

    def served_by(self, tier_tokens) -> np.ndarray:
        """Share of all prompt tokens served by each tier (capacities in tokens, fastest first, stacked inclusively);
        the last entry is the share recomputed (a miss everywhere)."""
        cum = np.cumsum(np.asarray(tier_tokens, float))
        hits = self.hit_rate(cum)
        return np.diff(np.concatenate([[0.0], hits, [1.0]]))


def reuse_curve(tr: BlockTrace) -> ReuseCurve:
    return ReuseCurve(tr, prefix_max(tr, stack_distances(tr)) + 1, tr.block_sizes().astype(float))
