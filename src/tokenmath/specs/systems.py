"""Systems: N chips grouped into scale-up domains, with the scale-up and scale-out links between them.

A `System` is a `Hardware` (the chip's peaks, memory and price) whose link fields describe the system: the domain
size, the scale-up bandwidth and latency, the scale-out bandwidth and latency. The engine reads it like any
Hardware, so there is one engine; `System.group_bw` adds what a flat per-chip figure cannot say, and the engine
uses it when an analysis passes the system as `links=`.

Topologies (data/systems.toml says which a system has):
- switch (NVSwitch: HGX, NVL72): any group gets each chip's full scale-up bandwidth. `group_bw` returns None and
  the engine uses `scaleup_bw`, exactly as for a plain Hardware.
- mesh (AMD Infinity Fabric on an 8-GPU board): one direct link per peer, so a group of p chips in a domain moves
  data on min(p-1, links) links per chip: a pair gets 64 GB/s on MI300X, the whole node 7 x 64 = 448 GB/s.
- torus (TPU ICI). Simplification, stated so it can be checked: a group of p chips inside a slice fills whole
  axes of the slice in turn, shortest axis first, so it spans k axes with extents n_1..n_k. On each axis it uses
  2 links (a bidirectional ring) when its extent is the whole axis and that axis wraps around, else 1 link (a
  line). Rings (all-reduce, all-gather, reduce-scatter) run on all of the group's axes at once:
      per-chip bandwidth = (links used) x link bandwidth   (scaling-book: bytes / (bidi ICI bw x num_axes))
  An all-to-all is bisection-bound on a torus: along an axis of extent n the traffic needs n S / (8 L) seconds
  with wraparound (n S / (4 L) without), all axes in parallel, and never less than the injection time
  (p-1)/p S / (links x L). The engine's all-to-all formula (p-1)/p x S / bw then gets the equivalent bandwidth.
  A point-to-point hand-off (pipeline stages) uses one link.
  Wraparound (jax-ml/scaling-book tpus.md): v5p axes wrap when their length is a multiple of 4; v5e/v6e axes only
  at the full 16. Link latency is the engine's (a fixed cost plus 2 us x (sqrt(p) - 1)), not a hop count.

`get_system(spec, chips)` takes a system id (hgx-h100, gb200-nvl72, tpu-v5p, ...), a chip id from the hardware
catalog (that chip in its usual domain, a switch), a System or Hardware, or a .toml/.json file in either schema.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from tokenmath.specs.catalog import looks_like_path, read_user_file, shipped
from tokenmath.base.validators import known_keys
from tokenmath.base.errors import InputError, closest, show
from tokenmath.specs.hardware import SHORT_NAMES, Hardware, record_number, catalog as hw_catalog, from_record as hw_from_record, get_hardware

TOPOLOGIES = ("switch", "mesh", "torus")
KNOWN_KEYS = ("id", "name", "chip", "domain", "topology", "scaleup_gbs", "scaleout_gbs", "scaleup_latency_us",
              "scaleout_latency_us", "link_gbs", "links", "torus_max", "slice_wrap", "default_chips", "node_kw",
              "node_chips", "notes", "sources")
MAX_CHIPS = 1_000_000


@dataclass(frozen=True)
class System(Hardware):
    """A chip in its system: the Hardware figures plus the domain's topology and links (B/s per link)."""
    chip: str = ""                      # hardware catalog id of the chip
    chips: int = 0                      # chips in the system as asked for
    topology: str = "switch"
    link_bw: float | None = None        # B/s per link, one direction (mesh, torus)
    links: int = 0                      # links per chip (mesh: peers; torus: 2 per axis)
    torus: tuple = ()                   # dims of one slice (torus)
    wrap: int = 0                       # an axis of at least this length wraps around (torus)
    system_sources: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    system_notes: str = ""
    node_w: float | None = None         # W of one whole node (or rack) at its maximum, the vendor's system rating
    node_chips: int = 0                 # chips in that node (or rack)

    @property
    def domains(self) -> int:
        return max(1, math.ceil(self.chips / self.scaleup_domain)) if self.chips else 1

    # ---- bandwidth a group actually gets inside one domain --------------------------------------------------
    def group_bw(self, kind: str, p):
        """Per-chip scale-up bandwidth (B/s, one direction) a collective of `kind` gets in a group of p chips,
        or None where every group gets `scaleup_bw` (switch). kind: all_reduce, all_gather, all_to_all, p2p."""
        if self.topology == "switch":
            return None
        L = float(self.link_bw or self.scaleup_bw)
        q = np.minimum(np.asarray(p, float), float(self.scaleup_domain))
        if kind == "p2p":
            return np.full(np.shape(q), L) if np.ndim(q) else L
        if self.topology == "mesh":
            return np.maximum(np.minimum(q - 1, self.links), 1) * L
        # torus: evaluate the few distinct group sizes, then map back (vectorized over p)
        uq, inv = np.unique(q, return_inverse=True)
        vals = np.array([self._torus_bw(kind, float(x), L) for x in uq.ravel()])
        out = vals[inv].reshape(np.shape(q))
        return float(out) if np.ndim(out) == 0 else out

    def group_axes(self, p: int) -> list[tuple[int, int, bool]]:
        """(extent, axis length, wraps) of each torus axis a group of p chips spans, shortest axis first."""
        out, left = [], max(int(p), 1)
        for n in sorted(self.torus):
            if left <= 1:
                break
            e = min(n, left)
            out.append((e, n, e == n and n >= self.wrap and n > 2))
            left = math.ceil(left / e)
        return out

    def _torus_bw(self, kind: str, q: float, L: float) -> float:
        axes = self.group_axes(int(round(q)))
        if not axes:
            return L
        used = sum(2 if w else 1 for _, _, w in axes)
        ring = used * L
        if kind != "all_to_all":
            return ring
        bisect = max(e / (8.0 if w else 4.0) for e, _, w in axes)      # seconds x L per byte of payload
        inject = (q - 1) / q / used
        t = max(bisect, inject)                                         # time = t x S / L
        return (q - 1) / q / t * L

    def describe(self) -> dict:
        src = dict(self.sources)
        return {"id": self.id, "name": self.name, "chip": self.chip, "chips": self.chips,
                "domain_size": self.scaleup_domain, "domains": self.domains, "topology": self.topology,
                "torus": list(self.torus) or None, "scaleup_gbs": self.scaleup_bw / 1e9,
                "link_gbs": None if self.link_bw is None else self.link_bw / 1e9, "links": self.links or None,
                "scaleout_gbs": None if self.scaleout_bw is None else self.scaleout_bw / 1e9,
                "scaleup_latency_us": self.scaleup_latency * 1e6, "scaleout_latency_us": self.scaleout_latency * 1e6,
                "memory_gb": self.memory_bytes / 1e9, "price_usd_per_chip_hour": self.price_usd_per_hour,
                "node_kw": None if self.node_w is None else self.node_w / 1e3, "node_chips": self.node_chips or None,
                "notes": self.system_notes or self.notes,
                "sources": {**{k: v for k, v in src.items() if k in ("scaleup", "scaleout")},
                            **dict(self.system_sources)}}


def catalog() -> dict:
    return shipped("systems.toml")


def system_ids() -> list[str]:
    return sorted(catalog())


# ---- TPU slices -------------------------------------------------------------------------------------------------
def slice_sizes(torus_max) -> list[tuple[int, tuple]]:
    """Slice shapes from one chip up: double the shortest axis that can still double; the full shape last."""
    dims = [1] * len(torus_max)
    out = [(1, tuple(dims))]
    while True:
        order = sorted(range(len(dims)), key=lambda i: (dims[i], i))
        for i in order:
            if dims[i] * 2 <= torus_max[i]:
                dims[i] *= 2
                break
        else:
            break
        out.append((math.prod(dims), tuple(sorted(dims))))
    full = math.prod(torus_max)
    if out[-1][0] != full:
        out.append((full, tuple(sorted(torus_max))))
    return out


def _slice_for(sid: str, torus_max, chips: int) -> tuple[int, tuple]:
    sizes = slice_sizes(torus_max)
    for n, dims in sizes:
        if n == chips:
            return n, dims
    if chips > sizes[-1][0]:
        for n, dims in reversed(sizes):
            if chips % n == 0 and n > 1:
                return n, dims
    valid = [n for n, _ in sizes]
    raise InputError("chips", f"{chips} chips is not a slice of {sid} (slices of up to {valid[-1]:,} chips, or a "
                     f"multiple of one for several slices over the data-centre network)",
                     f"one of {', '.join(f'{n:,}' for n in valid)}; above {valid[-1]:,}, a multiple of one of these")


# ---- building -----------------------------------------------------------------------------------------------------
def _chips_arg(v, default, field: str = "chips") -> int:
    if v is None:
        return int(default)
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a chip count", f"an integer from 1 to {MAX_CHIPS:,}")
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InputError(field, f"{show(v)} is not a chip count", f"an integer from 1 to {MAX_CHIPS:,}") from None
    if not math.isfinite(f) or f != int(f) or not 1 <= f <= MAX_CHIPS:
        raise InputError(field, f"{show(v)} is not a chip count", f"an integer from 1 to {MAX_CHIPS:,}")
    return int(f)


def from_hardware(hw: Hardware, chips=None) -> System:
    """A chip in its usual domain (the hardware file's scaleup_domain), on a switch."""
    n = _chips_arg(chips, hw.scaleup_domain)
    base = {k: getattr(hw, k) for k in Hardware.__dataclass_fields__}
    return System(**base, chip=hw.id, chips=n, topology="switch",
                  system_notes=f"{hw.id} in its usual scale-up domain of {hw.scaleup_domain} (hardware catalog)")


def from_record(sid: str, rec: dict, chips=None, field: str = "system") -> System:
    if not isinstance(rec, dict):
        raise InputError(field, f"entry {sid!r} is not a table", "a table of keys")
    known_keys(rec, KNOWN_KEYS, field)
    chip_id = rec.get("chip")
    if not isinstance(chip_id, str):
        raise InputError(f"{field}.chip", "missing", "a chip id from the hardware catalog (tokenmath hardware)")
    hw = get_hardware(chip_id)
    topo = rec.get("topology", "switch")
    if topo not in TOPOLOGIES:
        raise InputError(f"{field}.topology", f"unknown topology {topo!r}", f"one of {', '.join(TOPOLOGIES)}")
    up = record_number(rec, "scaleup_gbs", field, False, 1e-3, 1e6)
    out = record_number(rec, "scaleout_gbs", field, False, 1e-3, 1e6)
    lat_up = record_number(rec, "scaleup_latency_us", field, False, 0.0, 1e6)
    lat_out = record_number(rec, "scaleout_latency_us", field, False, 0.0, 1e6)
    link = record_number(rec, "link_gbs", field, topo != "switch", 1e-3, 1e6)
    links = rec.get("links", 0)
    if (isinstance(links, bool) or not isinstance(links, int) or not (1 if topo != "switch" else 0) <= links <= 1024):
        raise InputError(f"{field}.links", f"{show(links)} is not a link count", "an integer from 1 to 1024")
    key = "default_chips" if "default_chips" in rec else "domain"       # a file's figure: checked as --chips is
    if isinstance(rec.get(key), str):
        raise InputError(f"{field}.{key}", f"{show(rec[key])} is text, not a chip count",
                         f"an integer from 1 to {MAX_CHIPS:,}")
    default = _chips_arg(rec.get(key, hw.scaleup_domain), None, f"{field}.{key}")
    n = _chips_arg(chips, default)
    torus, wrap = (), 0
    if topo == "torus":
        tmax = rec.get("torus_max")
        if (not isinstance(tmax, list) or not 1 <= len(tmax) <= 4
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in tmax)):
            raise InputError(f"{field}.torus_max", f"{tmax!r} is not a list of axis lengths", "e.g. [16, 16, 24]")
        domain, torus = _slice_for(sid, tmax, n)
        wrap = rec.get("slice_wrap", 4)
        if isinstance(wrap, bool) or not isinstance(wrap, int) or not 0 <= wrap <= MAX_CHIPS:
            raise InputError(f"{field}.slice_wrap", f"{show(wrap)} is not a chip count", "an integer, e.g. 4")
    else:
        domain = rec.get("domain", hw.scaleup_domain)
        if isinstance(domain, bool) or not isinstance(domain, int) or not 1 <= domain <= MAX_CHIPS:
            raise InputError(f"{field}.domain", f"{domain!r} is not a chip count", "an integer from 1 to 1000000")
    node_kw = record_number(rec, "node_kw", field, False, 1e-3, 1e5)
    node_chips = rec.get("node_chips", domain)
    if node_kw is not None and (isinstance(node_chips, bool) or not isinstance(node_chips, int)
                                or not 1 <= node_chips <= MAX_CHIPS):
        raise InputError(f"{field}.node_chips", f"{node_chips!r} is not a chip count", "an integer from 1 to 1000000")
    srcs = rec.get("sources", {})
    base = {k: getattr(hw, k) for k in Hardware.__dataclass_fields__}
    base.update(
        id=sid, name=str(rec.get("name", sid)), scaleup_domain=int(domain),
        scaleup_bw=up * 1e9 if up is not None else hw.scaleup_bw,
        scaleout_bw=out * 1e9 if out is not None else hw.scaleout_bw,
        scaleup_latency=lat_up * 1e-6 if lat_up is not None else hw.scaleup_latency,
        scaleout_latency=lat_out * 1e-6 if lat_out is not None else hw.scaleout_latency)
    return System(**base, chip=hw.id, chips=n, topology=topo, link_bw=link * 1e9 if link is not None else None,
                  links=int(links or 0), torus=tuple(torus), wrap=wrap,
                  system_sources=MappingProxyType(dict(srcs) if isinstance(srcs, dict) else {}),
                  system_notes=str(rec.get("notes", "")),
                  node_w=None if node_kw is None else node_kw * 1e3, node_chips=int(node_chips) if node_kw else 0)


@dataclass(frozen=True)
class NodePower:
    """A whole node's (or rack's) power at its maximum, from the systems catalog (data/systems.toml node_kw): the
    chips' boards plus CPUs, NICs, switches and fans, as the vendor rates the system."""
    system: str         # the system id it comes from
    watts: float        # W per node
    chips: int          # chips per node
    source: str         # the catalog's source for the figure

    def to_dict(self) -> dict:
        return {"system": self.system, "node_kw": self.watts / 1e3, "node_chips": self.chips, "source": self.source}


def node_power(hw: Hardware) -> NodePower | None:
    """The whole-node power behind chip `hw`: its own (a System with node_kw), else that of the catalog system built
    of chip `hw.id` (hgx-h200 for h200, gb200-nvl72 for gb200-nvl72, ...). None where no system of that chip has a
    sourced node power, or where a what-if moved the chip's TDP (the catalog's node figure no longer holds)."""
    if any(o.field == "tdp_w" for o in getattr(hw, "what_if", ())):
        return None
    if isinstance(hw, System) and hw.node_w:
        return NodePower(hw.id, hw.node_w, hw.node_chips, str(hw.system_sources.get("power", "")))
    for sid, rec in catalog().items():
        if isinstance(rec, dict) and rec.get("chip") == hw.id and rec.get("node_kw") is not None:
            s = from_record(sid, rec, field=f"system[{sid}]")
            return NodePower(sid, s.node_w, s.node_chips, str(s.system_sources.get("power", "")))
    return None


def get_system(spec, chips=None) -> System:
    """A system id, a chip id (that chip in its usual domain), a System/Hardware, or a .toml/.json file.
    `chips`: total chips (default: the system's usual size); TPU slices are shaped from it."""
    if isinstance(spec, System):
        if chips is None or _chips_arg(chips, spec.chips) == spec.chips:
            return spec
        if spec.topology == "torus":
            raise InputError("system", "a TPU System object is built for its chip count",
                             "pass the system id with chips= instead")
        return spec.replace(chips=_chips_arg(chips, spec.chips))
    if isinstance(spec, Hardware):
        return from_hardware(spec, chips)
    if not isinstance(spec, str) or not spec:
        raise InputError("system", f"{spec!r} is not a name", "a system id such as hgx-h100 or a chip id such as h100-sxm")
    key = spec.lower()
    cat = catalog()
    if key in cat:
        return from_record(key, cat[key], chips, field=f"system[{key}]")
    key = SHORT_NAMES.get(key, key)     # a chip's short name (h100): that chip in its usual domain
    if key in hw_catalog():
        return from_hardware(get_hardware(key), chips)
    if looks_like_path(spec):
        data = read_user_file(spec, "system")
        if "chip" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
            sid, rec = next(iter(data.items()))
        else:
            sid, rec = str(data.get("id", spec)), data
        if "chip" in rec:
            return from_record(sid, rec, chips)
        return from_hardware(hw_from_record(sid, rec, field="system"), chips)
    names = sorted(set(cat) | set(hw_catalog()))
    near = closest(spec, names)
    raise InputError("system", f"unknown name {spec!r}",
                     f"did you mean {', '.join(near)}?" if near else f"systems: {', '.join(sorted(cat))}; "
                     "or any chip id from `tokenmath hardware`")
