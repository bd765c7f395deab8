"""Agent sessions in the simulator (issue 38 item 1): multi-turn sessions whose every prompt carries the session's
history, with a tool-call / think gap between turns.

A session runs `turns` turns. Turn k sends the session's history H_k (every earlier turn's prompt and output:
H_0 = 0, H_(k+1) = H_k + N_k + O_k, N_k new tokens drawn from input_len, O_k output tokens from output_len) plus its
N_k new tokens, and generates O_k. The history is the prefix of the session's own group in the prefix store
(prefix_store.py, its capacity and eviction as for shared prefixes): when turn k completes, the engine keeps its whole
sequence cached (vLLM's and SGLang's prefix caches keep a finished request's blocks until evicted), so turn k + 1
finds H_(k+1) cached and prefills its N_(k+1) new tokens, attending and reading the cached ones (step_cost.py prices
them); an evicted history is recomputed whole, and a kept one is found in whole KV blocks (prefix_store.py: up to a
block less one token of each history is prefilled again). Left out: the last sampled token (never fed back, so
never in the KV).

Who sends when:
- closed loop: `concurrency` users run sessions back to back: a turn's completion sends the session's next turn a
  tool gap later, and its last turn's completion starts the user's next session at once, with an empty history;
- open loop: sessions start at `arrival_rate` sessions/s (Poisson or gamma gaps, workload.py), each later turn a tool
  gap after the previous one completes.
Each tool gap is drawn exponential with mean tool_gap_s (seeded, workload.Workload.gaps), not a constant: users whose
gaps are all equal fall into step (a busy stretch slows every turn in it alike, so its users come back from their tools
together) and the replica swings between bursts and lulls. Measured with 64 users, 4 turns of 1,024 new and 128 out,
10 s gaps, against the closed form (steady_state.closed_loop at the mean turns in flight, users at random phases:
what `agents` assumes; tests/test_simulate_sessions.py): constant gaps ran 19 to 64 turns at once (10th and 90th
percentiles) for throughput 0.77x, TPOT 2.3x and TTFT 23x; exponential gaps 1.03x, 1.08x and 1.23x (the TTFT the
wait for the step in progress a returning turn finds, which the closed form leaves out).
Real tool times vary over orders of magnitude, from a file read to a test run. The mean is what the closed form and
`agents` use (S = C (T + G) / T holds for any law of G).
Requests are numbered session by session (request s x turns + k is session s's turn k); the last session is shorter
when the requests are not a whole number of sessions.
"""
from __future__ import annotations

import heapq

import numpy as np

from tokenmath.analyses.serving.simulation.result import percentiles

BY_TURN_MAX = 64            # turns per session up to which the answer lists each turn's means (a row per turn)


def session_prompts(new: np.ndarray, out: np.ndarray, turns: int):
    """Per request (numbered session by session): (whole prompt tokens H_k + N_k, history H_k, prefix group: the
    session for turns k >= 1 and -1 for first turns (nothing to find), session index)."""
    n = int(new.size)
    idx = np.arange(n, dtype=np.int64)
    session = idx // turns
    grown = np.cumsum(new + out) - (new + out)           # every earlier request's prompt and output, run by run
    history = grown - grown[session * turns]             # ... counted from the session's first turn
    group = np.where(idx % turns > 0, session, -1).astype(np.int64)
    return history + new, history, group, session


class Sessions:
    """Which request a completion sends next, and when. gaps: the tool gap after each request, seconds
    (workload.Workload.gaps); gap_s their mean. starts: each session's first send in seconds (open loop), None for a
    closed loop (a user starts the next session when its last one ends)."""

    def __init__(self, n: int, turns: int, gap_s: float, gaps, starts=None):
        self.n, self.turns, self.gap = int(n), int(turns), float(gap_s)
        self.gaps = [float(x) for x in gaps]
        self.count = -(-self.n // self.turns)           # sessions, the last one possibly shorter
        self.closed = starts is None
        self.started = 0
        self.due: list[tuple[float, int]] = []           # (send time s, request), a heap
        if starts is not None:                          # sorted times: already a heap
            self.due = [(float(t), s * self.turns) for s, t in enumerate(starts)]
            self.started = self.count

    def start(self) -> int | None:
        """The first turn of the next session not yet started (closed loop); None when all have started."""
        if self.started >= self.count:
            return None
        self.started += 1
        return (self.started - 1) * self.turns

    def done(self, i: int, now: float):
        """Request i completed at `now`: (send time, request) of what its user sends next, or None."""
        j = i + 1
        if j % self.turns and j < self.n:
            return now + self.gaps[i], j
        if self.closed:
            j = self.start()
            if j is not None:
                return now, j
        return None

    def send_due(self, now: float, arrival, waiting) -> float:
        """Queue every send due by `now` (its arrival the time it was sent); the next send's time (inf: none)."""
        due = self.due
        while due and due[0][0] <= now:
            t, j = heapq.heappop(due)
            arrival[j] = t
            waiting.append(j)
        return due[0][0] if due else float("inf")

    def completed(self, left: list, now: float, arrival, waiting) -> None:
        """The requests in `left` completed at `now`: what each sends next is queued now (no gap) or due later."""
        for i in left:
            nxt = self.done(i, now)
            if nxt is None:
                continue
            t, j = nxt
            if t <= now:
                arrival[j] = now
                waiting.append(j)
            else:
                heapq.heappush(self.due, (t, j))
        left.clear()

    def to_dict(self) -> dict:
        return {"turns": self.turns, "tool_gap_s": self.gap, "sessions": self.count}


def session_summary(turns: int, gap_s: float, gaps, arrival, first, end, inp, history, cached, computed) -> dict:
    """What the sessions did: their wall times (first turn's send to last token, tool gaps included), the tool time
    drawn per session, and per turn the prompt, history, cached and computed tokens (means, and by turn position up
    to BY_TURN_MAX turns)."""
    n = arrival.size
    whole = n // turns                                   # sessions with every turn
    starts = np.arange(whole) * turns
    wall = end[starts + turns - 1] - arrival[starts] if whole else np.zeros(0)
    tool = np.asarray(gaps, float)[:whole * turns].reshape(whole, turns)[:, :-1].sum(axis=1) if whole else wall
    inp, history, cached, computed = (np.asarray(x, float) for x in (inp, history, cached, computed))
    d = {"turns": turns, "tool_gap_s": gap_s, "sessions_served": -(-n // turns), "whole_sessions": whole,
         "session_s": percentiles(wall).to_dict(),
         "tool_time_per_session_s": float(tool.mean()) if whole else None,
         "prompt_tokens_per_turn": float(inp.mean()), "history_tokens_per_turn": float(history.mean()),
         "cached_tokens_per_turn": float(cached.mean()), "computed_tokens_per_turn": float(computed.mean()),
         # the hit rate an unbounded cache gives: every history found (prefix_cache.hit_rate_tokens: what was found)
         "history_share_of_prompt_tokens": float(history.sum() / max(inp.sum(), 1.0))}
    if turns <= BY_TURN_MAX:
        k = np.arange(n) % turns
        rows = []
        for t in range(min(turns, n)):
            m = k == t
            rows.append({"turn": t + 1, "requests": int(m.sum()), "prompt_tokens": float(inp[m].mean()),
                         "history_tokens": float(history[m].mean()), "cached_tokens": float(cached[m].mean()),
                         "computed_tokens": float(computed[m].mean()),
                         "ttft_mean_s": float((first[m] - arrival[m]).mean()),
                         "e2e_mean_s": float((end[m] - arrival[m]).mean())})
        d["by_turn"] = rows
    return d
