"""A machine's own measured kernel model: the [kernels] section `tokenmath measure` writes into a hardware file,
read into a KernelModel (specs/kernels.py) that engine/kernels.measured_share uses in place of tile and wave
quantization."""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from tokenmath.base.errors import InputError
from tokenmath.specs.kernels import (DTYPE_CLASS, TIMES, KernelModel, checked_number, class_model,
                                     increasing_list)

MEASURED_KEYS = ("how", "src", "date", "stream_gbs", "gemm_peak_tflops", "gemm_dtype", "per_call_s", "rows",
                 "weight_elements", "efficiency")
_TOL = 1e-6     # a figure written twice (memory_bw_tbs and stream_gbs) may differ in its last digit


def measured_model(sec, base: str, memory_bw: float, flops, chip: str = "",
                   where: str = "hardware.kernels") -> KernelModel:
    """The kernel model of a machine that measured itself: the constants of class `base` (the file's kernel_class,
    else generic) except
    - stream_bw = stream_gbs (the measured triad) / the file's memory_bw (1.0 when memory_bw_tbs is that triad);
    - the GEMM fraction of gemm_dtype's class = gemm_peak_tflops (the square-matmul figure the curve is relative
      to) / the file's figure for gemm_dtype (1.0 when tflops holds it); the other classes' 1.0 (the file's own
      sustained figures);
    - the curve: efficiency[i][j] = the share of max(FLOPs / peak, bytes / bandwidth) a GEMM of rows[i] x
      weight_elements[j] reached after its fixed per_call_s, in (0, 1] (engine/kernels.measured_share);
    - every kernel's fixed time = per_call_s (the measured per-call overhead); decode attention streams the KV at
      stream_bw and computes at the GEMM fraction.
    memory_bw in B/s, flops: dtype -> FLOP/s (the file's). InputError names the field of a value out of range."""
    if not isinstance(sec, dict):
        raise InputError(where, "not a table", f"a table with {', '.join(MEASURED_KEYS)}")
    for k in sec:
        if k not in MEASURED_KEYS:
            raise InputError(f"{where}.{k}", "unknown key", f"valid keys: {', '.join(MEASURED_KEYS)}")
    stream = checked_number(sec, "stream_gbs", where, 1e-3, memory_bw / 1e9 * (1 + _TOL),
                  f"GB/s, at most the file's memory_bw_tbs ({memory_bw / 1e12:g} TB/s): a measured triad") * 1e9
    dt = sec.get("gemm_dtype", "fp32")
    if not isinstance(dt, str) or dt not in flops:
        raise InputError(f"{where}.gemm_dtype", f"{dt!r} has no figure in tflops",
                         f"one of {', '.join(flops)} (the dtype the curve was measured in)")
    pk = checked_number(sec, "gemm_peak_tflops", where, 1e-6, flops[dt] / 1e12 * (1 + _TOL),
              f"TFLOP/s, at most the file's tflops.{dt} ({flops[dt] / 1e12:g})") * 1e12
    t0 = checked_number(sec, "per_call_s", where, 0.0, 1e-3 * (1 - _TOL), "seconds in [0, 1e-3): one call's fixed time")
    rows = increasing_list(sec, "rows", where, True)
    els = increasing_list(sec, "weight_elements", where, False)
    eff = sec.get("efficiency")
    if not (isinstance(eff, list) and len(eff) == len(rows) and all(isinstance(r, list) and len(r) == len(els)
                                                                     for r in eff)):
        raise InputError(f"{where}.efficiency", "not a rows x weight_elements table",
                         f"{len(rows)} lists (one per row count) of {len(els)} fractions (one per shape)")
    for i, r in enumerate(eff):
        for j, x in enumerate(r):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= 1:
                raise InputError(f"{where}.efficiency[{i}][{j}]", f"{x!r} is not a fraction of the roofline",
                                 "in (0, 1]: measured time never beats max(FLOPs / peak, bytes / bandwidth)")
    km = class_model(base)
    s, g = min(1.0, stream / memory_bw), min(1.0, pk / flops[dt])
    gcls = DTYPE_CLASS.get(dt, "bf16")
    how = f"measured: tokenmath measure {sec.get('date', '')}".rstrip()
    prov = {**km.provenance, "stream_bw": f"{how}, triad {stream / 1e9:.4g} GB/s / memory_bw {memory_bw / 1e9:.4g}",
            **{f"gemm_{c}": (f"{how}, {dt} square matmul {pk / 1e12:.4g} / tflops.{dt} {flops[dt] / 1e12:.4g}"
                             if c == gcls else f"{how}: the file's own sustained figure") for c in ("bf16", "fp8", "fp4")},
            **{k: f"{how}, per-call overhead" for k in TIMES},
            "attn_decode_bw": f"{how}: streams the KV cache like the triad",
            "attn_decode_flops": f"{how}: taken at the {dt} square-matmul figure",
            "curve": f"{how}: {sec.get('src', '')}"}
    return replace(km, kernel_class="measured", chip=chip, stream_bw=s,
                   gemm=MappingProxyType({**{c: (g if c == gcls else 1.0) for c in ("bf16", "fp8", "fp4")},
                                          "w4a16": g if gcls == "bf16" else 1.0}),     # not measured: as bf16
                   gemm_fixed_s=t0, small_kernel_fixed_s=t0, attn_decode_fixed_s=t0, attn_decode_bw=s,
                   attn_decode_flops=g, curve_rows=rows, curve_elements=els,
                   curve_efficiency=tuple(tuple(float(x) for x in r) for r in eff),
                   measured_on=f"tokenmath measure {sec.get('date', '')}".rstrip()
                   + (f"; other constants of the {base} class" if base else ""),
                   provenance=MappingProxyType(prov))
