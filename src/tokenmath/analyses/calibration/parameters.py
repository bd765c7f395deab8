"""The fitted parameters, declared: every value `tokenmath validate` fits is one of these, with its name, the physically
possible range it is bounded to, the grid searched inside that range, the rows it applies to and how it enters a
prediction. A fitted value at an edge of its bounds means the fit wanted to go further than physics allows: some
effect is missing from the model and the parameter is absorbing it ("physics missing" in validate's output).

Adding a parameter is one declaration:
- `enters` names a term the row evaluator re-times without re-running the engine ("flops", "memory_bw",
  "layer_overhead_s", "step_s": a fixed cost per decode step, "train_flops"), or
- `enters = "efficiency"` with `set(efficiency, value) -> Efficiency`: the engine is re-run at each grid value (e.g.
  a serving engine's step_cpu_s on Efficiency.engine, a kernel-model constant on Efficiency.kernels).
`scopes` says which rows share one value, most specific first; a row takes the first group that was fitted (a group
needs MIN_ROWS rows from MIN_SOURCES sources unless it is "all"), else the parameter's `start`.
Parameters with the same (applies, scopes) are fitted jointly over the product of their grids; different groups of
parameters are fitted in turn, each holding the others at their current values (coordinate descent).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.specs.efficiency import Efficiency

SCOPES = ("all", "family", "engine", "engine_family", "hardware")
FAST_TERMS = ("flops", "memory_bw", "layer_overhead_s", "step_s", "train_flops",
              # the physics model's (engine/static_batch.retimed): residual scales on the kernel model's fractions
              # and the serving engine's per-step CPU work
              "kernel_flops", "kernel_bw", "step_cpu_s", "step_cpu_per_seq_s")
MIN_ROWS = 6          # a group gets its own value only with this many rows ...
MIN_SOURCES = 2       # ... from this many sources; else it takes the next scope's value
LINK_EFF = 0.8        # link efficiency is not fitted (NCCL bus bandwidth, see specs/efficiency.py)
TRAIN_BW = 0.8        # training is compute-bound: only the FLOP fraction is fitted on training rows


@dataclass(frozen=True)
class FittedParameter:
    name: str                          # unique; the key in validate's output and data/calibration.toml
    applies: str                       # "inference" | "training"
    bounds: tuple[float, float]        # the physically possible range (why: `bounds_why`)
    grid: tuple[float, ...]            # searched values, ascending, from bounds[0] to bounds[1]
    scopes: tuple[str, ...]            # most specific first, each one of SCOPES
    start: float                       # the value before fitting and where no group has rows (the documented default)
    unit: str
    bounds_why: str
    enters: str                        # one of FAST_TERMS, or "efficiency" (re-run the engine through `set`)
    set: Callable[[Efficiency, float], Efficiency] | None = None

    def __post_init__(self):
        g = self.grid
        if self.applies not in ("inference", "training"):
            raise InputError(f"parameter {self.name}.applies", repr(self.applies), "inference, training")
        if not g or list(g) != sorted(g) or g[0] != self.bounds[0] or g[-1] != self.bounds[1]:
            raise InputError(f"parameter {self.name}.grid", "must ascend from bounds[0] to bounds[1]", str(self.bounds))
        if not self.bounds[0] <= self.start <= self.bounds[1]:
            raise InputError(f"parameter {self.name}.start", f"{self.start} is outside {self.bounds}", "within bounds")
        if any(s not in SCOPES for s in self.scopes):
            raise InputError(f"parameter {self.name}.scopes", repr(self.scopes), ", ".join(SCOPES))
        if self.enters not in FAST_TERMS and not (self.enters == "efficiency" and self.set is not None):
            raise InputError(f"parameter {self.name}.enters", repr(self.enters),
                             ", ".join(FAST_TERMS) + ', or "efficiency" with set=')

    @property
    def block(self) -> tuple[str, tuple[str, ...]]:
        """Parameters sharing (applies, scopes) are fitted jointly."""
        return self.applies, self.scopes

    def edge(self, value: float) -> str | None:
        """'lower' / 'upper' when the value sits on a bound (the fit wanted to go beyond it), else None."""
        lo, hi = self.bounds
        if np.isclose(value, lo, rtol=1e-9, atol=0.0) or value <= lo:
            return "lower"
        if np.isclose(value, hi, rtol=1e-9, atol=0.0) or value >= hi:
            return "upper"
        return None

    def to_dict(self) -> dict:
        return {"name": self.name, "applies": self.applies, "bounds": list(self.bounds), "grid": list(self.grid),
                "scopes": list(self.scopes), "start": self.start, "unit": self.unit, "bounds_why": self.bounds_why,
                "enters": self.enters}


# The flat set, as calibrated before issue 16 (same grids, so the numbers stay comparable): achievable fractions of
# peak FLOP/s and HBM bandwidth and a fixed time per layer per forward pass, one value per hardware family (families
# with too few rows take the all-rows value); training fits its own FLOP fraction on training rows.
FLAT = (
    FittedParameter("flops", "inference", (0.3, 1.0), (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), ("family", "all"),
                    0.8, "fraction of dense peak FLOP/s",
                    "at most the peak; 0.3 is below any matmul microbenchmark on these chips", "flops"),
    FittedParameter("memory_bw", "inference", (0.4, 1.0), (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), ("family", "all"),
                    0.8, "fraction of peak memory bandwidth",
                    "at most the peak (STREAM-class kernels reach 0.74-0.86, see specs/efficiency.py)", "memory_bw"),
    FittedParameter("layer_overhead_s", "inference", (0.0, 160e-6),
                    (0.0, 5e-6, 10e-6, 20e-6, 40e-6, 80e-6, 160e-6), ("family", "all"), 0.0,
                    "seconds per layer per forward pass",
                    "launch + sync gaps: 0 (CUDA graphs) to a few launches of ~5-40 us per layer", "layer_overhead_s"),
    FittedParameter("train_flops", "training", (0.3, 1.0), (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), ("all",),
                    0.8, "fraction of dense peak FLOP/s (training step)",
                    "at most the peak; bandwidth held at 0.8 (training is compute-bound)", "train_flops"),
)


def blocks(params) -> list[tuple[FittedParameter, ...]]:
    """The declared parameters grouped for joint fitting, in declaration order."""
    out: dict = {}
    for p in params:
        out.setdefault(p.block, []).append(p)
    return [tuple(b) for b in out.values()]


def check_declared(params) -> tuple[FittedParameter, ...]:
    params = tuple(params)
    names = [p.name for p in params]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError("parameters", f"declared twice: {', '.join(dup)}", "unique names")
    return params


@dataclass(frozen=True)
class CalibrationModel:
    """A declared parameter set and the efficiency the engine runs at before the fitted terms apply."""
    name: str
    params: tuple[FittedParameter, ...]
    base: Callable[[dict], Efficiency]      # measurement row -> the engine's efficiency for it
    description: str

    @property
    def kernel_retimed(self) -> bool:
        """The physics set: its terms re-time a kernel-model batch (engine/static_batch.retimed)."""
        return any(p.enters in ("kernel_flops", "kernel_bw", "step_cpu_s", "step_cpu_per_seq_s") for p in self.params)

    @property
    def retimed(self) -> bool:
        """flops / memory_bw re-time the pass from its pure-roofline cost, so the base must be the peak."""
        return any(p.enters in ("flops", "memory_bw") for p in self.params)


def _peak_with_link(row: dict) -> Efficiency:
    return Efficiency(1.0, 1.0, LINK_EFF, "peak + NCCL link (re-timed by the fitted fractions)")


FLAT_MODEL = CalibrationModel("flat", FLAT, _peak_with_link,
                              "flat fractions of peak FLOP/s and bandwidth + a time per layer per pass, per family")


# the physics set (issue 16): the sourced kernel model of each chip class (specs/kernels.py) and the row's
# serving-engine profile run the engine; what stays fitted are bounded residuals, each one a physical quantity
RESIDUAL_GRID = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
GAP_GRID_S = (0.0, 2.5e-6, 5e-6, 10e-6, 20e-6, 40e-6)


def physics_params():
    from tokenmath.specs import serving_engines as se
    # where each value is fitted is where specs.efficiency.physics_values looks it up: one declaration of the scopes
    from tokenmath.specs.efficiency import PHYSICS_SCOPES as SCOPES_OF
    lo, hi = se.STEP_CPU_BOUNDS_S
    cpu = tuple(sorted({lo, *(x for x in (0.25e-3, 0.5e-3, 1e-3, 2e-3, 3e-3) if lo < x < hi), hi}))
    plo, phi = se.STEP_CPU_PER_SEQ_BOUNDS_S
    per_seq = tuple(sorted({plo, *(x for x in (5e-6, 10e-6, 20e-6, 30e-6) if plo < x < phi), phi}))
    return (
        FittedParameter("compute_scale", "inference", (0.4, 1.0), RESIDUAL_GRID, SCOPES_OF["compute_scale"], 1.0,
                        "multiplier on every compute fraction of the chip class's kernel model",
                        "at most 1: no serving stack's kernels beat the microbenchmark ceilings the model holds; "
                        "0.4: below any tuned engine's large GEMMs", "kernel_flops"),
        FittedParameter("bw_scale", "inference", (0.4, 1.0), RESIDUAL_GRID, SCOPES_OF["bw_scale"], 1.0,
                        "multiplier on every bandwidth fraction of the chip class's kernel model",
                        "at most 1: no decode kernel streams faster than the measured streaming fraction; 0.4: "
                        "below any published decode kernel's bandwidth utilisation", "kernel_bw"),
        FittedParameter("layer_overhead_s", "inference", (GAP_GRID_S[0], GAP_GRID_S[-1]), GAP_GRID_S,
                        SCOPES_OF["layer_overhead_s"], 0.0, "seconds per layer per forward pass beyond the kernels' own "
                        "fixed times", "gaps between a layer's kernels (synchronisation, unfused glue): 0 to a few "
                        "launches' worth; the kernels' fixed times are already in the kernel model", "layer_overhead_s"),
        # CPU work is the engine's own (its scheduler's language, its overlap): fitted per engine only, never carried
        # to another engine (an engine without rows of its own keeps 0, and says so)
        FittedParameter("step_cpu_s", "inference", (lo, hi), cpu, SCOPES_OF["step_cpu_s"], lo,
                        "seconds of CPU work per engine step", "specs.serving_engines.STEP_CPU_BOUNDS_S",
                        "step_cpu_s"),
        FittedParameter("step_cpu_per_seq_s", "inference", (plo, phi), per_seq, SCOPES_OF["step_cpu_per_seq_s"],
                        plo,
                        "seconds of CPU work per running sequence per step",
                        "specs.serving_engines.STEP_CPU_PER_SEQ_BOUNDS_S (assumed ceiling)", "step_cpu_per_seq_s"),
        *[p for p in FLAT if p.applies == "training"])


def physics_base(row: dict) -> Efficiency:
    """The efficiency a measurement row runs at before the physics set's fitted terms: its chip's kernel model and
    its serving engine's profile with no per-step CPU time (engines without a profile, e.g. gpt-fast, Gaudi, NxD,
    JAX: the engine-free step)."""
    from dataclasses import replace
    from tokenmath.analyses.calibration.labels import PROFILE_OF, engine_of
    from tokenmath.specs import efficiency as eff_mod
    from tokenmath.specs import serving_engines as se
    eng = engine_of(row)
    eng = PROFILE_OF.get(eng, eng)
    prof = se.get_engine(eng) if eng in se.engine_ids() else None
    if prof is not None:
        prof = replace(prof, step_cpu_s=0.0, step_cpu_per_seq_s=0.0)
    return replace(eff_mod.kernel_default_for(row["hardware"]), engine=prof)


def physics_model() -> CalibrationModel:
    """The issue-16 set: the kernel model of the chip class (specs.efficiency.kernel_default_for) and the row's
    serving-engine profile run the engine once per row; the fitted residuals (compute and bandwidth scales per chip
    family, a per-layer gap and the per-step CPU work per engine) re-time it (engine/static_batch.retimed)."""
    return CalibrationModel("physics", physics_params(), physics_base,
                            "kernel model of the chip class + the serving engine's profile; bounded residuals "
                            "(compute and bandwidth scales per family, layer gap and CPU per step per engine)")
