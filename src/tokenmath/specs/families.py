"""Hardware families: the groups of chips that share a calibration (the same kernels, memory system and software
stack). The family follows the silicon, not the name that reached it:
- a catalog chip carries its family (`Hardware.family`, set by get_hardware from FAMILIES below), and a System
  copies its chip's fields, so hgx-h100, gb200-nvl72 or a system file naming `chip = "h100-sxm"` get the chip's;
- a system id given as a name resolves to its chip first (data/systems.toml `chip`);
- a user hardware file is not a catalog chip because it borrows an id: it gets the family its `family` field
  names, else "other" (the all-rows fit)."""
from __future__ import annotations

from functools import cache

FAMILIES = {
    "nvidia-datacenter": ("a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h800", "h20", "h200", "gh200", "b200",
                          "b300", "gb200-nvl72", "gb300-nvl72"),
    "nvidia-workstation": ("l40s", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000"),
    "amd": ("mi250x", "mi300x", "mi325x", "mi355x"),
    "tpu": ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7"),
    "apple": ("apple-m2-ultra", "apple-m3-max", "apple-m4-max", "apple-m3-ultra"),
}
OTHER = "other"
NAMES = (*FAMILIES, OTHER)     # what a hardware file's `family` field may say


def of_chip(chip_id: str) -> str:
    """The family of a catalog chip id ("other" for a chip in no family)."""
    for f, ids in FAMILIES.items():
        if chip_id in ids:
            return f
    return OTHER


def family(hw) -> str:
    """The calibration family of `hw`: a chip or system id (str), or a Hardware/System object (its `family`)."""
    if isinstance(hw, str):
        key = hw.lower()
        return of_chip(_system_chips().get(key, key))
    return getattr(hw, "family", "") or OTHER


@cache
def _system_chips() -> dict[str, str]:
    """Shipped system id -> its chip id (an id that is also a chip's stays that chip)."""
    from tokenmath.specs.catalog import shipped
    chips = shipped("hardware.toml")
    return {k: str(v["chip"]) for k, v in shipped("systems.toml").items()
            if k not in chips and isinstance(v, dict) and isinstance(v.get("chip"), str)}
