"""The core loop: steps of one replica, from the first arrival to the last completion.

It knows nothing about a particular engine: a policy (scheduler.py) says what the next step holds, a StepCost
(step_cost.py) says how long it takes, the State (state.py) keeps the requests. Each turn of the loop is either
- one step holding prefill chunks (mixed with the running decodes, or alone), or
- a run of k decode-only steps, when the policy has nothing to prefill: the batch is the same n_d sequences until
  the next event (a completion, an arrival the policy would admit, the KV cache filling), and the steps differ
  only by their growing contexts (each step attends n_d more keys; n_d E with speculation, E the expected tokens a
  verification step gains: state.py), so the run is priced in closed form from its
  first step time t0 and its slope s: k t0 + s k (k-1) / 2 (exact while the step time is linear in the keys);
- or idle until the next arrival.
A run costs the same Python work whatever its length, so a simulation costs ~ the number of events (arrivals,
completions, prefill steps), not the number of steps.

A closed loop's users ramp in over one request's lifetime (workload.Workload.phases): user u sends its first
request at the end of decode step floor(phases[u] x cycle_steps), phases uniform on [0, 1) (seeded), and every
later one when its last completes. Why:
- all users sending at t = 0 is a cohort, and with fixed lengths it never breaks up: every user's cycle (its
  prefill step and the same decode steps) is equally long, so the users whose prompts shared a step finish
  together, resend together and share a step again, forever: steps of C prompts between steps of none, and TTFT the
  whole cohort's prefill (DeepSeek-V3 ep=8 at 130 users: 1.04 s, against the 0.12 s of users spread out; issue 34,
  defect 4). Real clients are not one instant (a benchmark's users ramp up; network jitter and stop tokens spread
  them), and the steady state (steady_state.py) assumes users spread over their cycle, the prompts admitted at a
  step Poisson.
- so a warm-up cut alone cannot help: a deterministic simulation has no jitter, the cohort is not a transient that
  ends, and dropping the first requests from the figures would change nothing. The start must be spread.
- over steps, not seconds: a user sends when a request completes, at the end of a step that decodes, so that is
  where the spread users' sends fall at steady state. Sends uniform in time would land more often behind the long
  steps (a mixed step with a prompt lasts ~4 decode steps), clustering users that the fixed cycle then keeps
  together: +25% TTFT for Llama 3.1 70B at 64 users. Uniform over a cycle's decode steps, the prompts sharing a step
  are binomial(C, 1 / cycle) ~ Poisson, what the closed form assumes; a fixed-length cycle keeps that spread.
- with random lengths users desynchronize by themselves: the ramp only replaces the t = 0 burst of the first
  cycle (the steady window, result.steady_window, starts after the C-th completion, past the ramp, and is
  unchanged; whole-run figures count the ramp, a cycle with fewer users at first, where they counted the burst).
Sessions (sessions.Sessions): what a completion sends next, and when, is the session's (its next turn after the tool
gap, or a user's next session); sends due later wait in its heap, so a run of decode steps stops at the next one as
at an open loop's arrival. A closed loop's users ramp in as above, each starting a session; the cycle they spread
over counts a turn's new tokens, not its cached history. Tool gaps (exponential, sessions.py) spread the users
further by themselves: spreading their first sends over a whole session's cycle in time instead moved the steady
figures by under 0.5% (64 users, 4 turns, 10 s mean gaps).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from tokenmath.analyses.serving.simulation.step_geometry import chunk_geometry


@dataclass
class Records:
    """What the loop saw, for result.py: inter-token gaps (seconds, weighted by the decodes that waited them),
    (time, KV tokens held, queue, running) after each turn, and the sums of each kind of step (for the mean
    compositions: steps, seconds, decodes, keys, then prefill tokens, chunks, pairs, sliding pairs, reads, sliding
    reads)."""
    gaps: list = field(default_factory=list)
    gap_weights: list = field(default_factory=list)
    series: list = field(default_factory=list)
    decode: list = field(default_factory=lambda: [0, 0.0, 0.0, 0.0])
    mixed: list = field(default_factory=lambda: [0] + [0.0] * 9)
    prefill_only: list = field(default_factory=lambda: [0] + [0.0] * 9)


def steps_until(delta: float, t0: float, s: float, k_max: int) -> int:
    """Fewest steps (1..k_max) of times t0, t0 + s, t0 + 2 s, ... whose sum reaches delta seconds."""
    if delta <= t0:
        return 1
    if abs(s) < 1e-15 * t0:
        k = math.ceil(delta / t0)
    else:
        b = t0 - s / 2
        k = math.ceil((-b + math.sqrt(max(b * b + 2 * s * delta, 0.0))) / s)
    while k > 1 and (k - 1) * (t0 + s * (k - 2) / 2) >= delta:
        k -= 1
    return max(1, min(k, k_max))


def cycle_steps(st, policy, new_only: bool = False) -> int:
    """Steps one request lives at the mean lengths: its prompt's prefill step(s) (chunks of the token budget) and
    its decode steps ((E[O] - 1) / E, E tokens a step): the cycle a closed loop's users spread their first sends
    over. new_only: a prompt's tokens less its shared prefix (a session's history, found cached)."""
    n = len(st.I)
    mi, mo = (sum(st.I) - (sum(st.shared) if new_only else 0)) / n, sum(st.O) / n
    return max(1, round(math.ceil(mi / max(int(policy.budget), 1)) + (mo - 1) / st.E))


def run(st, policy, cost, arrivals, concurrency: int, max_turns: int, phases=None, sessions=None) -> Records:
    """Simulate until every request completes. arrivals: sorted times (open loop), or None for a closed loop of
    `concurrency` users who send the next request (in index order) when one of theirs completes. phases (closed
    loop): each user's first send as a share of the ramp (sorted, in [0, 1); workload.Workload.phases): user u
    sends at the end of the floor(phases[u] x cycle_steps)-th step that decodes (at t = 0 when 0; when nothing
    runs, at once); None: every user sends at t = 0 (the lock-step start of the module docstring). sessions: a
    sessions.Sessions (arrivals None), which says what each completion sends next (closed and open loops)."""
    n = len(st.I)
    rec = Records()
    sess = sessions
    closed = arrivals is None and (sess is None or sess.closed)
    arr = [] if arrivals is None else list(map(float, arrivals))
    issued = 0
    ramp = deque()          # closed loop: the steps after which the users not yet started send their first request
    if closed:
        users = min(concurrency, n if sess is None else sess.count)
        if phases is None:
            ramp.extend([0] * users)
        else:
            span = cycle_steps(st, policy, new_only=sess is not None)
            ramp.extend(sorted(int(p * span) for p in list(phases)[:users]))
    steps = 0
    window = cost.window
    schedule, admits, step_s, ends = policy.schedule, policy.admits_arrival, cost.step_s, cost.decode_ends
    gap, gap_w, series = rec.gaps.append, rec.gap_weights.append, rec.series.append
    dec, mix, pre = rec.decode, rec.mixed, rec.prefill_only
    decoding, waiting, heap, done, running = st.decoding, st.waiting, st.heap, st.done, st.running
    arrival, prefilled, next_finish = st.arrival, st.prefilled, st.next_finish
    last_dec = 0.0
    E, ahead = st.E, st.ahead                         # speculation: tokens a decode step adds, look-ahead slots
    next_arr = arr[0] if arr else math.inf            # the next arrival's time (inf: none left, or a closed loop)
    for _ in range(max_turns):
        if st.completed >= n:
            return rec
        if sess is not None:                              # sessions: the sends due by now
            next_arr = sess.send_due(st.now, arrival, waiting)
        while next_arr <= st.now:
            arrival[issued] = next_arr
            waiting.append(issued)
            issued += 1
            next_arr = arr[issued] if issued < n else math.inf
        while ramp and ramp[0] <= steps:                  # ramping users whose first send is due
            ramp.popleft()
            j = issued if sess is None else sess.start()
            if j is not None and j < n:
                arrival[j] = st.now
                waiting.append(j)
                issued += 1
        done_before = st.completed
        chunks, with_dec = schedule(st)
        if chunks:                                        # one step with prefill chunks
            n_d = len(decoding) if with_dec else 0
            keys = st.Q + n_d * st.G
            t_p = l_p = pf = ps = rf = rs = 0
            for i, k in chunks:
                prior = done[i]
                if window:
                    a, b, c, e = chunk_geometry(prior, k, window)
                else:
                    a = b = k * prior + k * (k + 1) / 2
                    c = e = prior
                t_p += k
                l_p += 1
                pf += a
                ps += b
                rf += c
                rs += e
            dt = step_s(n_d, keys, t_p, l_p, pf, ps, rf, rs)
            st.now += dt
            if n_d:
                steps += 1
                st.G += E
                gap(st.now - last_dec)
                gap_w(n_d)
                last_dec = st.now
            elif not decoding:
                last_dec = st.now                         # nobody was waiting for a token: gaps start here
            for i, k in chunks:
                prefilled(i, k)
            acc = mix if n_d else pre
            acc[0] += 1
            acc[1] += dt
            acc[2] += n_d
            acc[3] += keys
            acc[4] += t_p
            acc[5] += l_p
            acc[6] += pf
            acc[7] += ps
            acc[8] += rf
            acc[9] += rs
        elif decoding:                                    # a run of decode-only steps until the next event
            n_d = len(decoding)
            keys = st.Q + n_d * st.G
            k = next_finish() - st.G
            if E != 1:                                    # steps until the next finish, E tokens a step
                k = math.ceil(k / E)
            free = st.cap - keys - n_d * ahead - st.kv_pf - st.round * len(running) - st.extra
            room = int(free // (n_d * E)) + 1
            if room < k:
                k = room
            if ramp and ramp[0] - steps < k:            # stop where a ramping user sends
                k = ramp[0] - steps
            if k < 1:
                k = 1
            t0, t1 = ends(n_d, keys, keys + (k - 1) * n_d * E)
            s = (t1 - t0) / (k - 1) if k > 1 else 0.0
            dt = k * (t0 + s * (k - 1) / 2)
            if st.now + dt > next_arr and admits(st):
                k = steps_until(next_arr - st.now, t0, s, k)
                dt = k * (t0 + s * (k - 1) / 2)
            gap(st.now - last_dec + t0)
            gap_w(n_d)
            if k > 1:
                gap((dt - t0) / (k - 1))
                gap_w(n_d * (k - 1))
            st.now += dt
            steps += k
            st.G += k * E
            last_dec = st.now
            dec[0] += k
            dec[1] += dt
            dec[2] += n_d * k
            dec[3] += k * keys + n_d * E * k * (k - 1) / 2
        elif next_arr < math.inf:                         # idle until the next arrival
            st.now = max(st.now, next_arr)
            last_dec = st.now
            continue
        elif ramp:                                        # idle, a ramping user still to start: it sends now
            steps = ramp[0]
            continue
        else:
            raise RuntimeError(f"simulation stalled at t={st.now:.3f} s with {len(waiting)} waiting")
        if heap and heap[0][0] <= st.G:
            st.finish_due()
        if sess is not None:
            if st.left:
                sess.completed(st.left, st.now, arrival, waiting)
        elif closed:
            for _ in range(st.completed - done_before):
                if issued < n:
                    arrival[issued] = st.now
                    waiting.append(issued)
                    issued += 1
        series((st.now, st.Q + len(decoding) * (st.G - E) + st.kv_pf + st.extra, len(waiting), len(running)))
    raise RuntimeError(f"simulation did not finish in {max_turns:,} turns")
