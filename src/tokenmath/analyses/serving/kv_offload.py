"""A trace's prefix reuse on a deployment: the hit rate its KV cache reaches in HBM alone, with host DRAM added and
with local SSD added (capacities from the chips and data/kv_tiers.toml), how much each tier serves, whether each
tier's link can reload it at the trace's pace, and what a hit costs the provider there against list cached prices.

The hit rate is a result of the workload and the capacity (analyses/serving/kv_reuse.py), not an input. Costs:
a host tier's $/s (its capacity x its price per byte-second) spread over the hit tokens it serves per second, plus
moving each hit's KV over the tier's link (engine/economics.transfer_cost_per_mtok); HBM's cache lives in the KV
pool the chips already pay for.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.validators import finite
from tokenmath.engine.economics import (cost_per_token, holding_cost_per_token, per_mtok, transfer_cost_per_mtok,
                                        usd_per_byte_s_from_gib_hour)
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.kv_tiers import host_tier_figures
from tokenmath.specs.list_prices import list_price_dict, list_prices
from tokenmath.analyses.setup import Setup, setup
from tokenmath.analyses.serving.block_trace import BlockTrace, read_block_trace
from tokenmath.analyses.serving.kv_reuse import ReuseCurve, reuse_curve
from tokenmath.analyses.serving.simulation.replica import kv_capacity_tokens

CURVE_TOKENS = tuple(10.0 ** k for k in range(3, 11))     # the hit-rate curve's capacities, 1e3 ... 1e10 tokens


@dataclass(frozen=True)
class KVOffload:
    setup: Setup
    trace: BlockTrace
    curve: list[dict]            # {capacity_tokens, hit_rate}
    unbounded_hit_rate: float    # what the trace's own hash ids allow: every block ever seen still held
    tiers: list[dict]            # per tier: id, name, capacity_tokens, reload_bytes_per_s_per_chip, usd_per_byte_s
    what_ifs: list[dict]         # HBM only, + host DRAM, + local SSD: hit rate, share per tier, reload load, costs
    list_cached: tuple[dict, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "engine": su.engine_dict,
                "trace": {"name": self.trace.name, "requests": self.trace.requests,
                          "duration_s": self.trace.duration_s, "input_tokens": int(self.trace.input_tokens.sum()),
                          "block_tokens": self.trace.block_tokens},
                "unbounded_hit_rate": self.unbounded_hit_rate, "curve": self.curve, "tiers": self.tiers,
                "what_ifs": self.what_ifs, "list_cached_input": list(self.list_cached), "notes": list(self.notes)}


def kv_offload(model, hardware, trace, *, chips=None, tp=None, pp=None, ep=None, dp=None, weight_dtype=None,
               kv_dtype=None, efficiency=None, engine=None, **knobs) -> KVOffload:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    tr = trace if isinstance(trace, BlockTrace) else read_block_trace(trace)
    c = reuse_curve(tr)
    kvb = float(kv_bytes_per_token(su.model, su.precision.kv.bytes))
    n = su.chips
    tiers = [{"tier": "hbm", "name": "HBM (the KV pool)", "capacity_tokens": float(kv_capacity_tokens(su)),
              "reload_bytes_per_s_per_chip": None, "usd_per_byte_s": None}]
    for f in host_tier_figures():
        tiers.append({"tier": f.id, "name": f.name, "capacity_tokens": f.capacity_bytes_per_chip * n / kvb,
                      "capacity_bytes": f.capacity_bytes_per_chip * n,
                      "reload_bytes_per_s_per_chip": f.reload_bw_per_chip,
                      "usd_per_byte_s": usd_per_byte_s_from_gib_hour(f.usd_per_gib_hour)})
    unbounded = float(c.hit_rate(np.inf))
    what = [_what_if(c, tiers[:k], kvb, n, tr) for k in range(1, len(tiers) + 1)]
    notes = [su.engine_note,
             f"one LRU cache of {tr.block_tokens}-token blocks over the trace's {tr.requests:,} requests in arrival "
             "order (kv_reuse.py): no prefill time, no replication of hot blocks; HBM is the whole KV pool of the "
             "chips, shared with the running requests in an engine (an upper bound for the cache)",
             f"host DRAM and local SSD per chip are an 8-GPU DGX/HGX H100-class node's (data/kv_tiers.toml), assumed "
             f"for {su.hardware.id}'s hosts"]
    listed = tuple(list_price_dict(p) for p in list_prices(su.model.id) if p.cached_input_usd_per_mtok is not None)
    curve = [{"capacity_tokens": cap, "hit_rate": float(h)} for cap, h in zip(CURVE_TOKENS, c.hit_rate(CURVE_TOKENS))]
    return KVOffload(su, tr, curve, unbounded, tiers, what, listed, tuple(notes))


def _what_if(c: ReuseCurve, tiers: list[dict], kvb: float, chips: int, tr: BlockTrace) -> dict:
    """The cache made of `tiers` (fastest first): the hit rate, the share each tier serves, each host tier's reload
    load on its links at the trace's pace and the provider's cost of a hit token it serves."""
    share = c.served_by([t["capacity_tokens"] for t in tiers])
    secs = max(tr.duration_s, 1e-9)
    tokens_per_s = float(tr.input_tokens.sum()) / secs
    # what a tier holds at most: the trace's distinct blocks beyond what the faster tiers hold
    left = float(np.unique(tr.hashes).size * tr.block_tokens)
    rows = []
    for t, s in zip(tiers, share[:-1]):
        held = min(t["capacity_tokens"], left)
        left = max(left - t["capacity_tokens"], 0.0)
        row = {"tier": t["tier"], "share_of_input": float(s), "tokens_held": held}
        if t["reload_bytes_per_s_per_chip"] is not None:
            hit_tok_s = s * tokens_per_s
            load = hit_tok_s * kvb / chips / t["reload_bytes_per_s_per_chip"]
            hold_usd_s = holding_cost_per_token(held * kvb, 1.0, t["usd_per_byte_s"])   # its bytes held, $ per s
            move = float(transfer_cost_per_mtok(kvb, t["reload_bytes_per_s_per_chip"], t["usd_per_byte_s"],
                                                t["capacity_bytes"] / chips))
            row |= {"reload_link_load": finite(load),
                    "cost_per_mtok_hit_usd": finite(per_mtok(cost_per_token(hold_usd_s, 1.0, hit_tok_s)) + move)
                    if hit_tok_s > 0 else None}
        rows.append(row)
    binding = [r["tier"] for r in rows if (r.get("reload_link_load") or 0) > 1]
    return {"tiers": [t["tier"] for t in tiers], "hit_rate": float(1.0 - share[-1]), "recomputed": float(share[-1]),
            "served": rows, "reload_binds": binding}
