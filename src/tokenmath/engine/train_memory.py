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
  FFN, MoE), which gives exactly 34 for a GPT-3-shaped layer. Two switches for runs unlike GPT-3's:
      dropout=False   no dropout masks (Llama-style models train without dropout): 11 -> 10 and 19 -> 18 (32 sbh)
      flash=True      FlashAttention never stores the a x s x L scores: the 5as/h term becomes the fp32
                      log-sum-exp, 4 a s b bytes (Dao et al. 2022, FlashAttention Sec. 3.1)
  In flight on the first pipeline rank (the most: Korthikanti et al. 2022 Sec. 4.2.3):
      1F1B, ZB-H1   min(pp, m) micro-batches of its layers (Narayanan et al. 2021 Sec. 2.2.1; ZB-H1 keeps 1F1B's
                    peak, Qi et al. 2023 arXiv 2401.10241 Sec. 3.1)
      interleaved   v chunks of c = layers/v: Megatron's warm-up runs chunk 0 for min(m, 2pp - 1) micro-batches and
                    chunks 1..v-1 for min(m, pp), so it holds c (pp v + pp - 1) layers = the paper's
                    L (1 + (p - 1)/(p v)) at m >= pp
  Balanced stages (Llama 3, arXiv 2407.21783 Sec. 3.3.2: "reduce one Transformer layer each from the first and the
  last stages ... the first model chunk on the first stage has only the embedding"): the embedding and the output
  head each take one layer slot, so ranks hold ceil((n_layers + 2)/pp) slots and the first and last one fewer layer.
  The last stage holds one micro-batch plus the fp32 logits, 4 s b V / t (Korthikanti et al. 2022 Sec. 4.1).
  fits: total <= HBM x (1 - RESERVE_FRACTION) (engine.memory).
  A MemoryRecipe (engine/train_memory_recipe.py) changes the bytes per stored value: FP8 GEMM inputs (Transformer
  Engine), DeepSeek-V3's recomputation and FP8 caching, BF16 Adam moments, DualPipe's two stages per rank.

Layout fields as in engine/train_step.py (chips = tp x cp x ep x dp x pp). All inputs broadcast (numpy). Bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.memory import RESERVE_FRACTION, usable_bytes
from tokenmath.engine.train_memory_recipe import (
    DEFAULT_RECIPE,
    E5M6_BYTES,
    MemoryRecipe,
    linear_input_bytes,
)
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved", "zb-h1")
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


def schedule_code(sc) -> np.ndarray:
    """'1f1b' | 'interleaved' | 'zb-h1' (or 0/1/2, or an array of codes) -> int array."""
    if isinstance(sc, str):
        return np.asarray(SCHEDULES.index(sc))
    return np.asarray(sc, dtype=np.int64)


def stage_layers(m: Model, pp, balanced=False):
    """(layers on the fullest rank, layers on the first rank) of n_layers over pp pipeline ranks. Unbalanced: every
    rank holds up to ceil(n/pp) layers. Balanced (Llama 3): embedding and head each fill one slot, ranks hold
    ceil((n + 2)/pp) slots, the first (and last) rank one layer fewer. With pp = 1 one rank holds all."""
    pp = np.asarray(pp, float)
    bal = np.asarray(balanced, bool) & (pp > 1)
    full = np.where(bal, np.ceil((m.n_layers + 2.0) / pp), np.ceil(m.n_layers / pp))
    return full, np.where(bal, full - 1.0, full)


def stage_divisor(m: Model, pp, balanced=False):
    """n_layers / (layers on the fullest rank): what per-stage layer work divides by on the slowest stage."""
    return m.n_layers / stage_layers(m, pp, balanced)[0]


def stage_params(m: Model, pp, balanced=False):
    """Parameters of the first and the last pipeline stage, split (non-expert, expert): (first stage non-expert,
    last stage non-expert, experts per stage, non-expert parameters of all the layers), in parameters.
    The first stage also holds the embedding (and learned positions); the last the lm_head (a copy of the tied
    embedding when tied, as Megatron keeps it) and the final norm. With pp = 1 one stage holds all."""
    P = count_params(m)
    layers_ne = P.total - P.experts_total - P.embedding - P.lm_head - P.final_norm
    head = P.lm_head if not m.tie_embeddings else m.vocab_size * m.d_model
    pp = np.asarray(pp, float)
    _, first = stage_layers(m, pp, balanced)
    per_layer = layers_ne / m.n_layers
    first_ne = per_layer * first + P.embedding
    last_ne = per_layer * first + head + P.final_norm
    one = pp == 1
    first_ne = np.where(one, P.total - P.experts_total, first_ne)
    last_ne = np.where(one, P.total - P.experts_total, last_ne)
    e = P.experts_total / m.n_layers * stage_layers(m, pp, balanced)[0]
    return first_ne, last_ne, e, layers_ne


def in_flight_layers(m: Model, pp, micro_batches, schedule="1f1b", virtual_stages=1, balanced=False):
    """Layer-activations of one micro-batch each that the first pipeline rank holds at its peak (see the module
    docstring: 1F1B / ZB-H1 min(pp, m) x its layers; interleaved Megatron warm-up over v chunks)."""
    pp = np.asarray(pp, float)
    mb = np.maximum(np.asarray(micro_batches, float), 1.0)
    sc = schedule_code(schedule)
    v = np.where(sc == 1, np.maximum(np.asarray(virtual_stages, float), 1.0), 1.0)
    full, first = stage_layers(m, pp, balanced)
    c = full / v                                    # slots per chunk
    lost = full - first                             # the embedding's slot, in chunk 0 of the first rank
    inter = np.minimum(mb, 2.0 * pp - 1.0) * (c - lost) + (v - 1.0) * np.minimum(mb, pp) * c
    plain = np.minimum(mb, pp) * first
    return np.where((sc == 1) & (v > 1) & (pp > 1), inter, plain)


def activation_bytes_per_layer(m: Model, seq_len, micro_batch, tp=1, cp=1, recompute="none", flash=False,
                               dropout=True, act: str = "bf16"):
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
    2sbh / tp only. dropout=False removes the three masks (sbh each: attention output, MLP output, scores);
    flash=True replaces the score term by the fp32 log-sum-exp 4asb (FlashAttention stores no scores).
    act (engine/train_memory_recipe.py): "fp8" stores the GEMM-only inputs at 1 B (QKV input h, FFN input h or
    each dispatched copy h, FFN second-GEMM input F); "deepseek-v3" also drops the norms' outputs (the QKV / MLA
    down-projection and FFN inputs) and MLA's up-projected Q, K, V (recomputed), keeps the out-projection input in
    E5M6 (1.5 B) and, in MoE layers, only the SwiGLU inputs in FP8 (2F: its output is recomputed).
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
    mask = 1.0 if dropout else 0.0
    li = linear_input_bytes(act)                                  # a GEMM-only input, bytes per value
    ds = act == "deepseek-v3"
    x_in = 0.0 if ds else li                                      # a norm's output feeding a GEMM
    qkv = 0.0 if (ds and m.is_mla) else 2.0 * (q + k + v)         # MLA up-projections recomputed (DeepSeek-V3)
    attn_lin = x_in * h + qkv + 2.0 * latent + (E5M6_BYTES if ds else 2.0) * o + mask * h   # bytes per token
    norms = 4 * h

    def mlp(width, moe_layer=False):
        if ds and moe_layer:
            return 2.0 * width                                    # gate and up outputs in FP8, SwiGLU recomputed
        return (4 + li if m.ffn_gated else 2 + li) * width        # gate/up (or fc1 out) bf16 + second-GEMM input

    P = count_params(m)
    dense = (x_in + mask) * h + mlp(m.ffn_intermediate) if P.n_dense_layers else 0.0
    moe = 0.0
    if P.n_moe_layers:
        # the router reads the layer's normed input in bf16 (DeepSeek-V3 recomputes that norm)
        moe = ((0.0 if ds else 2.0) + mask) * h + m.experts_per_token * (li * h + mlp(m.moe_intermediate, True))
        if m.shared_width:
            moe += mlp(m.shared_width, True)
    ffn_avg = (P.n_dense_layers * dense + P.n_moe_layers * moe) / m.n_layers
    linear = s * b * (attn_lin + ffn_avg + norms)                  # bytes
    keys_full = L
    keys_slide = np.minimum(L, m.sliding_window) if m.sliding_window else L
    keys_avg = (m.n_full_layers * keys_full + m.n_sliding_layers * keys_slide) / m.n_layers
    scores = 4.0 * a * s * b if flash else (2.0 + 3.0 * mask) * a * s * keys_avg * b
    none = (linear + scores) / t
    selective = linear / t
    full = 2.0 * s * b * h / t
    return np.where(rc == 2, full, np.where(rc == 1, selective, none))


def train_memory(m: Model, hw_memory_bytes: float, lay: Layout, *, seq_len, micro_batch, micro_batches,
                 recompute="selective", zero=1, reserve: float = RESERVE_FRACTION,
                 grad_bytes: float = GRAD_BYTES, schedule="1f1b", virtual_stages=1, balanced=False,
                 flash=False, dropout=True, recipe: MemoryRecipe = DEFAULT_RECIPE) -> TrainMemory:
    """Memory per chip on the worst pipeline stage (the larger of the first and the last). schedule, virtual_stages,
    balanced: the pipeline (in_flight_layers); flash, dropout: the activation terms (activation_bytes_per_layer);
    recipe: activation storage, Adam's bytes and DualPipe (engine/train_memory_recipe.py)."""
    P = count_params(m)
    tp, pp, dp, ep, cp = (np.asarray(x, float) for x in (lay.tp, lay.pp, lay.dp, lay.ep, lay.cp))
    z = np.asarray(zero, dtype=np.int64)
    rc = recompute_code(recompute)
    mb = np.asarray(micro_batches, float)
    b = np.asarray(micro_batch, float)
    L = np.asarray(seq_len, float)
    first_ne, last_ne, e_stage, layers_ne = stage_params(m, pp, balanced)
    g_ne, g_e = dp * ep * cp, dp * cp

    def states(ne):
        ne_c, e_c = ne / tp, e_stage / (tp * ep)
        wts = WEIGHT_BYTES * (ne_c / np.where(z >= 3, g_ne, 1.0) + e_c / np.where(z >= 3, g_e, 1.0))
        grd = grad_bytes * (ne_c / np.where(z >= 2, g_ne, 1.0) + e_c / np.where(z >= 2, g_e, 1.0))
        opt = recipe.adam_bytes * (ne_c / np.where(z >= 1, g_ne, 1.0) + e_c / np.where(z >= 1, g_e, 1.0))
        return wts, grd, opt

    # ZeRO-3 prefetch: two layers' weights gathered whole (per tp shard) at a time
    layer_params = (layers_ne + P.experts_total / ep) / m.n_layers
    buffers = np.where(z >= 3, 2.0 * WEIGHT_BYTES * layer_params / tp, 0.0)

    per_layer = activation_bytes_per_layer(m, L, b, tp, cp, rc, flash, dropout, recipe.act)
    held = in_flight_layers(m, pp, mb, schedule, virtual_stages, balanced)
    _, layers_edge = stage_layers(m, pp, balanced)
    logits = LOGIT_BYTES * b * (L / cp) * m.vocab_size / tp
    act_first = held * per_layer + np.where(pp == 1, logits, 0.0)
    act_last = layers_edge * per_layer + logits

    w1, g1, o1 = states(first_ne)
    w2, g2, o2 = states(last_ne)
    t1 = w1 + g1 + o1 + act_first
    t2 = w2 + g2 + o2 + act_last
    if recipe.dualpipe:
        # DualPipe: rank 0 holds stage 0 and stage pp-1 (weights and gradients of both; each stage's optimizer
        # shard over twice the ranks) and PP + 1 micro-batches of a stage's layers (report Table 2), plus the logits
        two = pp > 1
        w1, g1, o1 = np.where(two, w1 + w2, w1), np.where(two, g1 + g2, g1), np.where(two, (o1 + o2) / 2.0, o1)
        act_first = np.where(two, np.minimum(mb, pp + 1.0) * stage_layers(m, pp, balanced)[0] * per_layer + logits,
                             act_first)
        t1, t2 = w1 + g1 + o1 + act_first, 0.0 * t2
    pick = t1 >= t2
    shape = np.broadcast(t1, t2, buffers).shape

    def sel(x, y):
        return np.broadcast_to(np.where(pick, x, y), shape).astype(float)

    return TrainMemory(weights=sel(w1, w2), gradients=sel(g1, g2), optimizer=sel(o1, o2),
                       buffers=np.broadcast_to(buffers, shape).astype(float), activations=sel(act_first, act_last),
                       # training runs no serving engine: the reserve alone (engine/memory.usable_bytes)
                       usable=usable_bytes(hw_memory_bytes, reserve))
