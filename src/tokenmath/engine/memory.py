"""Memory per chip: weight shard + KV cache of the sequences it holds + activations, against usable HBM.

usable = HBM x (1 - reserve). The reserve (default 10%) stands for the CUDA context, allocator fragmentation and
framework buffers; it mirrors vLLM's default gpu_memory_utilization = 0.9 (vLLM engine arguments).
Activations: the working set of one prefill chunk of `chunk_tokens` tokens (default 8192, vLLM's default
max_num_batched_tokens for chunked prefill on large GPUs), about (8 d + 3 F / tp) values per token in bf16
(residual, norm output, q/k/v and attention output, FFN gate/up intermediate), plus the chunk's fp32 logits slice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.kv_cache import kv_bytes_per_sequence
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

RESERVE_FRACTION = 0.10
CHUNK_TOKENS = 8192


@dataclass
class Memory:
    weights: np.ndarray       # bytes per chip
    kv: np.ndarray            # bytes per chip
    activations: np.ndarray   # bytes per chip
    usable: float             # bytes per chip available to the model

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
    return (P.non_expert * weight_bytes / tp + P.experts_total * expert_bytes * lay.expert_share(m) / tp) / pp


def seqs_per_group(batch, lay: Layout):
    """Sequences held by the busiest attention group (a TP group of one stage)."""
    return np.ceil(np.asarray(batch, float) / (np.asarray(lay.dp, float) * np.asarray(lay.ep, float)))


def kv_per_chip(m: Model, lay: Layout, kv_bytes: float, batch, context):
    per_seq = kv_bytes_per_sequence(m, context, kv_bytes)
    return seqs_per_group(batch, lay) * per_seq / (np.asarray(lay.pp, float) * lay.kv_shard(m))


def activations_per_chip(m: Model, lay: Layout, tokens):
    tp = np.asarray(lay.tp, float)
    t = np.minimum(np.asarray(tokens, float), CHUNK_TOKENS)
    F = max(m.ffn_intermediate, m.experts_per_token * m.moe_intermediate + m.shared_width)
    return t * (8 * m.d_model + 3 * F / tp) * 2.0 + np.minimum(t, 256) * m.vocab_size / tp * 4.0


def memory_per_chip(m: Model, hw_memory_bytes: float, lay: Layout, weight_bytes: float, expert_bytes: float,
                    kv_bytes: float, batch, context, prefill_tokens, reserve: float = RESERVE_FRACTION) -> Memory:
    return Memory(
        weights=weights_per_chip(m, lay, weight_bytes, expert_bytes) + np.zeros(np.shape(batch)),
        kv=kv_per_chip(m, lay, kv_bytes, batch, context),
        activations=activations_per_chip(m, lay, prefill_tokens),
        usable=hw_memory_bytes * (1 - reserve),
    )


def max_batch(m: Model, hw_memory_bytes: float, lay: Layout, weight_bytes: float, expert_bytes: float,
              kv_bytes: float, context, reserve: float = RESERVE_FRACTION):
    """Largest batch (sequences, a multiple of dp x ep) whose KV fits beside weights and activations; 0 if none.
    Memory is linear in the number of sequences per group, so this is solved exactly, not searched."""
    usable = hw_memory_bytes * (1 - reserve)
    groups = np.asarray(lay.dp, float) * np.asarray(lay.ep, float)
    per_seq = kv_bytes_per_sequence(m, context, kv_bytes) / (np.asarray(lay.pp, float) * lay.kv_shard(m))
    # activations at a full chunk: conservative when the whole batch's prompts are shorter than one chunk
    fixed = weights_per_chip(m, lay, weight_bytes, expert_bytes) + activations_per_chip(m, lay, CHUNK_TOKENS)
    per_group = np.floor(np.maximum(usable - fixed, 0.0) / per_seq)
    return (per_group * groups).astype(np.int64)
