"""Expert parallelism in one forward pass: which tokens reach a MoE layer, how many experts they touch, what an EP
rank dispatches, and the time of the dispatch + combine all-to-all (arrays broadcast).

Tokens. A replica's attention runs data-parallel over its ep groups; B sequences over dp x ep groups put
ceil(B / dp) on the busiest replica and ceil(B / (dp ep)) on its busiest group. Only the groups that hold
sequences route tokens, so the tokens that reach the replica's MoE layer in one pass are its own sequences' tokens,
min(ep x seqs per group, replica sequences per micro-batch) x new tokens each -- B at one replica, not
ceil(B / ep) x ep: with fewer sequences than groups the idle groups route nothing and cost nothing extra
(engine/static_batch.py passes stage_seqs; training fills every group, so the default is ep x seqs).

Experts touched. Each of T tokens picks k of E experts uniformly: E (1 - (1 - k/E)^T) distinct experts are read
(DeepSeek-V3, E = 256, k = 8: 8 at T = 1, 15.75 at T = 2, all 256 by T ~ 1,000). The busiest EP rank holds
ceil(E / ep) / E of them (layout.expert_share).

All-to-all. Each rank of a group of tp chips sends its 1/tp share of its group's T x k x d_model activations
(bf16) in the dispatch and receives them back in the combine; the busiest rank gets ep_imbalance x the mean. The
group spans tp x ep chips placed by mapping/placement.py, priced for its slowest member (engine/collectives.py).
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.specs.model import Model

ACT_BYTES = 2.0  # activations in bf16 (the same figure as forward.ACT_BYTES)


def experts_touched(m: Model, tokens):
    """Expected distinct routed experts that `tokens` tokens read in one MoE layer: E (1 - (1 - k/E)^tokens)."""
    E, k = m.n_experts, m.experts_per_token
    return E * (1.0 - (1.0 - k / E) ** np.asarray(tokens, float))


def ep_dispatch_bytes(m: Model, tokens, tp=1.0):
    """Bytes one expert-parallel rank sends per MoE layer in the dispatch all-to-all (and receives back in the
    combine): each of its `tokens` goes to top-k experts as d_model activations (ACT_BYTES each), and a rank of a
    tp group sends its 1/tp share of them. The busiest rank's imbalance multiplies this (not included here)."""
    return tokens * m.experts_per_token * m.d_model * ACT_BYTES / tp


def alltoall_s(m: Model, hw, tokens, tp, ep, eff_link: float, *, imbalance: float = 1.0, up_bw=None, span=None):
    """Dispatch + combine time of one MoE layer (s) for a rank whose attention group holds `tokens` tokens; 0 where
    ep = 1 (tensor parallelism alone never dispatches tokens). span: the placement of the tp x ep chips."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    payload = ep_dispatch_bytes(m, tokens, tp)
    if imbalance != 1.0:
        payload = payload * np.where(ep > 1, float(imbalance), 1.0)   # the busiest rank receives more
    return np.where(ep > 1, 2 * coll.all_to_all(payload, tp * ep, hw, eff_link, up_bw=up_bw, span=span), 0.0)


def moe_layer_compute_s(ops: dict, n_layers: int):
    """Per-occurrence time of the non-communication work of one MoE layer (what a second micro-batch overlaps),
    from a pass's ops (forward.PassCost.ops)."""
    t = 0.0
    for name in ("attn_proj", "norms", "router", "experts", "shared_experts"):
        if name in ops:
            t = t + ops[name].time_s
    att = 0.0
    for name in ("attention", "attention_local"):
        if name in ops:
            att = att + ops[name].total_s
    return t + att / n_layers
