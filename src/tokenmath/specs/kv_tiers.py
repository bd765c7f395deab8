"""Where a cached prompt's KV can wait for its reuse: HBM (the chip's own memory) and the host tiers of
data/kv_tiers.toml (host DRAM, local NVMe SSD), each with a capacity and a reload bandwidth per chip and a price,
every figure sourced there.

This module holds the figures as the catalog states them; turning a price into $ per byte-second is engine/economics'
(usd_per_byte_s_of, usd_per_byte_s_from_gib_hour), done where the tiers are built (analyses/serving/
input_vs_output.py: hbm_tier, host_tiers), since specs may not import the engine."""
from __future__ import annotations

from dataclasses import dataclass, field

from tokenmath.specs.catalog import shipped


@dataclass(frozen=True)
class KVTier:
    id: str
    name: str
    capacity_bytes_per_chip: float
    reload_bw_per_chip: float          # B/s into one chip's HBM; inf for HBM itself (already in place)
    usd_per_byte_s: float | None       # None: no price (an unpriced chip's HBM)
    in_place: bool = False             # HBM: the KV never moves
    notes: str = ""
    sources: dict[str, str] = field(default_factory=dict)


HBM_NOTES = "the chip's own memory: a byte costs the chip's $/s / its HBM bytes"
HBM_SOURCES = {"capacity": "hardware.toml memory_gb", "price": "hardware.toml price_usd_per_hour"}


@dataclass(frozen=True)
class HostTierFigures:
    """One host tier of data/kv_tiers.toml: bytes and bytes/s per chip, and its rental price as the catalog lists it."""
    id: str
    name: str
    capacity_bytes_per_chip: float
    reload_bw_per_chip: float          # B/s into one chip's HBM
    usd_per_gib_hour: float            # $ per GiB (2^30 bytes) held one hour
    notes: str = ""
    sources: dict[str, str] = field(default_factory=dict)


def host_tier_figures() -> list[HostTierFigures]:
    """The host tiers of data/kv_tiers.toml, in file order (fastest first)."""
    return [HostTierFigures(tid, str(r["name"]), float(r["capacity_gb_per_chip"]) * 1e9,
                            float(r["reload_gbs_per_chip"]) * 1e9, float(r["usd_per_gib_hour"]),
                            notes=str(r.get("notes", "")), sources=dict(r.get("sources", {})))
            for tid, r in shipped("kv_tiers.toml").items()]
