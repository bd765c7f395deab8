"""Training: step time, MFU, memory per chip and the cost of a whole run, for one layout or the best layouts.

All physics comes from engine/train_step.py (which reuses engine/step.py's forward pass and
engine/collectives.py); this module checks the question, calls the engine and derives the user-facing figures:
  steps      = tokens / global_batch_tokens
  train_time = steps x step_time
  chip_hours = chips x train_time / 3600;  cost = chip_hours x $/chip-hour;  energy = TDP x chips x train_time
  MFU        = 6 N G / (step_time x chips x peak)   (PaLM convention, Chowdhery et al. 2022 App. B, on 6N)
  tflops_per_chip = 6 N G / step_time / chips       (model FLOPs, TFLOP/s)
`search` enumerates layouts (TP over divisors of the heads within a scale-up domain, PP over divisors of the
layers, EP over divisors of the experts, micro-batch 1/2/4/8, recompute none/selective/full, ZeRO 1/3) and
evaluates them all in ONE vectorized engine call, then keeps those that fit and ranks them by step time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.base import units as u
from tokenmath.specs.efficiency import DEFAULT, Efficiency
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.train_step import (
    RECOMPUTE,
    TRAIN_DTYPES,
    ZERO_STAGES,
    TrainStep,
    activation_bytes_per_layer,
    matmul_params,
    train_memory,
    train_step,
)
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import Hardware
from tokenmath.mapping.layout import Layout, check_layout, make_train_layout, train_layout
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.base.validators import int_arg as _int_arg

MAX_BATCH_TOKENS = 10**12
MAX_TRAIN_TOKENS = 1e16
SEARCH_MICRO_BATCHES = (1, 2, 4, 8)
SEARCH_ZERO = (1, 3)


def _f(x):
    if x is None:
        return None
    x = float(np.asarray(x))
    return x if math.isfinite(x) else None


@dataclass
class TrainResult:
    model: Model
    hardware: Hardware
    layout: Layout
    seq_len: int
    global_batch_tokens: int
    micro_batch: int
    recompute: str
    zero: int
    dtype: str
    overlap: bool
    efficiency: Efficiency
    step: TrainStep
    fits: bool
    tokens: float | None = None
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    # ---- headline figures (None when the configuration does not fit) ---------------------------------------
    @property
    def chips(self) -> int:
        return int(self.layout.chips)

    def _ok(self, x):
        return _f(x) if self.fits else None

    @property
    def step_time_s(self):
        return self._ok(self.step.step_time_s)

    @property
    def mfu(self):
        return self._ok(self.step.mfu)

    @property
    def tflops_per_chip(self):
        return self._ok(self.step.tflops_per_chip / 1e12)

    @property
    def steps(self):
        return None if self.tokens is None else self.tokens / self.global_batch_tokens

    @property
    def train_time_s(self):
        if self.tokens is None or not self.fits:
            return None
        return self.steps * self.step_time_s

    @property
    def chip_hours(self):
        t = self.train_time_s
        return None if t is None else self.chips * t / 3600.0

    @property
    def cost_usd(self):
        h, p = self.chip_hours, self.hardware.price_usd_per_hour
        return None if h is None or p is None else h * p

    @property
    def energy_kwh(self):
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
            "micro_batch": self.micro_batch, "micro_batches": _f(s.micro_batches),
            "recompute": self.recompute, "zero": self.zero, "dtype": self.dtype, "overlap": self.overlap,
            "params_total": P.total, "params_active": P.active, "params_matmul": matmul_params(self.model),
            "fits": bool(self.fits),
            "step_time_s": ok(s.step_time_s), "step_floor_s": ok(s.floor_s),
            "tokens_per_s": ok(self.global_batch_tokens / s.step_time_s),
            "mfu": ok(s.mfu), "mfu_with_attention": ok(s.mfu_with_attention), "hfu": ok(s.hfu),
            "tflops_per_chip": ok(s.tflops_per_chip / 1e12),
            "hardware_tflops_per_chip": ok(s.hardware_flops_per_chip / 1e12),
            "peak_tflops_per_chip": s.peak_flops / 1e12,
            "model_flops_per_step": _f(s.model_flops), "hardware_flops_per_step": _f(s.hardware_flops),
            "bubble_fraction": _f(s.bubble_fraction),
            "breakdown_s": {
                "compute": ok(s.compute_s), "tp_comm": ok(s.tp_comm_s), "ep_comm": ok(s.ep_comm_s),
                "cp_comm": ok(s.cp_comm_s), "pp_bubble": ok(s.pp_bubble_s), "pp_p2p": ok(s.pp_p2p_s),
                "dp_comm_exposed": ok(s.dp_comm_exposed_s), "dp_comm_total": ok(s.dp_comm_total_s),
                "optimizer": ok(s.optimizer_s)},
            "memory_per_chip_bytes": _f(mem.total), "memory_usable_per_chip_bytes": _f(mem.usable),
            "memory_breakdown_bytes": {"weights": _f(mem.weights), "gradients": _f(mem.gradients),
                                       "optimizer": _f(mem.optimizer), "buffers": _f(mem.buffers),
                                       "activations": _f(mem.activations)},
            "tokens": self.tokens, "steps": self.steps, "train_time_s": self.train_time_s,
            "chip_hours": self.chip_hours, "cost_usd": self.cost_usd, "energy_kwh": self.energy_kwh,
            "price_usd_per_chip_hour": self.hardware.price_usd_per_hour, "tdp_w": self.hardware.tdp_w,
            "efficiency": {"flops": self.efficiency.flops, "memory_bw": self.efficiency.memory_bw,
                           "link_bw": self.efficiency.link_bw, "source": self.efficiency.source},
            "advice": self.advice, "notes": self.notes,
        }


@dataclass
class SearchResult:
    model: Model
    hardware: Hardware
    chips: int
    evaluated: int
    fitting: int
    top: list[TrainResult]
    tokens: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"model": self.model.id, "system": self.hardware.id, "chips": self.chips,
                "layouts_evaluated": self.evaluated, "layouts_fitting": self.fitting,
                "ranked_by": "step_time_s", "top": [r.to_dict() for r in self.top], "notes": self.notes}


# ---- checking the question ------------------------------------------------------------------------------------
def _system(system, chips):
    """A system id (hgx-h100, gb200-nvl72, tpu-v5p ...) or a chip id in its usual domain (systems.get_system)."""
    from tokenmath.specs.systems import get_system
    return get_system(system, chips if isinstance(chips, int) else None)


def _choice(v, name: str, options):
    key = str(v).lower()
    opts = [str(o) for o in options]
    if key not in opts:
        raise InputError(name, f"{v!r} is not an option", f"valid: {', '.join(opts)}")
    return key


def _tokens_arg(v):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError("tokens", f"{v!r} is not a number", "training tokens, e.g. 3e11") from None
    if isinstance(v, bool) or not math.isfinite(f) or not 1 <= f <= MAX_TRAIN_TOKENS:
        raise InputError("tokens", f"{v!r} is out of range", f"a number of tokens from 1 to {MAX_TRAIN_TOKENS:.0e}")
    return f


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _check_batch(lay: Layout, seq_len: int, micro_batch: int, gbt: int):
    unit = seq_len * micro_batch * int(lay.dp) * int(lay.ep)
    if gbt % unit:
        lo = max(unit, gbt // unit * unit)
        raise InputError("global_batch_tokens",
                         f"{gbt:,} tokens are not a whole number of micro-batches: seq_len {seq_len} x micro_batch "
                         f"{micro_batch} x dp {int(lay.dp)}" + (f" x ep {int(lay.ep)}" if int(lay.ep) > 1 else "")
                         + f" = {unit:,} tokens per micro-batch round",
                         f"a multiple of {unit:,}, e.g. {lo:,} or {lo + unit:,}")


# ---- one layout ----------------------------------------------------------------------------------------------
def train(model, system, *, chips=None, tp=None, pp=None, dp=None, ep=None, cp=None, seq_len=4096,
          global_batch_tokens=4_194_304, micro_batch=1, recompute="selective", zero=1, dtype="bf16", tokens=None,
          overlap=True, efficiency: Efficiency | None = None, reserve: float | None = None) -> TrainResult:
    """One training step of `global_batch_tokens` tokens (sequences of `seq_len`) on a layout of
    chips = tp x pp x dp x ep x cp; with `tokens`, the whole run (time, chip-hours, $, kWh).

    model: catalog id, config.json path or Model; system: hardware catalog id, hardware file or Hardware (the chip
    in its usual scale-up domain; chips beyond one domain talk over its scale-out link).
    Seconds, bytes, USD, kWh. A layout that fits with no recomputation at this ZeRO stage raises InputError
    naming what would fit; one that fits only with another recomputation returns fits=False with advice.
    """
    m = get_model(model)
    hw = _system(system, chips)
    eff = efficiency or DEFAULT
    reserve = RESERVE_FRACTION if reserve is None else reserve
    if not 0 <= reserve < 1:
        raise InputError("reserve", f"{reserve!r} is not a fraction of memory", "a number in [0, 1)")
    seq_len = _int_arg(seq_len, "seq_len", 1, 100_000_000)
    gbt = _int_arg(global_batch_tokens, "global_batch_tokens", 1, MAX_BATCH_TOKENS)
    micro_batch = _int_arg(micro_batch, "micro_batch", 1, 1_000_000)
    recompute = _choice(recompute, "recompute", RECOMPUTE)
    zero = int(_choice(zero, "zero", ZERO_STAGES))
    dtype = _choice(dtype, "dtype", TRAIN_DTYPES)
    tokens = _tokens_arg(tokens)
    lay = make_train_layout(m, hw, chips, tp, pp, dp, ep, cp)
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
    kw = dict(seq_len=seq_len, micro_batch=micro_batch, global_batch_tokens=gbt, dtype=dtype, overlap=overlap,
              eff=eff, reserve=reserve)
    step = train_step(m, hw, lay, recompute=recompute, zero=zero, **kw)
    fits = bool(step.memory.fits)
    res = TrainResult(m, hw, lay, seq_len, gbt, micro_batch, recompute, zero, dtype, overlap, eff, step, fits,
                      tokens, notes=notes)
    if not fits:
        res.advice = _fit_advice(m, hw, lay, zero, recompute, kw)
    if m.is_moe:
        notes.append("MoE: experts assumed evenly loaded; the all-to-all carries top-k copies of every token")
    if dtype == "fp8":
        notes.append("fp8: matmuls at the fp8 peak with fp8 weights read; master weights, optimizer and "
                     "activations stay in bf16/fp32 (no fp8 weight cache counted in memory)")
    return res


def _fit_advice(m, hw, lay, zero, recompute, kw) -> list[str]:
    """What fits instead: another recomputation at this ZeRO stage (advice), else raise naming ZeRO/recompute/chips."""
    rcs = np.repeat(np.arange(3), 4)
    zs = np.tile(np.arange(4), 3)
    alt = train_step(m, hw, lay, recompute=rcs, zero=zs, **kw)
    mem = alt.memory
    ok = mem.total <= mem.usable
    same_zero = ok & (zs == zero)
    usable = mem.usable
    need = float(np.asarray(mem.total)[(rcs == RECOMPUTE.index(recompute)) & (zs == zero)][0])
    if np.any(same_zero):
        out = [f"needs {u.bytes_(need)} per chip of {u.bytes_(usable)} usable with --recompute {recompute}"]
        for i in np.nonzero(same_zero)[0]:
            out.append(f"--recompute {RECOMPUTE[rcs[i]]} fits ({u.bytes_(float(mem.total[i]))} per chip, "
                       f"step {u.seconds(float(alt.step_time_s[i]))})")
        return out
    full_need = float(np.asarray(mem.total)[(rcs == 2) & (zs == zero)][0])
    fixes = [f"--zero {zs[i]} --recompute {RECOMPUTE[rcs[i]]} fits ({u.bytes_(float(mem.total[i]))})"
             for i in np.nonzero(ok)[0]]
    if not fixes:
        fixes = [_chips_needed(m, hw, lay, kw)]
    raise InputError("chips", f"{m.name} does not fit on {int(lay.chips)} x {hw.id} at ZeRO-{zero} with any "
                     f"recomputation: {u.bytes_(full_need)} per chip even with --recompute full, "
                     f"{u.bytes_(usable)} usable", "; ".join(fixes[:3]))


def _chips_needed(m, hw, lay, kw) -> str:
    """Smallest data-parallel width (tp, pp, ep, cp kept) at which ZeRO-3 + full recomputation fits."""
    dps = np.unique(np.round(np.geomspace(1, 1_000_000, 400)).astype(int))
    L, b, G = kw["seq_len"], kw["micro_batch"], kw["global_batch_tokens"]
    tl = train_layout(int(lay.tp), int(lay.pp), dps, int(lay.ep), int(lay.cp))
    mb = G / (L * b * dps * int(lay.ep))
    mem = train_memory(m, hw.memory_bytes, tl, seq_len=L, micro_batch=b, micro_batches=mb, recompute="full", zero=3,
                       reserve=kw["reserve"])
    ok = np.nonzero(mem.total <= mem.usable)[0]
    base = int(lay.tp) * int(lay.pp) * int(lay.ep) * int(lay.cp)
    if len(ok):
        d = int(dps[ok[0]])
        return (f"about {d * base:,} chips (dp={d}) with --zero 3 --recompute full, or more --tp/--pp "
                f"(`tokenmath train --search --chips N` ranks the layouts that fit)")
    act = float(np.min(mem.activations))
    return (f"activations alone need {u.bytes_(act)} per chip with full recomputation: raise --tp, --pp or --cp, "
            "or lower --micro-batch / --seq-len")


# ---- many layouts --------------------------------------------------------------------------------------------
def search(model, system, *, chips, seq_len=4096, global_batch_tokens=4_194_304, cp=None, dtype="bf16", tokens=None,
           overlap=True, efficiency: Efficiency | None = None, reserve: float | None = None, top: int = 10,
           micro_batches=SEARCH_MICRO_BATCHES, recomputes=RECOMPUTE, zeros=SEARCH_ZERO) -> SearchResult:
    """The fastest layouts of `chips` chips that fit, best first (ranked by step time: at a fixed global batch
    that is time to train). TP: divisors of the heads (splitting or evenly replicating the KV heads) up to the
    scale-up domain; PP: divisors of the layers; EP (MoE): divisors of the experts; DP: the rest; cp fixed.
    Every candidate is evaluated in one vectorized engine call."""
    m = get_model(model)
    hw = _system(system, chips)
    eff = efficiency or DEFAULT
    reserve = RESERVE_FRACTION if reserve is None else reserve
    n = _int_arg(chips, "chips", 1, 10_000_000)
    seq_len = _int_arg(seq_len, "seq_len", 1, 100_000_000)
    gbt = _int_arg(global_batch_tokens, "global_batch_tokens", 1, MAX_BATCH_TOKENS)
    c = _int_arg(1 if cp is None else cp, "cp", 1, 1_000_000)
    dtype = _choice(dtype, "dtype", TRAIN_DTYPES)
    tokens = _tokens_arg(tokens)
    if seq_len % c:
        raise InputError("cp", f"cp={c} does not split the {seq_len}-token sequence evenly", f"a divisor of {seq_len}")
    if n > hw.scaleup_domain and hw.scaleout_bw is None:
        raise InputError("chips", f"{n} chips span more than one scale-up domain of {hw.scaleup_domain} and "
                         f"{hw.id} has no scale-out bandwidth", f"at most {hw.scaleup_domain} chips")
    kvh = m.kv_heads
    tps = [t for t in _divisors(m.n_heads) if t <= hw.scaleup_domain and n % t == 0
           and (m.is_mla or kvh % t == 0 or t % kvh == 0)]
    pps = [p for p in _divisors(m.n_layers) if n % p == 0]
    eps = [e for e in _divisors(m.n_experts) if n % e == 0] if m.is_moe else [1]
    rows = []
    for t in tps:
        for p in pps:
            for e in eps:
                if n % (t * p * e * c):
                    continue
                d = n // (t * p * e * c)
                for b in micro_batches:
                    if gbt % (seq_len * b * d * e):
                        continue
                    for r in recomputes:
                        for z in zeros:
                            rows.append((t, p, d, e, b, RECOMPUTE.index(r), z))
    if not rows:
        raise InputError("global_batch_tokens", f"no layout of {n} chips splits {gbt:,} tokens into whole "
                         f"micro-batches of {seq_len} tokens", f"a multiple of seq_len x micro_batch x dp, e.g. "
                         f"{seq_len * n:,}")
    a = np.array(rows, dtype=np.int64).T
    lay = train_layout(a[0], a[1], a[2], a[3], c)
    st = train_step(m, hw, lay, seq_len=seq_len, micro_batch=a[4], global_batch_tokens=gbt, recompute=a[5],
                    zero=a[6], dtype=dtype, overlap=overlap, eff=eff, reserve=reserve)
    fit = np.asarray(st.memory.total <= st.memory.usable)
    idx = np.nonzero(fit)[0]
    if not len(idx):
        smallest = float(np.min(st.memory.total))
        raise InputError("chips", f"no layout of {n} x {hw.id} fits {m.name} (the leanest needs "
                         f"{u.bytes_(smallest)} per chip, {u.bytes_(st.memory.usable)} usable)",
                         f"more chips: about {math.ceil(n * smallest / st.memory.usable):,}, or a shorter --seq-len")
    order = idx[np.argsort(np.asarray(st.step_time_s)[idx], kind="stable")][:max(1, int(top))]
    best = [train(m, hw, tp=int(a[0][i]), pp=int(a[1][i]), dp=int(a[2][i]), ep=int(a[3][i]), cp=c,
                  seq_len=seq_len, global_batch_tokens=gbt, micro_batch=int(a[4][i]), recompute=RECOMPUTE[a[5][i]],
                  zero=int(a[6][i]), dtype=dtype, tokens=tokens, overlap=overlap, efficiency=eff, reserve=reserve)
            for i in order]
    notes = [f"{len(rows):,} layouts evaluated in one vectorized call; {len(idx):,} fit"]
    if c > 1:
        notes.append(f"context parallelism fixed at cp={c}")
    return SearchResult(m, hw, n, len(rows), int(len(idx)), best, tokens, notes)


# ---- the napkin derivation -----------------------------------------------------------------------------------
def explain(r: TrainResult) -> str:
    m, hw, lay, s = r.model, r.hardware, r.layout, r.step
    f = _f
    tp, pp, dp, ep, cp = (int(x) for x in (lay.tp, lay.pp, lay.dp, lay.ep, lay.cp))
    P = count_params(m)
    N = matmul_params(m)
    G, L, b = r.global_batch_tokens, r.seq_len, r.micro_batch
    mb = f(s.micro_batches)
    T = s.terms
    out = []
    out.append(f"{m.name} on {r.chips} x {hw.name}: tp={tp} pp={pp} dp={dp} ep={ep} cp={cp}; {r.dtype} matmuls, "
               f"recompute {r.recompute}, ZeRO-{r.zero}, overlap {'on' if r.overlap else 'off'}")
    out.append(f"Model: {m.describe()}; {u.count(P.total)} parameters, {u.count(P.active)} active, "
               f"N = {u.count(N)} in matmuls (lm_head counted, embedding lookup not)")
    out.append(f"Batch: {G:,} tokens per step = {G // L:,} sequences of {L:,}; micro-batch {b} sequence(s)")
    out.append("")
    out.append("1. FLOPs per step")
    out.append(f"  model: 6 x N x tokens = 6 x {u.count(N)} x {G:,} = {u.flops(f(s.model_flops))}"
               f"  (+ PaLM's attention term 12 x layers x heads x head_dim per attended key, causal: "
               f"{u.flops(f(s.attention_model_flops))})")
    out.append(f"  executed (causal attention, training lm_head, recompute {r.recompute}) = "
               f"{u.flops(f(s.hardware_flops))}")
    out.append("")
    out.append(f"2. One micro-batch on the slowest stage (per chip: {b} x {L // cp:,} tokens, {m.n_layers // pp} "
               f"of {m.n_layers} layers)")
    out.append(f"  {'op':<16}{'x':>6}  {'FLOPs/chip':>12} {'bytes/chip':>11}  {'compute':>9} {'memory':>9}  "
               f"{'total':>9}  bound")
    for op in s.forward.ops.values():
        if op.name in ("tp_allreduce", "ep_alltoall", "lm_head"):
            continue
        cnt = op.count / pp if op.name not in ("embed",) else op.count
        c_, m_ = f(op.compute_s), f(op.memory_s)
        out.append(f"  {op.name:<16}{cnt:>6.3g}  {u.flops(f(op.flops)):>12} {u.bytes_(f(op.bytes)):>11}  "
                   f"{u.seconds(c_):>9} {u.seconds(m_):>9}  {u.seconds(cnt * max(c_, m_)):>9}  "
                   f"{'compute' if c_ >= m_ else 'memory'}")
    h = s.head
    out.append(f"  {'lm_head (train)':<16}{1:>6}  {u.flops(f(h['flops'])):>12} {u.bytes_(f(h['bytes'])):>11}  "
               f"{u.seconds(f(h['compute_s'])):>9} {u.seconds(f(h['memory_s'])):>9}  {u.seconds(f(h['time_s'])):>9}  "
               f"{'compute' if f(h['compute_s']) >= f(h['memory_s']) else 'memory'}   (logits for every token)")
    out.append(f"  forward F = layers {u.seconds(f(T['layer_fwd_s']))} / pp {pp} + "
               + ("embed + lm_head" if pp == 1 else "max(embed, lm_head)") + f" {u.seconds(f(T['extra_s']))} = "
               f"{u.seconds(f(s.fwd_s))}")
    out.append(f"  backward B = 2 x F = {u.seconds(f(s.bwd_s))}; recompute ({r.recompute}) R = "
               f"{u.seconds(f(s.recompute_s))}")
    passes = 3 if r.recompute == "full" else 2
    if tp > 1:
        per = f(T["tp_allreduce_fwd_s"]) / (2 * m.n_layers)
        act = u.bytes_(f(T["tokens_per_chip_mb"]) * m.d_model * 2)
        out.append(f"  TP: {passes} x 2 all-reduces x {m.n_layers // pp} layers of {act}"
                   f" over {tp} chips, {u.seconds(per)} each = {u.seconds(f(s.tp_comm_mb_s))}"
                   "  (sequence parallel: reduce-scatter + all-gather, same bytes)")
    if ep > 1:
        out.append(f"  EP: dispatch + combine all-to-all per MoE layer, x{passes} = {u.seconds(f(s.ep_comm_mb_s))}")
    if cp > 1:
        out.append(f"  CP: K,V all-gather over {cp} chips {u.seconds(f(T['cp_allgather_s']))} per layer pass, "
                   f"total {u.seconds(f(s.cp_comm_mb_s))}, exposed {u.seconds(f(s.cp_exposed_mb_s))}")
    if pp > 1:
        out.append(f"  PP: 2 point-to-point hand-offs of {u.bytes_(f(T['p2p_bytes']))} = {u.seconds(f(s.pp_p2p_mb_s))}")
    out.append(f"  per micro-batch t_mb = {u.seconds(f(s.microbatch_s))}")
    out.append("")
    out.append("3. Pipeline")
    out.append(f"  micro-batches m = tokens / (L x b x dp x ep) = {G:,} / ({L} x {b} x {dp} x {ep}) = {mb:,.6g}")
    out.append(f"  (m + pp - 1) x t_mb = ({mb:,.6g} + {pp - 1}) x {u.seconds(f(s.microbatch_s))} = "
               f"{u.seconds((mb + pp - 1) * f(s.microbatch_s))}; bubble (pp-1)/(m+pp-1) = {f(s.bubble_fraction):.1%}"
               f" = {u.seconds(f(s.pp_bubble_s))}")
    out.append("")
    out.append("4. Data parallel and optimizer")
    out.append(f"  per chip {u.count(f(T['params_ne_per_chip']))} non-expert params over {int(f(T['dp_group']))} chips"
               + (f", {u.count(f(T['params_e_per_chip']))} expert params over {int(f(T['expert_dp_group']))}"
                  if m.is_moe else ""))
    what = {0: "all-reduce of the gradients", 1: "all-reduce of the gradients (reduce-scatter + all-gather)",
            2: "reduce-scatter of the gradients per micro-batch + all-gather of the weights per step",
            3: "per micro-batch: 2 all-gathers of the weights + a reduce-scatter of the gradients"}[r.zero]
    out.append(f"  ZeRO-{r.zero}: {what}: {u.seconds(f(s.dp_comm_total_s))} per step, exposed "
               f"{u.seconds(f(s.dp_comm_exposed_s))}" + (" (overlapped with backward)" if r.overlap else ""))
    out.append(f"  Adam update: {f(T['opt_bytes_per_param']):g} B/param moved at "
               f"{u.rate(hw.memory_bw * r.efficiency.memory_bw, 'B/s')}"
               f" = {u.seconds(f(s.optimizer_s))}")
    out.append("")
    out.append("5. Step")
    out.append(f"  step = pipeline + exposed DP + optimizer = {u.seconds(f(s.step_time_s))}"
               f"  (compute {u.seconds(f(s.compute_s))}, TP {u.seconds(f(s.tp_comm_s))},"
               f" EP {u.seconds(f(s.ep_comm_s))},"
               f" CP {u.seconds(f(s.cp_comm_s))}, bubble {u.seconds(f(s.pp_bubble_s))}, p2p {u.seconds(f(s.pp_p2p_s))},"
               f" DP {u.seconds(f(s.dp_comm_exposed_s))}, optimizer {u.seconds(f(s.optimizer_s))})")
    out.append(f"  pure roofline of the same stage's work (100% of peaks) = {u.seconds(f(s.floor_s))}")
    pk = s.peak_flops
    out.append(f"  MFU = 6NG / (step x chips x peak) = {u.flops(f(s.model_flops))} / ({u.seconds(f(s.step_time_s))} x "
               f"{r.chips} x {u.rate(pk, 'FLOP/s')}) = {f(s.mfu):.1%}; with attention {f(s.mfu_with_attention):.1%};"
               f" HFU {f(s.hfu):.1%}")
    out.append(f"  model TFLOP/s per chip = {f(s.tflops_per_chip) / 1e12:,.1f}; "
               f"executed {f(s.hardware_flops_per_chip) / 1e12:,.1f}")
    out.append("")
    mem = s.memory
    out.append("6. Memory per chip (worst pipeline stage)")
    out.append(f"  model states: 2 B weights + {f(T['grad_bytes']):g} B grads + 12 B Adam (fp32 master, m, v) per param"
               f" over tp x pp" + (" (experts also over ep)" if m.is_moe else "")
               + f", ZeRO-{r.zero}: weights {u.bytes_(f(mem.weights))}, gradients {u.bytes_(f(mem.gradients))},"
               f" optimizer {u.bytes_(f(mem.optimizer))}"
               + (f", gather buffers {u.bytes_(f(mem.buffers))}" if r.zero == 3 else ""))
    per_layer = f(activation_bytes_per_layer(m, L, b, tp, cp, r.recompute))
    form = {"none": "sbh(34 + 5as/h)/t", "selective": "34 sbh/t", "full": "2 sbh/t"}[r.recompute]
    inflight = min(pp, max(mb, 1))
    out.append(f"  activations (Korthikanti et al. 2022, {form} for a GPT-shaped layer): {u.bytes_(per_layer)} "
               f"per layer per micro-batch x {m.n_layers // pp} layers x {inflight:g} in flight "
               "(+ fp32 logits on the last stage)"
               f" = {u.bytes_(f(mem.activations))}")
    out.append(f"  total {u.bytes_(f(mem.total))} of {u.bytes_(mem.usable)} usable -> "
               f"{'fits' if r.fits else 'DOES NOT FIT'}")
    if r.tokens is not None and r.fits:
        out.append("")
        out.append("7. The whole run")
        out.append(f"  steps = {r.tokens:,.0f} / {G:,} = {r.steps:,.1f}; time = steps x step = "
                   f"{r.train_time_s / 86400:,.2f} days")
        out.append(f"  chip-hours = {r.chips} x time = {r.chip_hours:,.0f}; cost = "
                   + (f"{r.chip_hours:,.0f} x ${hw.price_usd_per_hour:g} = {u.usd(r.cost_usd)}"
                      if r.cost_usd is not None else "n/a (no price)")
                   + "; energy = " + (f"{hw.tdp_w:g} W x {r.chips} x time = {r.energy_kwh:,.0f} kWh"
                                      if r.energy_kwh is not None else "n/a (no TDP)"))
    for a in r.advice:
        out.append(f"advice: {a}")
    for n_ in r.notes:
        out.append(f"note: {n_}")
    return "\n".join(out)
