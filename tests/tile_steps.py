"""Where the shape-aware kernel model may make a decode step cost more per token, for the invariant tests.

Cost per token never rises with batch while the batch fits, except where a GEMM's tile or wave quantization steps up
(engine/kernels.py: quantization_state, compute_inflation; docs/tile_quantization.md). This module reads, for a
served batch (engine/static_batch.serve_batch, decode), the token rows of each GEMM op of the decode pass as
engine/forward.py sets them, asks the kernel model for their quantization state and time per useful FLOP, and lists
the batch-to-batch transitions that break the invariant:
- a rise where no GEMM's quantization state changed (a rise inside one tile interval), or
- a rise larger than the largest rise of any GEMM's time per useful FLOP (the padded / unpadded compute ratio).
Batches must split evenly over the attention groups and micro-batches (tokens per group = batch / groups): an uneven
split is the other, separate exception (tests/test_ep_fewer_sequences_than_groups.py).
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine import kernels as K
from tokenmath.engine.expert_parallel import experts_touched
from tokenmath.specs.kernels import resolve

DENSE_GEMMS = ("attn_proj", "ffn", "router", "shared_experts", "lm_head")    # over the group's T tokens (decode)
REL = 1e-9           # slack for float summation order


def decode_gemms(m, hw, lay, prec, sv):
    """[(op name, dense-peak key, M rows per group, shapes, groups, grouped)] of the decode pass of BatchCost `sv`:
    T = sequences per micro-batch (one new token each) for the dense GEMMs, and for the routed experts
    M = T_st k / E_touched rows per expert over E_touched x expert_share groups (engine/forward.py)."""
    assert not lay.attn_by_batch, "batch- or dp-sharded attention runs the projections on other rows"
    T = np.asarray(sv.seqs_per_microbatch, float)
    tp = lay.tp
    out = []
    for name in DENSE_GEMMS:
        if name in sv.decode.ops:
            shapes = K.op_shapes(m, name, 1 if name == "router" else tp)
            out.append((name, hw.flops_key(prec.weight.compute), T, shapes, 1, False))
    if "experts" in sv.decode.ops:
        tst = np.asarray(sv.stage_seqs, float)
        touched = experts_touched(m, tst)
        out.append(("experts", hw.flops_key(prec.expert.compute), tst * m.experts_per_token / touched,
                    K.op_shapes(m, "experts", tp), touched * lay.expert_share(m), True))
    return out


def quanta(m, hw, lay, prec, eff, sv):
    """(state, inflation) over the batches of `sv` (1-d): state [batch, ...] the quantization state of every decode
    GEMM side by side, inflation [op, batch] each GEMM op's time per useful FLOP (engine/kernels.py)."""
    km = resolve(eff.kernels, hw)
    assert km is not None, "the flat model has no tiles: its cost per token never rises"
    n = np.shape(sv.batch)[0]
    states, infl = [], []
    for _name, key, M, shapes, groups, grouped in decode_gemms(m, hw, lay, prec, sv):
        st = K.quantization_state(km, M, shapes, groups)
        states.append(np.broadcast_to(st, (n, st.shape[-1])))
        infl.append(np.broadcast_to(K.compute_inflation(km, key, M, shapes, groups, grouped), (n,)))
    return np.concatenate(states, axis=1), np.array(infl)


def allowed(state, inflation):
    """(stepped, bound) per transition batch[i] -> batch[i + 1]: whether any GEMM's quantization state changes, and
    the most the cost per token may rise by: max(1, the largest ratio of any GEMM's time per useful FLOP), which is
    1 wherever no state changes (within one interval the padding only fills up)."""
    stepped = np.any(state[1:] != state[:-1], axis=1)
    bound = np.maximum(1.0, np.max(inflation[:, 1:] / inflation[:, :-1], axis=0))
    return stepped, bound


def violations(per_token, state, inflation, rel=REL):
    """Indices i of the transitions batch[i] -> batch[i + 1] whose cost per token breaks the invariant: it rises
    with no quantization step (same state), or by more than the bound of `allowed`."""
    c = np.asarray(per_token, float)
    ratio = c[1:] / c[:-1]
    stepped, bound = allowed(state, inflation)
    bad = ((ratio > 1 + rel) & ~stepped) | (ratio > bound * (1 + rel))
    return np.nonzero(bad)[0]


def rises(per_token, rel=REL):
    """Indices i where the cost per token rises from batch[i] to batch[i + 1]."""
    c = np.asarray(per_token, float)
    return np.nonzero(c[1:] > c[:-1] * (1 + rel))[0]
