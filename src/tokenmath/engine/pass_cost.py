"""The result of one forward pass: its operations (Op) and their sums (PassCost), per chip.

engine/forward.py fills a PassCost op by op; everything here only adds up what the ops carry (seconds, FLOPs,
bytes per chip), so the sums cost what a sweep can afford: a term that depends on fewer axes than the whole
product (a weight read depends on the layout and the batch, not on the context) keeps its smaller shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from tokenmath.specs.hardware import Hardware

# the bottleneck classes of a pass, by code (PassCost.bottleneck_code): the largest of the four sums is the label
BOTTLENECKS = np.array(["compute", "memory", "communication", "overhead"])
# ops whose arrays depend on the context (every axis of a sweep): summed last, after the smaller terms (see sum_ops)
CONTEXT_OPS = ("indexer", "attention", "attention_local")


@dataclass
class Op:
    """One operation of a pass, per occurrence and per chip: FLOPs, bytes, and their times (s) at the rates used."""
    name: str
    count: float          # occurrences per pass (layers)
    flops: np.ndarray     # per occurrence, per chip
    bytes: np.ndarray     # per occurrence, per chip (HBM traffic)
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    peak_flops: float = 0.0   # achievable FLOP/s used
    bandwidth: float = 0.0    # achievable B/s used
    note: str = ""
    weight_bytes: np.ndarray | float = 0.0   # the part of `bytes` that is weights (per occurrence)
    kv_bytes: np.ndarray | float = 0.0       # the part of `bytes` that is KV cache
    kernels: int = 0                         # kernels launched per occurrence (engine/kernels.op_kernels)
    fixed_s: np.ndarray | float = 0.0        # kernel model: t0 per occurrence, inside compute_s and memory_s

    @cached_property
    def has_comm(self) -> bool:
        return not (np.ndim(self.comm_s) == 0 and float(self.comm_s) == 0.0)

    @cached_property
    def time_s(self):
        """Per occurrence, s: max(compute, memory, communication). Kept once computed (an Op is not changed after
        forward_pass builds it; forward_pass hands over the max(compute, memory) the roofline already took)."""
        t = np.maximum(self.compute_s, self.memory_s)
        return np.maximum(t, self.comm_s) if self.has_comm else t

    @cached_property
    def total_s(self):
        """Per pass, s: count x time_s (kept: the pass's sums read it twice)."""
        return self.count * self.time_s


def sum_terms(terms):
    """sum(terms): the same left-to-right additions, in place once the running total is an array of its own that
    already has the broadcast shape (a sweep's totals are large; this saves a temporary per term)."""
    acc = 0
    own = False
    for x in terms:
        if own:
            try:
                np.add(acc, x, out=acc)     # refused (before any arithmetic) when x would grow the shape
                continue
            except ValueError:
                pass
        acc = acc + x
        own = type(acc) is np.ndarray and acc.size >= 4096 and acc.dtype == np.float64
    return acc


@dataclass
class PassCost:
    """Ops of one pass; totals are computed once (the pass is complete when forward_pass returns it).
    overhead_s: the pass's fixed time, n_layers x Efficiency.layer_overhead_s (launches, syncs), in seconds; it is
    not in time_s (the ops' roofline): engine/static_batch.py adds it to the step and to TTFT.
    Every sum over ops adds them in one fixed order (sum_ops): the context-independent ops in the order they were
    added, then CONTEXT_OPS. In a sweep only those last ones span the whole product, so each sum is one pass over
    it rather than one per op; the order is the same for a scalar and for any block, so infer and sweep agree to
    the bit."""
    ops: dict[str, Op] = field(default_factory=dict)
    overhead_s: float = 0.0

    def sum_ops(self, term):
        """sum of term(op) over the ops, in the fixed order above."""
        ops = self.ops
        first = [term(op) for k, op in ops.items() if k not in CONTEXT_OPS]
        return sum_terms(first + [term(ops[k]) for k in CONTEXT_OPS if k in ops])

    @cached_property
    def time_s(self):
        return self.sum_ops(lambda op: op.total_s)

    @cached_property
    def _shares(self):
        def share(op, v, where):
            """where(where, v, 0) x count. Where v (compute or memory) is the larger leg and the op moves nothing over
            links, count x v is already total_s (and 0 x count is 0): one pass fewer over a sweep's block."""
            if op.has_comm:
                t = np.where(where, v, 0.0)
                return t * op.count if t.ndim == 0 else np.multiply(t, op.count, out=t)
            t = np.where(where, op.total_s, 0.0)
            return t[()] if t.ndim == 0 else t

        def pure_comm(op):     # a pure collective adds exact zeros to the compute and memory sums
            c, m = op.compute_s, op.memory_s
            return np.ndim(c) == 0 == np.ndim(m) and c == 0.0 == m
        ops = [op for k, op in self.ops.items() if k not in CONTEXT_OPS] + \
              [self.ops[k] for k in CONTEXT_OPS if k in self.ops]
        work = [op for op in ops if not pure_comm(op)]
        comm = [op for op in ops if op.has_comm]
        cs = sum_terms(share(op, op.compute_s, op.compute_s >= op.memory_s) for op in work) if work else 0.0
        ms = sum_terms(share(op, op.memory_s, op.memory_s > op.compute_s) for op in work) if work else 0.0
        ks = sum_terms(op.count * op.comm_s for op in comm) if comm else 0.0
        return cs, ms, ks

    @property
    def compute_bound_s(self):
        """Time in ops whose FLOPs outweigh their bytes."""
        return self._shares[0]

    @property
    def memory_bound_s(self):
        return self._shares[1]

    @property
    def comm_s(self):
        return self._shares[2]

    @cached_property
    def bottleneck_code(self):
        """Index into BOTTLENECKS: 0 compute, 1 memory, 2 communication, 3 overhead -- the largest of the pass's
        compute-bound time, memory-bound time, communication time and fixed overhead (overhead_s); a tie goes to
        the earlier class."""
        c, m, k = self._shares
        o = self.overhead_s
        code = np.empty(np.broadcast(c, m, k).shape, np.int8)
        np.greater(m, c, out=code, casting="unsafe")
        top = np.maximum(c, m)
        np.copyto(code, 2, where=k > top, casting="unsafe")
        if o:
            np.copyto(code, 3, where=o > np.maximum(top, k), casting="unsafe")
        return code

    @property
    def bottleneck(self):
        return BOTTLENECKS[self.bottleneck_code]

    @property
    def kernels(self) -> float:
        """Kernels launched per pass (what an eager engine pays CPU launch time for)."""
        return sum(op.count * op.kernels for op in self.ops.values())

    @property
    def weight_bytes(self):
        return self.sum_ops(lambda op: op.count * op.weight_bytes)

    @property
    def kv_bytes(self):
        return self.sum_ops(lambda op: op.count * op.kv_bytes)

    @property
    def flops(self):
        return self.sum_ops(lambda op: op.count * op.flops)

    @property
    def bytes(self):
        return self.sum_ops(lambda op: op.count * op.bytes)

    def napkin_floor_s(self, hw: Hardware):
        """(weight + KV bytes) / peak bandwidth: what one chip of a replica's critical path reads in this pass (its
        1/tp of every stage's layers in turn, for MoE only the experts touched), at 100% of peak; no prediction may
        beat it (the pure roofline adds activations and FLOPs)."""
        return (self.weight_bytes + self.kv_bytes) / hw.memory_bw

    def roofline_floor_s(self, hw: Hardware, prec):
        """max(all FLOPs / fastest peak used, all bytes / bandwidth) at 100% of peak: no prediction may beat it.
        prec: the pass's forward.Precision (the dtypes whose peaks it used)."""
        peak = max(hw.peak_flops(k) for k in (prec.weight.compute, prec.expert.compute, "bf16"))
        return np.maximum(self.flops / peak, self.bytes / hw.memory_bw)
