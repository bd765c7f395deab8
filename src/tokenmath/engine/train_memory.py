"""Memory per chip of a training step (the worst pipeline stage), and the per-stage parameter split it rests on.

  model states: bf16 weights 2 B + gradients (grad_bytes, 2 B) + Adam 12 B (fp32 master, m, v) = 16 B/param
  (Rajbhandari et al. 2020, ZeRO Sec. 3.1: "16 Psi bytes"), over tp x pp (experts also over ep); ZeRO-1 shards
  the optimizer over the data-parallel group, ZeRO-2 also the gradients, ZeRO-3 also the weights (plus a
  prefetch buffer of two gathered layers).
  activations: Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4, bytes per layer per micro-batch
      none       sbh (34 + 5as/h) / t      (tensor + sequence parallel, eq. 5 divided by t)
      selective  34 sbh / t                 (attention scores not stored, Sec. 4.3)
      full       2 sbh / t                  (only the layer input, kept sequence-parallel-sharded)
  with s = L/cp tokens per chip (the score term keeps all L keys: 5 a s L b). The 34 is 11 (attention) + 19
  (MLP with F = 4h) + 4 (two norms); this module derives the same terms from the model's own widths (GQA, gated
  FFN, MoE), which gives exactly 34 for a GPT-3-shaped layer. 1F1B keeps min(pp, m) micro-batches in flight on
  the first stage (Narayanan et al. 2021 Sec. 2.2.1), so it holds about n_layers layers' worth; the last stage
  holds one micro-batch plus the fp32 logits, 4 s b V / t (Korthikanti et al. 2022 Sec. 4.1).
  fits: total <= HBM x (1 - RESERVE_FRACTION) (engine.memory).

Layout fields as in engine/train_step.py (chips = tp x cp x ep x dp x pp). All inputs broadcast (numpy). Bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

RECOMPUTE = ("none", "selective", "full")
ADAM_STATE_BYTES = 12.0       # fp32 master weight + first and second moments (ZeRO Sec. 3.1)
WEIGHT_BYTES = 2.0            # bf16 working weights
GRAD_BYTES = 2.0              # bf16 gradients (the 16 B/param accounting); 4.0 for fp32 main grads
LOGIT_BYTES = 4.0             # fp32 logits kept for the cross-entropy (Korthikanti et al. 2022 Sec. 4.1)


def recompute_code(r) -> np.ndarray:
    """'none' | 'selective' | 'full' (or 0/1/2, or an array of codes) -> int array."""
    if isinstance(r, str):
        return np.asarray(RECOMPUTE.index(r))
    return np.asarray(r, dtype=np.int64)


@dataclass(frozen=True)
class TrainMemory:
    """Bytes per chip on the worst pipeline stage; every field broadcasts over the layouts evaluated."""
    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    buffers: np.ndarray               # ZeRO-3 prefetch of gathered layers
    activations: np.ndarray
    usable: float                     # HBM x (1 - reserve)

    @property
    def states(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer + self.buffers + self.activations

    @property
    def fits(self) -> np.ndarray:
        return self.total <= self.usable


def stage_divisor(m: Model, pp):
    """n_layers / ceil(n_layers / pp): what per-stage layer work divides by on the slowest (fullest) stage."""
    pp = np.asarray(pp, float)
    return m.n_layers / np.ceil(m.n_layers / pp)


def stage_params(m: Model, pp):
    """Parameters of the first and the last pipeline stage, split (non-expert, expert): (first stage non-expert,
    last stage non-expert, experts per stage, non-expert parameters of all the layers), in parameters.
    The first stage also holds the embedding (and learned positions); the last the lm_head (a copy of the tied
    embedding when tied, as Megatron keeps it) and the final norm. With pp = 1 one stage holds all."""
    P = count_params(m)
    layers_ne = P.total - P.experts_total - P.embedding - P.lm_head - P.final_norm
    head = P.lm_head if not m.tie_embeddings else m.vocab_size * m.d_model
    pp = np.asarray(pp, float)
    ps = stage_divisor(m, pp)
    first_ne = layers_ne / ps + P.embedding
    last_ne = layers_ne / ps + head + P.final_norm
    one = pp == 1
    first_ne = np.where(one, P.total - P.experts_total, first_ne)
    last_ne = np.where(one, P.total - P.experts_total, last_ne)
    e = P.experts_total / ps
    return first_ne, last_ne, e, layers_ne


def activation_bytes_per_layer(m: Model, seq_len, micro_batch, tp=1, cp=1, recompute="none"):
    """Stored activation bytes of one layer for one micro-batch on one chip (Korthikanti et al. 2022, Sec. 4),
    averaged over the model's layers (dense / MoE, full / sliding attention).

    Terms (bytes, s = L/cp tokens on this chip, b = micro-batch, 2 bytes per bf16 value, 1 per dropout mask),
    each the paper's, written with the model's own widths so that GPT-3's shape gives exactly sbh(34 + 5as/h):
      attention linear: input 2sbh, Q 2sb(H hd), K and V 2sb(kv hd) each, out-proj input 2sb(H hd), dropout
                        mask sbh                                               -> 11 sbh for MHA
      attention scores: softmax 2asL b, its dropout mask asLb, dropout output 2asLb -> 5 a s L b
                        (L = all keys; a sliding layer attends at most its window)
      MLP: input 2sbh, dropout mask sbh, plain: 2sbF (fc1 out) + 2sbF (GeLU out); gated: gate, up and their
           product 6sbF                                                        -> 19 sbh for F = 4h
      MoE: input 2sbh + mask sbh + k x (2sbh dispatched copy + the expert's F_e terms) + shared experts
      norms: 4sbh
    Everything / tp (tensor + sequence parallel). selective drops the score term; full keeps the layer input
    2sbh / tp only.
    """
    rc = recompute_code(recompute)
    L = np.asarray(seq_len, float)
    s = L / np.asarray(cp, float)
    b = np.asarray(micro_batch, float)
    t = np.asarray(tp, float)
    h, a = m.d_model, m.n_heads
    if m.is_mla:
        q = a * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        k = q
        v = a * m.v_head_dim
        o = v
        latent = (m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim
    else:
        q = o = a * m.hd
        k = v = m.kv_heads * m.hd
        latent = 0
    attn_lin = 2 * (h + q + k + v + o + latent) + 1 * h          # values per token (bytes)
    norms = 4 * h

    def mlp(width):
        return (6 if m.ffn_gated else 4) * width

    P = count_params(m)
    dense = 3 * h + mlp(m.ffn_intermediate) if P.n_dense_layers else 0.0
    moe = 0.0
    if P.n_moe_layers:
        moe = 3 * h + m.experts_per_token * (2 * h + mlp(m.moe_intermediate))
        if m.shared_width:
            moe += mlp(m.shared_width)
    ffn_avg = (P.n_dense_layers * dense + P.n_moe_layers * moe) / m.n_layers
    linear = s * b * (attn_lin + ffn_avg + norms)                  # bytes
    keys_full = L
    keys_slide = np.minimum(L, m.sliding_window) if m.sliding_window else L
    keys_avg = (m.n_full_layers * keys_full + m.n_sliding_layers * keys_slide) / m.n_layers
    scores = 5.0 * a * s * keys_avg * b
    none = (linear + scores) / t
    selective = linear / t
    full = 2.0 * s * b * h / t
    return np.where(rc == 2, full, np.where(rc == 1, selective, none))


def train_memory(m: Model, hw_memory_bytes: float, lay: Layout, *, seq_len, micro_batch, micro_batches,
                 recompute="selective", zero=1, reserve: float = RESERVE_FRACTION,
                 grad_bytes: float = GRAD_BYTES) -> TrainMemory:
    """Memory per chip on the worst pipeline stage (the larger of the first and the last)."""
    P = count_params(m)
    tp, pp, dp, ep, cp = (np.asarray(x, float) for x in (lay.tp, lay.pp, lay.dp, lay.ep, lay.cp))
    z = np.asarray(zero, dtype=np.int64)
    rc = recompute_code(recompute)
    mb = np.asarray(micro_batches, float)
    b = np.asarray(micro_batch, float)
    L = np.asarray(seq_len, float)
    first_ne, last_ne, e_stage, layers_ne = stage_params(m, pp)
    g_ne, g_e = dp * ep * cp, dp * cp

    def states(ne):
        ne_c, e_c = ne / tp, e_stage / (tp * ep)
        wts = WEIGHT_BYTES * (ne_c / np.where(z >= 3, g_ne, 1.0) + e_c / np.where(z >= 3, g_e, 1.0))
        grd = grad_bytes * (ne_c / np.where(z >= 2, g_ne, 1.0) + e_c / np.where(z >= 2, g_e, 1.0))
        opt = ADAM_STATE_BYTES * (ne_c / np.where(z >= 1, g_ne, 1.0) + e_c / np.where(z >= 1, g_e, 1.0))
        return wts, grd, opt

    # ZeRO-3 prefetch: two layers' weights gathered whole (per tp shard) at a time
    layer_params = (layers_ne + P.experts_total / ep) / m.n_layers
    buffers = np.where(z >= 3, 2.0 * WEIGHT_BYTES * layer_params / tp, 0.0)

    per_layer = activation_bytes_per_layer(m, L, b, tp, cp, rc)
    layers_stage = m.n_layers / stage_divisor(m, pp)
    in_flight = np.minimum(pp, np.maximum(mb, 1.0))
    logits = LOGIT_BYTES * b * (L / cp) * m.vocab_size / tp
    act_first = in_flight * layers_stage * per_layer + np.where(pp == 1, logits, 0.0)
    act_last = layers_stage * per_layer + logits

    w1, g1, o1 = states(first_ne)
    w2, g2, o2 = states(last_ne)
    t1 = w1 + g1 + o1 + act_first
    t2 = w2 + g2 + o2 + act_last
    pick = t1 >= t2
    shape = np.broadcast(t1, t2, buffers).shape

    def sel(x, y):
        return np.broadcast_to(np.where(pick, x, y), shape).astype(float)

    return TrainMemory(weights=sel(w1, w2), gradients=sel(g1, g2), optimizer=sel(o1, o2),
                       buffers=np.broadcast_to(buffers, shape).astype(float), activations=sel(act_first, act_last),
                       usable=hw_memory_bytes * (1 - reserve))
