"""Which input moves an answer most: each hardware figure and each efficiency moved by +-delta (20% by default),
the answer re-evaluated through the one engine (analyses/serving/infer.py), ranked by the swing (a tornado).

Inputs moved:
- hardware (specs/overrides.py, so each value is checked like a hardware file): HBM bandwidth, dense FLOP/s of the
  dtype the weights' matmuls run on (and bf16, which attention and activations use), HBM capacity (it moves the
  answer only through the batch that fits: use batch "max" to see it), scale-up and scale-out bandwidth, the
  scale-up collective latency, and the price per chip-hour;
- efficiency (specs/efficiency.py): achievable fractions of peak FLOP/s, HBM and link bandwidth, and the fixed time
  per layer per pass. A fraction of peak cannot exceed 1, so its upper side is clipped at 1 (the row says so: a
  family calibrated at memory_bw = 1.0 has no upper side). Under a shape-aware kernel model (Efficiency.kernels,
  every calibrated chip's default) the flat efficiency.flops and efficiency.memory_bw never enter the engine: each
  op's FLOP/s and bandwidth come from the kernel model's fractions times its fitted residuals (engine/kernels.op_rates),
  so those two rows are left out (a note names them) and the residuals kernels.compute_scale and kernels.bw_scale,
  which do enter, are moved instead.
Every row whose answer does not move says why in its note (no silent 0.0% rows): the input binds no operation on
the metric's path at this layout and batch (a memory-bound step's FLOP/s, the links of one chip, a price on a time).
Not vectorized across inputs: hardware figures are scalars of a Hardware record, so this is 2 x inputs + 1 calls
of the engine, each itself vectorized over its layout and batch (a DeepSeek-V3 question takes about a second).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, pos_float
from tokenmath.analyses.serving.infer import infer
from tokenmath.analyses.setup import deployment_hardware, serving_efficiency
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware, get_hardware
from tokenmath.specs.overrides import apply, figure

METRICS = {
    "cost_per_mtok_output_usd": "$ per Mtok output (decode step)",
    "cost_per_mtok_output_request_usd": "$ per Mtok output (whole request)",
    "cost_per_mtok_input_usd": "$ per Mtok input",
    "decode_step_s": "decode step (s)",
    "ttft_s": "time to first token (s)",
    "output_tokens_per_s_per_user": "output tokens/s per user",
    "output_tokens_per_s": "output tokens/s (system)",
}
EFFICIENCY_FIELDS = ("flops", "memory_bw", "link_bw", "layer_overhead_s")
FLAT_FRACTIONS = ("flops", "memory_bw")                 # replaced, op by op, by a kernel model's fractions
KERNEL_SCALES = ("compute_scale", "bw_scale")           # the kernel model's fitted residuals (specs/kernels.py), <= 1
COSTS = ("cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "cost_per_mtok_input_usd")
LINKS = ("scaleup_gbs", "scaleup_latency_us", "scaleout_gbs", "efficiency.link_bw")


@dataclass(frozen=True)
class SensitivityRow:
    """One input moved down and up: its values (humane units for hardware, fractions or s for efficiency) and the
    answer at each (None where the batch no longer fits or the figure has no price)."""
    name: str
    kind: str                 # "hardware" or "efficiency"
    base: float
    low: float
    high: float
    answer_low: float | None
    answer_high: float | None
    note: str = ""

    @property
    def swing(self) -> float:
        """|answer_high - answer_low| (0 when a side has no answer)."""
        if self.answer_low is None or self.answer_high is None:
            return 0.0
        return abs(self.answer_high - self.answer_low)

    def to_dict(self) -> dict:
        return {"input": self.name, "kind": self.kind, "base": self.base, "low": self.low, "high": self.high,
                "answer_low": finite(self.answer_low), "answer_high": finite(self.answer_high),
                "swing": finite(self.swing), "note": self.note}


@dataclass(frozen=True)
class SensitivityResult:
    model: str
    hardware: str
    metric: str
    delta: float
    base_answer: float
    layout: str
    batch: int
    rows: tuple[SensitivityRow, ...]     # ranked, largest swing first
    efficiency_source: str
    notes: tuple[str, ...] = ()
    what_if: tuple[dict, ...] = ()       # the what-if overrides the figures were moved around (Override.to_dict)

    @property
    def label(self) -> str:
        return METRICS[self.metric]

    def to_dict(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "metric": self.metric, "delta": self.delta,
                "base_answer": finite(self.base_answer), "layout": self.layout, "batch": self.batch,
                "rows": [r.to_dict() for r in self.rows], "efficiency_source": self.efficiency_source,
                "notes": list(self.notes), **({"what_if": list(self.what_if)} if self.what_if else {})}


def _why_still(r: SensitivityRow, base: float, base_r, hw: Hardware, metric: str, batch) -> SensitivityRow:
    """The row with a note saying why its answer does not move, where it does not (a row that moves is returned as
    it is): a side with no answer, a price on a time, links that carry nothing, or an input that binds no
    operation on the metric's path (each op takes the longest of its compute, memory and communication)."""
    if r.swing > 1e-9 * abs(base):
        return r
    if r.answer_low is None or r.answer_high is None:
        side = "low" if r.answer_low is None else "high"
        why = f"at the {side} side the question has no answer (the batch no longer fits), so no swing is measured"
    elif r.note:
        return r
    elif r.name == "price_usd_per_hour" and metric not in COSTS:
        why = "a price moves costs only, and this metric is a time or a speed"
    elif r.name in LINKS and base_r.chips == 1:
        why = "one chip: no collectives"
    elif r.name == "scaleout_gbs" and base_r.chips <= hw.scaleup_domain:
        why = f"all {base_r.chips} chips sit in one scale-up domain of {hw.scaleup_domain}: no traffic leaves it"
    elif r.name.startswith("tflops.") or r.name == "kernels.compute_scale" or r.name == "efficiency.flops":
        why = ("no operation on this metric's path is bound by FLOP/s at this layout and batch: each takes the "
               "longest of its compute, memory and communication times, and here memory or communication is longer")
    elif r.name in ("memory_bw_tbs", "kernels.bw_scale", "efficiency.memory_bw"):
        why = ("no operation on this metric's path is bound by HBM bandwidth at this layout and batch: each takes the "
               "longest of its compute, memory and communication times, and here compute or communication is longer")
    elif r.name == "memory_gb":
        why = ("the batch does not change with capacity here: the largest batch is held by the engine's cap on "
               "running sequences, not by memory" if batch == "max" else
               "capacity moves the answer only through the batch that fits (batch is fixed here)")
    else:
        why = ("this input binds no operation on the metric's path at this layout and batch (each takes the longest "
               "of its compute, memory and communication times)")
    return replace(r, note=why)


def hardware_fields(hw: Hardware, compute_key: str) -> list[str]:
    """The hardware figures worth moving for this chip (those it has; links only when it has a domain)."""
    out = ["memory_bw_tbs", f"tflops.{compute_key}"]
    if compute_key != "bf16" and hw.flops.get("bf16"):
        out.append("tflops.bf16")
    out.append("memory_gb")
    if hw.scaleup_domain > 1:
        out += ["scaleup_gbs", "scaleup_latency_us"]
    if hw.scaleout_bw is not None:
        out.append("scaleout_gbs")
    if hw.price_usd_per_hour:
        out.append("price_usd_per_hour")
    return out


def sensitivity(model, hardware, *, metric: str = "cost_per_mtok_output_usd", delta: float = 0.2, batch="max",
                efficiency: Efficiency | None = None, engine=None, what_if=(), price_usd_per_hour=None,
                **kw) -> SensitivityResult:
    """Move each input by +-delta, answer `metric` of infer() at each, rank by swing.
    what_if, price_usd_per_hour: the deployment's chip (analyses.setup.deployment_hardware), the figures moved
    around it (applied here once, not again under each moved figure).
    kw: infer's other arguments (chips, tp, ep, dp, pp, input_len, output_len, weight_dtype, kv_dtype)."""
    if metric not in METRICS:
        from tokenmath.base.errors import unknown_name
        raise unknown_name("metric", metric, METRICS)
    delta = pos_float(delta, "delta", 0.0, 0.9)
    hw = deployment_hardware(get_hardware(hardware), what_if, price_usd_per_hour)
    eff = serving_efficiency(hw, efficiency, engine)

    def answer(h, e, b=batch):
        r = infer(model, h, batch=b, efficiency=e, **kw)
        return r, r.to_dict()[metric]

    base_r, base = answer(hw, eff)
    if base is None:
        if not base_r.fits:      # the question itself cannot run: name the batch and what would fit
            raise InputError("batch", f"{batch} does not fit on {base_r.chips} x {hw.id}: "
                             f"{'; '.join(base_r.advice[:1]) or 'not enough memory'}",
                             "a smaller --batch, 'max', or more --chips")
        raise InputError(metric, f"has no value for this question ({hw.id} has no price)",
                         "a chip with price_usd_per_hour, or a --metric that needs none (e.g. decode_step_s)")
    # hold the batch the base question runs; 'max' is re-solved at each point so memory shows its effect
    rows = []
    for f in hardware_fields(hw, base_r.hardware.flops_key(base_r.precision.weight.compute)):
        cur = figure(hw, f)
        lo, hi = cur * (1 - delta), cur * (1 + delta)
        note = ""
        if f == "scaleup_latency_us" and cur == 0:
            continue
        if f == "memory_gb" and batch != "max":
            note = "capacity moves the answer only through the batch that fits (batch is fixed here)"
        vals = []
        for v in (lo, hi):
            h, _ = apply(hw, {f: repr(v)})
            vals.append(answer(h, eff)[1])
        rows.append(SensitivityRow(f, "hardware", cur, lo, hi, vals[0], vals[1], note))
    km = eff.kernels
    moved = [(f"efficiency.{f}", getattr(eff, f), lambda v, f=f: replace(eff, **{f: v}), f != "layer_overhead_s")
             for f in EFFICIENCY_FIELDS if km is None or f not in FLAT_FRACTIONS]
    if km is not None:
        moved += [(f"kernels.{f}", getattr(km, f), lambda v, f=f: replace(eff, kernels=replace(km, **{f: v})), True)
                  for f in KERNEL_SCALES]
    for name, cur, moved_eff, fraction in moved:
        if cur == 0:
            continue
        lo, hi = cur * (1 - delta), cur * (1 + delta)
        note = ""
        if fraction and hi > 1.0:
            hi, note = 1.0, "a fraction of peak stops at 1"
        vals = [answer(hw, moved_eff(v))[1] if v != cur else base for v in (lo, hi)]
        rows.append(SensitivityRow(name, "efficiency", cur, lo, hi, vals[0], vals[1], note))
    rows = [_why_still(r, base, base_r, hw, metric, batch) for r in rows]
    rows.sort(key=lambda r: -r.swing)
    lay = base_r.layout
    notes = []
    if km is not None:
        notes.append("efficiency.flops and efficiency.memory_bw are left out: the efficiency carries a shape-aware "
                     "kernel model, whose fractions (tile and wave quantization, streaming, attention) give every "
                     "op's FLOP/s and bandwidth, so the flat fractions never enter the engine; its fitted residuals "
                     "kernels.compute_scale and kernels.bw_scale are moved instead")
    return SensitivityResult(base_r.model.id, hw.id, metric, delta, base,
                             f"tp={int(lay.tp)} pp={int(lay.pp)} ep={int(lay.ep)} dp={int(lay.dp)}",
                             int(base_r.batch), tuple(rows), eff.source, tuple(notes),
                             tuple(o.to_dict() for o in hw.what_if))
