"""Kernel efficiency as a function of shape: the few named constants of each chip class, with their provenance.

data/kernels.toml holds the constants (each marked sourced, derived with its arithmetic, fitted, or assumed from
another class); engine/kernels.py turns them into op times. The class follows the silicon, like specs/families.py:
- a catalog chip has the class its table in data/kernels.toml lists it under;
- a System (or a system id) resolves to its chip;
- a user hardware file is not a catalog chip because it borrows an id: it gets the class its `kernel_class` field
  names, else the conservative "generic" class (the lowest sourced fractions of any class).
`by_chip()` is the model of no chip in particular: Efficiency objects made without a chip (specs/efficiency.DEFAULT)
carry it, and the engine resolves it against the chip it prices (`resolve`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType

from tokenmath.base.errors import InputError

CLASSES = ("nvidia-hopper", "nvidia-blackwell", "nvidia-ampere", "nvidia-ada-and-consumer", "amd-cdna2", "amd-cdna3",
           "amd-cdna4", "tpu", "apple", "generic")
GENERIC = "generic"
MEASURED_K_CLASS = "nvidia-hopper"   # the class the [gemm_k_dependence] sweep was measured on (H800)
BY_CHIP = "by-chip"      # the kernel_class of by_chip(): resolved against the chip at pricing time
FRACTIONS = ("stream_bw", "gemm_bf16", "gemm_fp8", "gemm_fp4", "attn_decode_bw", "attn_decode_flops",
             "attn_prefill_scale", "link_bw")
TILES = ("tile_m_small", "tile_m", "split_k_min_k")
TIMES = ("gemm_fixed_s", "small_kernel_fixed_s", "attn_decode_fixed_s")
# the dense-peak key a matmul runs at (Hardware.flops_key) -> the GEMM fraction that applies to it
DTYPE_CLASS = {"fp32": "bf16", "tf32": "bf16", "bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "fp8",
               "fp6": "fp4", "fp4": "fp4", "int4": "fp4", "w4a16": "w4a16"}
# 4-bit floating-point weights on a chip without a 4-bit (or microscaling) path run W4A16 at the bf16 peak
# (specs/hardware.FALLBACK), dequantizing every weight tile inside the GEMM: the class's `gemm_w4a16` fraction
W4_KEYS = ("fp4", "mxfp4")


def fraction_key(requested: str, resolved: str) -> str:
    """The GEMM-fraction key for matmuls asked at `requested` (Precision .compute) that run at the dense peak
    `resolved` (Hardware.flops_key): "w4a16" where 4-bit float weights fell back to a 16-bit peak, else resolved."""
    return "w4a16" if requested in W4_KEYS and DTYPE_CLASS.get(resolved, "bf16") == "bf16" else resolved


@dataclass(frozen=True)
class KernelModel:
    """The kernel constants of one chip class (fractions of a peak in (0, 1], times in s, sizes in elements)."""
    kernel_class: str
    stream_bw: float            # fraction of HBM peak a long streaming read reaches
    gemm: MappingProxyType      # "bf16" | "fp8" | "fp4" | "w4a16" -> fraction of that dense peak a large GEMM sustains
                                # (w4a16: 4-bit weights dequantized in a bf16 GEMM, at the bf16 peak)
    compute_units: int          # SMs / CUs of the chip (0: unknown, no wave quantization)
    tile_m_small: int           # output tile rows when the GEMM has at most this many rows (tokens)
    tile_m: int                 # output tile rows otherwise
    tile_n: tuple               # output tile columns the library chooses from, per shape (the best-filling one)
    split_k_min_k: int          # a GEMM with fewer tiles than compute units splits K into slices of at least this
    gemm_fixed_s: float         # fixed time of one GEMM kernel (fill, drain, epilogue), s
    small_kernel_fixed_s: float # fixed time of one elementwise kernel (norm, activation, rotary), s
    attn_decode_fixed_s: float  # fixed time of one decode-attention kernel, s
    attn_decode_bw: float       # fraction of HBM peak decode attention streams the KV cache at
    attn_decode_flops: float    # fraction of the bf16 peak compute-bound decode attention reaches
    attn_prefill_scale: float   # multiplies the FlashAttention-3 table (measured on H100) for this class
    link_bw: float              # fraction of link bandwidth a large collective reaches (NCCL bus bandwidth)
    fa_seq_len: tuple           # FlashAttention-3 table: sequence lengths (columns)
    fa_head_dim: tuple          # ... head dims (rows)
    fa_causal: tuple            # ... fraction of the dense bf16 peak, causal, rows x columns
    grouped_tokens: tuple       # grouped GEMM: tokens per expert
    grouped_factor: tuple       # ... multiplier on the GEMM compute fraction
    # GEMM efficiency vs the reduction depth K ([gemm_k_dependence]): a GEMM class ("fp8") -> multipliers (<= 1) on
    # its compute fraction at k_points; a class with no row has no K dependence
    k_points: tuple = ()        # K (reduction length) of the measured points, increasing
    k_factor: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    provenance: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))   # field -> "how: source"
    chip: str = ""              # the chip this model was resolved for ("" for a class or by_chip())
    # a machine that measured itself (`tokenmath measure`, measured_model): its GEMM efficiency by rows and shape,
    # read by engine/kernels.measured_share in place of tile and wave quantization
    curve_rows: tuple = ()      # M (rows = tokens) of the measured GEMMs, increasing
    curve_elements: tuple = ()  # N x K (weight elements) of each measured shape, increasing
    curve_efficiency: tuple = ()   # [row][shape]: share (0, 1] of max(FLOPs / peak, bytes / bandwidth) reached
    measured_on: str = ""       # when and how the curve was measured ("" for a catalog class)
    # matrix-vector path: GEMMs of at most this many token rows run as matrix-vector kernels that compute only the
    # useful rows (no tile padding of the token dimension); 0: none, every GEMM pads to tile_m_small
    gemv_max_m: int = 0
    # bounded residuals of a serving stack on top of the sourced constants (tokenmath validate fits them, per chip
    # family, data/calibration.toml [physics]): every compute fraction x compute_scale, every bandwidth fraction x
    # bw_scale, both in (0, 1] so no op gets faster than the microbenchmark ceiling (1.0: the constants as read)
    compute_scale: float = 1.0
    bw_scale: float = 1.0
    fa_bwd_seq_len: tuple = ()  # FlashAttention-3 backward / forward speed: sequence lengths ...
    fa_bwd_ratio: tuple = ()    # ... and the ratio at each ([flash_attention_backward]; () = 1)

    def gemm_fraction(self, compute_key: str) -> float:
        """The large-GEMM fraction for matmuls at the dense peak `compute_key` (Hardware.flops_key)."""
        return float(self.gemm[DTYPE_CLASS.get(compute_key, "bf16")])

    @property
    def assumed(self) -> tuple[str, ...]:
        """Fields with no source for this class (provenance starts with 'assumed')."""
        return tuple(k for k, v in self.provenance.items() if v.startswith("assumed"))

    @property
    def source(self) -> str:
        if self.curve_rows:
            e = [x for row in self.curve_efficiency for x in row]
            return (f"this machine's measured kernel model ({self.measured_on}): GEMM efficiency {min(e):.0%}-"
                    f"{max(e):.0%} of max(FLOPs / peak, bytes / bandwidth) measured at {self.curve_rows[0]}-"
                    f"{self.curve_rows[-1]} rows on {len(self.curve_elements)} weight shapes, stream "
                    f"{self.stream_bw:g} of memory_bw, {self.gemm_fixed_s * 1e6:.3g} us per call; nothing fitted")
        where = f"{self.kernel_class}" + (f", {self.chip}" if self.chip else "")
        return (f"shape-aware kernel model ({where}; data/kernels.toml): stream {self.stream_bw:g} of HBM peak, "
                f"large GEMM {self.gemm['bf16']:g} bf16 / {self.gemm['fp8']:g} fp8 of peak, tile and wave "
                f"quantization over {self.compute_units or 'unknown'} compute units, {self.gemm_fixed_s * 1e6:g} us "
                f"per GEMM kernel; nothing fitted to LLM measurements"
                + (f"; {len(self.assumed)} constants assumed from another class" if self.assumed else ""))

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("kernel_class", "chip", "stream_bw", "compute_units", "tile_m_small",
                                              "tile_m", "tile_n", "split_k_min_k", "gemm_fixed_s",
                                              "small_kernel_fixed_s", "attn_decode_fixed_s", "attn_decode_bw",
                                              "attn_decode_flops", "attn_prefill_scale", "link_bw")}
        out["gemm"] = dict(self.gemm)
        out["gemm_k_dependence"] = {"k": list(self.k_points), **{c: list(v) for c, v in self.k_factor.items()}}
        out["provenance"] = dict(self.provenance)
        if self.curve_rows:
            out.update(curve_rows=list(self.curve_rows), curve_elements=list(self.curve_elements),
                       curve_efficiency=[list(r) for r in self.curve_efficiency], measured_on=self.measured_on)
        return out


def _bad(where: str, problem: str, valid: str):
    raise InputError(f"kernels.toml.{where}", problem, valid)


def _tile_n(where: str, rec) -> tuple[tuple, str]:
    vals = rec.get("values") if isinstance(rec, dict) else None
    if not isinstance(vals, list) or not vals or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                                          for v in vals):
        _bad(where, "not a { values = [sizes], how, src } table", "values = a list of positive integers")
    return tuple(vals), _entry(where, {**rec, "value": 0})[1]


def _entry(where: str, rec) -> tuple[float, str]:
    if not isinstance(rec, dict) or "value" not in rec:
        _bad(where, "not a { value, how, src } table", "value = number, how = sourced|derived|fitted|assumed-...")
    how = str(rec.get("how", ""))
    if not (how in ("sourced", "derived", "fitted", "assumed") or how.startswith("assumed-from-")):
        _bad(where, f"provenance {how!r}", "sourced, derived, fitted, assumed or assumed-from-<class>")
    v = rec["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _bad(where, f"{v!r} is not a number", "a number")
    return float(v), f"{how}: {rec.get('src', '')}"


@cache
def _data() -> dict:
    from tokenmath.specs.catalog import shipped
    return shipped("kernels.toml")


@cache
def kernels_per_op() -> MappingProxyType:
    """op name -> (GEMM kernels, elementwise kernels, attention kernels) launched per occurrence (assumed counts of
    an unfused vLLM-style layer; data/kernels.toml [kernels_per_op])."""
    rec = _data()["kernels_per_op"]
    return MappingProxyType({k: (int(v["gemm"]), int(v["small"]), int(v["attention"]))
                             for k, v in rec.items() if isinstance(v, dict)})


@cache
def class_model(name: str) -> KernelModel:
    """The constants of one class (no chip: compute_units 0)."""
    classes = _data()["classes"]
    if name not in classes:
        from tokenmath.base.errors import closest
        raise InputError("kernel_class", f"unknown kernel class {name!r}",
                         f"one of {', '.join(CLASSES)}" + (f" (did you mean {', '.join(closest(name, CLASSES))}?)"
                                                           if closest(name, CLASSES) else ""))
    rec = dict(classes[name])
    base = rec.pop("assumed_from", None)
    vals, prov = {}, {}
    if base:
        parent = class_model(base)
        for k in FRACTIONS + ("gemm_w4a16",) + TILES + TIMES + ("tile_n",):
            key = k.replace("gemm_", "") if k.startswith("gemm_") and k not in TIMES else None
            vals[k] = parent.gemm[key] if key else getattr(parent, k)
            prov[k] = f"assumed-from-{base}: {parent.provenance.get(k, '')}"
    if "tile_n" in rec:
        vals["tile_n"], prov["tile_n"] = _tile_n(f"classes.{name}.tile_n", rec["tile_n"])
    elif "tile_n" not in vals:
        _bad(f"classes.{name}.tile_n", "missing", "a { values = [sizes], how, src } table")
    for k in FRACTIONS + TILES + TIMES:
        if k in rec:
            vals[k], prov[k] = _entry(f"classes.{name}.{k}", rec[k])
        elif k not in vals:
            _bad(f"classes.{name}.{k}", "missing", "a { value, how, src } table")
    # optional: a class with no W4A16 figure of its own takes its parent's, else its bf16 GEMM fraction (said so)
    if "gemm_w4a16" in rec:
        vals["gemm_w4a16"], prov["gemm_w4a16"] = _entry(f"classes.{name}.gemm_w4a16", rec["gemm_w4a16"])
    elif "gemm_w4a16" not in vals:
        vals["gemm_w4a16"] = vals["gemm_bf16"]
        prov["gemm_w4a16"] = "assumed-from-bf16: no W4A16 GEMM measurement read for this class (dequantization free)"
    for k in FRACTIONS + ("gemm_w4a16",):
        if not 0 < vals[k] <= 1:
            _bad(f"classes.{name}.{k}", f"{vals[k]:g} is not a fraction of a peak", "in (0, 1]")
    for k in TILES:
        if vals[k] < 1 or vals[k] != int(vals[k]):
            _bad(f"classes.{name}.{k}", f"{vals[k]:g} is not a size", "a positive integer")
    for k in TIMES:
        if not 0 <= vals[k] < 1e-3:
            _bad(f"classes.{name}.{k}", f"{vals[k]:g} is not a kernel's fixed time", "seconds in [0, 1e-3)")
    fa, gg = _data()["flash_attention"], _data()["grouped_gemm"]
    gemv = 0
    if "gemv_max_m" in rec:
        g, prov["gemv_max_m"] = _entry(f"classes.{name}.gemv_max_m", rec["gemv_max_m"])
        if g < 0 or g != int(g):
            _bad(f"classes.{name}.gemv_max_m", f"{g:g} is not a number of rows", "an integer >= 0")
        gemv = int(g)
    k_points, k_factor, prov["gemm_k_dependence"] = _k_dependence(_data().get("gemm_k_dependence"))
    if name not in _data().get("gemm_k_dependence", {}).get("classes", ()):
        k_points, k_factor = (), MappingProxyType({})
        prov["gemm_k_dependence"] = "assumed: no K dependence (no K sweep read for this class's matrix engines)"
    elif k_factor and name != MEASURED_K_CLASS:     # the sweep was measured on one class only
        prov["gemm_k_dependence"] = f"assumed-from-{MEASURED_K_CLASS}: {prov['gemm_k_dependence']}"
    return KernelModel(
        kernel_class=name, stream_bw=vals["stream_bw"],
        gemm=MappingProxyType({"bf16": vals["gemm_bf16"], "fp8": vals["gemm_fp8"], "fp4": vals["gemm_fp4"],
                               "w4a16": vals["gemm_w4a16"]}),
        compute_units=0, tile_n=vals["tile_n"], **{k: int(vals[k]) for k in TILES}, **{k: vals[k] for k in TIMES},
        attn_decode_bw=vals["attn_decode_bw"], attn_decode_flops=vals["attn_decode_flops"],
        attn_prefill_scale=vals["attn_prefill_scale"], link_bw=vals["link_bw"],
        fa_seq_len=tuple(float(x) for x in fa["seq_len"]), fa_head_dim=tuple(float(x) for x in fa["head_dim"]),
        fa_causal=tuple(tuple(float(x) for x in row) for row in fa["causal"]),
        fa_bwd_seq_len=tuple(float(x) for x in _data().get("flash_attention_backward", {}).get("seq_len", ())),
        fa_bwd_ratio=tuple(float(x) for x in _data().get("flash_attention_backward", {}).get("ratio", ())),
        grouped_tokens=tuple(float(x) for x in gg["tokens_per_expert"]),
        grouped_factor=tuple(float(x) for x in gg["factor"]),
        k_points=k_points, k_factor=k_factor, provenance=MappingProxyType(prov), gemv_max_m=gemv)


def _k_dependence(rec) -> tuple[tuple, MappingProxyType, str]:
    """(K points, GEMM class -> factors, provenance) of the [gemm_k_dependence] table; none: no K dependence."""
    if rec is None:
        return (), MappingProxyType({}), "assumed: no K dependence (no [gemm_k_dependence] table)"
    where = "gemm_k_dependence"
    if not isinstance(rec, dict):
        _bad(where, "not a table", "k = [increasing K], <gemm class> = [factors], how, src")
    ks = increasing_list(rec, "k", f"kernels.toml.{where}", False)
    out = {}
    for c in ("bf16", "fp8", "fp4"):
        if c not in rec:
            continue
        v = rec[c]
        if not (isinstance(v, list) and len(v) == len(ks) and all(
                not isinstance(x, bool) and isinstance(x, (int, float)) and 0 < x <= 1 for x in v)):
            _bad(f"{where}.{c}", f"{v!r} is not {len(ks)} fractions", "one factor in (0, 1] per K point")
        out[c] = tuple(float(x) for x in v)
    _, how = _entry(where, {**rec, "value": 0})
    return ks, MappingProxyType(out), how


@cache
def _chip_classes() -> dict[str, str]:
    return {chip: name for name, rec in _data()["classes"].items() for chip in rec.get("chips", ())}


def class_of_chip(chip_id: str) -> str:
    """The kernel class of a catalog chip id ("generic" for a chip in no class)."""
    return _chip_classes().get(chip_id, GENERIC)


@cache
def _system_chip(key: str) -> str:
    from tokenmath.specs.catalog import shipped
    rec = shipped("systems.toml").get(key)
    return str(rec["chip"]) if isinstance(rec, dict) and isinstance(rec.get("chip"), str) else key


def _chip_of(hw) -> tuple[str, str]:
    """(kernel class, chip id) of a chip or system id, or of a Hardware/System object."""
    if isinstance(hw, str):
        key = hw.lower()
        chip = key if key in _chip_classes() else _system_chip(key)
        return class_of_chip(chip), chip
    named = getattr(hw, "kernel_class", "") or ""
    chip = getattr(hw, "chip", "") or getattr(hw, "id", "")
    if named:
        return named, chip
    # a catalog chip (or a system of one) carries its family; a user file that borrows an id does not
    if getattr(hw, "family", ""):
        return class_of_chip(chip), chip
    return GENERIC, chip


def kernel_class(hw) -> str:
    return _chip_of(hw)[0]


@cache
def _for(name: str, chip: str) -> KernelModel:
    km = class_model(name)
    cu = _data()["classes"][name].get("compute_units", {}).get(chip)
    if cu is None:
        return replace(km, chip=chip)
    n, how = _entry(f"classes.{name}.compute_units.{chip}", cu)
    return replace(km, chip=chip, compute_units=int(n),
                   provenance=MappingProxyType({**km.provenance, "compute_units": how}))


def kernel_model(hw) -> KernelModel:
    """The kernel model of a chip (its class's constants and its own compute units), or the measured one a hardware
    file carries (Hardware.kernels, from its [kernels] section: measured_model)."""
    own = getattr(hw, "kernels", None)
    if isinstance(own, KernelModel):
        return own
    name, chip = _chip_of(hw)
    if name not in CLASSES:
        raise InputError("hardware.kernel_class", f"unknown kernel class {name!r}", f"one of {', '.join(CLASSES)}")
    return _for(name, chip)


@cache
def by_chip() -> KernelModel:
    """The model of no chip in particular (the generic constants, kernel_class "by-chip"): the engine replaces it
    by the model of the chip it prices."""
    return replace(class_model(GENERIC), kernel_class=BY_CHIP)


def resolve(km: KernelModel | None, hw) -> KernelModel | None:
    """The kernel model the engine uses for `hw`: None stays None (flat fractions), by_chip() becomes the chip's."""
    if km is None or km.kernel_class != BY_CHIP:
        return km
    return kernel_model(hw)


# ---- checked numbers of a table (also the measured kernel model's: specs/kernels_measured.py) -------------------
def checked_number(sec: dict, key: str, where: str, lo: float, hi: float, valid: str) -> float:
    v = sec.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi or v != v:
        raise InputError(f"{where}.{key}", "missing" if v is None else f"{v!r} is out of range", valid)
    return float(v)


def increasing_list(sec: dict, key: str, where: str, integer: bool) -> tuple:
    v = sec.get(key)
    ok = isinstance(v, list) and v and all(not isinstance(x, bool) and isinstance(x, int if integer else (int, float))
                                           and 1 <= x < 1e15 for x in v)
    if not ok or any(b <= a for a, b in zip(v, v[1:])):
        raise InputError(f"{where}.{key}", f"{v!r} is not an increasing list" if v is not None else "missing",
                         "an increasing list of " + ("whole numbers >= 1" if integer else "numbers >= 1"))
    return tuple(int(x) if integer else float(x) for x in v)
