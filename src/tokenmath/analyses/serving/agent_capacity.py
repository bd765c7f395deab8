"""Agent capacity by system (issue 38, item 4; AA-AgentPerf's question): the most concurrent agent sessions each
catalog system keeps at a target tokens/s per user, per GPU, per kW, per $/hour and per system (one node or rack),
with the constraint that binds, and the offload what-if (idle sessions' prefixes in HBM only, + host DRAM, + NVMe).

Per system: the layouts of one scale-up domain (grid.up_to, mapping/candidates.layouts_for), their dp replicas
folded (by_concurrency.one_replica), ranked by a static bound on the turns in flight per chip (the largest static
batch whose decode step gives the target, at most the static KV limit x (L + O) / L x 1.05, as
by_concurrency.continuous_bound bounds a continuous replica's running requests), the best of each tensor-parallel
degree first (_order); each is traced in that order (agents.ReplicaSessions: the closed loop with the cached prefix),
skipping those whose bound is below the most turns in flight per chip found, at most `layouts` of them; a domain
wider than an 8-GPU node first traces (up to `layouts`) the replicas of at most 8 chips the same way, so a rack never
answers worse than one of its nodes would. The best is the one with the most sessions per chip; the system holds
floor(chips / replica chips) replicas. Power: whole nodes at the system's sourced rating x PUE (specs/systems
.node_power, as fleet counts it), else chip TDP x chips x PUE, and `power` says which.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.specs.serving_engines import DEFAULT_ENGINE
from tokenmath.specs.systems import node_power
from tokenmath.analyses.setup import fmt_layout, system_setup
from tokenmath.analyses.serving.agents import (TIER_NAMES, TIER_SETS, ReplicaSessions, agent_workload,
                                               capacity_dict)
from tokenmath.analyses.serving.by_concurrency import one_replica
from tokenmath.analyses.serving.grid import up_to

DEFAULT_SYSTEMS = ("hgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "mi355x")
MAX_SYSTEMS = 12
LAYOUTS = 10                # replicas traced per level: every layout of an 8-GPU node (9-10) traced by default
MAX_LAYOUTS = 64
NODE_CHIPS = 8              # an HGX / DGX node's GPUs: every scale-up domain is searched at least as one such node
COMM_BOUND = 0.5            # a decode step more than half exposed communication: the interconnect binds


@dataclass(frozen=True)
class AgentCapacity:
    model: str
    workload: dict
    targets: dict
    offload: str
    pue: float
    rows: tuple[dict, ...]
    notes: tuple[str, ...]
    search_s: float

    def to_dict(self) -> dict:
        return {"model": self.model, "workload": self.workload, "targets": self.targets, "offload": self.offload,
                "pue": self.pue, "systems": list(self.rows), "notes": list(self.notes), "search_s": self.search_s}


def systems_arg(systems) -> list[str]:
    """The systems asked for: a list, or a comma-separated string (None: DEFAULT_SYSTEMS)."""
    if systems is None:
        return list(DEFAULT_SYSTEMS)
    out = [s.strip() for s in (systems.split(",") if isinstance(systems, str) else systems) if str(s).strip()]
    if not out:
        raise InputError("systems", "no system given", "catalog systems such as hgx-h100,gb200-nvl72")
    if len(out) > MAX_SYSTEMS:
        raise InputError("systems", f"{len(out)} systems", f"at most {MAX_SYSTEMS}")
    return list(dict.fromkeys(out))


def agents(model="gpt-oss-120b", systems=None, *, min_tokens_per_s_per_user=20.0, ttft_ms=None, context_len=None,
           output_len=None, prefix_hit=None, tool_gap_s=None, offload="hbm", pue=1.0, layouts=LAYOUTS,
           weight_dtype=None, kv_dtype=None, efficiency=None, engine=DEFAULT_ENGINE, **knobs) -> AgentCapacity:
    """The agent-capacity table (module docstring). offload: where idle sessions' prefixes may wait for the headline
    figures (hbm, dram: + host DRAM, nvme: + host DRAM + NVMe); every row also carries all three (what_if)."""
    t0 = time.perf_counter()
    wl = agent_workload(context_len, output_len, prefix_hit, tool_gap_s)
    target = pos_float(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", 0.0, 1e6)
    ttft_s = None if ttft_ms is None else pos_float(ttft_ms, "ttft_ms", 0.0, 1e7) / 1e3
    if offload not in TIER_SETS:
        from tokenmath.base.errors import unknown_name
        raise unknown_name("offload", str(offload), TIER_SETS)
    pue = pos_float(pue, "pue", 0.5, 5.0)
    layouts = int_arg(layouts, "layouts", 1, MAX_LAYOUTS)
    ids = systems_arg(systems)
    rows, model_id = [], str(model)
    for sid in ids:
        su, n = system_setup(model, sid, None, weight_dtype, kv_dtype, efficiency, None,
                             engine if engine is not None else DEFAULT_ENGINE, **knobs)
        model_id = su.model.id
        rows.append(_system_row(su, n, wl, target, ttft_s, offload, pue, layouts))
    notes = [f"an agent turn: {wl.context_len:,}-token prompt, {wl.prefix_hit:g} of it cached from the session's "
             f"earlier turns ({wl.cached:,} tokens held between turns), {wl.new:,} computed, {wl.output_len:,} "
             f"generated, then {wl.tool_gap_s:g} s of tool time (sources: workload.sources)",
             "one replica of the best layout inside one scale-up domain, batching continuously (the engine's closed "
             "loop, steady_state.py, with the cached prefix); replicas fill the system; no disaggregation, no "
             "speculative decoding",
             "host DRAM and NVMe per chip are an 8-GPU DGX/HGX H100-class node's (data/kv_tiers.toml), assumed for "
             "every system's hosts (a GB200 NVL72's Grace memory over NVLink-C2C is larger and faster)"]
    cut = [f"{r['system']} ({r['layouts_untraced_could_win']})" for r in rows if r.get("layouts_untraced_could_win")]
    if cut:
        notes.append(f"search cut at {layouts} layouts a level: replicas whose bound could still beat the best were "
                     f"not traced on {', '.join(cut)} (--layouts up to {MAX_LAYOUTS} traces more)")
    return AgentCapacity(model_id, wl.to_dict(), {"min_tokens_per_s_per_user": target, "ttft_s": ttft_s}, offload,
                         pue, tuple(rows), tuple(notes), time.perf_counter() - t0)


def levels(top: int) -> list[int]:
    """The replica sizes (most chips) searched in turn on a system of `top` chips per scale-up domain: an 8-GPU
    node's replicas first where the domain is wider, then the whole domain's (each level traces up to `layouts`)."""
    return sorted({min(NODE_CHIPS, top), top})


def most_traces(system_ids, layouts: int) -> int:
    """The most replicas `agents` traces for these systems at `layouts` a level: the work one question may do."""
    from tokenmath.specs.systems import get_system
    systems = [get_system(s, None) for s in system_ids]
    return sum(len(levels(min(hw.chips, hw.scaleup_domain))) * int(layouts) for hw in systems)


def _bounds(g, target: float, L: int, O: int) -> np.ndarray:
    """(L,) a static bound on the turns in flight per chip of each layout of grid g (module docstring)."""
    fits = np.asarray(g.fits, bool)
    B = np.asarray(g.batch, float)
    speed_ok = fits & (1.0 / np.asarray(g.step_s, float) >= target)
    b_speed = np.max(np.where(speed_ok, B, 0.0), axis=1)
    b_kv = np.asarray(g.max_batch, float)[:, 0] * (L + O) / L * 1.05
    return np.minimum(b_speed, b_kv) / np.asarray(g.chips, float).reshape(-1)


def _system_row(su, n: int, wl, target, ttft_s, offload, pue, most: int) -> dict:
    hw = su.hardware
    top = min(n, hw.scaleup_domain)
    base = {"system": hw.id, "chip": getattr(hw, "chip", hw.id), "system_chips": n, "domain": hw.scaleup_domain,
            "price_usd_per_chip_hour": hw.price_usd_per_hour, "power": _power(hw, n, pue)}
    try:
        g = up_to(su, top, wl.context_len, wl.output_len)
    except InputError as e:
        return {**base, "fits": False, "why": e.problem, "best": None, "what_if": {}}
    bound = _bounds(g, target, wl.context_len, wl.output_len)
    groups: dict[tuple, float] = {}
    for i, t in enumerate(g.layouts):
        r = one_replica([t])[0]
        groups[r] = max(groups.get(r, 0.0), float(bound[i]))
    traced, best_c, seen = [], 0.0, set()
    for level in levels(top):
        # each level traces at most `most` replicas of up to `level` chips, in _order, past those already traced: a
        # rack is searched at least as an 8-GPU node of its chips would be, so it never answers worse than its node
        # (the static bound ranks wide EP first and is loose there: a 27K-token turn prefilled on one attention group)
        new = 0
        for t in _order({u: b for u, b in groups.items() if math.prod(u[:4]) <= level}):
            if new >= most or groups[t] <= 0:
                break
            if t in seen or (traced and groups[t] < best_c):
                continue
            seen.add(t)
            rs = ReplicaSessions(su, t, wl)
            if not rs.ok:
                continue
            new += 1
            caps = {k: rs.capacity(k, target, ttft_s) for k in TIER_SETS}
            # keep the figures, not the replica: its step tables are freed before the next trace (a system traces
            # up to 2 x `layouts` replicas, and a worker of the web server has 1 GiB)
            traced.append((t, rs.chips, caps))
            best_c = max(best_c, caps[offload]["concurrency"] / rs.chips)
            del rs
    if not traced:
        return {**base, "fits": False, "why": f"no layout of up to {top} chips holds a {wl.context_len:,}-token "
                "session's turn in its KV cache", "best": None, "what_if": {}}
    what_if = {k: _best(traced, k, g, su, base, n) for k in TIER_SETS}
    # replicas left untraced whose static bound still exceeds the best found: the search was cut by `layouts`
    could_win = sum(1 for t, b in groups.items() if t not in seen and b > best_c)
    return {**base, "fits": True, "best": what_if[offload], "layouts_traced": [fmt_layout(*t) for t, _, _ in traced],
            "layouts_untraced_could_win": could_win, "what_if": what_if}


def _best(traced, tier: str, g, su, base: dict, n: int) -> dict:
    """The traced layout with the most sessions per chip with idle prefixes in `tier`, as the row's figures."""
    t, chips, caps = max(traced, key=lambda x: (x[2][tier]["sessions"] / x[1], -x[1]))
    cap = caps[tier]
    d = capacity_dict(cap, chips)
    binding = d["binding"]
    if binding == "decode speed" and _comm_share(g, t, cap["point"].running) > COMM_BOUND:
        binding = "interconnect (decode step's communication)"
    replicas = n // chips
    per_system = cap["sessions"] * replicas
    price, kw = base["price_usd_per_chip_hour"], base["power"]["kw"]
    return {"tiers": TIER_NAMES[tier], "layout": fmt_layout(*t), "replica_chips": chips, "replicas": replicas,
            **d, "binding": binding, "sessions_per_gpu": finite(cap["sessions"] / chips),
            "sessions_per_system": finite(per_system),
            "sessions_per_kw": finite(per_system / kw) if kw else None,
            "sessions_per_usd_hour": finite(cap["sessions"] / chips / price) if price else None}


def _order(groups: dict[tuple, float]) -> list[tuple]:
    """The replicas to trace: the best-bounded of each tensor-parallel degree first (the static bound leaves out the
    prompt chunks a replica prefills among its decodes, which cost most where attention is not split by heads:
    tp = 1 with wide EP prefills a long prompt on one GPU), then the rest, each part by its bound."""
    ranked = sorted(groups, key=lambda t: -groups[t])
    first = list({t[0]: t for t in reversed(ranked)}.values())
    first.sort(key=lambda t: -groups[t])
    return first + [t for t in ranked if t not in first]


def _comm_share(g, t: tuple, running: float) -> float:
    """The static grid's exposed-communication share of the decode step of layout t at the batch nearest `running`."""
    for i, u in enumerate(g.layouts):
        if tuple(int(v) for v in u) == tuple(t):
            j = int(np.argmin(np.abs(np.asarray(g.batch[i], float) - running)))
            return float(g.comm_share[i, j])
    return 0.0


def _power(hw, n: int, pue: float) -> dict:
    """kW of the whole system at its maximum x PUE: whole nodes at the catalog's node rating, else chip TDP."""
    npw = node_power(hw)
    if npw is not None:
        nodes = -(-n // npw.chips)
        return {"basis": "node", "kw": nodes * npw.watts * pue / 1e3, **npw.to_dict(), "pue": pue,
                "formula": "kW = ceil(chips / node_chips) x node_kw x PUE"}
    if hw.tdp_w:
        return {"basis": "chip", "kw": n * hw.tdp_w * pue / 1e3, "chip_tdp_w": hw.tdp_w, "pue": pue,
                "formula": "kW = chips x chip_tdp_w x PUE / 1000",
                "why": f"no whole-node power is sourced for {hw.id}: chip TDP only (CPUs, NICs, fans left out)"}
    return {"basis": None, "kw": None, "why": f"{hw.id} has no TDP in the catalog"}
