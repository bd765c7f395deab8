"""Published training runs (data/training_runs.toml) predicted from their full layouts: MFU error in points.

Every run is predicted by analyses.training.train with the layout, batch, precision, recomputation, ZeRO stage and
pipeline schedule it published. No parameter of the training model is fitted on these runs (the kernel model and
the collective fractions are sourced constants, specs/kernels.py), so every prediction is held out; the table
still groups runs by source so that a source's runs can be read together.

One convention for every row: MFU on 6N (matmul parameters, PaLM App. B without attention) over the dense BF16
peak, as Llama 3 reports "BF16 MFU". A run that published another throughput metric is put on that scale through
the prediction itself, all metrics being proportional to throughput at a fixed configuration:
    measured MFU = predicted MFU x measured metric / predicted metric      (tokens/s, TFLOP/s)
    measured MFU = predicted MFU x predicted GPU-hours / measured GPU-hours
A TFLOP/s figure is compared on the FLOPs its source counted, the row's `flops_counted` (one home: tflops_key):
"6n" the model FLOPs, "6n+attention" with PaLM's causal attention term, "executed" every FLOP run, recomputation
included (Megatron's Eq. 3, HFU basis).
A run whose recipe overlapped its TP collectives with the GEMMs (tp_comm_overlap, with the script that says so) is
predicted with that overlap; "tp-overlap" in its layout; likewise pp_comm_overlap (Megatron overlap_p2p_comm,
"pp-overlap"). A run's published memory recipe (act_storage, adam_bytes, grad_bytes, dualpipe; each with its source
in the data file) goes to train() as is; fp8 runs store Transformer Engine's FP8 GEMM inputs by default.
Recomputation "unstated": the least recomputation that fits (none, then selective, then full), what a tuned run
would pick; the row says which was used.
Memory: a published run trained, so it fit in its chips' HBM: it is checked against the whole HBM (PUBLISHED_RESERVE
= 0), not against the planning margin that `train` keeps by default (engine/train_memory.RESERVE_FRACTION, vLLM's
serving default, for which no training source was found). The margin is for sizing a run not yet run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenmath.analyses.training.train import train
from tokenmath.base.errors import InputError
from tokenmath.specs.catalog import shipped
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kernels import kernel_class
from tokenmath.specs.model_catalog import get_model

TARGET_MEDIAN_POINTS = 3.0
TARGET_MAX_POINTS = 8.0
RECOMPUTE_ORDER = ("none", "selective", "full")


@dataclass(frozen=True)
class RunCheck:
    """One published run against its prediction (MFU in points of the dense BF16 peak, bytes per chip)."""
    id: str
    model: str
    hardware: str
    chips: int
    layout: str
    source: str
    metric: str
    measured: float
    predicted: float | None
    measured_mfu: float | None
    predicted_mfu: float | None
    recompute: str
    fits: bool
    memory_bytes: float | None
    usable_bytes: float | None
    note: str = ""
    dtype: str = "bf16"
    chip_class: str = ""                    # the chip's kernel class (specs/kernels.py), for the held-out groups
    moe: bool = False
    compute_share: float | None = None      # compute (F + B + R of every micro-batch) / predicted step
    compute_factor: float | None = None     # how much slower the compute must run for the step to match the measure

    @property
    def error_points(self) -> float | None:
        if self.measured_mfu is None or self.predicted_mfu is None:
            return None
        return 100.0 * (self.predicted_mfu - self.measured_mfu)

    def to_dict(self) -> dict:
        return {"id": self.id, "model": self.model, "hardware": self.hardware, "chips": self.chips,
                "layout": self.layout, "source": self.source, "metric": self.metric, "measured": self.measured,
                "predicted": self.predicted, "measured_mfu": self.measured_mfu, "predicted_mfu": self.predicted_mfu,
                "error_points": self.error_points, "recompute": self.recompute, "fits": self.fits,
                "memory_per_chip_bytes": self.memory_bytes, "memory_usable_bytes": self.usable_bytes,
                "dtype": self.dtype, "chip_class": self.chip_class, "moe": self.moe, "note": self.note,
                "compute_share": self.compute_share,
                "compute_factor_to_match": self.compute_factor}


@dataclass(frozen=True)
class RunValidation:
    rows: list[RunCheck]
    notes: list[str] = field(default_factory=list)

    @property
    def scored(self) -> list[RunCheck]:
        return [r for r in self.rows if r.error_points is not None]

    @property
    def median_abs_points(self) -> float | None:
        e = [abs(r.error_points) for r in self.scored]
        return float(np.median(e)) if e else None

    @property
    def max_abs_points(self) -> float | None:
        e = [abs(r.error_points) for r in self.scored]
        return float(max(e)) if e else None

    def groups(self) -> dict[str, tuple[int, float]]:
        """Median |error| (points) and runs scored by chip class, MoE or dense, and matmul precision: the same runs
        read as held-out groups (nothing is fitted on any of them)."""
        keys = {}
        for r in self.scored:
            for k in (r.chip_class, "MoE" if r.moe else "dense", r.dtype):
                keys.setdefault(k, []).append(abs(r.error_points))
        return {k: (len(v), float(np.median(v))) for k, v in keys.items()}

    @property
    def misses(self) -> list[RunCheck]:
        """Runs over the per-run target, or not predicted at all."""
        return [r for r in self.rows if r.error_points is None or abs(r.error_points) > TARGET_MAX_POINTS]

    @property
    def meets_target(self) -> bool:
        med = self.median_abs_points
        return med is not None and med <= TARGET_MEDIAN_POINTS and not self.misses

    def to_dict(self) -> dict:
        return {"runs": len(self.rows), "scored": len(self.scored), "median_abs_error_points": self.median_abs_points,
                "max_abs_error_points": self.max_abs_points, "target_median_points": TARGET_MEDIAN_POINTS,
                "target_max_points": TARGET_MAX_POINTS, "meets_target": self.meets_target,
                "groups": {k: {"runs": n, "median_abs_error_points": m} for k, (n, m) in self.groups().items()},
                "misses": [r.id for r in self.misses], "rows": [r.to_dict() for r in self.rows], "notes": self.notes}


def load_runs() -> list[dict]:
    """The shipped runs (data/training_runs.toml), each a dict with its source and quote."""
    return list(shipped("training_runs.toml").get("run", []))


FLOPS_COUNTED = {"6n": "tflops_per_chip", "6n+attention": "tflops_with_attention_per_chip",
                 "executed": "hardware_tflops_per_chip"}


def tflops_key(row: dict) -> str:
    """The train() key a published TFLOP/s per chip compares with: the FLOPs the source counted (`flops_counted`,
    default "6n"), shared by this table and the calibration rows (data/measurements.toml [[training]])."""
    counted = str(row.get("flops_counted", "6n"))
    if counted not in FLOPS_COUNTED:
        raise ValueError(f"{row.get('id')}: flops_counted {counted!r} is not one of {sorted(FLOPS_COUNTED)}")
    return FLOPS_COUNTED[counted]


PUBLISHED_RESERVE = 0.0     # a run that trained fit its HBM (see the module docstring)


def _kw(run: dict, recompute: str) -> dict:
    seq = int(run["seq_len"])
    return dict(reserve=PUBLISHED_RESERVE, chips=run["chips"], tp=run.get("tp"), pp=run.get("pp"), dp=run.get("dp"), ep=run.get("ep"),
                cp=run.get("cp"), seq_len=seq, global_batch_tokens=int(run["global_batch_seqs"]) * seq,
                micro_batch=run.get("micro_batch", 1), recompute=recompute, zero=run.get("zero", 1),
                dtype=run.get("dtype", "bf16"), tokens=run.get("tokens"), schedule=run.get("schedule", "1f1b"),
                virtual_stages=run.get("virtual_stages"), balanced=run.get("balanced", False),
                flash=run.get("flash", True), dropout=run.get("dropout", False),
                tp_overlap=run.get("tp_comm_overlap", False), pp_overlap=run.get("pp_comm_overlap", False),
                ep_comm=run.get("ep_comm", "bf16"), ep_overlap=run.get("ep_overlap", False),
                act=run.get("act_storage"), adam_bytes=run.get("adam_bytes"), grad_bytes=run.get("grad_bytes"),
                dualpipe=run.get("dualpipe", False))


def predict_run(run: dict) -> RunCheck:
    """One run: the published layout through train(), on the run's own metric and on BF16 MFU."""
    stated = run.get("recompute")
    tries = [stated] if stated in RECOMPUTE_ORDER else list(RECOMPUTE_ORDER)
    r, note = None, "" if stated in RECOMPUTE_ORDER else "recompute unstated: least that fits"
    for rc in tries:
        try:
            r = train(run["model"], run["hardware"], **_kw(run, rc))
        except InputError as e:
            note = f"not expressible: {e}"
            r = None
            break
        if r.fits:
            break
    lay = f"tp{run.get('tp', 1)} pp{run.get('pp', 1)} dp{run.get('dp', 1)} ep{run.get('ep', 1)} cp{run.get('cp', 1)}"
    if run.get("schedule") == "interleaved":
        lay += f" v{run.get('virtual_stages', 2)}"
    if run.get("tp_comm_overlap"):
        lay += " tp-overlap"
    if run.get("pp_comm_overlap"):
        lay += " pp-overlap"
    if run.get("ep_comm", "bf16") != "bf16":
        lay += f" ep-{run['ep_comm']}"
    if run.get("ep_overlap"):
        lay += " ep-overlap"
    base = dict(id=run["id"], model=run["model"], hardware=run["hardware"], chips=int(run["chips"]), layout=lay,
                source=run["source"], metric=run["metric"], measured=float(run["value"]),
                dtype=str(run.get("dtype", "bf16")), chip_class=kernel_class(get_hardware(run["hardware"])),
                moe=bool(get_model(run["model"]).is_moe))
    if r is None:
        return RunCheck(**base, predicted=None, measured_mfu=None, predicted_mfu=None, recompute=str(stated),
                        fits=False, memory_bytes=None, usable_bytes=None, note=note)
    mem = r.step.memory
    d = r.to_dict()
    if not r.fits:
        return RunCheck(**base, predicted=None, measured_mfu=None, predicted_mfu=None, recompute=r.recompute,
                        fits=False, memory_bytes=float(mem.total), usable_bytes=float(mem.usable),
                        note=f"does not fit in the training memory model: {mem.total / 1e9:.1f} GB per chip of "
                             f"{mem.usable / 1e9:.1f} GB of HBM (a run that trained fit: the model's memory misses a "
                             f"saving it used)")
    bf16 = r.hardware.peak_flops("bf16")
    mfu = float(r.step.mfu) * r.step.peak_flops / bf16
    m = run["metric"]
    pred = {"tflops_per_chip": d[tflops_key(run)],
            "tokens_per_s": d["tokens_per_s"], "tokens_per_s_per_chip": d["tokens_per_s"] / r.chips,
            "gpu_hours": d["chip_hours"], "mfu": d["mfu"]}.get(m)
    if pred is None:
        return RunCheck(**base, predicted=None, measured_mfu=None, predicted_mfu=mfu, recompute=r.recompute,
                        fits=True, memory_bytes=float(mem.total), usable_bytes=float(mem.usable),
                        note=f"metric {m!r} not predicted")
    ratio = pred / float(run["value"]) if m == "gpu_hours" else float(run["value"]) / pred
    # the miss read as compute: the measured step (predicted step / ratio) less everything that is not compute,
    # over the predicted compute; 1 where the compute is right and the rest of the step accounts for the gap
    step, comp = d["step_time_s"], d["breakdown_s"]["compute"]
    factor = (step / ratio - (step - comp)) / comp if comp else None
    return RunCheck(**base, predicted=float(pred), measured_mfu=mfu * ratio, predicted_mfu=mfu,
                    recompute=r.recompute, fits=True, memory_bytes=float(mem.total), usable_bytes=float(mem.usable),
                    note=note, compute_share=comp / step if step else None, compute_factor=factor)


def validate_runs() -> RunValidation:
    """Every shipped run predicted from its layout; median and worst |MFU error| in points."""
    rows = [predict_run(run) for run in load_runs()]
    notes = ["no parameter is fitted on these runs: every prediction is held out",
             "MFU on 6N over the dense BF16 peak for every run (fp8 runs included)"]
    return RunValidation(rows=rows, notes=notes)
