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
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.engine import collectives as coll
from tokenmath.engine.memory import Memory, max_batch, memory_per_chip
from tokenmath.engine.forward import ACT_BYTES, PassCost, Precision, decode_context, forward_pass, prefill_pairs
from tokenmath.mapping.placement import place


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

    @property
    def fits(self):
        return self.memory.fits & (self.batch >= 1)


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
                reserve: float, *, ep_imbalance: float = 1.0, ep_overlap: bool = False, links=None,
                decode_only: bool = False) -> BatchCost:
    """Everything about serving `batch` sequences (arrays broadcast). Times in s, memory in bytes per chip.

    ep_imbalance, ep_overlap, links: see forward.forward_pass (defaults: balanced routing, no overlap, every group
    gets hw.scaleup_bw). KV held per chip counts every sequence in flight: all pp micro-batches of a group hold
    their KV on every stage at once (each stage keeps its 1/pp of the layers), so the KV per chip is
    ceil(batch / (dp x ep)) x KV per sequence / (pp x kv_shard) whatever the micro-batching.
    decode_only: skip the prefill pass (prefill None, ttft_s NaN); everything else is unchanged."""
    opts = {}
    if ep_imbalance != 1.0:
        opts["ep_imbalance"] = ep_imbalance
    if ep_overlap:
        opts["ep_overlap"] = True
    if links is not None:
        opts["links"] = links
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
    mem = memory_per_chip(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes,
                          np.maximum(batch, 1.0), ctx, prefill_tokens, reserve)
    bmax = max_batch(m, hw.memory_bytes, lay, prec.weight.bytes, prec.expert.bytes, prec.kv.bytes, ctx, reserve)
    pre, dec = passes(m, hw, lay, prec, eff, s, input_len, output_len, decode_only, **opts)
    fixed = m.n_layers * eff.layer_overhead_s      # kernel launches and syncs per pass (0 unless calibrated)
    ttft = np.nan if decode_only else (micro + pp - 1) / pp * (pre.time_s + fixed)
    if np.any(pp > 1):
        crosses = place(lay, hw.scaleup_domain).replica.domains > 1     # some hand-off leaves the domain
        hop_bw = None if links is None else links.group_bw("p2p", 2)
        hop = coll.p2p(s * m.d_model * ACT_BYTES / tp, crosses, hw, eff.link_bw, up_bw=hop_bw)
        p2p = (pp - 1) * hop
        step = dec.time_s + p2p + fixed
    else:
        p2p = np.float64(0.0)              # no hand-offs: the step is the pass (t + 0.0 == t, so one addition)
        step = dec.time_s + fixed
    # FLOPs and bytes do not depend on the efficiencies: the pure roofline reads them off the same pass
    floor = dec.roofline_floor_s(hw, prec)
    shape = np.broadcast(batch, input_len, output_len, tp, pp, ep, dp, cpd).shape
    def b(x):
        x = np.asarray(x, float)
        return x if x.shape == shape else np.broadcast_to(x, shape)
    return BatchCost(batch=b(batch), seqs_per_microbatch=b(s), stage_seqs=b(stage), microbatches=b(micro),
                     prefill=pre, decode=dec,
                     ttft_s=b(ttft), decode_step_s=b(step), pp_p2p_s=b(p2p), decode_floor_s=b(floor), memory=mem,
                     max_batch=np.broadcast_to(bmax, shape))
