"""The prefix cache of a simulated replica: which shared prefixes are held in HBM, who uses them, and which go when
room is needed (issue 18 item 4 in `simulate`).

Model (vLLM's automatic prefix caching and SGLang's RadixAttention, at the granularity of a prefix group):
- a group's prefix becomes resident when the first request of the group finishes prefilling it; its tokens are
  then held once, shared by every running request of the group (each finds `min(its prefix, the resident one)`
  tokens cached and prefills the rest);
- a resident prefix no running request uses is idle: it stays in HBM, in least-recently-used order, until room
  is needed. In the shared pool (the default, as both engines do: cached blocks live among the free blocks) an idle
  prefix is evicted, oldest first, before any running request is preempted or the queue waits for memory, so the
  cache holds only memory nobody else needs at that moment; with a reserved share of the KV cache (`reserve`
  tokens, a what-if: memory kept for the cache) the running requests get the rest, and a new prefix that does
  not fit the reserve evicts idle ones oldest first, or is not kept when the in-use ones fill it;
- a request's own prefix is never evicted to admit it (vLLM touches a request's cached blocks before it allocates);
- only whole KV blocks are found: a lookup matches the cached prefix's full blocks (vLLM's design doc
  docs/design/v1/prefix_caching.md: "We only cache full blocks", each block hashed with the tokens before it;
  SGLang's radix cache matches whole pages, page size 1 by default), so up to a block less one token of a prefix
  is prefilled again (block_tokens: the engine's page size);
- an agent session's prefix is its history (sessions.py), and grows: a completed turn's whole sequence becomes it
  (`keep`), idle until the session's next turn.
What it reports: the hit rate achieved (cached tokens over the prompt tokens of every admission, and the share of
admissions of requests with a prefix that found it cached), evictions, and the tokens held over time (peak and
time-weighted mean).
"""
from __future__ import annotations

from collections import OrderedDict


class PrefixStore:
    def __init__(self, reserve_tokens: int = 0, block_tokens: int = 1):
        self.reserve = int(reserve_tokens)       # 0: the shared pool
        self.block = max(int(block_tokens), 1)   # the engine's KV page: a lookup finds whole pages only
        self.size: dict[int, int] = {}           # resident group -> tokens held
        self.refs: dict[int, int] = {}           # resident group -> running requests using it
        self.idle: OrderedDict[int, int] = OrderedDict()   # resident groups nobody uses, least recently used first
        self.resident = 0                        # tokens held
        self.admissions = self.with_prefix = self.hits = self.evictions = 0
        self.prompt_tokens = self.hit_tokens = 0
        self.area = 0.0                          # integral of resident tokens over time (token-seconds)
        self.t = 0.0
        self.peak = 0

    @property
    def pooled(self) -> bool:
        """Whether the cache shares the running requests' pool (its tokens count in the KV held)."""
        return self.reserve == 0

    def _held(self, delta: int, now: float) -> None:
        self.area += self.resident * (now - self.t)
        self.t = now
        self.resident += delta
        if self.resident > self.peak:
            self.peak = self.resident

    def _whole(self, tokens: int) -> int:
        """The tokens of whole blocks in `tokens`: what the engine keeps and finds."""
        return tokens // self.block * self.block

    def peek(self, g: int, want: int) -> int:
        """Tokens of a prefix of `want` tokens in group g found cached now: whole blocks (0: not resident)."""
        if g < 0 or g not in self.size:
            return 0
        return self._whole(min(want, self.size[g]))

    def lookup(self, g: int, want: int, prompt: int) -> int:
        """An admission of a prompt of `prompt` tokens whose first `want` are group g's: the tokens found cached
        (the group is then in use)."""
        self.admissions += 1
        self.prompt_tokens += prompt
        if g < 0:
            return 0
        self.with_prefix += 1
        h = self.peek(g, want)
        if h:
            self.hits += 1
            self.hit_tokens += h
            self.refs[g] += 1
            self.idle.pop(g, None)
        return h

    def insert(self, g: int, tokens: int, now: float) -> bool:
        """A request of group g finished prefilling its `tokens`-token prefix: keep it (in use by that request);
        False when the group is already resident, or a reserve full of prefixes in use has no room for it. Only its
        whole blocks are kept."""
        tokens = self._whole(tokens)
        if g in self.size or tokens <= 0:
            return False
        if not self.pooled:
            if tokens > self.reserve:
                return False
            while self.idle and self.resident + tokens > self.reserve:
                self._evict_oldest(now)
            if self.resident + tokens > self.reserve:
                return False
        self.size[g] = tokens
        self.refs[g] = 1
        self._held(tokens, now)
        return True

    def keep(self, g: int, tokens: int, now: float) -> int:
        """A session's turn of group g completed: the engine keeps its whole sequence, `tokens` tokens, as the group's
        prefix for the session's next turn (idle until then, most recently used; sessions.py). The tokens added to
        those held: in a reserve the idle others go first, oldest first, and a history that still does not fit
        leaves the group's shorter one in place (0 added). Only its whole blocks are kept."""
        tokens = self._whole(tokens)
        old = self.size.get(g, 0)
        if tokens <= old:
            return 0
        if not self.pooled:
            mine = self.idle.pop(g, None)          # not its own victim
            while self.idle and self.resident - old + tokens > self.reserve:
                self._evict_oldest(now)
            if mine is not None:
                self.idle[g] = mine
            if self.resident - old + tokens > self.reserve:
                return 0
        if not old:
            self.refs[g] = 0
        self.size[g] = tokens
        self._held(tokens - old, now)
        if self.refs[g] == 0:
            self.idle[g] = tokens
            self.idle.move_to_end(g)
        return tokens - old

    def release(self, g: int, now: float) -> None:
        """A running request of group g left (finished or preempted)."""
        self.refs[g] -= 1
        if self.refs[g] == 0:
            self.idle[g] = self.size[g]          # most recently used: evicted last

    def _evict_oldest(self, now: float, spare: int = -1) -> int:
        """Evict the least recently used idle prefix but group `spare`'s (the one a request being admitted is about to
        find: vLLM touches a request's cached blocks before it allocates, so they are not its own victims)."""
        g = next(iter(self.idle))
        if g == spare:
            g = next(k for k in self.idle if k != spare)
        tokens = self.idle.pop(g)
        del self.size[g], self.refs[g]
        self.evictions += 1
        self._held(-tokens, now)
        return tokens

    def evict(self, amount: float, now: float, spare: int = -1) -> int:
        """Free at least `amount` tokens of the shared pool by evicting idle prefixes, oldest first (as many as there
        are), never group `spare`'s; the tokens freed."""
        freed = 0
        while self.pooled and len(self.idle) > (spare in self.idle) and freed < amount:
            freed += self._evict_oldest(now, spare)
        return freed

    def summary(self, end: float, kv_tokens: int) -> dict:
        """What the run's cache did (fractions of the KV cache's kv_tokens)."""
        self._held(0, end)
        return {"reserve_tokens": self.reserve, "hit_rate_tokens": self.hit_tokens / max(self.prompt_tokens, 1),
                "hit_rate_requests": self.hits / max(self.with_prefix, 1), "admissions": self.admissions,
                "hits": self.hits, "evictions": self.evictions, "peak_tokens": self.peak,
                "peak_fraction": self.peak / kv_tokens, "mean_fraction": self.area / max(end, 1e-12) / kv_tokens,
                "resident_prefixes_at_end": len(self.size)}
