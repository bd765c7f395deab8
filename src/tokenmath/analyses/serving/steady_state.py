"""Closed-loop steady state in closed form: C users, each sending its next request when the last completes, served
by one replica of an engine (the same replica, policy limits and step costs as the simulator; simulation/).

At steady state the replica runs C_run = min(C, max_running, C_kv) requests (C_kv: the KV cache over the mean
tokens a running request holds, c + half a block, c = the mean keys a decode attends,
E[I] + (E[O^2] - E[O]) / (2 (E[O] - 1)); TensorRT-LLM's no-evict reserves E[I] + E[O] each); the rest queue.
Completions are spread out (users desynchronize), so the prompts admitted at a step boundary are Poisson with mean
r, the admissions per step; a step with m prompts costs tau(m) (the engine's step at that composition, averaged
over the whole tokens the m prompts hold: prompt_totals, since a kernel model prices a step as a staircase in its
tokens), and every average is a Poisson sum over m (the m-th term size-biased where a request asks "the step I am
in").

- token budget, mixed steps (vLLM; TensorRT-LLM without chunks): a request lives one prefill step plus E[O] - 1
  decode steps, so r = C_run / E[O] and n_d = C_run - r decodes share each step; the prompts fit while
  n_d + r E[I] <= budget. Beyond, every step is full: r = budget / (E[I] + E[O] - 1), and a prompt waits
  C_run / r - (E[O] - 1) steps for its first token.
  mean step = sum_m P(m) tau(C_run - m decodes, m prompts); TTFT = sum_m P(m-1) tau(m) (the request's own step);
  TPOT = the steps' mean weighted by the decodes in them.
- prefill first, not mixed (SGLang, MLX): every decode step holds all C_run; r = C_run / (E[O] - 1) complete per
  decode step, and after a decode step with m >= 1 completions one prefill step of the m prompts runs before the
  next decode step: cycle = tau_d + sum_{m>=1} P(m) tau_p(m); TPOT = cycle; TTFT = sum_m P(m-1) tau_p(m).
Throughput = r E[O] output tokens per (mean step or cycle); a queued user waits (C - C_run) / admission rate more.
Speculative decoding (a draft, k, acceptance a): a decode step gains A = 1 + sum_i prod_(j<=i) a_j tokens per
sequence (engine/speculative.py: (1 - a^(k+1)) / (1 - a) for a separate draft, Leviathan et al. 2023, eq. 1; the
MTP head's rate falls with the position), so a request decodes in D = E[ceil((O - 1) / A)] steps instead of
E[O] - 1, and each decode takes k + 1 tokens of the step's budget; the step is the simulator's own (step_cost.py:
verification pass + the draft's k steps); TPOT = step x D / (E[O] - 1); the mean keys of a decode step are
E[I] + E[R^2] / (2 E[R]) + (1 - A) / 2 with R = O - 1 (A = 1: the line above), and each running decode holds k
look-ahead slots.
Attention sharded over the batch (attention_sharding batch / dp): the replica's KV and step costs follow the layout
(replica.py, step_cost.py); the formulas above are unchanged.
The simulator agrees within 5% on throughput, TPOT and TTFT (tests/test_steady_state.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from tokenmath.specs.serving_engines import DEFAULT_ENGINE   # the one default engine (vLLM)
from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg
from tokenmath.mapping.layout import attention_name, with_attention
from tokenmath.analyses.setup import setup
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.scheduler import PrefillFirst, NoEvict
from tokenmath.analyses.serving.simulation.step_geometry import chunk_geometry
from tokenmath.analyses.serving.simulation.workload import Lengths, parse_lengths
from tokenmath.analyses.serving.speculative import resolve_draft



@dataclass(frozen=True)
class SteadyPoint:
    concurrency: int
    running: float               # requests the replica runs at once
    queued: float                # users waiting for a slot
    limit: str                   # what caps running: "users", "max_running", "kv"
    regime: str                  # "decode" (prompts fit in the steps) or "budget" (every step full of prefill)
    admissions_per_step: float
    decode_seqs: float           # decodes per step (mean)
    step_s: float                # mean step (prefill-first: a decode step and the prefills after it)
    output_tokens_per_s: float
    total_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    chips: int
    held_tokens: float = 0.0     # KV tokens a running request holds on average (the `per_req` of C_kv)
    kv_tokens: float = 0.0       # the replica's KV pool, tokens

    @property
    def output_tokens_per_s_per_chip(self) -> float:
        return self.output_tokens_per_s / self.chips

    @property
    def output_tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s > 0 else math.inf

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("concurrency", "limit", "regime", "chips")}
        for k in ("running", "queued", "admissions_per_step", "decode_seqs", "step_s", "output_tokens_per_s",
                  "output_tokens_per_s_per_chip", "output_tokens_per_s_per_user", "total_tokens_per_s", "ttft_s",
                  "tpot_s", "e2e_s"):
            d[k] = finite(getattr(self, k))
        return d


@dataclass(frozen=True)
class SteadyState:
    model: str
    hardware: str
    chips: int
    layout: dict
    engine: dict
    policy: str
    input: Lengths
    output: Lengths
    points: tuple[SteadyPoint, ...]

    def to_dict(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "chips": self.chips, **self.layout,
                "engine": self.engine, "policy": self.policy, "input": self.input.to_dict(),
                "output": self.output.to_dict(), "points": [p.to_dict() for p in self.points]}


LOG_TAIL = 41.5              # m whose P(m) is below 1e-18 of the mode's are left out: nothing a double can add


def _poisson(r: float, most: float) -> tuple[np.ndarray, np.ndarray]:
    """(m, P(m)) for m = lo..enough (the tail beyond holds < 1e-9), at most `most` (renormalized); lo: the first m
    whose P(m) is within 1e-18 of the mode's (at r = 4,000 admissions a step, m = 0..3,400 held P < 1e-30 and cost
    the closed form a quadratic share of its time: an agents search with two-token turns took 72 s; issue 40)."""
    top = max(min(int(r + 10 * math.sqrt(r) + 12), math.ceil(most)), 1)
    m = np.arange(top + 1)
    logp = m * math.log(r) - r - np.array([math.lgamma(k + 1) for k in m]) if r > 0 else np.where(m == 0, 0.0, -np.inf)
    lo = int(np.argmax(logp >= logp.max() - LOG_TAIL))
    m, p = m[lo:], np.exp(logp[lo:])
    return m, p / p.sum()


def _prompt_terms(i1: float, i2: float, chunk: float) -> tuple[float, float, float]:
    """Per prompt of mean length i1 (mean square i2) prefilled in chunks of `chunk` tokens: (causal pairs, cached
    tokens read by its later chunks, chunks)."""
    pairs = (i2 + i1) / 2
    j = max(math.ceil(i1 / max(chunk, 1.0)), 1)
    read = chunk * j * (j - 1) / 2 if j > 1 else 0.0
    return pairs, read, float(j)


POINTS = 64                  # equal-probability points of a step's prompt tokens (prompt_totals)


def prompt_totals(inp: Lengths, m: float, points: int = POINTS) -> np.ndarray:
    """Whole prompt tokens of m prompts admitted together, as `points` equally likely totals (the midpoints of
    equal-probability bins; m = 1: the length law itself, m >= 2: the normal law of the sum, mean m E[I], variance
    m Var[I]), their mean m E[I]. Why not the mean alone: under a shape-aware kernel model a prefill step is a
    staircase in its tokens (GEMM rows padded to tiles, engine/kernels.py), so the mean prompt (1,024 tokens: 8 whole
    tiles of 128) is cheaper than the mean step over prompts of 512-1,536 (E[ceil(I / 128)] x 128 = I + 64 on
    average): Jensen's gap, 6-15% of the TTFT at one user."""
    i1, i2 = inp.moments()
    q = (np.arange(points) + 0.5) / points
    if m <= 0:
        return np.zeros(1)
    if inp.kind == "fixed" or i2 - i1 * i1 <= 1e-9:
        return np.array([m * i1])
    if m == 1 and inp.kind == "uniform":
        x = inp.a + q * (inp.b - inp.a + 1) - 0.5
    else:
        z = np.array([NormalDist().inv_cdf(v) for v in q])
        if m == 1:               # lognormal (median a, sigma b)
            x = inp.a * np.exp(inp.b * z)
        else:
            x = m * i1 + math.sqrt(m * (i2 - i1 * i1)) * z
        x = np.maximum(x, m) * (m * i1 / np.mean(np.maximum(x, m)))     # the midpoints keep the mean: m E[I]
    return np.maximum(np.rint(x), 1.0)


def decode_steps(out: Lengths, step_tokens: float) -> float:
    """Mean decode steps of a request: E[ceil((O - 1) / A)] for A tokens a step (E[O] - 1 at A = 1); a lognormal's
    ceil is taken as + 1/2 on average."""
    o1 = out.moments()[0]
    if step_tokens == 1:
        return max(o1 - 1.0, 0.0)
    if out.kind == "lognormal":
        return max(o1 - 1.0, 0.0) / step_tokens + 0.5
    v = np.arange(int(out.a), int(out.b) + 1, dtype=float) if out.kind == "uniform" else np.array([out.a], float)
    return float(np.mean(np.ceil(np.maximum(v - 1.0, 0.0) / step_tokens - 1e-9)))


# TensorRT-LLM tech blog 10 ("ADP Balance Strategy", 8 x GB200, DeepSeek-V3, DEP8): a group ready for a prompt waits
# up to timeout_iters = 50 steps for every other group to have one (the blog's setting)
ADP_TIMEOUT_STEPS = 50


def balance_wait_steps(cost, r: float) -> float:
    """Steps a prompt waits under a balancing scheduler (step_cost.StepCost.balanced) for the other coupled
    attention groups to have one each: prompts reach one coupled set at r / replicas per step, so a set of `coupled`
    gathers in coupled / rate steps and a prompt waits (coupled - 1) / (2 rate) on average, at most the timeout."""
    if not getattr(cost, "balanced", False) or cost.coupled <= 1 or r <= 0:
        return 0.0
    rate = r / max(cost.replicas, 1)
    return min((cost.coupled - 1) / (2.0 * rate), ADP_TIMEOUT_STEPS)


def closed_loop(rep, cost, concurrency: int, inp: Lengths, out: Lengths, cached: float = 0.0,
                sends_mid_step: bool = False) -> SteadyPoint:
    """The steady state of `concurrency` users on replica `rep` (simulation.replica) with step costs `cost`.
    cached: tokens of every prompt already in the KV cache before it (prefix caching: an agent's earlier turns),
    beyond the `inp` tokens it computes: its decodes attend them, it holds them, and its prefill chunks read them
    and attend to them (engine/prefix_cache.py's model: new tokens x cached pairs, one read per chunk; sliding layers
    within their window, step_geometry.chunk_geometry); the token budget counts the computed tokens only.
    sends_mid_step: a user sends at a random time, not when its last request completes (an agent back from a tool
    call): its prompt first waits out the step in progress, E[step^2] / (2 E[step]) over the steps (the residual
    of a renewal process), added to TTFT. Measured on simulated agent sessions (tests/test_simulate_sessions.py):
    without it the closed form's TTFT was 1.36x short."""
    C = int(concurrency)
    c0 = float(cached)
    i1, i2 = inp.moments()
    o1, o2 = out.moments()
    dec = max(o1 - 1.0, 0.0)                    # tokens of a request that decode steps generate
    A, ahead = 1, 0                             # tokens a decode step gains per sequence; look-ahead slots
    if rep.draft is not None:
        A, ahead = rep.draft.spec.tokens_per_step, int(rep.draft.spec.k)
    k1 = ahead + 1                              # tokens of the budget each decode takes
    ds = decode_steps(out, A)                   # decode steps of a request
    per_token = ds / dec if dec > 1e-9 else 1.0        # TPOT = step x per_token
    keys = i1 + c0 + ((o2 - o1) / (2 * dec) + (1 - A) / 2 if dec > 1e-9 else 0.0)
    policy = type(rep.policy())
    per_req = (i1 + c0 + o1 if policy is NoEvict else keys + ahead) + (rep.block_tokens - 1) / 2
    c_kv = rep.kv_tokens / per_req
    c_run = float(min(C, rep.max_running, c_kv))
    limit = "users" if c_run == C else ("max_running" if c_run == rep.max_running else "kv")
    B = float(rep.budget)
    chips = int(rep.su.layout.chips)

    def tau(n_d, m, chunk=None, count=None):
        """A step of n_d decodes and m prompts' worth of prefill (chunk: tokens of prefill when capped; count: the
        prompts they belong to, when known: each is prefilled whole on one attention group, step_cost.py)."""
        t_p = m * i1 if chunk is None else chunk
        if t_p <= 0 and n_d <= 0:
            return 0.0
        pairs, read, j = _prompt_terms(i1, i2, max(B - n_d, 1.0))
        frac = t_p / i1 if i1 else 0.0
        chunks = (frac if count is None else count) * j if t_p > 0 else 0.0
        pairs_sl, read_sl = pairs, read
        if c0 > 0:                  # the cached prefix: attended by every new token, read by every chunk
            win = int(getattr(cost, "window", 0) or 0)
            pairs_sl = chunk_geometry(c0, i1, win)[1] if win else pairs + i1 * c0
            read_sl = read + j * (min(c0, win) if win else c0)
            pairs, read = pairs + i1 * c0, read + j * c0
        return cost.step_s(n_d, n_d * keys, t_p, chunks, frac * pairs, frac * pairs_sl, frac * read, frac * read_sl)

    def tau_m(n_d, m, room=math.inf):
        """tau's mean over the whole prompt tokens of m prompts (prompt_totals), at most `room` of them this step
        (the prompts it reaches: ceil(m room / total))."""
        if not m:
            return tau(n_d, 0)
        return float(np.mean([tau(n_d, 0, chunk=min(x, room),
                                  count=float(m if x <= room else max(math.ceil(m * room / x), 1)))
                              for x in prompt_totals(inp, m)]))

    if policy is PrefillFirst:
        r = c_run / ds if ds > 1e-9 else c_run
        m, p = _poisson(r, c_run)
        steps = np.maximum(np.ceil(m * i1 / B), 1.0)
        # the m prompts' steps: k = ceil(T / B) steps of T / k tokens, over the whole totals T (prompt_totals)
        tp = np.array([np.mean([max(math.ceil(x / B), 1) * tau(0, 0, chunk=x / max(math.ceil(x / B), 1))
                                for x in prompt_totals(inp, mm)]) if mm else 0.0 for mm in m])
        # the j-th of m prompts has its first token after ceil((j + 1) i1 / B) of the k prefill steps
        own = np.array([np.mean(np.ceil(np.arange(1, mm + 1) * i1 / B)) / k if mm else 0.0 for mm, k in zip(m, steps)])
        td = tau(c_run, 0) if ds > 1e-9 else 0.0
        cycle = td + float(np.sum(p * tp))
        ttft = float(np.sum(p[:-1] * (tp * own)[1:]))
        tpot, n_d, regime = cycle * per_token, c_run, "decode"
        resid = cycle / 2.0           # a send mid-cycle waits on average half of it
    else:
        def waits(r):
            """(decodes per step, prefill tokens a step holds at most, P(m), steps a prompt waits beyond its own)
            at r admissions per step (the cheap part of `at`: the search for r needs only this)."""
            n_d = r * ds
            cap = B - n_d * k1
            if policy is NoEvict and i1 <= cap:
                cap = math.floor(cap / i1) * i1            # whole prompts only
            m, p = _poisson(r, c_run)
            mu = r * i1
            backlog = r * i2 / (2 * (cap - mu)) if cap > mu else math.inf     # Kingman, tokens at a boundary
            extra = 0.0
            if m.size > 1:            # the request and mm others arrive at one boundary: the j-th of them (1..mm + 1)
                ms = m[:-1]           # waits ceil((backlog + j i1) / cap) - 1 steps; their mean by running sums
                steps = np.maximum(np.ceil((backlog + np.arange(1, int(ms[-1]) + 2) * i1) / cap) - 1, 0.0)
                extra = float(np.sum(p[:-1] * np.cumsum(steps)[ms] / (ms + 1)))
            return n_d, cap, m, p, extra

        def at(r):
            """(mean step, TTFT, TPOT, decodes per step, steps to the first token) at r admissions per step."""
            n_d, cap, m, p, extra = waits(r)
            nd = np.maximum(n_d + r - m, 0.0)              # the prompts admitted this step are not decoding yet
            room = np.maximum(B - nd * k1, 1.0)
            t = np.array([tau_m(a, b, c) for a, b, c in zip(nd, m, room)])
            spill = float(np.sum(p * np.maximum(m * i1 - room, 0.0)))
            full = tau(n_d, 0, chunk=cap)
            kappa = (full - tau(n_d, 0, chunk=cap / 2)) / (cap / 2)
            step = float(np.sum(p * t)) + spill * kappa
            w = p * nd
            tpot = (float(np.sum(w * t) / np.sum(w)) if np.sum(w) > 0 else step) + spill * kappa
            resid = float(np.sum(p * t * t)) / (2.0 * float(np.sum(p * t))) if np.sum(p * t) > 0 else 0.0
            return (step, float(np.sum(p[:-1] * t[1:])) + extra * full, tpot * per_token, float(np.sum(w)),
                    1.0 + extra, resid)

        hi = min(c_run / max(o1 if A == 1 else 1.0 + ds, 1.0), B / max(i1 + ds * k1, 1.0))
        lo = 0.0
        if hi * (1.0 + waits(hi)[4] + ds) > c_run:         # prompts wait: solve r (s_p(r) + D) = C_run
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if mid * (1.0 + waits(mid)[4] + ds) < c_run else (lo, mid)
        r = hi
        cycle, ttft, tpot, n_d, s_p, resid = at(r)
        regime = "decode" if s_p < 1.5 else "budget"
    ttft += balance_wait_steps(cost, r) * cycle
    if sends_mid_step:
        ttft += resid
    rate = r / cycle if cycle > 0 else 0.0                     # admissions (= completions) per second
    wait = (C - c_run) / rate if rate > 0 and C > c_run else 0.0
    out_tps = r * o1 / cycle if cycle > 0 else 0.0
    return SteadyPoint(C, c_run, C - c_run, limit, regime, r, n_d, cycle, out_tps, r * (i1 + o1) / cycle,
                       ttft + wait, tpot, ttft + wait + dec * tpot, chips, per_req, float(rep.kv_tokens))


def steady_state(model="llama-3.1-8b", hardware="h100-sxm", *, concurrency=64, chips=None, tp=None, pp=None,
                 ep=None, dp=None, engine=DEFAULT_ENGINE, input_len=1024, output_len=256, weight_dtype=None,
                 kv_dtype=None, efficiency=None, speculation=None, attention_sharding=None, **knobs) -> SteadyState:
    """Closed-loop steady state at one concurrency or a list of them (each an integer >= 1). speculation: an
    analyses.serving.speculative.Speculation (every decode verifies k + 1 tokens after the draft's k steps).
    attention_sharding: heads (None), batch or dp inside the TP group (mapping/layout.py)."""
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine if engine is not None else DEFAULT_ENGINE, **knobs)
    if attention_sharding is not None:
        su = replace(su, layout=with_attention(su.model, su.layout, attention_sharding))
    cs = [concurrency] if np.ndim(concurrency) == 0 else list(concurrency)
    if not cs:
        raise InputError("concurrency", "no concurrency given", "an integer >= 1 or a list of them")
    cs = [int_arg(c, "concurrency", 1, 1_000_000) for c in cs]
    inp, out = parse_lengths(input_len, "input_len"), parse_lengths(output_len, "output_len")
    rep = make_replica(su, resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype))
    most = min(inp.max + out.max, rep.kv_tokens)
    cost = rep.cost(int(most), max(cs) + min(rep.budget, 1 << 20))     # any step up to the budget
    lay = su.layout
    return SteadyState(su.model.id, su.hardware.id, int(lay.chips),
                       {"tp": int(lay.tp), "pp": int(lay.pp), "ep": int(lay.ep), "dp": int(lay.dp),
                        **({"attention_sharding": attention_name(lay)} if lay.attn_by_batch else {})},
                       rep.engine.describe(), type(rep.policy()).name, inp, out,
                       tuple(closed_loop(rep, cost, c, inp, out) for c in cs))
