"""A static batch served end to end: prefill of all prompts, then decode steps while the context grows.

Vectorized over batch, lengths and layout degrees (numpy broadcasting): a sweep is one call.

Scheduling model (stated so it can be checked):
- the batch splits evenly over dp replicas and, inside a replica, over ep attention groups; the busiest group
  (ceil(batch / (dp x ep)) sequences) sets the pace of the per-group work, while the MoE layers of the busiest
  replica see the tokens of its ceil(batch / dp) sequences only (fewer than ep sequences leave groups idle, and
  idle groups route nothing: engine/expert_parallel.py);
- with pp stages the group's sequences flow as M = min(pp, sequences) micro-batches: a decode step (the time
  between two tokens of one sequence) is one pass of a micro-batch through all layers plus pp-1 hand-offs (priced
  across domains when the replica's chips span more than one: mapping/placement.py);
  prefill takes (M + pp - 1) / pp passes (pipeline fill);
- the decode step is the mean over the generation (context growing from input_len to input_len + output_len);
  attention cost is linear in context, so the mean equals the cost at the mean context (windows handled exactly).

A serving engine (Efficiency.engine, specs/serving_engines.py; None: none of this) adds what its scheduler does
around the device's work, per step (engine_step):
- a step the engine does not replay from a captured graph (graphs_at the pass's sequences) is launched kernel by
  kernel from the CPU; the device cannot finish before the launcher does: max(device, kernels x launch time);
- the engine's per-step CPU work (scheduling, sampling, detokenization; step_cpu_s, 0 until fitted) runs beside the
  device with overlap scheduling: max(device side, CPU), else after it: device side + CPU;
- with chunked prefill the prompts of a pass are prefilled in ceil(tokens / max_batched_tokens) steps, each
  reading the weights again and attending to the chunks before it, each paying the per-step costs once;
- memory: the engine's memory fraction, KV blocks and running-sequence cap (engine/memory.py); a batch over the cap
  does not fit (the engine would not run it at once).
No engine term is ever negative, so an engine never makes a step faster than the engine-free one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.engine import collectives as coll
from tokenmath.engine.memory import Memory, chunk_tokens, max_batch, memory_per_chip, running_cap
from tokenmath.engine.forward import (ACT_BYTES, BOTTLENECKS, TRANSPORT_DEFAULTS, PassCost, Precision, decode_context,
                                     forward_pass, placed, prefill_pairs)
from tokenmath.specs.serving_engines import LAUNCH_CPU_S, EngineProfile


@dataclass(frozen=True)
class BatchCost:
    """The engine's answer for a static batch: its passes, times (s), memory per chip (bytes) and the largest batch
    that fits, broadcast to the shape of the inputs."""
    batch: np.ndarray
    seqs_per_microbatch: np.ndarray
    stage_seqs: np.ndarray     # sequences per micro-batch whose tokens reach the busiest replica's MoE layers
    microbatches: np.ndarray
    prefill: PassCost | None   # None when served decode_only
    decode: PassCost
    ttft_s: np.ndarray
    decode_step_s: np.ndarray
    pp_p2p_s: np.ndarray
    decode_floor_s: np.ndarray
    memory: Memory
    max_batch: np.ndarray
    engine: EngineProfile | None = None
    decode_device_s: np.ndarray | None = None   # the step without the engine's launch and CPU costs (s)
    decode_launch_s: np.ndarray | float = 0.0   # CPU launch time of an eager step (0 where a graph is replayed), s
    prefill_chunks: np.ndarray | float = 1.0    # prefill steps per micro-batch (chunked prefill)
    running_cap: float = np.inf                 # sequences one attention group runs at once (inf: no cap)
    runs_at_once: np.ndarray | bool = True      # the busiest group's sequences are within running_cap
    prefill_launch_s: np.ndarray | float = 0.0  # CPU launch time of one eager prefill step (0 without an engine), s

    @property
    def fits(self):
        """Memory holds the batch and the engine runs all of it at once."""
        return self.memory.fits & (self.batch >= 1) & self.runs_at_once

    @property
    def decode_bottleneck_code(self):
        """The decode pass's bottleneck (PassCost.bottleneck_code), or 3 "overhead" where the engine's host side (the
        CPU launching an eager step's kernels, or its per-step CPU work) outlasts the pass's largest class."""
        code = self.decode.bottleneck_code
        if self.engine is None:
            return code
        d = self.decode
        cpu = self.engine.step_cpu + self.engine.step_cpu_per_seq_s * np.asarray(self.seqs_per_microbatch, float)
        host = np.maximum(self.decode_launch_s, cpu)
        top = np.maximum(np.maximum(d.compute_bound_s, d.memory_bound_s), np.maximum(d.comm_s, d.overhead_s))
        return np.where(host > top, np.int8(3), code).astype(np.int8)

    @property
    def decode_bottleneck(self):
        return BOTTLENECKS[self.decode_bottleneck_code]


def launch_time_s(eff: Efficiency, hw: Hardware) -> float:
    """CPU seconds to launch one kernel: the chip's kernel model's figure when it has one (cpu_launch_s), else
    serving_engines.LAUNCH_CPU_S."""
    from tokenmath.specs.kernels import resolve
    km = resolve(eff.kernels, hw) if eff.kernels is not None else None
    v = getattr(km, "cpu_launch_s", None)
    return LAUNCH_CPU_S if v is None else float(v)


def pass_options(links=None, **transport) -> dict:
    """forward_pass's optional keywords as serve_batch passes them: `transport` (forward.TRANSPORT_DEFAULTS' names;
    None: the default) with the defaults left out, and the links when given."""
    out = {}
    for k, v in transport.items():
        if k not in TRANSPORT_DEFAULTS:
            raise TypeError(f"pass_options: unknown transport keyword {k!r}")
        if v is None or (not isinstance(v, np.ndarray) and v == TRANSPORT_DEFAULTS[k]):
            continue
        out[k] = v
    if links is not None:
        out["links"] = links
    return out


def engine_step(engine: EngineProfile, device_s, kernels, seqs, launch_s: float, tp=1, cpu_seqs=None):
    """(step, CPU launch time) of one engine step whose device work takes device_s (arrays broadcast): an eager
    step (no graph replayed for `seqs` sequences) lasts at least kernels x launch_s; the per-step CPU work
    (step_cpu + step_cpu_per_seq_s x the cpu_seqs sequences in the step, default seqs) adds to it, or hides behind it
    with overlap scheduling."""
    launch = np.where(engine.graphs_at(seqs, tp), 0.0, np.asarray(kernels, float) * launch_s)
    cpu = engine.step_cpu
    if engine.step_cpu_per_seq_s:
        cpu = cpu + engine.step_cpu_per_seq_s * np.asarray(seqs if cpu_seqs is None else cpu_seqs, float)
    return host_step(device_s, launch, cpu, engine.overlap_scheduling), launch


def host_step(device_s, launch_s, cpu_s, overlap: bool):
    """A step's time from its device work, the CPU time launching it eagerly and the engine's CPU work per step (s,
    arrays broadcast): the device cannot finish before the launcher, and the CPU work adds to the step or, with
    overlap scheduling, hides behind it."""
    dev = np.maximum(device_s, launch_s)
    return np.maximum(dev, cpu_s) if overlap else dev + cpu_s


def kernels_of(p: PassCost):
    """Kernels one pass launches (PassCost.kernels); at least one per operation occurrence where it is not known."""
    k = getattr(p, "kernels", None)
    return sum(op.count for op in p.ops.values()) if k is None else k


def chunked_prefill(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, seqs, input_len, chunks,
                    **opts) -> PassCost:
    """One of `chunks` equal prefill steps of `seqs` prompts of input_len tokens: input_len / chunks new tokens per
    prompt, 1/chunks of the prompt's attended pairs, reading the KV of the chunks before it (on average
    input_len (chunks - 1) / (2 chunks) tokens). Weights are read once per chunk."""
    ch = np.asarray(chunks, float)
    L = np.asarray(input_len, float)
    pf, ps = prefill_pairs(input_len, m.sliding_window)
    before = L * (ch - 1) / (2 * ch)
    before_sliding = np.minimum(before, m.sliding_window) if m.sliding_window else before
    return forward_pass(m, hw, lay, prec, eff, phase="prefill", seqs=seqs, new_tokens=L / ch, pairs_full=pf / ch,
                        pairs_sliding=ps / ch, kv_read_full=before, kv_read_sliding=before_sliding, **opts)


def passes(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, seqs, input_len, output_len,
           decode_only: bool = False, **opts):
    """(prefill pass, mean decode pass) per chip for `seqs` sequences per attention group.
    opts: forward_pass's optional keywords (ep_imbalance, ep_overlap, links, stage_seqs). decode_only: no prefill
    pass (None)."""
    if decode_only:
        pre = None
    else:
        pf, ps = prefill_pairs(input_len, m.sliding_window)
        pre = forward_pass(m, hw, lay, prec, eff, phase="prefill", seqs=seqs, new_tokens=input_len, pairs_full=pf,
                           pairs_sliding=ps, kv_read_full=0.0, kv_read_sliding=0.0, **opts)
    cf, cs = decode_context(input_len, output_len, m.sliding_window)
    dec = forward_pass(m, hw, lay, prec, eff, phase="decode", seqs=seqs, new_tokens=1, pairs_full=cf,
                       pairs_sliding=cs, kv_read_full=cf - 1, kv_read_sliding=cs - 1, **opts)
    return pre, dec


def serve_batch(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, batch, input_len, output_len,
                reserve: float, *, links=None, decode_only: bool = False, **transport) -> BatchCost:
    """Everything about serving `batch` sequences (arrays broadcast). Times in s, memory in bytes per chip.

    transport (ep_imbalance, ep_overlap, ep_comm, experts_whole: forward.TRANSPORT_DEFAULTS), links: see
    forward.forward_pass (defaults: balanced routing, no overlap,
    one bf16 copy per expert, every group
    gets hw.scaleup_bw). KV held per chip counts every sequence in flight: all pp micro-batches of a group hold
    their KV on every stage at once (each stage keeps its 1/pp of the layers), so the KV per chip is
    ceil(batch / (dp x ep)) x KV per sequence / (pp x kv_shard) whatever the micro-batching.
    decode_only: skip the prefill pass (prefill None, ttft_s NaN); everything else is unchanged."""
    opts = pass_options(links, **transport)
    batch = np.asarray(batch, float)
    input_len = np.asarray(input_len, float)
    output_len = np.asarray(output_len, float)
    tp, pp, ep, dp = (np.asarray(x, float) for x in (lay.tp, lay.pp, lay.ep, lay.dp))
    groups = dp * ep
    s_group = np.ceil(np.maximum(batch, 1.0) / groups)
    micro = np.minimum(pp, s_group)
    s = np.ceil(s_group / micro)
    # the busiest replica's sequences per micro-batch: only groups holding sequences route tokens to the experts
    stage = np.minimum(ep * s, np.ceil(np.ceil(np.maximum(batch, 1.0) / dp) / micro))
    if np.any(ep > 1):
        opts["stage_seqs"] = stage
    ctx = input_len + output_len
    cpd = np.asarray(getattr(lay, "cp", 1), float)
    has_cp = bool(np.any(cpd > 1))
    prefill_tokens = s * input_len / cpd if has_cp else s * input_len
    eng = eff.engine
    mem = memory_per_chip(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes,
                          np.maximum(batch, 1.0), ctx, prefill_tokens, reserve, engine=eng)
    bmax = max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, ctx, reserve,
                     engine=eng)
    pre, dec = passes(m, hw, lay, prec, eff, s, input_len, output_len, decode_only, **opts)
    fixed = m.n_layers * eff.layer_overhead_s      # kernel launches and syncs per pass (0 unless calibrated)
    chunks = 1.0
    if eng is not None and not decode_only and eng.chunked_prefill:
        chunks = np.maximum(np.ceil(prefill_tokens / chunk_tokens(hw.memory_bytes, eng)), 1.0)
        if np.any(chunks > 1):
            pre = chunked_prefill(m, hw, lay, prec, eff, s, input_len, chunks, **opts)
    pre_launch = 0.0
    if decode_only:
        ttft = np.nan
    elif eng is None:
        ttft = (micro + pp - 1) / pp * (pre.time_s + fixed)
    else:
        launch_s = launch_time_s(eff, hw)
        chunk_step, pre_launch = engine_step(eng, pre.time_s + fixed, kernels_of(pre), prefill_tokens / chunks,
                                             launch_s, tp, cpu_seqs=s)
        ttft = (micro + pp - 1) / pp * chunks * chunk_step
    if np.any(pp > 1):
        crosses = placed(lay, hw.scaleup_domain).replica.domains > 1     # some hand-off leaves the domain
        hop_bw = None if links is None else links.group_bw("p2p", 2)
        hop = coll.p2p(s * m.d_model * ACT_BYTES / tp, crosses, hw, eff.link_bw, up_bw=hop_bw)
        p2p = (pp - 1) * hop
        step = dec.time_s + p2p + fixed
    else:
        p2p = np.float64(0.0)              # no hand-offs: the step is the pass (t + 0.0 == t, so one addition)
        step = dec.time_s + fixed
    device, launch = step, 0.0
    cap, at_once = np.inf, True
    if eng is not None:
        step, launch = engine_step(eng, device, kernels_of(dec), s, launch_time_s(eff, hw), tp)
        cap = running_cap(hw.memory_bytes, eng)
        at_once = s_group <= cap
    # FLOPs and bytes do not depend on the efficiencies: the pure roofline reads them off the same pass
    floor = dec.roofline_floor_s(hw, prec)
    shape = np.broadcast(batch, input_len, output_len, tp, pp, ep, dp, cpd).shape
    def b(x):
        x = np.asarray(x, float)
        return x if x.shape == shape else np.broadcast_to(x, shape)
    extra = {} if eng is None else dict(
        engine=eng, decode_device_s=b(device), decode_launch_s=b(launch), prefill_chunks=b(chunks), running_cap=cap,
        prefill_launch_s=b(pre_launch),
        runs_at_once=np.broadcast_to(np.asarray(at_once, bool), shape))
    return BatchCost(batch=b(batch), seqs_per_microbatch=b(s), stage_seqs=b(stage), microbatches=b(micro),
                     prefill=pre, decode=dec,
                     ttft_s=b(ttft), decode_step_s=b(step), pp_p2p_s=b(p2p), decode_floor_s=b(floor), memory=mem,
                     max_batch=np.broadcast_to(bmax, shape), **extra)


def retimed(sv: BatchCost, n_layers: int, pp, compute_scale=1.0, bw_scale=1.0, layer_overhead_s=0.0,
            step_cpu_s=0.0, step_cpu_per_seq_s=0.0):
    """(ttft_s, decode_step_s) of a batch served by serve_batch with a kernel model and no per-layer overhead or
    per-step CPU time, as serve_batch would give them with KernelModel.compute_scale / bw_scale, Efficiency
    .layer_overhead_s and the engine's step_cpu_s / step_cpu_per_seq_s set to these values (arrays broadcast), without
    re-running the engine: each pass re-timed by roofline.retime_kernels, the fixed time per layer added, the
    engine's host side (launch, CPU work, overlap) applied as engine_step does. What `tokenmath validate` searches
    when it fits those values; tests check it against a full run."""
    from tokenmath.engine.roofline import retime_kernels
    fixed = n_layers * np.asarray(layer_overhead_s, float)
    pp = np.asarray(pp, float)
    fill = (sv.microbatches + pp - 1) / pp
    dec = retime_kernels(sv.decode, compute_scale, bw_scale) + fixed
    if np.any(pp > 1):
        dec = dec + sv.pp_p2p_s
    pre = None if sv.prefill is None else retime_kernels(sv.prefill, compute_scale, bw_scale) + fixed
    eng = sv.engine
    if eng is None:
        return (np.nan if pre is None else fill * pre), dec

    s = sv.seqs_per_microbatch
    cpu = np.asarray(step_cpu_s, float) + np.asarray(step_cpu_per_seq_s, float) * np.asarray(s, float)
    step = host_step(dec, sv.decode_launch_s, cpu, eng.overlap_scheduling)
    ttft = np.nan if pre is None else fill * sv.prefill_chunks * host_step(pre, sv.prefill_launch_s, cpu,
                                                                           eng.overlap_scheduling)
    return ttft, step
