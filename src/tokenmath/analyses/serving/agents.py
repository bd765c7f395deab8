"""Agent sessions on one replica: how many concurrent sessions it keeps at a speed target, and what binds first.

An agent session (stated, every default sourced or labelled an assumption in DEFAULTS) runs turns: each turn sends a
prompt of L tokens of which a share h is its own earlier context, already in the KV cache (c = h L cached, n = L - c
computed), and generates O tokens; then the agent runs a tool for G seconds before its next turn.

At C turns in flight the replica is the continuously batched closed loop of steady_state.closed_loop (C users, each
sending its next prompt when the last completes), with the c cached tokens held, attended and read (its `cached`):
it gives each turn's time T = TTFT + (O - 1) x TPOT, the users' speed 1 / TPOT and the KV a running turn holds. A
session spends T + R (R: reloading its prefix from a host tier, below) of every T + R + G seconds in a turn, so

    sessions S = C x (T + R + G) / (T + R)

and S - C sessions sit between turns, each holding its c-token prefix for its next turn. Where that prefix waits:
- HBM only: in the KV pool beside the running turns: (S - C) c <= pool - C_run x held;
- + host DRAM, + NVMe (data/kv_tiers.toml, per chip): what HBM cannot hold moves down, least recently used first,
  and comes back at the tier's reload bandwidth (per chip, x the replica's chips): a turn whose prefix waits in tier
  k (share s_k = tokens there / idle tokens) first reloads c x kv_bytes over it: R = sum_k s_k c kvb / (bw_k chips),
  and the tier's link carries (C / (T + R)) s_k c kvb per second, at most its bandwidth.
Capacity: the largest C (powers of two, then bisected: every constraint only tightens with C) at which the users
get the target speed, every turn in flight runs (none waits for KV memory or the engine's max_running), the TTFT
(+ R) meets its target when one is given, the idle prefixes fit the tiers and no reload link is over-full. The
constraint that fails first past it is the binding one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.engine.prefix_cache import hit_rate
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.kv_tiers import host_tier_figures
from tokenmath.analyses.serving.by_concurrency import layout_replica
from tokenmath.analyses.serving.simulation.workload import parse_lengths
from tokenmath.analyses.serving.steady_state import closed_loop

# An agent turn's defaults, each with where it comes from
DEFAULTS = {
    "context_len": (27_000, "AA-AgentPerf methodology (artificialanalysis.ai/methodology/agentperf): input sequence "
                            "length ~5K-131K tokens per turn of real coding-agent trajectories, mean ~27K"),
    "output_len": (150, "AA-AgentPerf methodology: output sequence length median ~150 tokens per turn "
                        "(P95 ~2K, DeepSeek V3.2)"),
    "prefix_hit": (0.86, "SemiAnalysis InferenceX agentic traces (cc-traces-weka-no-subagents, Claude Code sessions): "
                         "~85.8% of prompt tokens found by an unbounded prefix cache (SemiAnalysisAI/InferenceX "
                         "issue 1632, from the traces' hash_ids)"),
    "tool_gap_s": (3.0, "ASSUMPTION: no public figure found; AA-AgentPerf simulates the inter-turn tool latency with "
                        "an unpublished CPU baseline. Set --tool-gap-s"),
}
TIER_SETS = ("hbm", "dram", "nvme")          # HBM only; + host DRAM; + host DRAM + NVMe
TIER_NAMES = {"hbm": "HBM only", "dram": "+ host DRAM", "nvme": "+ host DRAM + NVMe"}
MAX_USERS = 1 << 20                           # turns in flight one replica is searched to


@dataclass(frozen=True)
class AgentWorkload:
    context_len: int        # L: prompt tokens of a turn, cached and new
    output_len: int         # O: tokens a turn generates
    prefix_hit: float       # h: the share of L already cached (the session's earlier turns)
    tool_gap_s: float       # G: seconds between a turn's last token and the next turn's prompt

    @property
    def cached(self) -> int:
        """c = h L, leaving at least one token to compute (engine/prefix_cache.cached_tokens' rule)."""
        return int(min(round(self.prefix_hit * self.context_len), self.context_len - 1))

    @property
    def new(self) -> int:
        return self.context_len - self.cached

    def to_dict(self) -> dict:
        return {"context_len": self.context_len, "output_len": self.output_len, "prefix_hit": self.prefix_hit,
                "tool_gap_s": self.tool_gap_s, "cached_tokens": self.cached, "new_tokens": self.new,
                "sources": {k: v[1] for k, v in DEFAULTS.items()}}


def agent_workload(context_len=None, output_len=None, prefix_hit=None, tool_gap_s=None) -> AgentWorkload:
    """The workload with each field checked (None: its default, DEFAULTS)."""
    d = {k: v[0] for k, v in DEFAULTS.items()}
    L = int_arg(d["context_len"] if context_len is None else context_len, "context_len", 2, 10_000_000)
    O = int_arg(d["output_len"] if output_len is None else output_len, "output_len", 2, 1_000_000)
    h = hit_rate(d["prefix_hit"] if prefix_hit is None else prefix_hit, "prefix_hit")
    g = d["tool_gap_s"] if tool_gap_s is None else tool_gap_s
    g = 0.0 if g in (0, 0.0, "0") else pos_float(g, "tool_gap_s", 0.0, 86_400.0)
    return AgentWorkload(L, O, float(h), float(g))


@dataclass(frozen=True)
class Tier:
    id: str
    name: str
    tokens: float               # what it holds for the replica, tokens
    bytes_per_s: float          # reload bandwidth into the replica's chips


def host_tiers(tier_set: str, chips: int, kv_bytes: float) -> list[Tier]:
    """The host tiers of `tier_set` (TIER_SETS) for a replica of `chips` chips (data/kv_tiers.toml, per chip)."""
    if tier_set not in TIER_SETS:
        from tokenmath.base.errors import unknown_name
        raise unknown_name("offload", tier_set, TIER_SETS)
    figs = host_tier_figures()[:TIER_SETS.index(tier_set)]
    return [Tier(f.id, f.name, f.capacity_bytes_per_chip * chips / kv_bytes, f.reload_bw_per_chip * chips)
            for f in figs]


def sessions_at(p, wl: AgentWorkload, tiers: list[Tier], kv_bytes: float) -> dict:
    """The sessions the steady point p (C turns in flight) serves, where their idle prefixes wait, and the reload:
    {sessions, turn_s, reload_s, idle_tokens, fits, tiers: [{id, tokens, share, link_load}]} (module docstring)."""
    C, T, c, G = float(p.concurrency), float(p.e2e_s), float(wl.cached), wl.tool_gap_s
    free = max(p.kv_tokens - p.running * p.held_tokens, 0.0)
    R, S, rows = 0.0, C, []
    for _ in range(4):                  # R depends on where the idle prefixes wait, which depends on S: iterate
        S = C * (T + R + G) / (T + R) if T + R > 0 else C
        idle = max(S - C, 0.0) * c
        left, rows, R_new = max(idle - free, 0.0), [], 0.0
        for t in tiers:
            held = min(left, t.tokens)
            left -= held
            share = held / idle if idle > 0 else 0.0
            R_new += share * c * kv_bytes / t.bytes_per_s
            rows.append({"id": t.id, "tokens": held, "share": share, "bytes_per_s": t.bytes_per_s})
        if abs(R_new - R) <= 1e-6 * max(T, 1e-9):
            R = R_new
            break
        R = R_new
    rate = C / (T + R) if T + R > 0 else 0.0       # turns starting per second
    for r in rows:
        r["link_load"] = rate * r["share"] * c * kv_bytes / r["bytes_per_s"]
    return {"sessions": S, "turn_s": T, "reload_s": R, "idle_tokens": idle, "hbm_free_tokens": free,
            "fits": left <= 1e-9 * max(idle, 1.0), "tiers": rows}


def failing(p, s: dict, target: float, ttft_s: float | None) -> str | None:
    """The first constraint point p (with its sessions s) misses, or None: speed, running, TTFT, KV, reload link."""
    speed = p.output_tokens_per_s_per_user
    if not (speed >= target):
        return "prefill" if p.regime == "budget" else "decode speed"
    if p.queued > 1e-6:
        return "engine max_running" if p.limit == "max_running" else "KV memory (turns in flight)"
    if ttft_s is not None and p.ttft_s + s["reload_s"] > ttft_s:
        return "TTFT"
    if not s["fits"]:
        return "KV memory (idle sessions)"
    for r in s["tiers"]:
        if r["link_load"] > 1.0:
            return f"reload link ({r['id']})"
    return None


class ReplicaSessions:
    """One layout's replica under the agent workload: its closed-loop points (memoized by C) and the capacity for
    each tier set (capacity)."""

    def __init__(self, su, t: tuple, wl: AgentWorkload, draft=None):
        self.wl = wl
        self.inp, self.out = parse_lengths(wl.new, "context_len"), parse_lengths(wl.output_len, "output_len")
        self.name, self.rep, self.cost, self.problem = layout_replica(su, t, self.inp, self.out, 1 << 16, draft,
                                                                      cached=wl.cached)
        self.kv_bytes = float(kv_bytes_per_token(su.model, su.precision.kv.bytes))
        self.chips = int(self.rep.su.layout.chips) if self.rep is not None else int(math.prod(t[:4]))
        self._pts: dict[int, object] = {}

    @property
    def ok(self) -> bool:
        return self.rep is not None

    def point(self, C: int):
        if C not in self._pts:
            # a turn back from its tools arrives mid-step (none without tool time: it follows its last token)
            self._pts[C] = closed_loop(self.rep, self.cost, C, self.inp, self.out, cached=self.wl.cached,
                                       sends_mid_step=self.wl.tool_gap_s > 0)
        return self._pts[C]

    def capacity(self, tier_set: str, target: float, ttft_s: float | None = None) -> dict:
        """The largest C meeting every constraint on this replica with the idle prefixes in `tier_set`, its sessions
        and the constraint that binds (the one C + 1 fails); C = 0 when even one turn in flight fails."""
        tiers = host_tiers(tier_set, self.chips, self.kv_bytes)

        def check(C):
            p = self.point(C)
            s = sessions_at(p, self.wl, tiers, self.kv_bytes)
            return failing(p, s, target, ttft_s), p, s
        why, p, s = check(1)
        if why is not None:
            return {"concurrency": 0, "sessions": 0.0, "binding": why, "point": p, "at": s}
        lo, hi, why_hi = 1, None, None
        while hi is None:
            nxt = lo * 2
            if nxt > MAX_USERS:
                raise InputError("context_len", f"more than {MAX_USERS:,} turns in flight on one replica",
                                 "a longer context or a higher speed target")
            w = check(nxt)[0]
            if w is None:
                lo = nxt
            else:
                hi, why_hi = nxt, w
        while hi - lo > 1:
            mid = (lo + hi) // 2
            w = check(mid)[0]
            lo, hi, why_hi = (mid, hi, why_hi) if w is None else (lo, mid, w)
        _, p, s = check(lo)
        return {"concurrency": lo, "sessions": s["sessions"], "binding": why_hi, "point": p, "at": s}


def capacity_dict(cap: dict, chips: int) -> dict:
    """A capacity as JSON: sessions, turns in flight, the point's speed, TTFT, turn time, reload and tiers."""
    p, s = cap["point"], cap["at"]
    return {"sessions": finite(cap["sessions"]), "sessions_per_chip": finite(cap["sessions"] / chips),
            "concurrency": cap["concurrency"], "binding": cap["binding"],
            "tokens_per_s_per_user": finite(p.output_tokens_per_s_per_user) if cap["concurrency"] else None,
            "ttft_s": finite(p.ttft_s) if cap["concurrency"] else None,
            "tpot_s": finite(p.tpot_s) if cap["concurrency"] else None,
            "turn_s": finite(s["turn_s"]), "reload_s": finite(s["reload_s"]), "running": finite(p.running),
            "kv_held_tokens_per_turn": finite(p.held_tokens), "kv_pool_tokens": finite(p.kv_tokens),
            "idle_prefix_tokens": finite(s["idle_tokens"]), "hbm_free_tokens": finite(s["hbm_free_tokens"]),
            "regime": p.regime, "output_tokens_per_s": finite(p.output_tokens_per_s) if cap["concurrency"] else None,
            "tiers": [{k: finite(v) if isinstance(v, float) else v for k, v in r.items()} for r in s["tiers"]]}
