"""Where a layout's parallel groups sit on real chips: the scale-up domains each group spans and how it splits.

Chips are numbered 0..N-1 in scale-up domains of D consecutive chips (chip c sits in domain c // D). A layout puts
its ranks in the order tp (innermost), ep, cp, pp, dp, starting on a domain boundary (layout.py), so every group of
one kind is a contiguous block of g chips, the j-th at chips [j g, (j + 1) g):

    tensor-parallel group          g = tp              (the all-reduces)
    expert-parallel stage          g = tp x ep         (the dispatch and combine all-to-all)
    context-parallel block         g = tp x ep x cp    (the ring of a sequence's cp ranks, tp x ep chips apart)
    replica                        g = tp x ep x cp x pp  (the pipeline hand-offs; what `domains_spanned` reports)

Domain-aligned where possible: a block whose size divides D, or is a multiple of it, spans exactly ceil(g / D)
domains. Any other size makes some blocks straddle a boundary, and for g <= D no placement avoids that (a domain
holds at most floor(D / g) whole groups, fewer in all than the N / g groups), while a contiguous block never spans
more than two. E.g. 144 GB200 (two NVL72 racks): replicas of 48 chips sit at 0-47 (rack 1), 48-95 (24 + 24 across
the racks), 96-143 (rack 2); tp=16 x dp=9 puts its 5th replica on chips 64-79, 8 in each rack.

Each kind is summarised by its worst groups (the slowest member sets a collective's pace):
- domains: the most domains one group spans;
- piece_min, piece_max: the fewest and the most ranks a group has inside one domain, over all groups. A rank whose
  domain holds c of its all-to-all's g ranks sends (g - c) / (g - 1) of what leaves it to other domains: on 72 HGX
  H200 (9 nodes of 8), ep = 9 puts 8 ranks on one node and 1 on the next, and that lone rank sends 8/8 of its
  traffic across (crossing_fraction 1), not 1/9;
- ring_domains, ring_piece_min, ring_piece_max: the group whose hierarchical ring moves the most bytes per chip
  over the scale-out link ((n - 1)/n of its buffer / its smallest piece; the largest piece breaks ties), which
  prices all-reduce, all-gather and reduce-scatter.
Arrays broadcast: every field has the broadcast shape of the inputs (a sweep over layouts is one call; the blocks
of each distinct (g, N) pair are walked once, at most D / gcd(g, D) of them since the pattern repeats).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tokenmath.mapping.layout import Layout


@dataclass(frozen=True)
class Span:
    """How the groups of one kind (g chips each, N chips in all) sit on domains; see the module docstring."""
    size: np.ndarray
    domains: np.ndarray
    piece_min: np.ndarray
    piece_max: np.ndarray
    ring_domains: np.ndarray
    ring_piece_min: np.ndarray
    ring_piece_max: np.ndarray

    @property
    def crosses(self):
        """True where some group of this kind spans more than one domain."""
        return self.domains > 1

    @property
    def crossing_fraction(self):
        """Share of what leaves the worst-placed rank of an all-to-all that goes to other domains:
        (its peers outside its domain) / (g - 1); 0 for a group of one."""
        g = self.size
        return np.where(g > 1, (g - self.piece_min) / np.maximum(g - 1.0, 1.0), 0.0)


@dataclass(frozen=True)
class Placement:
    """The spans of a layout's group kinds (arrays broadcast like the layout's degrees)."""
    tp: Span
    stage: Span
    cp: Span
    replica: Span


@lru_cache(maxsize=4096)   # a pure function of three ints, asked again for every block of a sweep
def _blocks(g: int, n: int, d: int) -> tuple[int, int, int, int, int, int]:
    """(domains, piece_min, piece_max, ring_domains, ring_piece_min, ring_piece_max) for blocks of g of n chips."""
    if g <= 1 or d <= 0:
        return 1, max(g, 1), max(g, 1), 1, max(g, 1), max(g, 1)
    j = np.arange(min(max(n // g, 1), d // math.gcd(g, d)), dtype=np.int64)   # offsets repeat mod d after that
    s = j * g
    e = s + g - 1
    spans = e // d - s // d + 1
    first = np.minimum(g, d - s % d)
    last = np.where(spans > 1, e % d + 1, g)
    lo = np.minimum(first, last)
    hi = np.where(spans > 2, d, np.maximum(first, last))
    key = (spans - 1) / spans / lo                      # bytes per chip a ring sends across, per byte of buffer
    w = np.lexsort((-hi, -key))[0]
    return int(spans.max()), int(lo.min()), int(hi.max()), int(spans[w]), int(lo[w]), int(hi[w])


def span(g, chips, domain: int) -> Span:
    """Groups of g chips laid contiguously over `chips` chips in domains of `domain` (arrays broadcast)."""
    g_, n_ = np.broadcast_arrays(np.rint(np.asarray(g, float)).astype(np.int64),
                                 np.rint(np.asarray(chips, float)).astype(np.int64))
    n_ = np.maximum(n_, g_)
    # distinct (g, n) pairs as one int64 key each (both < 2**31): a 1-d unique, ~10x cheaper than unique(axis=0)
    keys, inv = np.unique((g_.ravel() << 32) | n_.ravel(), return_inverse=True)
    pairs = np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)
    rows = np.array([_blocks(int(a), int(b), int(domain)) for a, b in pairs], dtype=float).reshape(len(pairs), 6)
    vals = rows[np.asarray(inv).ravel()]
    shape = g_.shape

    def col(i):
        v = vals[:, i].reshape(shape)
        return v if shape else np.float64(v)
    return Span(np.asarray(g_, float) if shape else np.float64(g_), *(col(i) for i in range(6)))


def place(lay: Layout, domain: int) -> Placement:
    """The groups of `lay` on chips in domains of `domain` chips (ordered tp, ep, cp, pp, dp)."""
    tp, ep, pp = (np.asarray(x, float) for x in (lay.tp, lay.ep, lay.pp))
    cp = np.asarray(getattr(lay, "cp", 1), float)
    n = np.asarray(lay.chips, float)
    stage = tp * ep
    block = stage * cp
    return Placement(tp=span(tp, n, domain), stage=span(stage, n, domain), cp=span(block, n, domain),
                     replica=span(block * pp, n, domain))
