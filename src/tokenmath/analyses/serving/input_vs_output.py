"""What an input token and an output token cost to serve, across context lengths, and why output costs more.

Prefill multiplies each weight by all B x L prompt tokens at once (compute-bound, near peak FLOP/s); decode
fetches every weight for only B tokens per step (bandwidth-bound at small B). So an output token carries more chip
time, the more so the smaller the batch: the batch is set by --batch, by a speed per user
(--min-tokens-per-s-per-user: the largest batch whose decode step still gives that speed), or else the largest that
fits (where decode may turn compute-bound and the ratio falls towards 1).

A cached input token skips its prefill. Its KV waits for the reuse in one of the tiers providers use (specs/kv_tiers'
figures, priced per byte-second here by hbm_tier and host_tiers through engine/economics: HBM, host DRAM, local NVMe
SSD, each with a capacity, a reload bandwidth and a price per byte-second); it is charged the cheaper of holding it
for the TTL in the cheapest tier that can hold the batch's prompts and reload them before their prefill would have
finished, and recomputing it (the uncached input price). Holding in a host tier also pays for moving the KV over
the tier's link, once to write it and once to reload it (engine/economics.transfer_cost_per_mtok: the link's time at
the tier's $/s); the reload runs on copy engines (DMA) alongside compute and is not charged as chip time. That is
the provider's cost floor for a cache hit, with one hit per cached prompt; it is set beside the list cached-input
prices of the model (specs/list_prices), which charge 10-80% of the input price.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import math

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_BATCH, finite, int_arg, pos_float
from tokenmath.engine.economics import (cached_input_cost_per_mtok, decode_cost_per_mtok, holding_cost_per_mtok,
                                        prefill_cost_per_mtok, transfer_cost_per_mtok, usd_per_byte_s_from_gib_hour,
                                        usd_per_byte_s_of, usd_per_s)
from tokenmath.engine.memory import kv_per_chip
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.kv_tiers import HBM_NOTES, HBM_SOURCES, KVTier, host_tier_figures
from tokenmath.specs.list_prices import list_price_dict, list_prices
from tokenmath.mapping.layout import with_attention
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, setup
from tokenmath.analyses.serving.operating_point import largest_batch_at_speed

DEFAULT_CONTEXTS = (256, 1024, 4096, 16384, 65536, 131072)


def hbm_tier(hw: Hardware) -> KVTier:
    """The chip's HBM: a byte of it costs the chip's price per second shared by its HBM bytes."""
    price = hw.price_usd_per_hour
    return KVTier("hbm", "HBM", float(hw.memory_bytes), math.inf,
                  None if price is None else usd_per_byte_s_of(usd_per_s(1, price), hw.memory_bytes), in_place=True,
                  notes=HBM_NOTES, sources=dict(HBM_SOURCES))


def host_tiers() -> list[KVTier]:
    """The host tiers of data/kv_tiers.toml (specs/kv_tiers), their $ per GiB-hour as $ per byte-second."""
    return [KVTier(f.id, f.name, f.capacity_bytes_per_chip, f.reload_bw_per_chip,
                   usd_per_byte_s_from_gib_hour(f.usd_per_gib_hour), notes=f.notes, sources=f.sources)
            for f in host_tier_figures()]


@dataclass(frozen=True)
class Prices:
    setup: Setup
    rows: list[dict]      # one per context length: input, output and cached-input cost per Mtok
    cache_ttl_s: float    # how long a cached prompt's KV waits for its reuse, s
    min_tokens_per_s_per_user: float | None = None    # the speed per user that picked each batch (None: not asked)
    tiers: tuple[KVTier, ...] = ()                    # the KV tiers considered for cached prompts
    notes: tuple[str, ...] = ()
    list_cached: tuple[dict, ...] = ()                # providers' list prices of this model with a cached price

    def to_dict(self):
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips, "engine": su.engine_dict,
                "cache_ttl_s": self.cache_ttl_s,
                "min_tokens_per_s_per_user": self.min_tokens_per_s_per_user,
                "price_usd_per_chip_hour": su.hardware.price_usd_per_hour, "rows": self.rows,
                "kv_tiers": [{"tier": t.id, "name": t.name, "capacity_bytes_per_chip": t.capacity_bytes_per_chip,
                              "reload_bytes_per_s_per_chip": finite(t.reload_bw_per_chip),
                              "usd_per_byte_s": t.usd_per_byte_s, "sources": t.sources} for t in self.tiers],
                "list_cached_input": list(self.list_cached),
                "notes": list(self.notes), **what_if_dict(su.hardware)}


def prices(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, contexts=None, output_len=256,
           batch=None, min_tokens_per_s_per_user=None, cache_ttl_s=300.0, weight_dtype=None, kv_dtype=None,
           efficiency=None, engine=None, attention_sharding=None, **knobs) -> Prices:
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    if attention_sharding is not None:
        su = replace(su, layout=with_attention(su.model, su.layout, attention_sharding))
    m, hw, lay = su.model, su.hardware, su.layout
    output_len = int_arg(output_len, "output_len")
    ttl = pos_float(cache_ttl_s, "cache_ttl_s")
    if batch is not None and min_tokens_per_s_per_user is not None:
        raise InputError("min_tokens_per_s_per_user", "a fixed --batch and a speed per user both pick the batch",
                         "give one of --batch and --min-tokens-per-s-per-user")
    target = None if min_tokens_per_s_per_user is None else pos_float(min_tokens_per_s_per_user,
                                                                      "min_tokens_per_s_per_user")
    ctx = np.array([int_arg(c, "contexts") for c in (contexts or DEFAULT_CONTEXTS)], float)
    probe = serve_batch(m, hw, lay, su.precision, su.efficiency, 1, ctx, output_len, su.reserve, **su.transport.kw())
    bmax = np.asarray(probe.max_batch, float)
    if target is not None:
        B = largest_batch_at_speed(su, ctx, output_len, bmax, target)
    else:
        B = np.minimum(bmax, int_arg(batch, "batch", 1, MAX_BATCH)) if batch is not None else bmax
    Bc = np.maximum(B, 1)
    sv = serve_batch(m, hw, lay, su.precision, su.efficiency, Bc, ctx, output_len, su.reserve, **su.transport.kw())
    ttft, step = np.asarray(sv.ttft_s, float), np.asarray(sv.decode_step_s, float)
    rate = su.usd_per_chip_s
    unit = "$/Mtok" if rate is not None else "chip-s/Mtok"
    # unpriced chips: the same formulas at $1 per chip-second give chip-seconds per Mtok
    usd_s = usd_per_s(su.chips, hw.price_usd_per_hour) if rate is not None else float(su.chips)
    per_in = prefill_cost_per_mtok(usd_s, ttft, Bc, ctx)
    per_out = decode_cost_per_mtok(usd_s, step, Bc)
    # unpriced: HBM at $1 per chip-second, so its holding cost reads in chip-seconds like the rest
    hbm = hbm_tier(hw) if rate is not None else KVTier("hbm", "HBM", float(hw.memory_bytes), np.inf,
                                                       usd_per_byte_s_of(1.0, hw.memory_bytes), in_place=True)
    tiers = [hbm] + (host_tiers() if rate is not None else [])
    notes = [su.engine_note]
    if rate is None:
        notes.append(f"{hw.id} has no price: costs in chip-seconds per Mtok; cached prompts are priced in HBM only "
                     "(the host tiers have $ prices)")
    if len(tiers) > 1:
        notes.append("host DRAM and local SSD per chip are an 8-GPU DGX/HGX H100-class node's (data/kv_tiers.toml), "
                     f"assumed for {hw.id}'s hosts")
    kvb = kv_bytes_per_token(m, su.precision.kv.bytes)
    # every tp (x cp) rank of the replica keeps its shard or copy of a sequence's KV in HBM; a host keeps one copy
    hbm_copies = float(np.asarray(lay.tp) * np.asarray(getattr(lay, "cp", 1)) / np.asarray(lay.kv_shard(m)))
    # what one chip reloads for the batch's prompts, and the prefill time that reload replaces
    reload_bytes = np.asarray(kv_per_chip(m, lay, su.precision.kv.bytes, Bc, ctx), float)
    rows = []
    for i, c in enumerate(ctx):
        ok = bool(B[i] >= 1 and np.asarray(sv.fits)[i])
        fmt = (lambda v: f"${v:.4g}/Mtok") if rate is not None else (lambda v: f"{v:.4g} chip-s/Mtok")
        row = {"input_len": int(c), "output_len": output_len, "batch": int(B[i]), "fits": ok}
        if not ok:
            if target is not None and bmax[i] >= 1:
                row["reason"] = (f"even batch 1 decodes at {1 / float(np.asarray(probe.decode_step_s)[i]):,.1f} "
                                 f"tokens/s per user, below {target:g}")
            rows.append(row | {"unit": unit, "bottleneck_prefill": None, "bottleneck_decode": None})
            continue
        options = _tier_options(tiers, kvb, hbm_copies, ttl, float(reload_bytes[i]), float(ttft[i]))
        hold = min((o for o in options if o["eligible"]), key=lambda o: o["cost_per_mtok"])
        cached = float(cached_input_cost_per_mtok(hold["cost_per_mtok"], per_in[i]))
        where = hold["tier"] if hold["cost_per_mtok"] <= per_in[i] else "recompute"
        row |= {"decode_step_s": finite(step[i]), "output_tokens_per_s_per_user": finite(1 / step[i]),
                "ttft_s": finite(ttft[i]),
                "cost_per_mtok_input": finite(per_in[i]), "cost_per_mtok_output": finite(per_out[i]),
                "output_input_ratio": finite(per_out[i] / per_in[i]),
                "cost_per_mtok_cached_input": finite(cached), "cached_input_tier": where, "cached_input_options": options,
                "cached_share_of_input": finite(cached / per_in[i]),
                "unit": unit, "bottleneck_prefill": str(np.asarray(sv.prefill.bottleneck)[i]),
                "bottleneck_decode": str(np.asarray(sv.decode.bottleneck)[i]),
                "input_label": fmt(per_in[i]), "output_label": fmt(per_out[i]), "cached_label": fmt(cached)}
        rows.append(row)
    listed = tuple(list_price_dict(p) for p in list_prices(m.id) if p.cached_input_usd_per_mtok is not None)
    if rate is not None:
        notes.append(_cached_floor_note(rows, listed, ttl))
    return Prices(setup=su, rows=rows, cache_ttl_s=ttl, min_tokens_per_s_per_user=target, tiers=tuple(tiers),
                  notes=tuple(notes), list_cached=listed)


def _cached_floor_note(rows, listed, ttl) -> str:
    """The cached-input cost read for what it is: the provider's floor, beside what lists charge for this model."""
    shares = [r["cached_share_of_input"] for r in rows if r["fits"]]
    at = (f"{min(shares):.1%}-{max(shares):.1%}" if shares and max(shares) > min(shares) * 1.001
          else f"{shares[0]:.1%}" if shares else "-")
    s = (f"cached input is the provider's cost floor for a hit ({at} of the input cost here): its KV held {ttl:g} s, "
         "written and reloaded once (one hit per cached prompt; prompts never reused, the cache servers' CPUs and "
         "network are not in it), not a price; ")
    if not listed:
        return s + "no provider in data/api_prices.toml lists a cached price for this model (they charge 10-50% "                    "of input for other models)"
    lo, hi = min(p["cached_share_of_input"] for p in listed), max(p["cached_share_of_input"] for p in listed)
    who = ", ".join(f"{p['provider']} ${p['cached_input_usd_per_mtok']:g} vs ${p['input_usd_per_mtok']:g}" for p in listed)
    return s + f"list cached-input prices of this model are {lo:.0%}-{hi:.0%} of their input price ({who})"


def _tier_options(tiers, kvb, hbm_copies, ttl, reload_bytes, prefill_s) -> list[dict]:
    """Each tier's cost per Mtok of a cached token (holding its KV for the TTL, plus for a host tier writing it once
    and reloading it once over the tier's link), and whether it can serve the batch's prompts: hold them (capacity
    per chip) and reload them before their prefill would have finished.

    A host tier keeps one copy of the KV (kvb per token), written once; every tp (x cp) rank holding a copy or shard
    reloads its part, hbm_copies x kvb in all, each over its own chip's link (the tier's figures are per chip)."""
    out = []
    for t in tiers:
        held = kvb * (hbm_copies if t.in_place else 1.0)
        reload_s = 0.0 if t.in_place else reload_bytes / t.reload_bw_per_chip
        fits = reload_bytes <= t.capacity_bytes_per_chip
        hold = float(holding_cost_per_mtok(held, ttl, t.usd_per_byte_s))
        if t.in_place:
            write = reload = 0.0
        else:
            move = lambda b: float(transfer_cost_per_mtok(b, t.reload_bw_per_chip, t.usd_per_byte_s,  # noqa: E731
                                                           t.capacity_bytes_per_chip))
            write, reload = move(kvb), move(kvb * hbm_copies)
        out.append({"tier": t.id, "cost_per_mtok": hold + write + reload, "holding_cost_per_mtok": hold,
                    "write_cost_per_mtok": write, "reload_cost_per_mtok": reload,
                    "bytes_held_per_token": held, "reload_s": reload_s, "fits_batch_prompts": bool(fits),
                    "eligible": bool(fits and reload_s <= prefill_s)})
    return out
