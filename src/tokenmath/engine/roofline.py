"""Roofline: an operation takes max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth).

Williams, Waterman & Patterson, "Roofline: an insightful visual performance model", CACM 2009.
Times are summed per operation (each kernel is bound by its own resource), never one global max.
"""
from __future__ import annotations

import numpy as np


def op_time(flops, nbytes, peak_flops: float, bandwidth: float):
    """Returns (time_s, compute_s, memory_s) for FLOPs at `peak_flops` FLOP/s and bytes at `bandwidth` B/s."""
    compute = np.asarray(flops, dtype=float) / peak_flops
    memory = np.asarray(nbytes, dtype=float) / bandwidth
    return np.maximum(compute, memory), compute, memory


def kernel_op_time(flops, nbytes, peak_flops, bandwidth, fixed_s=0.0):
    """With a kernel model (engine/kernels.py): t0 + max(FLOPs / achieved FLOP/s, bytes / achieved B/s), where the
    achieved rates already carry the op's shape-dependent fractions (arrays broadcast). Returns (time_s, compute_s,
    memory_s) with the fixed time t0 inside both compute_s and memory_s, so max(compute_s, memory_s) is the time
    for every caller that takes it."""
    compute = fixed_s + np.asarray(flops, dtype=float) / peak_flops
    memory = fixed_s + np.asarray(nbytes, dtype=float) / bandwidth
    return np.maximum(compute, memory), compute, memory


def retime_kernels(pass_cost, compute_scale, bw_scale):
    """Time of a kernel-model pass (Efficiency.kernels set) re-timed with its compute and bandwidth fractions
    multiplied by compute_scale and bw_scale (arrays broadcast, each in (0, 1]): sum over ops of count x
    max(t0 + (compute - t0) / compute_scale, t0 + (memory - t0) / bw_scale, communication). The same time the
    engine gives with KernelModel.compute_scale / bw_scale set (engine/kernels.op_rates), without re-running it."""
    cs, bs = np.asarray(compute_scale, float), np.asarray(bw_scale, float)
    t = 0.0
    for op in pass_cost.ops.values():
        t0 = op.fixed_s
        work = np.maximum(t0 + (op.compute_s - t0) / cs, t0 + (op.memory_s - t0) / bs)
        t = t + op.count * np.maximum(work, op.comm_s)
    return t


def retime(pass_cost, flops_eff, bw_eff):
    """Time of a pass evaluated at 100% of peak FLOP/s and bandwidth, re-timed at other achievable fractions
    (arrays broadcast): sum over ops of count x max(compute / flops_eff, memory / bw_eff, communication).
    Flat passes only (Efficiency.kernels None): a kernel-model pass has shape-dependent fractions and fixed times."""
    fe, be = np.asarray(flops_eff, float), np.asarray(bw_eff, float)
    t = 0.0
    for op in pass_cost.ops.values():
        t = t + op.count * np.maximum(np.maximum(op.compute_s / fe, op.memory_s / be), op.comm_s)
    return t
