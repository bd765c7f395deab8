"""What a chip can do: peak dense FLOP/s per dtype, memory, links, power and price (SI units inside).

The catalog (data/hardware.toml) is written in humane units with a source for every figure; `Hardware` holds SI.
Users pass their own file of the same schema (TOML or JSON) with `--hardware FILE`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from tokenmath.specs.catalog import looks_like_path, read_user_file, shipped
from tokenmath.base.validators import known_keys
from tokenmath.base.errors import InputError, show, unknown_name
from tokenmath.specs.families import NAMES as FAMILY_NAMES, of_chip

if TYPE_CHECKING:
    from tokenmath.specs.kernels import KernelModel

FLOP_KEYS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")

# Where a chip lacks a native path for a dtype, the matmul runs at the next one that it has
# (weight-only quantization dequantizes to bf16: W4A16 Marlin kernels, W8A16 on A100).
FALLBACK = {
    "fp4": ("fp4", "bf16", "fp16", "fp32"),      # without a 4-bit path, fp4 weights dequantize to 16-bit (W4A16)
    "int4": ("int4", "int8", "bf16", "fp16", "fp32"),
    "fp8": ("fp8", "bf16", "fp16", "fp32"),
    "int8": ("int8", "bf16", "fp16", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "fp32": ("fp32", "tf32", "bf16"),
}

# Fixed latency of one small collective when the file gives none (engine/collectives.py adds 2 us x (sqrt(p)-1)):
# Epoch AI's NCCL-fitted t_reduce = 2us*(sqrt(N)-1) + 6us (Erdil 2025, arXiv:2506.04645) gives ~10 us for 8 GPUs,
# matching 10.1-11.8 us measured for small all-reduces on 8xH100 in sglang PR #2904. Crossing nodes adds tens of
# microseconds: 46-48 us for a small all-reduce over 2 nodes of 8 H20 (NVIDIA/nccl issue #1244).
DEFAULT_SCALEUP_LATENCY_S = 6e-6
DEFAULT_SCALEOUT_LATENCY_S = 40e-6


@dataclass(frozen=True)
class Hardware:
    """One chip: memory (bytes), bandwidths (bytes/s), dense FLOP/s per dtype, its scale-up domain, power, price."""
    id: str
    name: str
    memory_bytes: float            # bytes of HBM/DRAM per chip
    memory_bw: float               # bytes/s per chip
    flops: MappingProxyType        # dtype -> dense FLOP/s per chip
    scaleup_domain: int            # chips per scale-up domain
    scaleup_bw: float              # bytes/s per chip, one direction
    scaleout_bw: float | None      # bytes/s per chip, one direction (None: unknown)
    scaleup_latency: float = DEFAULT_SCALEUP_LATENCY_S    # s, fixed cost of a collective in a domain
    scaleout_latency: float = DEFAULT_SCALEOUT_LATENCY_S  # s, extra when it crosses domains
    tdp_w: float | None = None
    price_usd_per_hour: float | None = None
    price_date: str | None = None
    price_market: str | None = None  # which market the price is: "on-demand, Lambda", "on-demand list, CoreWeave"
    vendor: str = ""
    kind: str = "gpu"
    sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    notes: str = ""
    caveats: tuple = ()            # figures without a source, or marked ASSUMED: every answer's notes carry them
    family: str = ""               # calibration family (specs/families.py): a catalog chip's, or a file's `family`
    kernel_class: str = ""         # a file's `kernel_class` (specs/kernels.py); "" : the catalog chip's, else generic
    kernels: "KernelModel | None" = None   # a file's own measured KernelModel (its [kernels] section, `tokenmath measure`)
    what_if: tuple = ()            # the what-if overrides applied to these figures (specs/overrides.Override), in order

    def _path(self, compute: str) -> tuple[str, ...]:
        """The FLOP keys tried, in order, for matmuls on `compute`. mxfp4 weights meet MXFP8 activations where the
        chip has microscaling (fp4) tensor cores and bf16 elsewhere (specs/dtypes.py, the W4A8 / W4A16 note)."""
        if compute == "mxfp4":
            return (("fp8",) if self.flops.get("fp4") else ()) + ("bf16", "fp16", "fp32")
        return FALLBACK.get(compute, (compute, "bf16", "fp16", "fp32"))

    def peak_flops(self, compute: str) -> float:
        """Dense FLOP/s for matmuls on `compute` (a dtype key), falling back where the chip lacks that path."""
        for k in self._path(compute):
            if self.flops.get(k):
                return self.flops[k]
        raise InputError("hardware", f"{self.id} lists no FLOP/s figure usable for {compute}",
                         "add a tflops entry for bf16 or fp16 to the hardware file")

    def flops_key(self, compute: str) -> str:
        for k in self._path(compute):
            if self.flops.get(k):
                return k
        return compute

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where bf16 matmuls turn compute-bound."""
        return self.peak_flops("bf16") / self.memory_bw

    def replace(self, **kw) -> "Hardware":
        from dataclasses import replace
        return replace(self, **kw)


KNOWN_KEYS = ("id", "name", "vendor", "kind", "release_year", "memory_gb", "memory_bw_tbs", "tflops", "scaleup_domain",
              "scaleup_gbs", "scaleup_link", "scaleout_gbs", "scaleup_latency_us", "scaleout_latency_us", "tdp_w",
              "price_usd_per_hour", "price_date", "price_market", "notes", "sources", "measured", "family", "kernel_class", "kernels")


# which `sources` entry vouches for each figure of a record (the catalog schema)
FIGURE_SOURCES = {"memory_gb": "memory", "memory_bw_tbs": "memory", "tflops": "flops", "scaleup_gbs": "scaleup",
                  "scaleout_gbs": "scaleout", "tdp_w": "power", "price_usd_per_hour": "price"}


def caveats(hid: str, rec: dict) -> tuple[str, ...]:
    """Figures a record gives without a source, or whose source says ASSUMED. Only for records that carry a
    `sources` table (the catalog, `tokenmath measure` files): in a hand-written file the user is the source. First, a
    measured file's noisy figures, whatever its sources."""
    out = _noise_caveat(hid, rec)
    src = rec.get("sources")
    if not isinstance(src, dict) or not src:
        return out
    out = list(out)
    for key, group in FIGURE_SOURCES.items():
        if key not in rec or (key == "scaleup_gbs" and rec.get("scaleup_domain", 1) == 1):
            continue
        s = str(src.get(group, "") or "")
        shown = show(rec[key]) if not isinstance(rec[key], dict) else "the table"
        if not s:
            out.append(f"{hid}: {key} = {shown} has no source in the catalog")
        elif s.lstrip().upper().startswith("ASSUMED"):
            out.append(f"{hid}: {key} = {shown} is assumed, not sourced ({s.split(';')[0].strip()})")
    return tuple(out)


NOISY_MARK = "measured on a noisy machine"


def _noise_caveat(hid: str, rec: dict) -> tuple[str, ...]:
    """A measured file written despite noisy repetitions (`measure --accept-noisy`: its [measured.noise] table names
    the figures, tokenmath.local.noise) says so in every answer that uses it."""
    meas = rec.get("measured")
    noise = meas.get("noise") if isinstance(meas, dict) else None
    bad = noise.get("noisy") if isinstance(noise, dict) else None
    if not bad or not isinstance(bad, list):
        return ()
    spread = noise.get("spread") if isinstance(noise.get("spread"), dict) else {}
    figs = ", ".join(f"{k} {spread[k]:.0%}" if isinstance(spread.get(k), (int, float)) else str(k) for k in bad[:4])
    return (f"{hid}: {NOISY_MARK} ({figs} spread between repetitions, median vs best): its figures may be off by "
            "as much; measure again with the machine quiet",)


def noise_caveats(hw: Hardware) -> tuple[str, ...]:
    """The caveat of a hardware file measured on a noisy machine (none for any other chip)."""
    return tuple(c for c in hw.caveats if NOISY_MARK in c)


def record_number(rec: dict, key: str, field: str, required: bool, lo: float, hi: float) -> float | None:
    v = rec.get(key)
    if v is None:
        if required:
            raise InputError(f"{field}.{key}", "missing", f"a number between {lo:g} and {hi:g}")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{field}.{key}", f"must be a number, got {type(v).__name__} {show(v)}", f"between {lo:g} and {hi:g}")
    if not (lo <= v <= hi) or v != v:
        raise InputError(f"{field}.{key}", f"{show(v)} is out of range", f"between {lo:g} and {hi:g}")
    return float(v)


def from_record(hid: str, rec: dict, field: str = "hardware") -> Hardware:
    """Build Hardware from a record in the catalog schema (humane units). Range-checks every figure."""
    if not isinstance(rec, dict):
        raise InputError(field, f"entry {hid!r} is not a table", "a table of keys")
    known_keys(rec, KNOWN_KEYS, field)
    mem = record_number(rec, "memory_gb", field, True, 0.001, 1e6)
    bw = record_number(rec, "memory_bw_tbs", field, True, 1e-4, 1e4)
    tf = rec.get("tflops")
    if not isinstance(tf, dict) or not tf:
        raise InputError(f"{field}.tflops", "missing or not a table", f"a table like {{ bf16 = 989 }} with keys from {', '.join(FLOP_KEYS)}")
    flops = {}
    for k, v in tf.items():
        if k not in FLOP_KEYS:
            raise InputError(f"{field}.tflops.{k}", "unknown dtype key", f"valid: {', '.join(FLOP_KEYS)}")
        flops[k] = record_number(tf, k, f"{field}.tflops", True, 1e-4, 1e7) * 1e12
    if not any(k in flops for k in ("bf16", "fp16", "fp32")):
        raise InputError(f"{field}.tflops", "no bf16, fp16 or fp32 figure", "at least one of bf16, fp16, fp32")
    dom = rec.get("scaleup_domain", 1)
    if isinstance(dom, bool) or not isinstance(dom, int) or not 1 <= dom <= 1_000_000:
        raise InputError(f"{field}.scaleup_domain", f"{show(dom)} is not a chip count", "an integer between 1 and 1000000")
    up = record_number(rec, "scaleup_gbs", field, False, 1e-3, 1e6)
    if up is None and dom > 1:
        raise InputError(f"{field}.scaleup_gbs", f"missing: scaleup_domain = {dom} puts {dom} chips on one link, "
                         "and how fast that link is decides every collective",
                         "GB/s per chip, one direction: e.g. 450 for NVLink 4 (H100 SXM), 900 for NVLink 5, 64 for "
                         "PCIe Gen5 x16, 32 for PCIe Gen4 x16; or scaleup_domain = 1 for chips that share no link")
    out = record_number(rec, "scaleout_gbs", field, False, 1e-3, 1e6)
    lat_up = record_number(rec, "scaleup_latency_us", field, False, 0.0, 1e6)
    lat_out = record_number(rec, "scaleout_latency_us", field, False, 0.0, 1e6)
    fam = rec.get("family", "")
    if fam and fam not in FAMILY_NAMES:
        raise InputError(f"{field}.family", f"unknown hardware family {show(fam)}",
                         f"one of {', '.join(FAMILY_NAMES)} (the efficiencies calibrated for it)")
    kcls = rec.get("kernel_class", "")
    from tokenmath.specs.kernels import CLASSES as KERNEL_CLASSES
    if kcls and kcls not in KERNEL_CLASSES:
        raise InputError(f"{field}.kernel_class", f"unknown kernel class {show(kcls)}",
                         f"one of {', '.join(KERNEL_CLASSES)} (the kernel constants of data/kernels.toml)")
    return Hardware(
        id=hid,
        name=str(rec.get("name", hid)),
        memory_bytes=mem * 1e9,
        memory_bw=bw * 1e12,
        flops=MappingProxyType(flops),
        scaleup_domain=dom,
        # a domain of one chip has no scale-up traffic (its chips only talk over scale-out); the figure is never used
        scaleup_bw=(up if up is not None else 32.0) * 1e9,
        scaleout_bw=out * 1e9 if out is not None else None,
        scaleup_latency=lat_up * 1e-6 if lat_up is not None else DEFAULT_SCALEUP_LATENCY_S,
        scaleout_latency=lat_out * 1e-6 if lat_out is not None else DEFAULT_SCALEOUT_LATENCY_S,
        tdp_w=record_number(rec, "tdp_w", field, False, 0.1, 1e7),
        price_usd_per_hour=record_number(rec, "price_usd_per_hour", field, False, 1e-6, 1e5),   # 0 would price every token at $0
        price_date=str(rec["price_date"]) if rec.get("price_date") is not None else None,
        price_market=str(rec["price_market"]) if rec.get("price_market") is not None else None,
        vendor=str(rec.get("vendor", "")),
        kind=str(rec.get("kind", "gpu")),
        sources=MappingProxyType(dict(rec.get("sources", {})) if isinstance(rec.get("sources"), dict) else {}),
        notes=str(rec.get("notes", "")),
        caveats=caveats(hid, rec),
        family=str(fam or ""),
        kernel_class=str(kcls or ""),
        kernels=_measured_kernels(hid, rec, field, bw * 1e12, flops),
    )


def _measured_kernels(hid: str, rec: dict, field: str, memory_bw: float, flops: dict):
    """The KernelModel of a file's [kernels] section (specs.kernels_measured.measured_model), None without one."""
    if "kernels" not in rec:
        return None
    from tokenmath.specs.kernels import GENERIC
    from tokenmath.specs.kernels_measured import measured_model
    return measured_model(rec["kernels"], rec.get("kernel_class") or GENERIC, memory_bw, flops, hid,
                          where=f"{field}.kernels")


def catalog() -> dict:
    return shipped("hardware.toml")


def hardware_ids() -> list[str]:
    return sorted(catalog())


# Short names people type for a chip sold in several forms: the form clouds and MLPerf mean by the bare name (the SXM
# board of 8-GPU HGX nodes; A100 80 GB, the only A100 still listed; the NVL72 rack for Grace-Blackwell). Each
# answer names the chip it used (e.g. "NVIDIA H100 SXM5 80GB"), so the choice is never hidden.
SHORT_NAMES = {"h100": "h100-sxm", "a100": "a100-80gb", "gb200": "gb200-nvl72", "gb300": "gb300-nvl72"}


def get_hardware(spec: "str | Hardware") -> Hardware:
    """A catalog id (e.g. 'h100-sxm') or the path of a hardware file (.toml or .json, catalog schema)."""
    if isinstance(spec, Hardware):
        return spec
    if not isinstance(spec, str) or not spec:
        raise InputError("hardware", f"{spec!r} is not a name", "a catalog id such as h100-sxm, or a file path")
    cat = catalog()
    key = SHORT_NAMES.get(spec.lower(), spec.lower())
    if key in cat:
        return from_record(key, cat[key], field=f"hardware[{key}]").replace(family=of_chip(key))
    if looks_like_path(spec):
        data = read_user_file(spec, "hardware")
        # a file may hold one chip (flat) or several tables; take the single one
        if "memory_gb" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
            hid, rec = next(iter(data.items()))
        else:
            hid, rec = str(data.get("id", spec)), data
        return from_record(hid, rec, field="hardware")
    system = shipped("systems.toml").get(key)
    if system is not None and system.get("chip") in cat:
        # a system id where a chip is asked for: name the chip it is built of (closest-name matching would not)
        raise InputError("hardware", f"{spec!r} is a system of {system['chip']} chips, not a chip",
                         f"pass --hardware {system['chip']} (with --chips), or --system {key} to plan / fleet")
    raise unknown_name("hardware", spec, cat)
