"""Memory per chip: weight shard + KV cache (and recurrent state) of the sequences it holds + activations, against
usable HBM.

usable = HBM x (1 - reserve). The reserve (default 10%) stands for the CUDA context, allocator fragmentation and
framework buffers; it mirrors vLLM's default gpu_memory_utilization = 0.9 (vLLM engine arguments).
Activations: the working set of one prefill chunk of `chunk_tokens` tokens (default 8192, vLLM's default
max_num_batched_tokens for chunked prefill on large GPUs), about (8 d + 3 F / tp) values per token in bf16
(residual, norm output, q/k/v and attention output, FFN gate/up intermediate), plus the chunk's fp32 logits slice.

With a serving engine (specs/serving_engines.py) the engine's own settings replace the reserve and the chunk:
- usable = kv_memory_fraction x HBM (kv_fraction_of "total", vLLM's gpu_memory_utilization: weights, activations
  and KV together), or weights + activations + kv_memory_fraction x (HBM - weights - activations) ("free",
  TensorRT-LLM's free_gpu_memory_fraction of what is left once the weights and the step's buffers are allocated);
- activations: one step of at most the engine's max_batched_tokens;
- a sequence holds whole KV blocks: its context rounded up to kv_block_tokens;
- max_batch: at most max_running sequences per attention group (one scheduler per data-parallel rank).

Attention sharded over the batch inside a TP group (Layout.attn: batch, dp; mapping/layout.py): each rank holds
the whole KV of its ceil(S / tp) sequences (no head split, no copies), so the group holds tp x what one chip's KV
room holds; dp also keeps the attention projections whole on every rank (replicated weights).

The one home of usable memory and KV capacity: usable_bytes (what a chip may use), fixed_bytes (weights + one
step's activations), kv_bytes_left (what that leaves for the KV cache), kv_capacity (that room in sequences or
tokens) and room_beside (what more fixed bytes fit beside a given KV). max_batch, memory_per_chip, the draft's
(engine/speculative.py), the simulator's replica, infer's advice, moe and training memory all call these.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.kv_cache import kv_bytes_full_layers, kv_bytes_per_sequence, state_bytes_per_sequence
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model, full_layer_shapes
from tokenmath.specs.params import count_params
from tokenmath.specs.serving_engines import EngineProfile

RESERVE_FRACTION = 0.10
CHUNK_TOKENS = 8192


@dataclass
class Memory:
    """Bytes per chip: weights, KV cache, activations, and the usable HBM they must fit in."""
    weights: np.ndarray       # bytes per chip
    kv: np.ndarray            # bytes per chip
    activations: np.ndarray   # bytes per chip
    usable: np.ndarray | float   # bytes per chip available to the model (an array when it depends on the weights)

    @property
    def total(self):
        return self.weights + self.kv + self.activations

    @property
    def fits(self):
        return self.total <= self.usable


def weight_bytes_total(m: Model, weight_bytes: float, expert_bytes: float) -> float:
    P = count_params(m)
    return P.non_expert * weight_bytes + P.experts_total * expert_bytes


def weights_per_chip(m: Model, lay: Layout, weight_bytes: float, expert_bytes: float):
    P = count_params(m)
    tp, pp = np.asarray(lay.tp, float), np.asarray(lay.pp, float)
    w = (P.non_expert * weight_bytes / tp + P.experts_total * expert_bytes * lay.expert_share(m) / tp) / pp
    if lay.attn_by_batch:
        # dp attention: the attention projections whole on every rank instead of 1/tp of them
        attn = P.attn_per_layer * P.n_attn_layers * weight_bytes
        w = w + attn * (1.0 / lay.attn_weight_split() - 1.0 / tp) / pp
    return w


def seqs_per_group(batch, lay: Layout):
    """Sequences held by the busiest attention group (a TP group of one stage)."""
    return np.ceil(np.asarray(batch, float) / (np.asarray(lay.dp, float) * np.asarray(lay.ep, float)))


def held_per_sequence_per_chip(m: Model, lay: Layout, kv_bytes: float, context):
    """Cache bytes one sequence leaves on each chip of its group: the KV shards over kv_shard chips; the recurrent
    state of hybrid models (constant in context) shards over the tp chips that split its heads; both over pp."""
    state = state_bytes_per_sequence(m)
    per_seq = (kv_bytes_per_sequence(m, context, kv_bytes) - state) / lay.kv_shard(m)
    if m.has_full_shapes:   # Gemma 4: the full layers' fewer KV heads split over fewer chips (copies beyond them)
        per_seq = per_seq + kv_bytes_full_layers(m, context, kv_bytes) * (
            1.0 / lay.kv_shard(full_layer_shapes(m)) - 1.0 / lay.kv_shard(m))
    if state:
        # (batch / dp attention: counted whole per sequence on the ceil(S / tp) it holds, ~ S x state / tp)
        per_seq = per_seq + state / lay.attn_head_split()
    return per_seq / np.asarray(lay.pp, float)


def kv_per_chip(m: Model, lay: Layout, kv_bytes: float, batch, context):
    """Bytes of cache on the fullest chip: its sequences (all the group's under heads, ceil(S / tp) under batch and
    dp attention: Layout.attn_seqs) x what each leaves on it."""
    return lay.attn_seqs(seqs_per_group(batch, lay)) * held_per_sequence_per_chip(m, lay, kv_bytes, context)


def chunk_tokens(hw_memory_bytes: float, engine: EngineProfile | None = None) -> int:
    """Tokens of the largest step whose activations are held: the engine's max_batched_tokens, else CHUNK_TOKENS."""
    if engine is None:
        return CHUNK_TOKENS
    return engine.limits_for(hw_memory_bytes)[1] or CHUNK_TOKENS


def kv_context(context, engine: EngineProfile | None = None):
    """Tokens of KV a sequence of `context` tokens holds: whole blocks of the engine's kv_block_tokens."""
    if engine is None or engine.kv_block_tokens == 1:
        return context
    blk = float(engine.kv_block_tokens)
    return np.ceil(np.asarray(context, float) / blk) * blk


def usable_bytes(hw_memory_bytes: float, reserve: float, fixed=0.0, engine: EngineProfile | None = None):
    """Bytes per chip the model may use (weights + activations + KV), the one home of this figure: HBM x
    (1 - reserve) without a serving engine, else the engine's memory fraction of the total, or of what `fixed` =
    weights + activations (fixed_bytes) leaves (kv_fraction_of "free"). Callers that want the plain reserve even when
    an engine is set (a whole domain's napkin, training) pass engine=None and say why."""
    if engine is None:
        return hw_memory_bytes * (1 - reserve)
    f = engine.kv_memory_fraction
    if engine.kv_fraction_of == "total":
        return f * hw_memory_bytes
    return fixed + f * (hw_memory_bytes - fixed)


def fixed_bytes(m: Model, lay: Layout, weight_bytes: float, expert_bytes: float, hw_memory_bytes: float,
                engine: EngineProfile | None = None, extra=0.0):
    """Bytes per chip held whatever the batch: the weight shard (+ `extra`, e.g. a draft's weights) + the
    activations of one full step (chunk_tokens: conservative when the batch's prompts are shorter than a chunk)."""
    chunk = chunk_tokens(hw_memory_bytes, engine)
    return weights_per_chip(m, lay, weight_bytes, expert_bytes) + extra + activations_per_chip(m, lay, chunk, chunk)


def kv_bytes_left(hw_memory_bytes: float, reserve: float, fixed, engine: EngineProfile | None = None):
    """Bytes per chip left for the KV cache (and recurrent state) once the fixed bytes are in: usable - fixed, at
    least 0."""
    return np.maximum(usable_bytes(hw_memory_bytes, reserve, fixed, engine) - fixed, 0.0)


def room_beside(hw_memory_bytes: float, reserve: float, fixed, kv, engine: EngineProfile | None = None):
    """Bytes per chip that may still join the fixed bytes (e.g. more expert weights) with `kv` bytes of KV kept:
    the largest x with fixed + x + kv <= usable. Under a free-memory fraction the usable bytes grow with x (the KV
    gets f of HBM - fixed - x), so x <= HBM - fixed - kv / f; otherwise usable does not depend on x."""
    if engine is not None and engine.kv_fraction_of == "free":
        return hw_memory_bytes - fixed - kv / engine.kv_memory_fraction
    return usable_bytes(hw_memory_bytes, reserve, fixed, engine) - fixed - kv


def kv_capacity(kv_left, bytes_each, ranks=1.0, groups=1.0, cap=np.inf):
    """How many sequences (bytes_each: one sequence's cache bytes per chip) or tokens (bytes_each: one token's) the
    KV room holds: floor(kv_left / bytes_each) on each attention rank, x its ranks (1 under heads attention, tp under
    batch / dp: each rank holds its own sequences), at most `cap` per attention group (the engine's running cap),
    x the groups (dp x ep). An int64 array (0-d for scalars)."""
    per_group = np.minimum(np.floor(kv_left / bytes_each) * ranks, cap)
    return (per_group * groups).astype(np.int64)


def activations_per_chip(m: Model, lay: Layout, tokens, chunk: int = CHUNK_TOKENS):
    tp = np.asarray(lay.tp, float)
    t = np.minimum(np.asarray(tokens, float), chunk)
    F = max(m.ffn_intermediate, m.experts_per_token * m.moe_intermediate + m.shared_width)
    return t * (8 * m.d_model + 3 * F / tp) * 2.0 + np.minimum(t, 256) * m.vocab_size / tp * 4.0


def memory_per_chip(m: Model, hw_memory_bytes: float, lay: Layout, weight_bytes: float, expert_bytes: float,
                    kv_bytes: float, batch, context, prefill_tokens, reserve: float = RESERVE_FRACTION,
                    engine: EngineProfile | None = None) -> Memory:
    w = weights_per_chip(m, lay, weight_bytes, expert_bytes)
    chunk = chunk_tokens(hw_memory_bytes, engine)
    usable = usable_bytes(hw_memory_bytes, reserve, w + activations_per_chip(m, lay, chunk, chunk), engine)
    return Memory(
        weights=w + np.zeros(np.shape(batch)),
        kv=kv_per_chip(m, lay, kv_bytes, batch, kv_context(context, engine)),
        activations=activations_per_chip(m, lay, prefill_tokens, chunk),
        usable=usable,
    )


def running_cap(hw_memory_bytes: float, engine: EngineProfile | None = None) -> float:
    """Most sequences one attention group (one scheduler) runs at once: the engine's max_running, else no cap."""
    cap = 0 if engine is None else engine.limits_for(hw_memory_bytes)[0]
    return float(cap) if cap else np.inf


def max_batch(m: Model, hw_memory_bytes: float, lay: Layout, weight_bytes: float, expert_bytes: float,
              kv_bytes: float, context, reserve: float = RESERVE_FRACTION, engine: EngineProfile | None = None):
    """Largest batch (sequences, a multiple of dp x ep) whose KV fits beside weights and activations, and that the
    engine runs at once (at most its max_running per group); 0 if none.
    Memory is linear in the number of sequences per group, so this is solved exactly, not searched."""
    groups = np.asarray(lay.dp, float) * np.asarray(lay.ep, float)
    per_seq = held_per_sequence_per_chip(m, lay, kv_bytes, kv_context(context, engine))
    fixed = fixed_bytes(m, lay, weight_bytes, expert_bytes, hw_memory_bytes, engine)
    ranks = lay.attn_ranks() if lay.attn_by_batch else 1.0   # batch / dp attention: every rank its own sequences
    return kv_capacity(kv_bytes_left(hw_memory_bytes, reserve, fixed, engine), per_seq, ranks, groups,
                       running_cap(hw_memory_bytes, engine))
