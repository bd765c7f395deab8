"""Achievable fractions of peak: named parameters with their provenance, never silent fudge factors.

DEFAULT holds kernel-level ceilings measured by microbenchmarks (not fitted to any LLM measurement):
- memory_bw 0.80: STREAM-style sustained bandwidth / datasheet peak. A100 80GB triad 1759 of 2039 GB/s = 0.86
  and H200 triad/init 3534-3884 of 4800 GB/s = 0.74-0.81 (github.com/te42kyfo/gpu-benches, cuda-stream/a100_80.txt,
  gpu-stream/h200.txt); gpt-fast README: A100 "peak bandwidth is about 1700 GB/s" = 0.83.
- flops 0.80: maximum achievable matmul FLOP/s (MAMF) / dense peak. H100 SXM bf16 794.5 of 989 = 0.80,
  A100 SXM 271.2 of 312 = 0.87, GH200 828.6 of 989 = 0.84 (github.com/stas00/ml-engineering,
  compute/accelerator/README.md, MAMF table). MI300X measures 0.51-0.60 there: chips differ, so a per-chip
  figure from `tokenmath measure` or a calibrated file beats this default.
- link_bw 0.80: NCCL ring all-reduce bus bandwidth on 8xH100 NVLink, 365-370 of 450 GB/s = 0.82
  ("protocol overhead (~20%)", NVIDIA/nccl-tests issue #212); MI300X xGMI ~48 of 64 GB/s = 0.75 (ROCm blog).
Whole-model decode reaches less (memory-bandwidth utilisation 0.55-0.60 at batch 1 in Databricks' "LLM inference
performance engineering"; 0.56-0.73 in gpt-fast): small kernels, launch gaps and host overhead that a per-kernel
ceiling does not contain. PEAK (all 1.0) is the pure roofline bound that no prediction may beat.

DEFAULT (`--uncalibrated`) also carries the shape-aware kernel model (specs/kernels.py, data/kernels.toml) of
whatever chip it prices (kernels=by_chip(), resolved by the engine): each op's time is its kernels' fixed time
plus max(FLOPs / (peak x GEMM fraction x tile/wave utilisation), bytes / (bandwidth x streaming fraction)), from
sourced constants with nothing fitted to LLM measurements. Its flat fractions above then only serve code that
prices work outside the engine's op table (and explain texts). kernel_default_for(hw) is the same model resolved
for a chip, with the class's collective fraction: what default_for will return once the flat per-family fit is
replaced by bounded residuals on top of it (issue 16).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenmath.specs.kernels import KernelModel
    from tokenmath.specs.serving_engines import EngineProfile


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak (FLOP/s, memory and link bandwidth), fixed overheads (s) and their source."""
    flops: float = 0.80       # fraction of peak dense FLOP/s a large matmul sustains
    memory_bw: float = 0.80   # fraction of peak HBM bandwidth a streaming read sustains
    link_bw: float = 0.80     # fraction of link bandwidth a collective sustains (NCCL bus bandwidth / line rate)
    source: str = "kernel microbenchmark ceilings (see tokenmath.specs.efficiency)"
    layer_overhead_s: float = 0.0   # fixed time per layer per forward pass (launches, syncs); fitted, see calibrated()
    kernels: "KernelModel | None" = None        # shape-aware kernel model of the chip class (None: flat fractions)
    engine: "EngineProfile | None" = None       # the serving engine's per-step costs and limits (None: none)

    def __post_init__(self):
        if not (isinstance(self.layer_overhead_s, (int, float)) and 0 <= self.layer_overhead_s < 1):
            from tokenmath.base.errors import InputError
            raise InputError("efficiency.layer_overhead_s", f"{self.layer_overhead_s!r} is not a time", "seconds >= 0")
        for name in ("flops", "memory_bw", "link_bw"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v <= 1):
                from tokenmath.base.errors import InputError
                raise InputError(f"efficiency.{name}", f"{v!r} is not a fraction of peak", "a number in (0, 1]")


def _by_chip():
    from tokenmath.specs.kernels import by_chip
    return by_chip()


DEFAULT = Efficiency(source="sourced kernel model of the chip's class (tokenmath.specs.kernels; data/kernels.toml), "
                            "nothing fitted", kernels=_by_chip())
PEAK = Efficiency(1.0, 1.0, 1.0, "peak (pure roofline)")


def default_for(hardware, engine: "EngineProfile | None" = None) -> Efficiency:
    """What the serving analyses use unless told otherwise: the physics set calibrated on published measurements
    (physics_calibrated: the chip class's sourced kernel model, its bounded residuals and the serving engine's
    per-step CPU work, fitted by `tokenmath validate`). DEFAULT (nothing fitted), PEAK (pure roofline) and the flat
    per-family fit (calibrated) stay one argument away. A hardware file that carries its machine's measured kernel
    model (`tokenmath measure`) uses that, with nothing fitted on top. engine: the serving engine's profile the
    answer assumes (None: the engine-free step)."""
    if getattr(hardware, "kernels", None) is not None:
        eff = kernel_default_for(hardware)
        return eff if engine is None else replace(eff, engine=engine)
    return physics_calibrated(hardware, engine)


def _physics_records() -> dict:
    from tokenmath.specs.catalog import shipped
    return {(r["name"], r["group"]): float(r["value"]) for r in shipped("calibration.toml").get("physics", [])}


# where a fitted value is looked up, most specific first ("_all": the all-rows fit); the scopes of
# analyses/calibration/parameters.py's physics set
PHYSICS_SCOPES = {"compute_scale": ("engine_family", "family", "all"), "bw_scale": ("engine_family", "family", "all"),
                  "layer_overhead_s": ("engine", "all"), "step_cpu_s": ("engine",), "step_cpu_per_seq_s": ("engine",)}
PHYSICS_NEUTRAL = {"compute_scale": 1.0, "bw_scale": 1.0, "layer_overhead_s": 0.0, "step_cpu_s": 0.0,
                   "step_cpu_per_seq_s": 0.0}


def physics_values(hardware, engine: "EngineProfile | None" = None) -> dict:
    """The fitted physics values for a chip (or system) and an engine: name -> (value, the group it came from).
    A name with no fitted group takes its neutral value (the kernel model as sourced, no gap, no CPU work)."""
    from tokenmath.specs.families import OTHER, family
    recs = _physics_records()
    fam = family(hardware)
    eid = engine.calibration_key if engine is not None else None     # vllm@0.7: the V0 rows' group, vllm-v0
    keys = {"engine_family": f"{eid}@{fam}" if eid and fam != OTHER else None,
            "family": fam if fam != OTHER else None, "engine": eid, "all": "_all"}
    out = {}
    for name, scopes in PHYSICS_SCOPES.items():
        out[name] = (PHYSICS_NEUTRAL[name], "not fitted")
        for sc in scopes:
            k = keys[sc]
            if k is not None and (name, k) in recs:
                out[name] = (recs[(name, k)], k)
                break
    return out


def physics_calibrated(hardware, engine: "EngineProfile | None" = None, values: dict | None = None,
                       label: str | None = None) -> Efficiency:
    """The chip class's kernel model with the residuals fitted on published measurements (data/calibration.toml
    [[physics]], written by `tokenmath validate --write-calibration`): every compute fraction x compute_scale and
    every bandwidth fraction x bw_scale (both <= 1: never above the microbenchmark ceilings), a fixed time per layer
    per pass, and the engine's per-step CPU work (only where its profile leaves step_cpu_s "fitted").
    values: name -> value replacing the shipped ones (a calibration profile of the user's own runs, `tokenmath
    calibrate`; its step_cpu_s then applies to any engine), named `label` in the source."""
    v = physics_values(hardware, engine)
    if values:
        v = {**v, **{k: (float(x), label or "profile") for k, x in values.items() if k in v}}
        if engine is not None and "step_cpu_s" in values:
            engine = replace(engine, step_cpu_s=v["step_cpu_s"][0], step_cpu_per_seq_s=v["step_cpu_per_seq_s"][0])
    cs, bs, gap = v["compute_scale"][0], v["bw_scale"][0], v["layer_overhead_s"][0]
    base = kernel_default_for(hardware)
    km = replace(base.kernels, compute_scale=cs, bw_scale=bs)
    # an engine whose profile leaves its CPU time to the fit takes its own fitted values; one with no rows of its
    # own keeps None, and its answers say "not fitted (0)"
    if engine is not None and engine.step_cpu_s is None and v["step_cpu_s"][1] != "not fitted":
        engine = replace(engine, step_cpu_s=v["step_cpu_s"][0], step_cpu_per_seq_s=v["step_cpu_per_seq_s"][0])
    km0 = base.kernels
    src = (f"shape-aware kernel model ({km0.kernel_class}; data/kernels.toml: stream {km0.stream_bw:g} of HBM peak, "
           f"large GEMM {km0.gemm['bf16']:g} bf16 / {km0.gemm['fp8']:g} fp8 of peak, tile and wave quantization) with "
           f"residuals fitted on published measurements (tokenmath validate): compute x{cs:g} and bandwidth "
           f"x{bs:g} ({v['compute_scale'][1]}), {gap * 1e6:g} us per layer ({v['layer_overhead_s'][1]})")
    return Efficiency(min(base.flops * cs, 1.0), min(base.memory_bw * bs, 1.0), base.link_bw, src, gap, kernels=km,
                      engine=engine)


def kernel_default_for(hardware) -> Efficiency:
    """The shape-aware kernel model of `hardware`'s chip class (a Hardware, System, or chip or system id), with no
    fitted value: flat fields = its bf16 large-GEMM, streaming and collective fractions (for code outside the op
    table), no fixed per-layer overhead."""
    from tokenmath.specs.kernels import kernel_model
    km = kernel_model(hardware)
    return Efficiency(km.gemm["bf16"], km.stream_bw, km.link_bw, km.source, 0.0, kernels=km)


def calibrated(hardware) -> Efficiency:
    """Efficiencies fitted on published measurements (data/calibration.toml, written by `tokenmath validate
    --write-calibration`): per hardware family, else the all-rows fit. Provenance travels in `source`.
    hardware: a Hardware or System (its chip's family, see specs/families.py) or a chip or system id."""
    from tokenmath.specs.families import family
    from tokenmath.specs.catalog import shipped
    cal = shipped("calibration.toml")
    fam = family(hardware)
    rec = cal["family"].get(fam) or cal["family"]["_all"]
    which = fam if fam in cal["family"] else "all rows"
    return Efficiency(rec["flops"], rec["memory_bw"], rec.get("link_bw", 0.8),
                      f"calibrated on {cal['rows']} published measurements ({which}; {cal['fitted']}); "
                      f"held-out median error {cal['heldout_median_ape']:.0%}", rec["layer_overhead_s"])
