"""Where a cached prompt's KV can wait for its reuse: HBM (the chip's own memory) and the host tiers of
data/kv_tiers.toml (host DRAM, local NVMe SSD), each with a capacity and a reload bandwidth per chip and a price per
byte-second, every figure sourced there."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenmath.specs.catalog import shipped
from tokenmath.specs.hardware import Hardware

GIB = 2.0 ** 30
SECONDS_PER_HOUR = 3600.0


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


def hbm_tier(hw: Hardware) -> KVTier:
    """The chip's HBM: a byte of it costs the chip's price per second shared by its HBM bytes."""
    price = hw.price_usd_per_hour
    return KVTier("hbm", "HBM", float(hw.memory_bytes), math.inf,
                  None if price is None else price / SECONDS_PER_HOUR / hw.memory_bytes, in_place=True,
                  notes="the chip's own memory: a byte costs the chip's $/s / its HBM bytes",
                  sources={"capacity": "hardware.toml memory_gb", "price": "hardware.toml price_usd_per_hour"})


def host_tiers() -> list[KVTier]:
    """The host tiers of data/kv_tiers.toml, in file order (fastest first)."""
    out = []
    for tid, r in shipped("kv_tiers.toml").items():
        out.append(KVTier(tid, str(r["name"]), float(r["capacity_gb_per_chip"]) * 1e9,
                          float(r["reload_gbs_per_chip"]) * 1e9, float(r["usd_per_gib_hour"]) / GIB / SECONDS_PER_HOUR,
                          notes=str(r.get("notes", "")), sources=dict(r.get("sources", {}))))
    return out


def kv_tiers(hw: Hardware) -> list[KVTier]:
    """HBM, then the host tiers."""
    return [hbm_tier(hw), *host_tiers()]
