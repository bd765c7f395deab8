"""Scheduler policies: which tokens the next step runs. A small registry keyed by the engine profile's id (a
user's engine file falls back on its fields: mixed_batches -> the token-budget policy, else prefill-first).

Each policy answers two questions for the loop (loop.py), which knows nothing else about engines:
  schedule(st) -> (chunks, with_decodes): the prefill chunks [(request, tokens)] of the next step, and whether the
                  running decodes share it; it may admit from the queue and preempt (state.State's transitions);
  admits_arrival(st) -> whether a request arriving now would be scheduled at the next step (else the loop need not
                  stop a run of decode steps at arrivals).
Limits come from the profile (per attention group, multiplied by the groups by the caller): `budget` tokens per
step, `max_running` sequences, `chunked` prefill. Sources: ../shared/reference/engines.md (vLLM V1 scheduler.py
`schedule`, SGLang scheduler.py `get_next_batch_to_run`, TensorRT-LLM GUARANTEED_NO_EVICT).
"""
from __future__ import annotations


class TokenBudget:
    """vLLM V1: one token budget per step and no phases. Running requests first (every decode gets its token,
    partial prefills continue), then the queue in FCFS order while budget, max_running and free KV allow; a
    prompt longer than the budget left is chunked. When KV runs out for the running requests, the last admitted
    is preempted by recompute (blocks freed, back to the queue's head), and nothing is admitted in that step."""
    name = "token-budget"
    describe = "one token budget per step, running first, chunked prefill mixed with decodes, preempt by recompute"

    def __init__(self, budget: int, max_running: int, chunked: bool = True):
        self.budget = int(budget)
        self.max_running = int(max_running)
        self.chunked = chunked

    def _room(self, st, tokens: float, who: int | None = None) -> bool:
        """Preempt the last admitted until `tokens` more fit (idle cached prefixes go first); False when `who`
        itself had to go."""
        if st.pc is not None:
            st.free_cache(st.kv_used() + tokens - st.cap)
        while st.running and st.kv_used() + tokens > st.cap:
            victim = next(reversed(st.running))
            st.preempt(victim)
            if victim == who:
                return False
        return True

    def admissible(self, st, i: int, tokens: int) -> bool:
        if st.pc is not None:       # its own cached prefix is not evicted to admit it (prefix_store._evict_oldest)
            st.free_cache(st.kv_used() + tokens - st.cap, st.group[i])
        return st.kv_used() + tokens <= st.cap

    def schedule(self, st):
        running, decoding, prefilling = st.running, st.decoding, st.prefilling
        used = st.Q + len(decoding) * (st.G + st.ahead) + st.kv_pf + st.round * len(running) + st.extra   # kv_used()
        if not prefilling and (not st.waiting or len(running) >= self.max_running) and used <= st.cap:
            return (), True                 # nothing to prefill or admit, and the decodes' KV fits
        before = st.preemptions
        if decoding and used > st.cap:
            self._room(st, 0.0)
        budget = self.budget - len(decoding) * (st.ahead + 1)     # a decode verifies k + 1 tokens (vLLM)
        chunks = []
        taken = 0
        if prefilling:
            for i in list(prefilling):
                if budget <= 0:
                    break
                if i not in prefilling:     # preempted to make room for an earlier one
                    continue
                n = min(st.need[i] - st.done[i], budget)
                if not self._room(st, taken + n, who=i):
                    continue
                chunks.append((i, n))
                budget -= n
                taken += n
            if st.preemptions != before:
                return chunks, True
        waiting, cap, chunked, admissible = st.waiting, self.max_running, self.chunked, self.admissible
        while waiting and budget > 0 and len(running) < cap:
            i = waiting[0]
            rest = st.pending(i)
            n = rest if rest < budget else budget
            if n < rest and not chunked and (chunks or rest <= self.budget):
                break           # no chunking: the whole prompt in one step (alone if it exceeds the budget)
            if not admissible(st, i, taken + (n if chunked else rest)):
                break           # FCFS: the head of the queue waits for memory, and so does everyone behind it
            st.admit()
            chunks.append((i, n))
            budget -= n
            taken += n
        return chunks, True

    def admits_arrival(self, st) -> bool:
        return not st.waiting and len(st.running) < self.max_running


class NoEvict(TokenBudget):
    """TensorRT-LLM GUARANTEED_NO_EVICT: a request is admitted only when the KV of its whole prompt and every token
    it may generate is free beside what the running requests have reserved; nothing is ever preempted."""
    name = "guaranteed-no-evict"
    describe = "in-flight batching (mixed steps), admission reserves prompt + output KV, never evicts"

    def admissible(self, st, i: int, tokens: int) -> bool:
        need = st.reserved + st.need[i] + st.O[i] - st.gen[i] + st.round * (len(st.running) + 1)
        if st.pc is not None:
            st.free_cache(need + st.extra - st.cap, st.group[i])
        return need + st.extra <= st.cap


class PrefillFirst:
    """SGLang: a prefill batch runs whenever one can be formed (partial chunked prefill first, then the queue,
    FCFS, up to the chunk budget and while the whole prompt's KV is free); otherwise one decode step of every
    running request. Prefill and decode never share a step (enable_mixed_chunk off). When KV runs out for the
    decodes, the request with the fewest tokens generated (longest prompt on a tie) is retracted (recompute)."""
    name = "prefill-first"
    describe = "prefill steps first, decode steps apart (not mixed), retract by recompute when KV runs out"

    def __init__(self, budget: int, max_running: int, chunked: bool = True):
        self.budget = int(budget)
        self.max_running = int(max_running)
        self.chunked = chunked

    def schedule(self, st):
        if not st.prefilling and (not st.waiting or len(st.running) >= self.max_running) and \
                st.Q + len(st.decoding) * (st.G + st.ahead) + st.kv_pf + st.round * len(st.running) + st.extra \
                <= st.cap:
            return (), True
        budget = self.budget
        chunks = []
        free = st.cap - st.kv_used()
        for i in st.prefilling:
            n = min(st.need[i] - st.done[i], budget)
            free -= st.need[i] - st.done[i]       # the rest of its prompt was counted when it was admitted
            if n > 0:
                chunks.append((i, n))
                budget -= n
        while st.waiting and budget > 0 and len(st.running) < self.max_running:
            i = st.waiting[0]
            rest = st.pending(i)
            if rest > free and st.pc is not None:
                free += st.free_cache(rest - free, st.group[i])
            if rest > free or (not self.chunked and rest > budget and chunks):
                break
            st.admit()
            n = min(rest, budget) if self.chunked else rest
            chunks.append((i, n))
            budget -= n
            free -= rest
        if chunks:
            return chunks, False
        if st.pc is not None:
            st.free_cache(st.kv_used() - st.cap)
        while len(st.decoding) > 1 and st.kv_used() > st.cap:
            victim = min(st.decoding, key=lambda j: (st.generated(j), -st.I[j]))
            st.preempt(victim)
        return chunks, True

    def admits_arrival(self, st) -> bool:
        return not st.waiting and len(st.running) < self.max_running


POLICIES = {"vllm": TokenBudget, "llama.cpp": TokenBudget, "tensorrt-llm": NoEvict, "sglang": PrefillFirst,
            "mlx": PrefillFirst}


def policy_for(profile, budget: int, max_running: int):
    """The scheduler of an engine profile (specs.serving_engines.EngineProfile) with these limits."""
    cls = POLICIES.get(profile.id) or (TokenBudget if profile.mixed_batches else PrefillFirst)
    return cls(budget, max_running, chunked=profile.chunked_prefill)
