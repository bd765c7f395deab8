"""`tokenmath hardware --template` (a commented hardware file to fill in) and `--check FILE` (what tokenmath reads
from a user's file, defaults included). The schema itself is specs/hardware.py (KNOWN_KEYS, from_record); this
module only writes it out for a person and reports a parsed file back.

The template's numbers are the catalog's H100 SXM figures (data/hardware.toml, each with its source), so a file
made from it unchanged describes that chip and `--check` of it agrees with `--hardware h100-sxm`.
"""
from __future__ import annotations

import json

TEMPLATE_CHIP = "h100-sxm"

# (key, required?, the comment above it). Order = the order a person fills them in. Every key of
# specs.hardware.KNOWN_KEYS is here (tests/test_hardware_template.py holds the two lists together).
FIELDS = (
    ("id", False, "short name used in answers; default: the file's path"),
    ("name", False, "display name; default: the id"),
    ("vendor", False, "free text; default: empty"),
    ("kind", False, "gpu | tpu | cpu | ...: free text, shown only; default: gpu"),
    ("release_year", False, "shown only"),
    ("memory_gb", True, "REQUIRED. Device memory per chip in GB = bytes / 1e9 (an '80 GiB' part is 85.9)"),
    ("memory_bw_tbs", True, "REQUIRED. Peak memory bandwidth per chip in TB/s = 1e12 bytes/s"),
    ("tflops", True, "REQUIRED. DENSE peak TFLOP/s per chip by dtype (TOP/s for int8/int4), never 2:4-sparse.\n"
                     "Keys: fp32 tf32 bf16 fp16 fp8 fp6 fp4 int8 int4; at least one of bf16, fp16, fp32. A dtype\n"
                     "the chip lacks runs at the next it has (fp8 -> bf16; int4 -> int8 -> bf16)."),
    ("scaleup_domain", False, "chips that share the fast link (8 on HGX, 72 on NVL72); default: 1 (no shared link)"),
    ("scaleup_gbs", False, "GB/s per chip, ONE direction, on the scale-up link. Required when scaleup_domain > 1.\n"
                           "E.g. 450 NVLink 4, 900 NVLink 5, 64 PCIe Gen5 x16, 32 PCIe Gen4 x16"),
    ("scaleup_link", False, "free text describing the link; shown only"),
    ("scaleout_gbs", False, "GB/s per chip, one direction, between scale-up domains (NIC); default: unknown, and\n"
                            "layouts that cross domains are refused"),
    ("scaleup_latency_us", False, "fixed us of one small collective in a domain; default 6 (Epoch AI's NCCL fit,\n"
                                  "arXiv:2506.04645, ~10 us for 8 GPUs with the 2 us x (sqrt(p) - 1) term)"),
    ("scaleout_latency_us", False, "extra us when a collective crosses domains; default 40 (NVIDIA/nccl #1244:\n"
                                   "46-48 us for a small all-reduce over 2 nodes)"),
    ("tdp_w", False, "board power in W; energy per token uses it; default: none (energy not reported)"),
    ("price_usd_per_hour", False, "$ per chip-hour; $/Mtok uses it; default: none ($ figures are null)"),
    ("price_date", False, "when the price was quoted, \"YYYY-MM\""),
    ("price_market", False, "which market the price is, e.g. \"on-demand, Lambda\" or \"reserved 1 year\""),
    ("family", False, "calibration family whose fitted efficiencies apply; default: other (the pooled fit)"),
    ("kernel_class", False, "kernel constants of data/kernels.toml; default: generic"),
    ("notes", False, "free text, shown in --explain"),
    ("sources", False, "table: where each figure comes from (keys memory, flops, scaleup, scaleout, power,\n"
                       "price). With a [sources] table, figures without a source are flagged in every answer."),
    ("measured", False, "table written by `tokenmath measure` (what it measured); leave out by hand"),
    ("kernels", False, "table written by `tokenmath measure`: this machine's kernel model; leave out by hand"),
)
LEFT_OUT = ("measured", "kernels")     # written by `tokenmath measure`, documented but not in the template


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in text.split("\n")]


def template_text() -> str:
    """The commented TOML a user copies (`tokenmath hardware --template > mychip.toml`), with the catalog's H100 SXM
    figures and their sources as the example values."""
    from tokenmath.local.hardware_file import toml_value
    from tokenmath.specs.families import NAMES as FAMILY_NAMES
    from tokenmath.specs.hardware import catalog
    from tokenmath.specs.kernels import CLASSES
    rec = dict(catalog()[TEMPLATE_CHIP])
    rec["id"] = "my-chip"
    rec["name"] = f"My chip (template: the catalog's {rec['name']})"
    rec.pop("notes", None)
    out = ["# tokenmath hardware file: one chip. Use it with `--hardware mychip.toml`; check it with",
           "# `tokenmath hardware --check mychip.toml`. Units are humane here (GB, TB/s, TFLOP/s, GB/s, W, $/h);",
           "# tokenmath converts them to SI. The example values are the catalog's H100 SXM figures (sources below):",
           "# replace them with your chip's. Keys tokenmath does not know are refused (a typo is named).", ""]
    for key, required, text in FIELDS:
        if key in LEFT_OUT or key == "sources":
            continue
        out += _comment(text)
        if key == "family":
            out += _comment("one of: " + ", ".join(FAMILY_NAMES))
            out.append('# family = "other"')
        elif key == "kernel_class":
            out += _comment("one of: " + ", ".join(CLASSES))
            out.append('# kernel_class = "generic"')
        elif key == "notes":
            out.append('# notes = ""')
        elif key in ("scaleup_latency_us", "scaleout_latency_us"):
            out.append(f"# {key} = {6 if key.startswith('scaleup') else 40}")
        elif key in rec:
            out.append(f"{key} = {toml_value(rec[key])}")
        out.append("")
    out += _comment(dict((k, t) for k, _, t in FIELDS)["sources"])
    out.append("[sources]")
    for k, v in rec.get("sources", {}).items():
        out.append(f"{k} = {toml_value(v)}")
    return "\n".join(out) + "\n"


def check_report(path: str) -> dict:
    """What tokenmath reads from the hardware file at `path` (SI inside, humane here), and which defaults it filled
    in. InputError (field, problem, valid) for a file that does not parse."""
    from tokenmath.specs.catalog import read_user_file
    from tokenmath.specs.hardware import DEFAULT_SCALEOUT_LATENCY_S, DEFAULT_SCALEUP_LATENCY_S, get_hardware
    hw = get_hardware(path)
    raw = read_user_file(path, "hardware")
    if "memory_gb" not in raw and len(raw) == 1 and isinstance(next(iter(raw.values())), dict):
        raw = next(iter(raw.values()))
    defaults = []
    if "scaleup_domain" not in raw:
        defaults.append("scaleup_domain = 1 (no shared link)")
    if "scaleup_latency_us" not in raw:
        defaults.append(f"scaleup_latency_us = {DEFAULT_SCALEUP_LATENCY_S * 1e6:g}")
    if "scaleout_latency_us" not in raw:
        defaults.append(f"scaleout_latency_us = {DEFAULT_SCALEOUT_LATENCY_S * 1e6:g}")
    if hw.scaleout_bw is None:
        defaults.append("scaleout_gbs unknown: layouts across scale-up domains are refused")
    if hw.tdp_w is None:
        defaults.append("tdp_w unknown: no energy per token")
    if hw.price_usd_per_hour is None:
        defaults.append("price_usd_per_hour unknown: $ figures are null")
    if not hw.family:
        defaults.append("family = other (the pooled calibration)")
    if not hw.kernel_class and hw.kernels is None:
        defaults.append("kernel_class = generic")
    return {"file": str(path), "ok": True, "id": hw.id, "name": hw.name,
            "memory_gb": hw.memory_bytes / 1e9, "memory_bw_tbs": hw.memory_bw / 1e12,
            "tflops": {k: v / 1e12 for k, v in hw.flops.items()},
            "ridge_flop_per_byte": hw.ridge_point,
            "scaleup_domain": hw.scaleup_domain,
            "scaleup_gbs": hw.scaleup_bw / 1e9 if hw.scaleup_domain > 1 else None,
            "scaleout_gbs": hw.scaleout_bw / 1e9 if hw.scaleout_bw is not None else None,
            "tdp_w": hw.tdp_w, "price_usd_per_hour": hw.price_usd_per_hour,
            "measured_kernels": hw.kernels is not None,
            "defaults": defaults, "caveats": list(hw.caveats)}


def print_check(rep: dict, as_json: bool) -> None:
    import click
    if as_json:
        click.echo(json.dumps(rep, indent=2))
        return
    fl = ", ".join(f"{k} {v:g}" for k, v in rep["tflops"].items())
    lines = [f"{rep['file']}: ok, chip {rep['id']} ({rep['name']})",
             f"  memory        {rep['memory_gb']:g} GB at {rep['memory_bw_tbs']:g} TB/s",
             f"  dense TFLOP/s {fl}",
             f"  ridge point   {rep['ridge_flop_per_byte']:.0f} FLOP/byte (bf16 matmuls turn compute-bound above it)",
             f"  scale-up      {rep['scaleup_domain']} chip(s)"
             + (f" at {rep['scaleup_gbs']:g} GB/s per chip, one way" if rep["scaleup_gbs"] else ""),
             f"  scale-out     " + (f"{rep['scaleout_gbs']:g} GB/s per chip" if rep["scaleout_gbs"] else "unknown"),
             f"  power, price  " + (f"{rep['tdp_w']:g} W, " if rep["tdp_w"] is not None else "power unknown, ")
             + (f"${rep['price_usd_per_hour']:g}/h" if rep["price_usd_per_hour"] is not None else "no price"),
             "  kernel model  " + ("measured ([kernels] section)" if rep["measured_kernels"] else "from kernel_class")]
    if rep["defaults"]:
        lines.append("  defaults used: " + "; ".join(rep["defaults"]))
    for c in rep["caveats"]:
        lines.append(f"  caveat: {c}")
    click.echo("\n".join(lines))
