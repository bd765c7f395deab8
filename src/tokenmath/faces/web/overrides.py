"""What-if hardware on the web API: the `set` parameter (the CLI's `--set FIELD=VALUE`, comma-separated) and the chip
it makes. Every value is checked by specs.overrides.apply (as a hardware file would be); the answer carries
`what_if`, the list of changed figures, as the CLI's JSON does. No physics here."""
from __future__ import annotations

from tokenmath.faces.web.params import Param

SET = Param("set", "overrides", None, "what-if hardware: FIELD=VALUE pairs, comma-separated, as the CLI's --set "
            "(memory_bw_tbs, memory_gb, tflops.<dtype>, scaleup_domain, scaleup_gbs, price_usd_per_hour, ...; "
            "a value is a number or a multiple of the catalog figure such as 2x)")


def chip(a: dict):
    """The hardware a request names (a catalog id), or that chip with its `set` overrides applied (a Hardware)."""
    if not a.get("set"):
        return a["hardware"]
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.overrides import apply
    hw, _ = apply(get_hardware(a["hardware"]), dict(a["set"]))
    return hw


def what_if(a: dict) -> dict:
    """{"what_if": the changed figures ({field, value, catalog, unit})}, as the CLI's JSON has it; {} without `set`."""
    if not a.get("set"):
        return {}
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.overrides import apply
    _, done = apply(get_hardware(a["hardware"]), dict(a["set"]))
    return {"what_if": [o.to_dict() for o in done]}
