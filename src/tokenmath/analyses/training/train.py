"""Training: step time, MFU, memory per chip and the cost of a whole run, for one layout.

All physics comes from engine/train_step.py and engine/train_memory.py (which reuse engine/forward.py's forward
pass and engine/collectives.py); this module checks the question, calls the engine and derives the user-facing
figures:
  steps      = tokens / global_batch_tokens
  train_time = steps x step_time
  chip_hours = chips x train_time / 3600;  cost = chip_hours x $/chip-hour;  energy = TDP x chips x train_time
  MFU        = 6 N G / (step_time x chips x peak)   (PaLM convention, Chowdhery et al. 2022 App. B, on 6N)
  tflops_per_chip = 6 N G / step_time / chips       (model FLOPs, TFLOP/s)
The ranking of many layouts is train_search.py; the napkin derivation is tokenmath.faces.explain_training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.analyses.setup import check_ep_imbalance
from tokenmath.analyses.training.fit_advice import fit_advice
from tokenmath.base import units as u
from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.engine.economics import chip_hours, usd_of_chip_hours
from tokenmath.engine.expert_parallel import EP_COMM
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.train_memory import GRAD_BYTES, RECOMPUTE, SCHEDULES, train_memory
from tokenmath.engine.train_memory_recipe import ACT_STORAGE, ADAM_STATE_BYTES, DEFAULT_RECIPE, MemoryRecipe
from tokenmath.engine.train_step import TRAIN_DTYPES, ZERO_STAGES, train_step
from tokenmath.engine.train_step_result import TrainStep, matmul_params
from tokenmath.mapping.layout import Layout, make_train_layout, train_layout
from tokenmath.specs.efficiency import DEFAULT, Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.kernels import kernel_class
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.specs.systems import get_system

MAX_BATCH_TOKENS = 10**12
MAX_TRAIN_TOKENS = 1e16


@dataclass(frozen=True)
class TrainResult:
    """One layout's training step and, with `tokens`, its whole run (seconds, bytes, USD, kWh)."""
    model: Model
    hardware: Hardware
    layout: Layout
    seq_len: int
    global_batch_tokens: int
    micro_batch: int
    recompute: str
    zero: int
    dtype: str
    schedule: str
    virtual_stages: int
    balanced: bool
    overlap: bool
    efficiency: Efficiency
    step: TrainStep
    fits: bool
    tokens: float | None = None
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flash: bool = True                # attention stores no scores (FlashAttention)
    dropout: bool = False             # dropout masks stored
    tp_overlap: bool = False          # userbuffers overlap of the TP collectives with the GEMMs
    pp_overlap: bool = False          # interleaved schedule's p2p hand-offs behind the chunks (overlap_p2p_comm)
    ep_comm: str = "bf16"             # EP all-to-all transport (engine/expert_parallel.EP_COMM)
    ep_overlap: bool = False          # DualPipe's overlap of the all-to-all with the paired micro-batch
    recipe: MemoryRecipe = DEFAULT_RECIPE  # activation storage, Adam bytes, DualPipe (engine/train_memory_recipe.py)
    grad_bytes: float = GRAD_BYTES    # bytes per gradient (2 bf16, 4 fp32)

    # ---- headline figures (None when the configuration does not fit) ---------------------------------------
    @property
    def chips(self) -> int:
        return int(self.layout.chips)

    def _ok(self, x) -> float | None:
        return finite(x) if self.fits else None

    @property
    def step_time_s(self) -> float | None:
        return self._ok(self.step.step_time_s)

    @property
    def mfu(self) -> float | None:
        return self._ok(self.step.mfu)

    @property
    def tflops_per_chip(self) -> float | None:
        return self._ok(self.step.tflops_per_chip / 1e12)

    @property
    def steps(self) -> float | None:
        return None if self.tokens is None else self.tokens / self.global_batch_tokens

    @property
    def train_time_s(self) -> float | None:
        if self.tokens is None or not self.fits:
            return None
        return self.steps * self.step_time_s

    @property
    def chip_hours(self) -> float | None:
        t = self.train_time_s
        return None if t is None else float(chip_hours(self.chips, t))

    @property
    def cost_usd(self) -> float | None:
        h, p = self.chip_hours, self.hardware.price_usd_per_hour
        return None if h is None or p is None else usd_of_chip_hours(h, p)

    @property
    def energy_kwh(self) -> float | None:
        """Board power at TDP for the whole run (an upper bound), in kWh (3.6e6 J)."""
        t, w = self.train_time_s, self.hardware.tdp_w
        return None if t is None or w is None else w * self.chips * t / 3.6e6

    def to_dict(self) -> dict:
        s, mem, lay = self.step, self.step.memory, self.layout
        P = count_params(self.model)
        ok = self._ok
        return {
            "model": self.model.id, "system": self.hardware.id, "chips": self.chips,
            "tp": int(lay.tp), "pp": int(lay.pp), "dp": int(lay.dp), "ep": int(lay.ep), "cp": int(lay.cp),
            "seq_len": self.seq_len, "global_batch_tokens": self.global_batch_tokens,
            "micro_batch": self.micro_batch, "micro_batches": finite(s.micro_batches),
            "recompute": self.recompute, "zero": self.zero, "dtype": self.dtype, "overlap": self.overlap,
            "schedule": self.schedule, "virtual_stages": self.virtual_stages, "balanced_stages": self.balanced,
            "tp_comm_overlap": self.tp_overlap, "pp_comm_overlap": self.pp_overlap, "ep_comm": self.ep_comm,
            "ep_overlap": self.ep_overlap, "memory_recipe": self.recipe.to_dict(), "grad_bytes": self.grad_bytes,
            "params_total": P.total, "params_active": P.active, "params_matmul": matmul_params(self.model),
            "fits": bool(self.fits),
            "step_time_s": ok(s.step_time_s), "step_floor_s": ok(s.floor_s),
            "tokens_per_s": ok(self.global_batch_tokens / s.step_time_s),
            "mfu": ok(s.mfu), "mfu_with_attention": ok(s.mfu_with_attention), "hfu": ok(s.hfu),
            "tflops_per_chip": ok(s.tflops_per_chip / 1e12),
            "tflops_with_attention_per_chip": ok(s.tflops_with_attention_per_chip / 1e12),
            "hardware_tflops_per_chip": ok(s.hardware_flops_per_chip / 1e12),
            "peak_tflops_per_chip": s.peak_flops / 1e12,
            "model_flops_per_step": finite(s.model_flops), "hardware_flops_per_step": finite(s.hardware_flops),
            "bubble_fraction": finite(s.bubble_fraction),
            "breakdown_s": {
                "compute": ok(s.compute_s), "tp_comm": ok(s.tp_comm_s), "ep_comm": ok(s.ep_comm_s),
                "cp_comm": ok(s.cp_comm_s), "pp_bubble": ok(s.pp_bubble_s), "pp_p2p": ok(s.pp_p2p_s),
                "dp_comm_exposed": ok(s.dp_comm_exposed_s), "dp_comm_total": ok(s.dp_comm_total_s),
                "dp_overlap_contention": ok(s.dp_contention_s),
                "optimizer": ok(s.optimizer_s)},
            "memory_per_chip_bytes": finite(mem.total), "memory_usable_per_chip_bytes": finite(mem.usable),
            "memory_breakdown_bytes": {"weights": finite(mem.weights), "gradients": finite(mem.gradients),
                                       "optimizer": finite(mem.optimizer), "buffers": finite(mem.buffers),
                                       "activations": finite(mem.activations)},
            "tokens": self.tokens, "steps": self.steps, "train_time_s": self.train_time_s,
            "chip_hours": self.chip_hours, "cost_usd": self.cost_usd, "energy_kwh": self.energy_kwh,
            "price_usd_per_chip_hour": self.hardware.price_usd_per_hour, "tdp_w": self.hardware.tdp_w,
            "efficiency": {"flops": self.efficiency.flops, "memory_bw": self.efficiency.memory_bw,
                           "link_bw": self.efficiency.link_bw, "source": self.efficiency.source},
            "advice": self.advice, "notes": self.notes,
        }


# ---- checking the question ------------------------------------------------------------------------------------
def train_system(system, chips) -> Hardware:
    """A system id (hgx-h100, gb200-nvl72, tpu-v5p ...) or a chip id in its usual domain (systems.get_system)."""
    return get_system(system, chips if isinstance(chips, int) else None)


def choice_arg(v, name: str, options) -> str:
    """`v` as one of `options` (compared as lower-case text), else InputError naming them."""
    key = str(v).lower()
    opts = [str(o) for o in options]
    if key not in opts:
        raise InputError(name, f"{v!r} is not an option", f"valid: {', '.join(opts)}")
    return key


def tokens_arg(v) -> float | None:
    """Training tokens of a whole run: None, or a number from 1 to MAX_TRAIN_TOKENS."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError("tokens", f"{v!r} is not a number", "training tokens, e.g. 3e11") from None
    if isinstance(v, bool) or not math.isfinite(f) or not 1 <= f <= MAX_TRAIN_TOKENS:
        raise InputError("tokens", f"{v!r} is out of range", f"a number of tokens from 1 to {MAX_TRAIN_TOKENS:.0e}")
    return f


def _check_batch(lay: Layout, seq_len: int, micro_batch: int, gbt: int):
    unit = seq_len * micro_batch * int(lay.dp) * int(lay.ep)
    if gbt % unit:
        lo = max(unit, gbt // unit * unit)
        raise InputError("global_batch_tokens",
                         f"{gbt:,} tokens are not a whole number of micro-batches: seq_len {seq_len} x micro_batch "
                         f"{micro_batch} x dp {int(lay.dp)}" + (f" x ep {int(lay.ep)}" if int(lay.ep) > 1 else "")
                         + f" = {unit:,} tokens per micro-batch round",
                         f"a multiple of {unit:,}, e.g. {lo:,} or {lo + unit:,}")


def unused_on_layout(lay: Layout, **given) -> list[str]:
    """Notes for the options that change nothing on this layout: pipeline ones without a pipeline (or, for the p2p
    overlap, without an interleaved one), the TP overlap without a TP group, the EP ones without expert parallelism
    (before, the same answer as without them, silently; issue 40, found by benchmarks/fuzz_cli.py)."""
    tp, pp, ep = int(lay.tp), int(lay.pp), int(lay.ep)
    unused = []
    if pp == 1:
        unused += [(f"--schedule {given['schedule']}", "pp = 1: no pipeline")] if given["schedule"] != "1f1b" else []
        unused += [(o, "pp = 1: no pipeline stages") for o, k in (("--balanced-stages", "balanced"),
                                                                   ("--dualpipe", "dualpipe")) if given[k]]
    if given["pp_overlap"] and (pp == 1 or given["schedule"] != "interleaved"):
        unused.append(("--pp-comm-overlap", "it overlaps an interleaved pipeline's hand-offs, and there is none"))
    if given["tp_overlap"] and tp == 1:
        unused.append(("--tp-comm-overlap", "tp = 1: no tensor-parallel collectives"))
    if ep == 1:
        ep_given = [o for o, on in (("--ep-comm", given["ep_comm"] != "bf16"), ("--overlap-ep", given["ep_overlap"]),
                                    ("--ep-imbalance", given["ep_imbalance"] != 1.0)) if on]
        unused += [(o, "ep = 1: no expert all-to-all") for o in ep_given]
    return [f"{o} changes nothing here: {why}" for o, why in unused]


# ---- one layout ----------------------------------------------------------------------------------------------
def train(model, system, *, chips=None, tp=None, pp=None, dp=None, ep=None, cp=None, seq_len=4096,
          global_batch_tokens=4_194_304, micro_batch=1, recompute="selective", zero=1, dtype="bf16", tokens=None,
          overlap=True, efficiency: Efficiency | None = None, reserve: float | None = None, schedule="1f1b",
          virtual_stages=None, balanced=False, flash=True, dropout=False, tp_overlap=False,
          pp_overlap=False, ep_comm="bf16", ep_overlap=False, act=None, adam_bytes=None, grad_bytes=None,
          dualpipe=False, ep_imbalance=None) -> TrainResult:
    """One training step of `global_batch_tokens` tokens (sequences of `seq_len`) on a layout of
    chips = tp x pp x dp x ep x cp; with `tokens`, the whole run (time, chip-hours, $, kWh).

    model: catalog id, config.json path or Model; system: hardware catalog id, hardware file or Hardware (the chip
    in its usual scale-up domain; chips beyond one domain talk over its scale-out link).
    schedule: '1f1b', 'interleaved' (virtual_stages v >= 2 model chunks per rank; default 2) or 'zb-h1';
    balanced: Llama 3's stage balancing (embedding and head take a layer slot); flash / dropout: whether attention
    stores no scores (FlashAttention) and whether the model trains with dropout masks (engine/train_memory.py);
    tp_overlap: the tensor-parallel collectives overlapped with the GEMMs (Megatron --tp-comm-overlap, engine/train_step.py);
    pp_overlap: the interleaved schedule's point-to-point hand-offs overlapped with the chunks (Megatron
    overlap_p2p_comm; no effect without an interleaved pipeline); ep_comm: the EP all-to-all's transport (bf16, fp8,
    deepep); ep_overlap: DualPipe's overlap of the all-to-all with compute (MoE with ep > 1).
    Memory recipe (engine/train_memory_recipe.py): act 'bf16' | 'fp8' | 'deepseek-v3' (default: 'fp8' when
    dtype is fp8, Transformer Engine's FP8 GEMM inputs, else 'bf16'); adam_bytes per parameter (12; 8 with BF16
    moments); grad_bytes (2 bf16; 4 fp32); dualpipe: DualPipe's two stages per rank and PP + 1 micro-batches.
    Seconds, bytes, USD, kWh. A layout that fits with no recomputation at this ZeRO stage raises InputError
    naming what would fit; one that fits only with another recomputation returns fits=False with advice.
    """
    m = get_model(model)
    hw = train_system(system, chips)
    eff = efficiency or DEFAULT
    reserve = RESERVE_FRACTION if reserve is None else reserve
    if not 0 <= reserve < 1:
        raise InputError("reserve", f"{reserve!r} is not a fraction of memory", "a number in [0, 1)")
    seq_len = int_arg(seq_len, "seq_len", 1, 100_000_000)
    gbt = int_arg(global_batch_tokens, "global_batch_tokens", 1, MAX_BATCH_TOKENS)
    micro_batch = int_arg(micro_batch, "micro_batch", 1, 1_000_000)
    recompute = choice_arg(recompute, "recompute", RECOMPUTE)
    zero = int(choice_arg(zero, "zero", ZERO_STAGES))
    dtype = choice_arg(dtype, "dtype", TRAIN_DTYPES)
    schedule = choice_arg(schedule, "schedule", SCHEDULES)
    ep_comm = choice_arg(ep_comm, "ep_comm", EP_COMM)
    imb = check_ep_imbalance(ep_imbalance)
    tokens = tokens_arg(tokens)
    recipe, grad_bytes = memory_recipe(dtype, act, adam_bytes, grad_bytes, dualpipe)
    lay = make_train_layout(m, hw, chips, tp, pp, dp, ep, cp)
    v = _virtual_stages(m, lay, schedule, virtual_stages, bool(balanced))
    if seq_len % int(lay.cp):
        raise InputError("cp", f"cp={int(lay.cp)} does not split the {seq_len}-token sequence evenly",
                         f"a divisor of {seq_len}")
    _check_batch(lay, seq_len, micro_batch, gbt)

    notes = []
    if m.max_context and seq_len > m.max_context:
        notes.append(f"seq_len {seq_len:,} exceeds the model's max_position_embeddings {m.max_context:,}")
    if int(lay.tp) > hw.scaleup_domain:
        notes.append(f"tp={int(lay.tp)} spans scale-up domains of {hw.scaleup_domain}: its per-layer all-reduces "
                     "cross the scale-out link")
    if tokens is not None and tokens % gbt:
        notes.append(f"{tokens:,.0f} tokens are {tokens / gbt:,.2f} steps of {gbt:,}; the fraction is counted as is")
    notes += unused_on_layout(lay, schedule=schedule, balanced=balanced, pp_overlap=pp_overlap, dualpipe=dualpipe,
                              tp_overlap=tp_overlap, ep_comm=ep_comm, ep_overlap=ep_overlap, ep_imbalance=imb)
    kw = dict(seq_len=seq_len, micro_batch=micro_batch, global_batch_tokens=gbt, dtype=dtype, overlap=overlap,
              eff=eff, reserve=reserve, schedule=schedule, virtual_stages=v, balanced=bool(balanced),
              flash=bool(flash), dropout=bool(dropout), tp_overlap=bool(tp_overlap), pp_overlap=bool(pp_overlap),
              ep_comm=ep_comm, ep_overlap=bool(ep_overlap), recipe=recipe, grad_bytes=grad_bytes, ep_imbalance=imb)
    step = train_step(m, hw, lay, recompute=recompute, zero=zero, **kw)
    fits = bool(step.memory.fits)
    advice = [] if fits else fit_advice(m, hw, lay, zero, recompute, kw)
    if m.is_moe:
        notes.append("MoE: experts assumed evenly loaded; the all-to-all carries top-k copies of every token. Host time "
                     "per layer (a dispatcher's token-count sync, eager kernel launches) is not modelled: published "
                     "Megatron MoE runs (NeMo 25.11: GPT-OSS, Qwen3 30B-A3B, DeepSeek-V3) ran 1.3-3.8x slower than "
                     "predicted; `tokenmath validate`, docs/training.md")
    if dtype == "fp8":
        notes.append("fp8: matmuls at the fp8 peak with fp8 weights read; master weights and optimizer stay in "
                     f"bf16/fp32, activations stored as '{recipe.act}' (no fp8 weight cache counted in memory)")
        if kernel_class(hw) == "nvidia-blackwell":
            notes.append("fp8 on Blackwell: the published NeMo runs on B200/GB200 ran 10-31% slower than this "
                         "prediction (the class's FP8 GEMM fraction is derived, not measured in training); "
                         "docs/training.md")
    return TrainResult(model=m, hardware=hw, layout=lay, seq_len=seq_len, global_batch_tokens=gbt,
                       micro_batch=micro_batch, recompute=recompute, zero=zero, dtype=dtype, overlap=overlap,
                       schedule=schedule, virtual_stages=v, balanced=bool(balanced),
                       efficiency=eff, step=step, fits=fits, tokens=tokens, advice=advice, notes=notes,
                       flash=bool(flash), dropout=bool(dropout), tp_overlap=bool(tp_overlap),
                       pp_overlap=bool(pp_overlap), ep_comm=ep_comm, ep_overlap=bool(ep_overlap), recipe=recipe,
                       grad_bytes=grad_bytes)


def memory_recipe(dtype, act=None, adam_bytes=None, grad_bytes=None, dualpipe=False) -> tuple[MemoryRecipe, float]:
    """Checked (MemoryRecipe, grad_bytes): act defaults to 'fp8' (Transformer Engine's FP8 GEMM inputs) for an fp8
    run and 'bf16' otherwise; Adam 12 B and bf16 gradients 2 B per parameter unless given."""
    act = choice_arg(act or ("fp8" if dtype == "fp8" else "bf16"), "act", ACT_STORAGE)
    adam_bytes = ADAM_STATE_BYTES if adam_bytes is None else pos_float(adam_bytes, "adam_bytes", 0.0, 64.0)
    grad_bytes = GRAD_BYTES if grad_bytes is None else pos_float(grad_bytes, "grad_bytes", 0.0, 8.0)
    return MemoryRecipe(act=act, adam_bytes=adam_bytes, dualpipe=bool(dualpipe)), grad_bytes


def _virtual_stages(m, lay, schedule, v, balanced) -> int:
    """Model chunks per pipeline rank: 1 unless interleaved (default 2); each chunk must hold whole layer slots."""
    if schedule != "interleaved":
        if v not in (None, 1):
            raise InputError("virtual_stages", f"{v} virtual stages need --schedule interleaved",
                             "--schedule interleaved, or leave --virtual-stages out")
        return 1
    v = 2 if v is None else int_arg(v, "virtual_stages", 2, 1024)
    pp = int(lay.pp)
    if pp < 2:
        raise InputError("schedule", "an interleaved schedule needs a pipeline", "--pp 2 or more, or --schedule 1f1b")
    slots = (m.n_layers + (2 if balanced else 0))
    per_rank = -(-slots // pp)
    if per_rank % v:
        ok = [d for d in range(2, per_rank + 1) if per_rank % d == 0]
        raise InputError("virtual_stages", f"{v} chunks do not split the {per_rank} layer slots of a rank evenly",
                         f"a divisor of {per_rank}: {', '.join(map(str, ok)) or 'none (use --schedule 1f1b)'}")
    return v
