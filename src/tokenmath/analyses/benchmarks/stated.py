"""What a result file states of its deployment (llm-d reports' scenario.host), turned into tokenmath's terms: the
catalog chip an accelerator name means, and the layout (chips, tp, pp, dp) of identical replicas. Anything it cannot
map for sure is left to the user's flags, with the reason.

Accelerator names come as Kubernetes node labels: llm-d-benchmark writes the value of its affinity label
(LLMDBENCH_VLLM_COMMON_AFFINITY, e.g. nvidia.com/gpu.product:NVIDIA-H100-80GB-HBM3, the label NVIDIA's GPU feature
discovery sets; native_to_br0_1.py keeps the part after the colon) or a short name ("H100" in its v0.1 example).
"""
from __future__ import annotations

import re

# (pattern on the lower-cased name with NVIDIA/AMD/Instinct/Google removed, catalog id); first match wins. A form
# the catalog lacks (H100 NVL or PCIe A100, H200 NVL) maps to nothing rather than to a neighbour.
NAMES = (
    (r"h100.*(nvl)", None), (r"h100.*pcie", "h100-pcie"), (r"gh200", "gh200"), (r"h100", "h100-sxm"),
    (r"h200.*nvl", None), (r"h200", "h200"), (r"h800", "h800"), (r"\bh20\b", "h20"),
    (r"a100.*pcie", None), (r"a100.*40\s*gb", "a100-40gb"), (r"a100", "a100-80gb"),
    (r"gb200", "gb200-nvl72"), (r"gb300", "gb300-nvl72"), (r"b200", "b200"), (r"b300", "b300"),
    (r"l40s", "l40s"), (r"rtx.*pro.*6000", "rtx-pro-6000"),
    (r"mi300x", "mi300x"), (r"mi325x", "mi325x"), (r"mi355x", "mi355x"), (r"mi250x", "mi250x"),
    (r"gaudi\s*3|hl-325", "gaudi3"),
    (r"tpu.*v7|tpu7|\bv7x\b", "tpu-v7"), (r"v6e", "tpu-v6e"), (r"v5p", "tpu-v5p"), (r"v5e|v5 lite", "tpu-v5e"),
)


def hardware_id(name: str | None) -> str | None:
    """The catalog id an accelerator name means (NVIDIA-H100-80GB-HBM3 -> h100-sxm), or None when unsure."""
    if not name:
        return None
    from tokenmath.specs.hardware import SHORT_NAMES, hardware_ids
    key = name.strip().lower()
    ids = set(hardware_ids())
    if key in ids or key in SHORT_NAMES:
        return SHORT_NAMES.get(key, key)
    plain = re.sub(r"\b(nvidia|amd|instinct|google|tesla)\b", " ", key.replace("-", " ").replace("_", " "))
    for pattern, hid in NAMES:
        if re.search(pattern, plain):
            return hid if hid in ids else None
    return None


def layout_of(dep: dict) -> tuple[dict | None, str]:
    """(layout, how) from a stated deployment: identical replicas give chips = their sum, tp and pp from each, dp =
    chips / (tp x pp). (None, why) for what tokenmath's calibrate cannot take from the file."""
    reps = dep.get("replicas") or []
    if not reps:
        return None, "the file states no accelerators"
    if dep.get("roles") != ["replica"]:
        return None, f"the file describes {' / '.join(dep.get('roles') or ['no'])} servers (prefill / decode " \
                     "disaggregation is not what calibrate prices)"
    shapes = {(r["accelerator"], r["count"], r["tp"], r["pp"], r["ep"]) for r in reps}
    if len(shapes) > 1:
        return None, "its replicas differ in accelerator, count or parallelism"
    _, count, tp, pp, ep = shapes.pop()
    if ep > 1:
        return None, f"it states ep {ep}, vLLM's expert parallelism over tp x dp ranks, which is not tokenmath's ep " \
                     "degree"
    chips = dep["chips"]
    if count % (tp * pp) or chips % (tp * pp):
        return None, f"{count} accelerators per replica is not a multiple of tp {tp} x pp {pp}"
    return {"chips": chips, "tp": tp, "pp": pp, "ep": None, "dp": chips // (tp * pp)}, \
        f"{len(reps)} replica(s) of {count} accelerator(s), tp {tp}, pp {pp} (the file's scenario.host)"
