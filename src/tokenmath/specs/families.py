"""Hardware families: the groups of chips that share a calibration (the same kernels, memory system and software
stack). A system name resolves to its chip first, so a family follows the silicon, not the name that reached it."""
from __future__ import annotations

FAMILIES = {
    "nvidia-datacenter": ("a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h800", "h20", "h200", "gh200", "b200",
                          "b300", "gb200-nvl72", "gb300-nvl72"),
    "nvidia-workstation": ("l40s", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-pro-6000"),
    "amd": ("mi250x", "mi300x", "mi325x", "mi355x"),
    "tpu": ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7"),
    "apple": ("apple-m2-ultra", "apple-m3-max", "apple-m4-max", "apple-m3-ultra"),
}


def family(hw_id: str) -> str:
    for f, ids in FAMILIES.items():
        if hw_id in ids:
            return f
    return "other"
