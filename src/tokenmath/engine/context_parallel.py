"""Context parallelism's communication in one forward pass (arrays broadcast).

The cp ranks of a sequence sit tp x ep chips apart in a block of tp x ep x cp chips (mapping/placement.py), so
their ring crosses a scale-up domain where that block does; a ring runs at its slowest hop (then the scale-out
link, plus its latency).
- prefill (ring attention, Liu et al. 2023): every rank receives the other ranks' KV blocks of each layer (cp-1 of
  cp), overlapped with the attention on the blocks it already has; only the part longer than the attention is
  exposed;
- decode: the KV stays split cp ways; the partial attention outputs (fp32, with their log-sum-exp) are
  all-gathered per layer.
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model


def cp_comm(m: Model, hw, lay: Layout, eff_link: float, phase: str, S, T, new_tokens, kvl, shard, cpd, up_bw, block,
            attention_s) -> tuple[str, np.ndarray, str]:
    """(op name, exposed communication per layer in s, note). S: sequences per group; T: tokens per rank; kvl: KV
    bytes per token per layer; shard: ways one sequence's KV is split (cp included); up_bw: the group's scale-up
    bandwidth (None: hw.scaleup_bw); block: placement.Span of the tp x ep x cp block; attention_s: the pass's
    attention time over all layers (what the prefill ring overlaps)."""
    tp = np.asarray(lay.tp, float)
    crosses = block.domains > 1
    up = hw.scaleup_bw if up_bw is None else up_bw
    if np.any(crosses):
        up = np.where(crosses, coll.scaleout_bandwidth(hw, 1.0), up)
    extra = np.where(crosses, hw.scaleout_latency, 0.0)
    if phase == "prefill":
        kv_layer = kvl * np.asarray(new_tokens, float) * S / (shard / cpd)     # one layer's KV of the whole prompts
        ring = coll.all_gather(kv_layer, cpd, hw, eff_link, up_bw=up) + extra
        exposed = np.where(cpd > 1, np.maximum(0.0, ring - attention_s / m.n_layers), 0.0)
        return "cp_ring", exposed, "ring attention: all-gather of the layer's KV over cp, overlapped with attention"
    vhd = m.v_head_dim if m.is_mla else m.hd
    partial = T * m.n_heads * (vhd + 1) * 4.0 / tp                  # fp32 partial outputs + log-sum-exp
    comb = np.where(cpd > 1, coll.all_gather(partial * cpd, cpd, hw, eff_link, up_bw=up) + extra, 0.0)
    return "cp_combine", comb, "all-gather of partial attention outputs over cp (KV stays split)"
