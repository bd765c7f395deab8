"""Data-parallel gradient / weight traffic and the optimizer update of one training step (seconds per step, per
chip); arrays broadcast. Called by engine/train_step.py, which documents every term:

  ZeRO-0/1: one all-reduce of the gradients per step (ZeRO-1 as reduce-scatter + all-gather of the updated weights
            moves the same bytes; Rajbhandari et al. 2020, ZeRO Sec. 7).
  ZeRO-2:   reduce-scatter of the gradients every micro-batch and one all-gather of the updated bf16 weights per step.
  ZeRO-3:   per micro-batch an all-gather of the weights in forward, another in backward, and a reduce-scatter of
            the gradients (1.5x the all-reduce volume per micro-batch, ZeRO Sec. 7.2.2).
  overlap:  Megatron-Core's distributed data parallel, as NeMo documents it ("The DP communication is chunked by the
            granularity of a Transformer layer and overlaps each communication chunk with computation. This overlap
            method exposes only one DP communication chunk ... When training with pipeline-parallelism, the
            granularity of DP communication becomes the Transformer layers per virtual pipeline stage": NVIDIA/NeMo
            docs/source/features/optimizations/communication_overlap.rst):
            - gradients (ZeRO-0 all-reduce, ZeRO-1 reduce-scatter) hide behind the last micro-batch's backward
              (+ recompute), the gradients being ready chunk by chunk (overlap_grad_reduce);
            - the updated weights' all-gather (ZeRO-1 distributed optimizer, ZeRO-2) hides behind the next step's
              first forward, each chunk gathered before its layers run (overlap_param_gather);
            - each exposes at least one chunk: max(comm / chunks, comm - window); chunks = the stage's layers, or
              its v model chunks with an interleaved schedule;
            - ZeRO-2/3's per-micro-batch traffic hides behind that micro-batch's forward + backward;
            - hidden is not free: the collective's kernels share the chip's compute units and memory with the
              GEMMs they run beside, so the compute slows by OVERLAP_CONTENTION of the hidden traffic's time
              (contention_s). Lee et al. 2025 ("Characterizing Compute-Communication Overlap in GPU-Accelerated
              Distributed Deep Learning", arXiv 2507.03114, abstract): overlapped computation is slowed by 18.9%
              on average (40.0% at most) across GPT and Llama training on A100, H100, MI250 and MI210. DeepSeek's
              20 of 132 SMs given to communication (arXiv 2412.19437 Sec. 3.2.2) is the same size: 132/112 - 1 =
              17.9% (engine/train_step.py DUALPIPE_COMM_SMS).
  Adam:     memory-bound; per parameter it reads the fp32 master weight and two moments (12 B) and the gradient, and
            writes the master, the moments and the bf16 weight (14 B); sharded over the data-parallel group with
            ZeRO >= 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.engine.train_memory import WEIGHT_BYTES
from tokenmath.engine.train_memory_recipe import ADAM_STATE_BYTES
from tokenmath.specs.hardware import Hardware

OVERLAP_CONTENTION = 0.189   # compute slowdown while a collective runs beside it (Lee et al. 2025, module docstring)


def contention_s(total_s, exposed_s):
    """Seconds the compute loses to the traffic hidden beside it: OVERLAP_CONTENTION x (total - exposed)."""
    return OVERLAP_CONTENTION * (total_s - exposed_s)


def strided_collective(fn, nbytes, p, stride, hw: Hardware, eff_link: float):
    """A collective over p chips spaced `stride` ranks apart: a scale-up domain of D chips holds D // stride of
    them, so it costs what a contiguous group costs in a domain of D // stride chips (at least 1)."""
    p = np.asarray(p, float)
    stride = np.asarray(stride, float)
    nbytes, p, stride = np.broadcast_arrays(np.asarray(nbytes, float), p, stride)
    out = np.zeros(p.shape)
    if not np.any(p > 1):
        return out
    for s in np.unique(stride[p > 1]):
        dom = max(1, int(hw.scaleup_domain // s))
        sel = (stride == s) & (p > 1)
        out = np.where(sel, fn(nbytes, np.where(sel, p, 1.0), hw.replace(scaleup_domain=dom), eff_link), out)
    return out


@dataclass(frozen=True)
class DataParallelCost:
    """Per step, per chip (s): the collective per step, per micro-batch, their total and exposed parts, the
    compute slowdown the hidden part causes (contention_s), Adam."""
    step_s: np.ndarray
    micro_batch_s: np.ndarray
    total_s: np.ndarray
    exposed_s: np.ndarray
    contention_s: np.ndarray
    optimizer_s: np.ndarray
    opt_bytes_per_param: float


def data_parallel_cost(hw: Hardware, *, ne_chip, e_chip, tp, ep, g_ne, g_e, zero, micro_batches, fwd_s, bwd_s,
                       recompute_s, grad_bytes: float, link_eff: float, memory_bw: float, overlap: bool,
                       has_experts: bool, chunks=1.0) -> DataParallelCost:
    """ne_chip / e_chip: non-expert / expert parameters per chip before ZeRO; g_ne / g_e: the groups their
    gradients are reduced over (dp x ep x cp, dp x cp); fwd_s, bwd_s, recompute_s: one micro-batch (s);
    memory_bw: achievable HBM bytes/s for the optimizer; chunks: the DP communication chunks of the stage (>= 1)."""
    z = np.asarray(zero)
    mb = np.asarray(micro_batches, float)

    def over_dp(fn, nbytes_per_param):
        out = strided_collective(fn, ne_chip * nbytes_per_param, g_ne, tp, hw, link_eff)
        if has_experts:
            out = out + strided_collective(fn, e_chip * nbytes_per_param, g_e, tp * ep, hw, link_eff)
        return out

    ar = over_dp(coll.all_reduce, grad_bytes)
    rs = over_dp(coll.reduce_scatter, grad_bytes)
    ag = over_dp(coll.all_gather, WEIGHT_BYTES)
    # ZeRO-1 (Megatron's distributed optimizer): reduce-scatter of the gradients + all-gather of the updated bf16
    # weights, the same bytes as the all-reduce with 2 B gradients
    dp_step = np.where(z == 0, ar, np.where(z == 1, rs + ag, np.where(z == 2, ag, 0.0)))
    dp_mb = np.where(z == 2, rs, np.where(z == 3, 2.0 * ag + rs, 0.0))
    total = dp_step + mb * dp_mb
    if overlap:
        ch = np.maximum(np.asarray(chunks, float), 1.0)

        def hide(comm, window):     # one chunk is always exposed (the last gradients / the first weights)
            return np.maximum(comm / ch, comm - window)
        back = bwd_s + recompute_s
        grads = hide(np.where(z == 0, ar, np.where(z == 1, rs, 0.0)), back)
        weights = hide(np.where((z == 1) | (z == 2), ag, 0.0), fwd_s)
        exposed = grads + weights + mb * np.maximum(dp_mb - (fwd_s + bwd_s + recompute_s), 0.0)
    else:
        exposed = total
    contention = contention_s(total, exposed)
    per_param = ADAM_STATE_BYTES + grad_bytes + ADAM_STATE_BYTES + WEIGHT_BYTES
    shard_ne = np.where(z >= 1, g_ne, 1.0)
    shard_e = np.where(z >= 1, g_e, 1.0)
    opt = (ne_chip / shard_ne + e_chip / shard_e) * per_param / memory_bw
    return DataParallelCost(dp_step, dp_mb, total, exposed, contention, opt, per_param)
