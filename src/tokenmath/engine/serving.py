"""A static batch served end to end: prefill of all prompts, then decode steps while the context grows.

Vectorized over batch, lengths and layout degrees (numpy broadcasting): a sweep is one call.

Scheduling model (stated so it can be checked):
- the batch splits evenly over dp replicas and, inside a replica, over ep attention groups; the busiest group
  (ceil(batch / (dp x ep)) sequences) sets the pace;
- with pp stages the group's sequences flow as M = min(pp, sequences) micro-batches: a decode step (the time
  between two tokens of one sequence) is one pass of a micro-batch through all layers plus pp-1 hand-offs;
  prefill takes (M + pp - 1) / pp passes (pipeline fill);
- the decode step is the mean over the generation (context growing from input_len to input_len + output_len);
  attention cost is linear in context, so the mean equals the cost at the mean context (windows handled exactly).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..efficiency import Efficiency
from ..hardware import Hardware
from ..mapping import Layout
from ..model import Model
from . import collectives as coll
from .memory import Memory, max_batch, memory_per_chip
from .step import ACT_BYTES, PassCost, Precision, decode_context, forward_pass, prefill_pairs


@dataclass
class Serving:
    batch: np.ndarray
    seqs_per_microbatch: np.ndarray
    microbatches: np.ndarray
    prefill: PassCost
    decode: PassCost
    ttft_s: np.ndarray
    decode_step_s: np.ndarray
    pp_p2p_s: np.ndarray
    decode_floor_s: np.ndarray
    memory: Memory
    max_batch: np.ndarray

    @property
    def fits(self):
        return self.memory.fits & (self.batch >= 1)


def passes(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, seqs, input_len, output_len):
    """(prefill pass, mean decode pass) per chip for `seqs` sequences per attention group."""
    pf, ps = prefill_pairs(input_len, m.sliding_window)
    pre = forward_pass(m, hw, lay, prec, eff, phase="prefill", seqs=seqs, new_tokens=input_len, pairs_full=pf,
                       pairs_sliding=ps, kv_read_full=0.0, kv_read_sliding=0.0)
    cf, cs = decode_context(input_len, output_len, m.sliding_window)
    dec = forward_pass(m, hw, lay, prec, eff, phase="decode", seqs=seqs, new_tokens=1, pairs_full=cf,
                       pairs_sliding=cs, kv_read_full=cf - 1, kv_read_sliding=cs - 1)
    return pre, dec


def serve(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, batch, input_len, output_len,
          reserve: float) -> Serving:
    """Everything about serving `batch` sequences (arrays broadcast). Times in s, memory in bytes per chip."""
    batch = np.asarray(batch, float)
    input_len = np.asarray(input_len, float)
    output_len = np.asarray(output_len, float)
    tp, pp, ep, dp = (np.asarray(x, float) for x in (lay.tp, lay.pp, lay.ep, lay.dp))
    groups = dp * ep
    s_group = np.ceil(np.maximum(batch, 1.0) / groups)
    micro = np.minimum(pp, s_group)
    s = np.ceil(s_group / micro)
    ctx = input_len + output_len
    mem = memory_per_chip(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes,
                          np.maximum(batch, 1.0), ctx, s * input_len, reserve)
    bmax = max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, ctx, reserve)
    pre, dec = passes(m, hw, lay, prec, eff, s, input_len, output_len)
    ttft = (micro + pp - 1) / pp * pre.time_s
    crosses = tp * ep * pp > hw.scaleup_domain
    if np.any(pp > 1):
        hop = coll.p2p(s * m.d_model * ACT_BYTES / tp, crosses, hw, eff.link_bw)
        p2p = (pp - 1) * hop
    else:
        p2p = np.zeros_like(np.asarray(dec.time_s, float))
    step = dec.time_s + p2p
    # FLOPs and bytes do not depend on the efficiencies: the pure roofline reads them off the same pass
    floor = dec.roofline_floor_s(hw, prec)
    shape = np.broadcast(batch, input_len, output_len, tp, pp, ep, dp).shape
    b = lambda x: np.broadcast_to(np.asarray(x, float), shape)  # noqa: E731
    return Serving(b(batch), b(s), b(micro), pre, dec, b(ttft), b(step), b(p2p), b(floor), mem,
                   np.broadcast_to(bmax, shape))
