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


def retime(pass_cost, flops_eff, bw_eff):
    """Time of a pass evaluated at 100% of peak FLOP/s and bandwidth, re-timed at other achievable fractions
    (arrays broadcast): sum over ops of count x max(compute / flops_eff, memory / bw_eff, communication).
    Flat passes only (Efficiency.kernels None): a kernel-model pass has shape-dependent fractions and fixed times."""
    fe, be = np.asarray(flops_eff, float), np.asarray(bw_eff, float)
    t = 0.0
    for op in pass_cost.ops.values():
        t = t + op.count * np.maximum(np.maximum(op.compute_s / fe, op.memory_s / be), op.comm_s)
    return t
