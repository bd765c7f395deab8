"""The simulated replica's state: every request's progress, the queue, the running set and the KV it holds.

Token accounting (what a step reads and writes):
- a request's prefill processes `need` tokens (its prompt, or after a preemption its prompt plus what it had
  generated: recompute), in chunks; the chunk that completes it samples a token (the first one the first time);
- a decoding request with `gen` tokens generated feeds the last one back: the step writes it to the KV cache and
  attends need + (tokens generated since) keys. With G the number of decode steps run so far, a request that
  joined decoding when G was g0 attends q + G keys, q = need + 1 - g0; the running total of attended keys is
  A = Q + n_d x G (Q the sum of q), kept in O(1) as requests join and leave;
- it finishes when gen reaches its output length: at G = g0 + output - gen, the key of a heap.
KV held (tokens): A + the prefilled part of partial prefills, plus half a block per running request (paging
rounds each sequence up to whole blocks; half a block is the mean waste). Prefix caching (prefix_store.py): a
request whose prefix group is resident starts its prefill after the cached tokens (read, not recomputed); a
resident prefix is held once, shared by the group's running requests, and idle ones stay until evicted. `extra`
carries that into the KV held: the resident tokens (in the shared pool) minus the cached tokens the running
requests count in their own contexts; 0 without prefix groups.
Sessions (sessions.py, `session`: each request's session, None without): a completed turn's whole sequence (prompt
+ output) becomes its session's cached prefix (prefix_store.keep), moved from the turn's own count into `extra`;
the completed requests are listed in `left` for the loop to send what follows, and each request's cached tokens at
its last admission and tokens prefilled (recompute included) are kept for the answer.
Speculative decoding: G counts tokens per sequence, not steps: a step adds E = (1 - a^(k+1)) / (1 - a) (the
expected accepted tokens, Leviathan et al. 2023, eq. 1) to every decoding sequence, so keys, KV and finishing times
follow unchanged (a request needing R more tokens finishes after ceil(R / E) steps); each decode also holds k
look-ahead slots for its drafted tokens while the step runs (`ahead`). Without speculation E = 1 and ahead = 0
(integers: the same arithmetic as before).
"""
from __future__ import annotations

import heapq
from collections import deque

from tokenmath.analyses.serving.simulation.prefix_store import PrefixStore


class State:
    def __init__(self, inp, out, prefix_group, prefix_tokens, cap_tokens: float, block_tokens: int,
                 step_tokens=1, ahead: int = 0, prefix_reserve: int = 0, session=None):
        n = len(inp)
        self.E = step_tokens               # tokens a decode step adds to each sequence (1, or E with speculation)
        self.ahead = ahead                 # look-ahead KV slots per decode (k drafted tokens)
        self.eps = 1e-9 if step_tokens != 1 else 0      # float clock: a finish due within rounding is due
        self.I, self.O = list(map(int, inp)), list(map(int, out))
        self.group, self.shared = list(map(int, prefix_group)), list(map(int, prefix_tokens))
        self.need = list(self.I)
        self.done = [0] * n
        self.gen = [0] * n                 # tokens generated when the request last joined decoding (or finished)
        self.g0 = [0] * n
        self.q = [0] * n
        self.epoch = [0] * n
        self.res = [0] * n                 # KV tokens reserved at admission: need + output still to generate
        self.arrival = [0.0] * n
        self.first = [-1.0] * n
        self.end = [-1.0] * n
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}      # admission order: prefilling and decoding
        self.prefilling: dict[int, None] = {}
        self.decoding: dict[int, None] = {}
        self.heap: list[tuple[int, int, int]] = []
        self.hit = [0] * n                 # cached prefix tokens a running request uses (counted in its context)
        self.sess = None if session is None else list(map(int, session))
        self.left: list[int] = []          # sessions: requests completed since the loop last looked
        self.cached = None if session is None else [0] * n      # cached tokens found at the last admission
        self.computed = None if session is None else [0] * n    # tokens prefilled, recompute included
        shared = self.sess is not None or any(g >= 0 for g in self.group)
        self.pc = PrefixStore(prefix_reserve, block_tokens) if shared else None
        self.extra = 0                     # KV held beyond the requests' own counts (prefix sharing)
        self.now = 0.0
        self.G = 0
        self.Q = 0
        self.kv_pf = 0                      # tokens held by partial prefills
        self.reserved = 0                   # sum of (need + output still to generate) over running requests
        self.cap = float(cap_tokens) - (prefix_reserve if self.pc is not None else 0)
        self.round = (block_tokens - 1) / 2
        self.preemptions = 0
        self.completed = 0

    # ---- what the policies read ----------------------------------------------------------------------------
    @property
    def n_d(self) -> int:
        return len(self.decoding)

    def attended(self) -> int:
        return self.Q + len(self.decoding) * self.G

    def kv_used(self) -> float:
        """KV tokens held once the next decode step has written its tokens."""
        return (self.Q + len(self.decoding) * (self.G + self.ahead) + self.kv_pf + self.round * len(self.running)
                + self.extra)

    def pending(self, i: int) -> int:
        """Tokens a waiting request would still prefill if admitted now (after a cached shared prefix)."""
        if self.done[i] or self.pc is None:
            return self.need[i] - self.done[i]
        return self.need[i] - self.pc.peek(self.group[i], self.shared[i])

    def free_cache(self, amount: float, spare: int = -1) -> int:
        """Evict idle cached prefixes (oldest first) for at least `amount` tokens of the pool, never group `spare`'s
        (the prefix of a request being admitted); the tokens freed."""
        if self.pc is None or amount <= 0:
            return 0
        freed = self.pc.evict(amount, self.now, spare)
        self.extra -= freed
        return freed

    def next_finish(self) -> int | None:
        """G at which the next decoding request finishes (stale heap entries of preempted requests dropped)."""
        heap = self.heap
        while heap and (heap[0][2] != self.epoch[heap[0][1]] or heap[0][1] not in self.decoding):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def generated(self, i: int) -> int:
        if i not in self.decoding:
            return self.gen[i]
        return min(self.gen[i] + int(self.G - self.g0[i] + self.eps), self.O[i])

    # ---- transitions ---------------------------------------------------------------------------------------
    def admit(self) -> int:
        i = self.waiting.popleft()
        self.running[i] = None
        self.prefilling[i] = None
        if self.pc is not None and not self.done[i]:
            h = self.pc.lookup(self.group[i], self.shared[i], self.need[i])
            if h:
                self.done[i] = self.hit[i] = h
                self.kv_pf += h
                self.extra -= h
            if self.cached is not None:
                self.cached[i] = h
        self.res[i] = self.need[i] + self.O[i] - self.gen[i]
        self.reserved += self.res[i]
        return i

    def prefilled(self, i: int, n: int) -> None:
        """A chunk of n tokens of request i ran in the step that just ended (at self.now)."""
        done = self.done[i] + n
        self.done[i] = done
        if self.computed is not None:
            self.computed[i] += n
        if done < self.need[i]:
            self.kv_pf += n
            return
        del self.prefilling[i]
        self.kv_pf -= done - n
        if self.pc is not None and not self.hit[i] and self.group[i] >= 0 and \
                self.pc.insert(self.group[i], self.shared[i], self.now):
            self.hit[i] = self.shared[i]               # its prefix is the cache's now, held once
            self.extra += (self.shared[i] if self.pc.pooled else 0) - self.shared[i]
        gen = self.gen[i] = self.gen[i] + 1
        if self.first[i] < 0:
            self.first[i] = self.now
        if gen >= self.O[i]:
            self._leave(i)
            return
        G = self.G
        self.decoding[i] = None
        self.g0[i] = G
        q = self.q[i] = done + 1 - G
        self.Q += q
        heapq.heappush(self.heap, (G + self.O[i] - gen - self.eps, i, self.epoch[i]))

    def finish_due(self) -> list[int]:
        """Requests whose last token came out of the decode steps run so far; they leave."""
        out = []
        heap = self.heap
        while heap and heap[0][0] <= self.G:
            _, i, ep = heapq.heappop(heap)
            if ep != self.epoch[i] or i not in self.decoding:
                continue
            del self.decoding[i]
            self.Q -= self.q[i]
            self.gen[i] = self.O[i]
            self._leave(i)
            out.append(i)
        return out

    def _unpin(self, i: int) -> None:
        if self.hit[i]:
            self.pc.release(self.group[i], self.now)
            self.extra += self.hit[i]
            self.hit[i] = 0

    def _leave(self, i: int) -> None:
        if self.hit[i]:
            self._unpin(i)
        if self.sess is not None:       # the turn's whole sequence stays cached for its session's next turn
            added = self.pc.keep(self.sess[i], self.I[i] + self.O[i], self.now)
            self.extra += added if self.pc.pooled else 0
            self.left.append(i)
        del self.running[i]
        self.reserved -= self.res[i]
        self.end[i] = self.now
        self.completed += 1

    def preempt(self, i: int) -> None:
        """Recompute: drop i's KV; it goes back to the head of the queue to prefill prompt + generated tokens."""
        g = self.generated(i)
        if i in self.decoding:
            del self.decoding[i]
            self.Q -= self.q[i]
        if i in self.prefilling:
            del self.prefilling[i]
            self.kv_pf -= self.done[i]
        if self.hit[i]:
            self._unpin(i)
        del self.running[i]
        self.reserved -= self.res[i]
        self.gen[i] = g
        self.need[i] = self.I[i] + g
        self.done[i] = 0
        self.epoch[i] += 1
        self.waiting.appendleft(i)
        self.preemptions += 1
