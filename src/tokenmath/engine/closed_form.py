"""The engine's roofline collapsed to a closed form over abstract models (active params, total params, KV bytes).

The inverse questions (deduce a model from its price) sample hundreds of thousands of hypothetical models at once,
which the per-operation engine cannot enumerate as Model objects. This form keeps the same physics in aggregate,
and tests/test_deduce.py checks it against the per-operation engine on catalog models:

  decode, per output token (chip-seconds, communication ignored):
      [ max(2 N_a B / F, N_t q / W)  +  max(g K c B / F, K c B / W) ] / B
        weight matmuls: FLOPs vs one fetch     attention: FLOPs vs KV reads of B sequences at context c
  prefill, per input token:
      max(2 N_a / F, N_t q / (L B W)) + g K L / (2 F)
        (causal attention attends L/2 positions on average)

N_a active params, N_t params read per step (all experts at serving batches), q bytes per weight, K KV bytes per
token (all layers), g = attention FLOPs per KV byte per attended position (4 h d_head L / K with K = 2 h_kv d_head L
x 2 B: 1 for MHA in bf16, the GQA group size h / h_kv for GQA, 241.8 for DeepSeek-V3's MLA; twice that with fp8 KV;
analyses/inverse/deduce.attn_flops_per_kv_byte), F = peak FLOP/s x efficiency, W = bandwidth x efficiency (per chip).
"""
from __future__ import annotations

import numpy as np


def decode_chip_s_per_token(n_active, n_total, q, kv_bytes, context, batch, flops, bw, g=2.0):
    B = np.asarray(batch, float)
    mat = np.maximum(2 * np.asarray(n_active) * B / flops, np.asarray(n_total) * q / bw)
    kv = np.asarray(kv_bytes) * np.asarray(context) * B
    att = np.maximum(np.asarray(g) * kv / flops, kv / bw)
    return (mat + att) / B


def decode_step_s(n_active, n_total, q, kv_bytes, context, batch, flops, bw, chips, g=2.0):
    """Time of one decode step on `chips` chips with perfect tensor parallelism (a lower bound on latency)."""
    return decode_chip_s_per_token(n_active, n_total, q, kv_bytes, context, batch, flops, bw, g) * np.asarray(batch) / chips


def prefill_chip_s_per_token(n_active, n_total, q, kv_bytes, prompt_len, batch, flops, bw, g=2.0):
    L = np.asarray(prompt_len, float)
    mat = np.maximum(2 * np.asarray(n_active) / flops, np.asarray(n_total) * q / (L * np.asarray(batch) * bw))
    return mat + np.asarray(g) * np.asarray(kv_bytes) * L / 2 / flops
