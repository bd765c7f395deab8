"""How fast and how expensive is this model on this hardware: prefill (TTFT) and decode for a static batch.

All physics comes from the engine (engine/forward.py, engine/memory.py); this module picks the workload, calls it
and derives the user-facing figures (throughput, $/Mtok, J/token). Its --explain text is faces/explain_infer.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_BATCH, finite, int_arg, pos_float
from tokenmath.engine.economics import (decode_cost_per_mtok, energy_j_per_token, prefill_cost_per_mtok,
                                        request_cost_per_mtok, usd_per_s)
from tokenmath.engine.expert_parallel import experts_touched
from tokenmath.engine.forward import PassCost, Precision
from tokenmath.engine.prefix_cache import hit_rate
from tokenmath.engine.memory import Memory, fixed_bytes, max_batch, usable_bytes, weight_bytes_total
from tokenmath.engine.static_batch import BatchCost, kernels_of, serve_batch
from tokenmath.mapping.layout import Layout, attention_name, with_attention
from tokenmath.specs.dtypes import get_dtype
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware, noise_caveats
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token
from tokenmath.specs.model import Model
from tokenmath.specs.overrides import what_if_dict
from tokenmath.specs.params import count_params
from tokenmath.specs.serving_engines import EngineProfile, engine_dict
from tokenmath.analyses.serving.operating_point import DEFAULT_SPEED, largest_batch_at_speed
from tokenmath.analyses.setup import setup
from typing import TYPE_CHECKING

if TYPE_CHECKING:        # only infer under load builds one (imported there): not on every start-up
    from tokenmath.analyses.serving.load import Load


@dataclass(frozen=True)
class InferResult:
    """A static batch served: sizes in bytes, times in s; speeds and costs are None when it does not fit."""
    model: Model
    hardware: Hardware
    layout: Layout
    precision: Precision
    efficiency: Efficiency
    batch: int
    input_len: int
    output_len: int
    params_total: float
    params_active: float
    weights_bytes: float
    kv_bytes_per_token: float
    memory: Memory
    fits: bool
    prefill: PassCost | None
    decode: PassCost | None
    ttft_s: float | None = None
    decode_step_s: float | None = None
    pp_p2p_s: float = 0.0
    decode_floor_s: float | None = None
    decode_napkin_floor_s: float | None = None   # weight + KV bytes one chip of the critical path reads / bandwidth
    experts_touched_per_layer: float | None = None   # MoE: distinct routed experts a decode step reads per layer
    advice: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    max_batch: int = 0                               # the largest batch that fits (and the engine runs at once)
    decode_device_s: float | None = None             # engine: the step's device time (engine-free step), s
    decode_launch_s: float = 0.0                     # engine: CPU launch time of an eager step (0: graph replayed), s
    decode_kernels: float = 0.0                      # engine: kernels one decode pass launches
    prefill_chunks: int = 1                          # engine: prefill steps of the batch's prompts (chunked prefill)
    running_cap: int | None = None                   # engine: sequences one attention group runs at once
    decode_bottleneck: str | None = None             # the step's bottleneck ("overhead" where the engine's host side
                                                     # outlasts the pass); None: the decode pass's own
    load: Load | None = None                         # under load (--concurrency / --arrival-rate): ttft_s and
    #                                                  decode_step_s are then per request (analyses/serving/load.py)
    prefix_hit: float = 0.0                          # cached share of every prompt (engine/prefix_cache.py)
    ttft_uncached_s: float | None = None             # the TTFT without the cache (prefix_hit > 0 only), s
    prefill_s: float | None = None                   # under load: the running batch's prefill time (chip time), s
    batch_cost: BatchCost | None = field(default=None, repr=False, compare=False)   # the engine's whole answer
    speculative: object = None                       # a static batch decoded speculatively beside the plain one
    #                                                  (analyses/serving/speculative.SpeculativeResult; ask.infer)
    speed_batch: int | None = None                   # static: the largest batch giving `speed` tokens/s per user
    operating_point: dict | None = None              # that batch's answer (analyses/serving/operating_point.py)

    @property
    def engine(self) -> EngineProfile | None:
        return self.efficiency.engine

    @property
    def chips(self) -> int:
        return int(self.layout.chips)

    @property
    def output_tokens_per_s(self):
        """System output tokens/s. Static batch: batch x output_len over one round (TTFT + output_len steps). Under
        load the steady state's own throughput: there TTFT holds the queue wait, which is not chip time, and only the
        running sequences share a step (Little's law: users x output_len / end-to-end latency)."""
        if not self.fits:
            return None
        if self.load is not None:
            return self.load.output_tokens_per_s
        return self.batch * self.output_len / (self.ttft_s + self.output_len * self.decode_step_s)

    @property
    def output_tokens_per_s_per_user(self):
        return None if not self.fits else 1.0 / self.decode_step_s

    @property
    def chips_usd_per_s(self) -> float | None:
        """$ per second of the layout's chips; None when the chip has no price."""
        return usd_per_s(self.chips, self.hardware.price_usd_per_hour)

    @property
    def cost_per_mtok_input_usd(self):
        r = self.chips_usd_per_s
        if r is None or not self.fits:
            return None
        # chip time of the batch's prefill: under load TTFT also holds the queue wait, which costs no chip time
        return prefill_cost_per_mtok(r, self.ttft_s if self.prefill_s is None else self.prefill_s, self.batch,
                                     self.input_len)

    @property
    def cost_per_mtok_output_usd(self):
        """The decode step alone per output token (the prompt's prefill billed as input)."""
        r = self.chips_usd_per_s
        if r is None or not self.fits:
            return None
        return decode_cost_per_mtok(r, self.decode_step_s, self.batch)

    @property
    def cost_per_mtok_output_request_usd(self):
        """A whole request's chip time (prefill + every decode step) per output token."""
        r = self.chips_usd_per_s
        if r is None or not self.fits:
            return None
        return request_cost_per_mtok(r, self.output_tokens_per_s)

    @property
    def energy_j_per_output_token(self):
        if self.hardware.tdp_w is None or not self.fits:
            return None
        return energy_j_per_token(self.chips, self.hardware.tdp_w, self.decode_step_s, self.batch)

    def prefix_cache_dict(self) -> dict:
        """The prefix cache's effect: hit rate, cached tokens per prompt, TTFT and $ per Mtok input without it."""
        from tokenmath.engine.prefix_cache import cached_tokens
        r = self.chips_usd_per_s
        unc = None if (r is None or self.ttft_uncached_s is None) else prefill_cost_per_mtok(
            r, self.ttft_uncached_s, self.batch, self.input_len)
        return {"hit": self.prefix_hit, "cached_tokens_per_prompt": finite(cached_tokens(self.input_len,
                                                                                        self.prefix_hit)),
                "ttft_uncached_s": finite(self.ttft_uncached_s), "cost_per_mtok_input_uncached_usd": finite(unc)}

    def to_dict(self) -> dict:
        f = finite
        mem = self.memory
        return {
            "model": self.model.id, "hardware": self.hardware.id,
            "chips": self.chips, "tp": int(self.layout.tp), "pp": int(self.layout.pp),
            "ep": int(self.layout.ep), "dp": int(self.layout.dp), "cp": int(self.layout.cp),
            **({"attention_sharding": attention_name(self.layout)} if self.layout.attn_by_batch else {}),
            "weight_dtype": self.precision.weight.name, "expert_dtype": self.precision.expert.name,
            "kv_dtype": self.precision.kv.name,
            "input_len": self.input_len, "output_len": self.output_len,
            "params_total": f(self.params_total), "params_active": f(self.params_active),
            "weights_bytes": f(self.weights_bytes), "kv_bytes_per_token": f(self.kv_bytes_per_token),
            "memory_per_chip_bytes": f(mem.total), "memory_usable_per_chip_bytes": f(mem.usable),
            "memory_breakdown_bytes": {"weights": f(mem.weights), "kv_cache": f(mem.kv), "activations": f(mem.activations)},
            "fits": bool(self.fits), "batch": int(self.batch),
            "ttft_s": f(self.ttft_s), "decode_step_s": f(self.decode_step_s),
            "decode_floor_s": f(self.decode_floor_s), "decode_napkin_floor_s": f(self.decode_napkin_floor_s),
            "output_tokens_per_s": f(self.output_tokens_per_s),
            "output_tokens_per_s_per_user": f(self.output_tokens_per_s_per_user),
            "bottleneck_prefill": str(self.prefill.bottleneck) if self.prefill is not None else None,
            "bottleneck_decode": (self.decode_bottleneck or str(self.decode.bottleneck)) if self.decode is not None else None,
            "cost_per_mtok_input_usd": f(self.cost_per_mtok_input_usd),
            "cost_per_mtok_output_usd": f(self.cost_per_mtok_output_usd),
            "cost_per_mtok_output_request_usd": f(self.cost_per_mtok_output_request_usd),
            "energy_j_per_output_token": f(self.energy_j_per_output_token),
            "price_usd_per_chip_hour": self.hardware.price_usd_per_hour,
            "efficiency": {"flops": self.efficiency.flops, "memory_bw": self.efficiency.memory_bw,
                           "link_bw": self.efficiency.link_bw, "source": self.efficiency.source},
            "engine": engine_dict(self.engine), "max_batch": int(self.max_batch),
            **({} if self.engine is None else {
                "engine_step": {"decode_device_s": f(self.decode_device_s), "decode_launch_s": f(self.decode_launch_s),
                                "decode_kernels": f(self.decode_kernels),
                                "step_cpu_s": self.engine.step_cpu, "overlap_scheduling": self.engine.overlap_scheduling,
                                "prefill_chunks": int(self.prefill_chunks),
                                "max_running_per_group": self.running_cap}}),
            **({} if self.load is None else {"load": self.load.to_dict()}),
            **({} if not self.prefix_hit else {"prefix_cache": self.prefix_cache_dict()}),
            **({} if self.speculative is None else {"speculative": self.speculative.to_dict()}),
            **({} if self.operating_point is None else {"operating_point": self.operating_point}),
            "advice": list(self.advice), "notes": list(self.notes), **what_if_dict(self.hardware),
        }


def _scalar(x):
    return float(np.asarray(x))


def infer(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, batch=1, input_len=1024,
          output_len=256, weight_dtype=None, kv_dtype=None, efficiency: Efficiency | None = None,
          reserve: float | None = None, cp=None, engine=None, concurrency=None, arrival_rate=None,
          prefix_hit=None, attention_sharding=None, speculation=None, speed=None, speed_batch=None,
          **knobs) -> InferResult:
    """Prefill and decode of a static batch of `batch` prompts of `input_len` tokens generating `output_len` each.

    model: catalog id, config.json path or Model; hardware: catalog id, hardware file or Hardware.
    batch: an integer or "max" (the largest batch that fits at input_len + output_len, and that the engine runs).
    engine: a serving engine's id or file (its step costs and limits), "none" or None (the engine-free step).
    concurrency / arrival_rate: serving under load (closed loop of that many users / open loop at that many
    requests/s; analyses/serving/load.py): ttft_s is then one request's, decode_step_s the mean time between its
    tokens, and batch the sequences running at once; `load` holds the rest.
    prefix_hit: the cached share of every prompt (prefix caching, engine/prefix_cache.py; the static batch only:
    `simulate --prefix-hit` serves it under load).
    attention_sharding: heads (None, the default), batch or dp: how attention splits inside a TP group
    (mapping/layout.py; under load too: the steady state's and the simulator's replica follow it).
    speculation: a speculative.Speculation; under load every decode verifies k + 1 tokens (steady_state.py). The
    static batch's speculative figures sit beside it (analyses/serving/speculative.py; the CLI adds them).
    knobs: the deployment's (specs/question/deployment.KNOB_FIELDS: ep_comm, ep_overlap, ep_imbalance,
    moe_sharding, adp_balance, max_running, price_usd_per_hour, what_if), applied once by
    analyses.setup.with_deployment_knobs: the static batch and the steady state under load alike.
    speed: tokens/s per user of the operating point beside a static batch (speed_batch: the largest batch giving
    it; default operating_point.DEFAULT_SPEED). speed_batch: that batch when the caller has it already (the answer
    at the operating point's own batch): taken as it is, not searched for again.
    Times in seconds, sizes in bytes, costs in USD per million tokens.
    """
    input_len = int_arg(input_len, "input_len")
    output_len = int_arg(output_len, "output_len")
    hit = hit_rate(prefix_hit)
    load = None
    if hit and (concurrency is not None or arrival_rate is not None):
        raise InputError("prefix_hit", "given with --concurrency/--arrival-rate (the steady state has no cache)",
                         "the static batch (leave those out), or `tokenmath simulate --prefix-hit`")
    if concurrency is not None or arrival_rate is not None:
        from tokenmath.analyses.serving.load import under_load
        load = under_load(model, hardware, input_len=input_len, output_len=output_len, concurrency=concurrency,
                          arrival_rate=arrival_rate, engine=engine, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp,
                          weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                          attention_sharding=attention_sharding, speculation=speculation, **knobs)
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, reserve=reserve, cp=cp, engine=engine, **knobs)
    imb = su.transport.ep_imbalance
    if attention_sharding is not None:
        su = replace(su, layout=with_attention(su.model, su.layout, attention_sharding))
    m, hw, lay, prec, eff, reserve = su.model, su.hardware, su.layout, su.precision, su.efficiency, su.reserve
    eng = eff.engine
    ctx = input_len + output_len
    notes = [su.engine_note, *noise_caveats(hw)]   # a `measure --accept-noisy` file says so in every answer
    if m.max_context and ctx > m.max_context:
        notes.append(f"context {ctx:,} exceeds the model's max_position_embeddings {m.max_context:,}; "
                     "the figures extrapolate the architecture")

    bmax = int(max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, ctx, reserve,
                         engine=eng))
    if load is not None:
        # the sequences running at once (their mean context is shorter than a static batch's full one)
        batch = max(min(int(round(load.running or 1)), bmax), 1)
    if isinstance(batch, str):
        if batch.lower() != "max":
            batch = int_arg(batch, "batch", 1, MAX_BATCH)
        else:
            batch = bmax
    else:
        batch = int_arg(batch, "batch", 1, MAX_BATCH)

    P = count_params(m)
    sv = serve_batch(m, hw, lay, prec, eff, max(batch, 1), input_len, output_len, reserve, **su.transport.kw())
    fits = batch >= 1 and bool(sv.fits)
    if m.is_moe and int(lay.ep) > 1 and imb != 1.0:
        from tokenmath.engine.expert_parallel import imbalance_factor
        f = float(imbalance_factor(m, lay.ep, imb))
        how = {"routing": "the measured routing skew of DeepSeek-R1's router", "eplb": "routing skew with EPLB's "
               "redundant experts"}.get(imb, "as given")
        notes.append(f"EP routing: the busiest of {int(lay.ep)} ranks carries {f:.3g} x the mean routed tokens ({how}; "
                     "its expert FLOPs, expert weights touched and all-to-all payload set the step)")
    ttft, pre, ttft0 = sv.ttft_s, sv.prefill, None
    if hit:
        from tokenmath.engine.prefix_cache import ttft_with_hits   # noqa: I001 (heavy only when asked)
        ttft0 = _scalar(sv.ttft_s)
        ttft, pre = ttft_with_hits(sv, m, hw, lay, prec, eff, input_len, hit, **su.transport.kw())
        notes.append(f"prefix caching: {hit:g} of every prompt is cached ({int(np.floor(hit * input_len)):,} of "
                     f"{input_len:,} tokens): TTFT and $/Mtok input count the rest; decode and memory unchanged")
    sizes = dict(model=m, hardware=hw, layout=lay, precision=prec, efficiency=eff, batch=batch, input_len=input_len,
                 output_len=output_len, params_total=P.total, params_active=P.active,
                 weights_bytes=weight_bytes_total(m, prec.weight.bytes, prec.expert.bytes),
                 kv_bytes_per_token=kv_bytes_per_token(m, prec.kv.bytes), memory=sv.memory, fits=fits,
                 prefill=pre, decode=sv.decode, max_batch=bmax, prefix_hit=hit, ttft_uncached_s=ttft0,
                 batch_cost=sv, speed_batch=None if load is not None else int(speed_batch) if speed_batch is not None
                 else int(largest_batch_at_speed(su, input_len, output_len, bmax, DEFAULT_SPEED if speed is None else
                                                 pos_float(speed, "min_tokens_per_s_per_user"))))
    if eng is not None:
        cap = float(sv.running_cap)
        sizes.update(decode_device_s=_scalar(sv.decode_device_s), decode_launch_s=_scalar(sv.decode_launch_s),
                     decode_kernels=_scalar(kernels_of(sv.decode)), decode_bottleneck=str(sv.decode_bottleneck),
                     prefill_chunks=int(_scalar(sv.prefill_chunks)), running_cap=int(cap) if math.isfinite(cap) else None)
    if not fits:
        # the bottlenecks stay informative when it does not fit; speeds are not reported
        return InferResult(**sizes, load=load, advice=tuple(_advice(m, hw, lay, prec, batch, ctx, bmax, reserve, eng,
                                                         bool(np.all(sv.memory.fits)))),
                           notes=tuple(notes))
    groups = int(lay.dp * lay.ep)
    if groups > 1 and batch % groups:
        notes.append(f"batch {batch} does not split evenly over {groups} replicas/attention groups; "
                     "the busiest group sets the pace")
    if load is not None:
        notes.append(f"under load ({load.source}): TTFT is one request's, the decode step the mean time between its "
                     f"tokens; {load.running:,.0f} sequences run at once" if load.running else
                     f"under load ({load.source})")
        if int(lay.ep) > 1 and int(lay.pp) == 1:
            notes.append(f"attention data-parallel over ep = {int(lay.ep)} groups: each prompt is prefilled whole on "
                         "the one group that keeps its KV and every MoE layer's all-to-all waits for it, so the steps "
                         "that carry prompts run at that group's tokens (TensorRT-LLM tech blog 10, 'ADP Balance "
                         "Strategy'); disaggregated prefill (plan --disaggregated) avoids it")
    return InferResult(**sizes, load=load, ttft_s=load.ttft_s if load else _scalar(ttft),
                       prefill_s=_scalar(ttft) if load else None,
                       decode_step_s=load.tpot_s if load else _scalar(sv.decode_step_s),
                       pp_p2p_s=_scalar(sv.pp_p2p_s), decode_floor_s=_scalar(sv.decode_floor_s),
                       decode_napkin_floor_s=_scalar(sv.decode.napkin_floor_s(hw)),
                       experts_touched_per_layer=_scalar(experts_touched(m, sv.stage_seqs)) if m.is_moe else None,
                       notes=tuple(notes))


def _advice(m, hw, lay, prec, batch, ctx, bmax, reserve, eng=None, memory_fits=False) -> list[str]:
    usable = _usable(m, hw, lay, prec, reserve, eng)
    out = []
    if memory_fits and batch >= 1:
        # memory holds it: the engine's cap on running sequences is what refuses it
        cap = eng.limits_for(hw.memory_bytes)[0] if eng is not None else 0
        groups = int(np.asarray(lay.dp) * np.asarray(lay.ep))
        return [f"{eng.name} runs at most {cap:,} sequences per scheduler ({groups} x {cap:,} = {groups * cap:,} on "
                f"this layout; asked for {batch:,}): the rest would wait in its queue; --batch max runs {bmax:,}"]
    wtot = weight_bytes_total(m, prec.weight.bytes, prec.expert.bytes)
    kv_tot = _scalar(kv_bytes_per_sequence(m, ctx, prec.kv.bytes)) * max(batch, 1)
    need = math.ceil((wtot + kv_tot) / usable)
    if batch == 0 or bmax < 1:
        out.append(f"the weights alone ({wtot / 1e9:,.1f} GB) leave no room for even one sequence of {ctx:,} tokens "
                   f"on {int(lay.chips)} x {hw.id}")
    else:
        cap = eng.limits_for(hw.memory_bytes)[0] if eng is not None else 0
        capped = bool(cap) and bmax == cap * int(np.asarray(lay.dp) * np.asarray(lay.ep))
        out.append(f"at most {bmax} sequences of {ctx:,} tokens fit on this layout (asked for {batch})"
                   + (f"; {eng.name} runs at most {cap:,} per scheduler" if capped else ""))
    out.append(f"weights + KV need about {need} x {hw.id} ({(wtot + kv_tot) / 1e9:,.1f} GB over "
               f"{usable / 1e9:,.1f} GB usable each)")
    for name in ("fp8", "int4"):
        d = get_dtype(name)
        if d.bytes >= prec.weight.bytes:
            continue
        alt = max_batch(m, hw.memory_bytes, lay, d.bytes, min(d.bytes, prec.expert.bytes), prec.kv.bytes, ctx, reserve,
                        engine=eng)
        if int(alt) >= max(batch, 1):
            out.append(f"--weight-dtype {name} fits (up to batch {int(alt)} at this context)")
            break
    if prec.kv.bytes > 1:
        alt = max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, 1.0, ctx, reserve, engine=eng)
        if int(alt) >= max(batch, 1) > bmax:
            out.append(f"--kv-dtype fp8 fits (up to batch {int(alt)})")
    return out



def _usable(m, hw, lay, prec, reserve, eng) -> float:
    """Bytes per chip the model may use (engine/memory.usable_bytes, the one home), the largest over the layouts."""
    fixed = fixed_bytes(m, lay, prec.weight.bytes, prec.expert.bytes, hw.memory_bytes, eng)
    return float(np.max(usable_bytes(hw.memory_bytes, reserve, fixed, eng)))
