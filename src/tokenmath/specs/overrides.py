"""What-if hardware: override chip or system figures (`--set memory_bw_tbs=12`, `--vary scaleup_domain=8,72,576`).

Fields are named as in a hardware file (data/hardware.toml's schema, humane units): memory_gb, memory_bw_tbs,
tflops.<dtype>, scaleup_domain, scaleup_gbs, scaleout_gbs, scaleup_latency_us, scaleout_latency_us, tdp_w,
price_usd_per_hour (aliases: hbm_gb, price). A value is a number, or a multiple of the catalog figure (`2x`).

Every override is checked by the same code that checks a hardware file (specs.hardware.from_record): the chip's
figures are written back as a record, the overrides applied, and the record read again, so a value that a file
could not hold (a bandwidth of 0, a fractional domain) is refused with the same field name and valid range. Only the
overridden figures are copied onto the chip (or System); its id, family and calibration stay those of the catalog
chip, so the efficiencies are the chip's own and the answer moves by the physics of the changed figure alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from tokenmath.base.errors import InputError, closest, show
from tokenmath.specs.hardware import FLOP_KEYS, Hardware, from_record

# field -> (Hardware attribute, SI per humane unit, humane unit)
SCALAR_FIELDS = {
    "memory_gb": ("memory_bytes", 1e9, "GB"),
    "memory_bw_tbs": ("memory_bw", 1e12, "TB/s"),
    "scaleup_domain": ("scaleup_domain", 1, "chips"),
    "scaleup_gbs": ("scaleup_bw", 1e9, "GB/s"),
    "scaleout_gbs": ("scaleout_bw", 1e9, "GB/s"),
    "scaleup_latency_us": ("scaleup_latency", 1e-6, "us"),
    "scaleout_latency_us": ("scaleout_latency", 1e-6, "us"),
    "tdp_w": ("tdp_w", 1, "W"),
    "price_usd_per_hour": ("price_usd_per_hour", 1, "$/chip-hour"),
}
ALIASES = {"hbm_gb": "memory_gb", "price": "price_usd_per_hour", "hbm_bw_tbs": "memory_bw_tbs"}
FIELDS = tuple(SCALAR_FIELDS) + tuple(f"tflops.{k}" for k in FLOP_KEYS)


@dataclass(frozen=True)
class Override:
    """One overridden figure, in the hardware file's humane units (`was` None: the chip had no such figure)."""
    field: str
    value: float
    was: float | None
    unit: str

    def to_dict(self) -> dict:
        return {"field": self.field, "value": self.value, "catalog": self.was, "unit": self.unit}

    def text(self) -> str:
        was = "none" if self.was is None else f"{self.was:g}"
        return f"{self.field} = {self.value:g} {self.unit} (catalog {was})"


def canonical(name) -> str:
    """The field a user's name means (aliases resolved); an unknown name is refused naming the closest fields."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key in FIELDS:
        return key
    if key == "tflops":
        raise InputError("set.tflops", "names no dtype", f"one of {', '.join('tflops.' + k for k in FLOP_KEYS)}")
    near = closest(key, (*FIELDS, *ALIASES))
    raise InputError(f"set.{name}", "unknown hardware field",
                     f"did you mean {', '.join(near)}?" if near else f"valid fields: {', '.join(FIELDS)}")


def figure(hw: Hardware, field: str) -> float | None:
    """The chip's current figure for `field`, in humane units (None where it has none)."""
    if field.startswith("tflops."):
        v = hw.flops.get(field.split(".", 1)[1])
        return None if v is None else v / 1e12
    attr, scale, _ = SCALAR_FIELDS[field]
    v = getattr(hw, attr)
    return None if v is None else (int(v) if field == "scaleup_domain" else v / scale)


def parse_value(field: str, text, current: float | None) -> float:
    """A number, or `<m>x` for m times the current figure. Range checks come later (from_record)."""
    s = str(text).strip().lower()
    try:
        if s.endswith("x"):
            if current is None:
                raise InputError(f"set.{field}", f"{show(text)} scales a figure the chip does not have",
                                 "an absolute number")
            v = float(s[:-1]) * current
        else:
            v = float(s)
    except ValueError:
        raise InputError(f"set.{field}", f"{show(text)} is not a number", "a number, or a multiple like 2x") from None
    if not math.isfinite(v):
        raise InputError(f"set.{field}", f"{show(text)} is not finite", "a finite number")
    if field == "scaleup_domain" and v == int(v):
        v = int(v)
    return v


def record_of(hw: Hardware) -> dict:
    """The chip's figures as a hardware-file record (humane units), the form from_record checks."""
    rec = {"memory_gb": hw.memory_bytes / 1e9, "memory_bw_tbs": hw.memory_bw / 1e12,
           "tflops": {k: v / 1e12 for k, v in hw.flops.items()}, "scaleup_domain": int(hw.scaleup_domain),
           "scaleup_gbs": hw.scaleup_bw / 1e9, "scaleup_latency_us": hw.scaleup_latency * 1e6,
           "scaleout_latency_us": hw.scaleout_latency * 1e6}
    for key, attr, scale in (("scaleout_gbs", "scaleout_bw", 1e9), ("tdp_w", "tdp_w", 1),
                             ("price_usd_per_hour", "price_usd_per_hour", 1)):
        if getattr(hw, attr) is not None:
            rec[key] = getattr(hw, attr) / scale
    return rec


def parse_pairs(pairs) -> dict:
    """`FIELD=VALUE` strings -> {canonical field: value text}; a field given twice is refused."""
    out = {}
    for p in pairs or ():
        if "=" not in str(p):
            raise InputError("set", f"{show(p)} is not FIELD=VALUE", f"e.g. memory_bw_tbs=6.7; fields: {', '.join(FIELDS)}")
        name, val = str(p).split("=", 1)
        key = canonical(name)
        if key in out:
            raise InputError(f"set.{key}", "given twice", "one value per field (--vary sweeps several)")
        out[key] = val
    return out


def apply(hw: Hardware, overrides: dict) -> tuple[Hardware, tuple[Override, ...]]:
    """`hw` (a Hardware or System) with `overrides` ({field name: number or 'Mx' text}) applied and checked.
    Returns the new chip (its `what_if` extended by what changed) and the list of what changed."""
    if not overrides:
        return hw, ()
    rec = record_of(hw)
    done, new = [], {}
    for name, text in overrides.items():
        field = canonical(name)
        cur = figure(hw, field)
        v = parse_value(field, text, cur)
        if field.startswith("tflops."):
            rec["tflops"][field.split(".", 1)[1]] = v
        else:
            rec[field] = v
        unit = "TFLOP/s" if field.startswith("tflops.") else SCALAR_FIELDS[field][2]
        done.append(Override(field, v, cur, unit))
    topo = getattr(hw, "topology", "switch")
    if topo != "switch" and any(canonical(n) == "scaleup_gbs" for n in overrides):
        # a mesh or torus prices a group by its per-link bandwidth (systems.System.group_bw), not this figure
        raise InputError("set.scaleup_gbs", f"a {topo} system's collectives run on its links (link_gbs x links "
                         "used), so this figure would change nothing", "a switched system (hgx-*, gb200-nvl72, ...)")
    if topo == "torus" and any(canonical(n) == "scaleup_domain" for n in overrides):
        raise InputError("set.scaleup_domain", "a TPU slice's domain is its torus shape, set by --chips",
                         "--chips (a slice size) instead")
    checked = from_record(hw.id, rec, field="set")      # the hardware file's checks, names and ranges
    for o in done:
        if o.field.startswith("tflops."):
            new["flops"] = MappingProxyType(dict(checked.flops))
        else:
            attr = SCALAR_FIELDS[o.field][0]
            new[attr] = getattr(checked, attr)
    caveat = "what-if: " + "; ".join(o.text() for o in done)
    return hw.replace(**new, caveats=(*hw.caveats, caveat), what_if=(*hw.what_if, *done)), tuple(done)


def what_if_dict(hw) -> dict:
    """{"what_if": the overrides applied to `hw` ({field, value, catalog, unit} each)} for an answer's JSON; {} for
    catalog figures (and for None)."""
    done = getattr(hw, "what_if", ())
    return {"what_if": [o.to_dict() for o in done]} if done else {}


def vary_values(spec) -> tuple[str, list[str]]:
    """`FIELD=v1,v2,...` -> (canonical field, [value texts]); at least one value, at most 64."""
    if "=" not in str(spec):
        raise InputError("vary", f"{show(spec)} is not FIELD=v1,v2,...", "e.g. scaleup_domain=8,72,144,576")
    name, vals = str(spec).split("=", 1)
    field = canonical(name)
    out = [v.strip() for v in vals.split(",") if v.strip()]
    if not 1 <= len(out) <= 64:
        raise InputError(f"vary.{field}", f"{len(out)} values", "1 to 64 comma-separated values")
    return field, out
