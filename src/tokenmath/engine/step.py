"""The cost of one forward pass (a decode step or a prefill) per chip, operation by operation.

Every quantity is per chip and broadcasts over numpy arrays (batch, context, tp, ep, ...). The operations:

  op            FLOPs (per layer, per chip)                 bytes (per layer, per chip)
  attn_proj     2 x W_attn x T / tp                         W_attn x w / tp + activations
  attention     c_pair x pairs x S / tp                     KV x (read + written tokens) x S / kv_shard + q/o
  ffn           2 x W_ffn x T / tp                          W_ffn x w / tp + activations
  router        2 x d x E x T                               d x E x w
  experts       2 x T_st x k x W_e / (ep tp)                E_touched x W_e x w_e / (ep tp) + activations
  shared        2 x W_sh x T / tp                           W_sh x w / tp + activations
  lm_head       2 x V x d x T_logits / tp                   V x d x w / tp
  tp_allreduce  2 per layer, ring all-reduce of T x d activations over tp chips
  ep_alltoall   dispatch + combine per MoE layer over tp x ep chips

T = tokens per attention group (S sequences x new tokens each); T_st = T x ep tokens in the stage.
E_touched = E (1 - (1 - k/E)^T_st): the expected number of distinct experts a pass touches when each of T_st
tokens picks k of E uniformly (small batches read few experts; large batches read them all).
c_pair (FLOPs per query-key pair): 4 h d_head for GQA/MHA (QK^T and PV, 2 FLOPs per multiply-add);
MLA decode runs the absorbed form, 2 h (2 kv_lora + rope) (DeepSeek-V2 paper, Sec. 2.1.2 / App. on absorption);
MLA prefill decompresses, 2 h (qk_nope + rope) + 2 h v.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..efficiency import Efficiency
from ..hardware import Hardware
from ..kv_cache import kv_values_per_token_per_layer
from ..mapping import Layout
from ..model import Model
from ..params import count_params
from . import collectives as coll
from .roofline import op_time

ACT_BYTES = 2.0  # activations in bf16


@dataclass(frozen=True)
class Precision:
    weight: DType
    expert: DType
    kv: DType


@dataclass
class Op:
    name: str
    count: float          # occurrences per pass (layers)
    flops: np.ndarray     # per occurrence, per chip
    bytes: np.ndarray     # per occurrence, per chip (HBM traffic)
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    peak_flops: float = 0.0   # achievable FLOP/s used
    bandwidth: float = 0.0    # achievable B/s used
    note: str = ""
    weight_bytes: np.ndarray | float = 0.0   # the part of `bytes` that is weights (per occurrence)
    kv_bytes: np.ndarray | float = 0.0       # the part of `bytes` that is KV cache

    @property
    def time_s(self):
        """Per occurrence."""
        return np.maximum(np.maximum(self.compute_s, self.memory_s), self.comm_s)

    @property
    def total_s(self):
        return self.count * self.time_s


@dataclass
class PassCost:
    ops: dict[str, Op] = field(default_factory=dict)

    @property
    def time_s(self):
        return sum(op.total_s for op in self.ops.values())

    def _share(self, kind: str):
        t = 0.0
        for op in self.ops.values():
            if kind == "communication":
                t = t + op.count * op.comm_s
            else:
                c, m = op.compute_s, op.memory_s
                pick = (c >= m) if kind == "compute" else (m > c)
                t = t + op.count * np.where(pick & (op.comm_s == 0), np.maximum(c, m), 0.0)
        return t

    @property
    def compute_bound_s(self):
        return self._share("compute")

    @property
    def memory_bound_s(self):
        return self._share("memory")

    @property
    def comm_s(self):
        return self._share("communication")

    @property
    def bottleneck(self):
        c, m, k = np.broadcast_arrays(self.compute_bound_s, self.memory_bound_s, self.comm_s)
        names = np.array(["compute", "memory", "communication"])
        return names[np.argmax(np.stack([c, m, k]), axis=0)]

    @property
    def weight_bytes(self):
        return sum(op.count * op.weight_bytes for op in self.ops.values())

    @property
    def kv_bytes(self):
        return sum(op.count * op.kv_bytes for op in self.ops.values())

    @property
    def flops(self):
        return sum(op.count * op.flops for op in self.ops.values())

    @property
    def bytes(self):
        return sum(op.count * op.bytes for op in self.ops.values())

    def roofline_floor_s(self, hw: Hardware, prec: "Precision"):
        """max(all FLOPs / fastest peak used, all bytes / bandwidth) at 100% of peak: no prediction may beat it."""
        peak = max(hw.peak_flops(k) for k in (prec.weight.compute, prec.expert.compute, "bf16"))
        return np.maximum(self.flops / peak, self.bytes / hw.memory_bw)


def pair_flops(m: Model, phase: str) -> float:
    """FLOPs per (query token, attended key) pair in one layer (all heads)."""
    h = m.n_heads
    if m.is_mla:
        if phase == "decode":
            return 2.0 * h * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        return 2.0 * h * (m.qk_nope_head_dim + m.qk_rope_head_dim) + 2.0 * h * m.v_head_dim
    return 4.0 * h * m.hd


def _attn_io_width(m: Model, tp):
    """Activation values read and written by the attention projections per token (per chip)."""
    h, d = m.n_heads, m.d_model
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        sharded = h * qk + h * (m.qk_nope_head_dim + m.v_head_dim) + h * m.v_head_dim
        return 2 * d + m.kv_lora_rank + m.qk_rope_head_dim + sharded / tp
    return 2 * d + (2 * h * m.hd + 2 * m.kv_heads * m.hd) / tp


def forward_pass(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, *, phase: str,
                 seqs, new_tokens, pairs_full, pairs_sliding, kv_read_full, kv_read_sliding) -> PassCost:
    """Cost per chip of one forward pass over all layers.

    seqs: sequences per attention group in the pass; new_tokens: tokens each sequence processes;
    pairs_*: attended (query, key) pairs per sequence in one full / sliding layer;
    kv_read_*: cached tokens per sequence read from HBM in one full / sliding layer.
    """
    P = count_params(m)
    tp = np.asarray(lay.tp, float)
    ep = np.asarray(lay.ep, float)
    S = np.asarray(seqs, float)
    T = S * np.asarray(new_tokens, float)
    d, ab = m.d_model, ACT_BYTES
    bw = hw.memory_bw * eff.memory_bw
    wkey, ekey = prec.weight.compute, prec.expert.compute
    pk_w = hw.peak_flops(wkey) * eff.flops
    pk_e = hw.peak_flops(ekey) * eff.flops
    pk_a = hw.peak_flops("bf16") * eff.flops
    zero = np.zeros(np.broadcast(T, tp, ep).shape)
    out = PassCost()

    def add(name, count, flops, nbytes, peak, comm=None, note="", weights=0.0, kv=0.0):
        """nbytes = weights + kv + activation bytes; weights and kv are also kept apart for the analyses."""
        if count == 0:
            return
        flops = np.asarray(flops, float) + zero
        nbytes = np.asarray(nbytes, float) + zero
        _, c, mem = op_time(flops, nbytes, peak, bw)
        out.ops[name] = Op(name, float(count), flops, nbytes, c, mem,
                           (np.asarray(comm, float) + zero) if comm is not None else zero, peak, bw, note,
                           np.asarray(weights, float) + zero, np.asarray(kv, float) + zero)

    wb = prec.weight.bytes
    add("embed", 1, 0.0, T * d * (wb + ab), pk_w, note="gather one embedding row per token", weights=T * d * wb)
    add("attn_proj", m.n_layers, 2 * P.attn_per_layer * T / tp,
        P.attn_per_layer * wb / tp + T * _attn_io_width(m, tp) * ab, pk_w, note="q, k, v, o projections",
        weights=P.attn_per_layer * wb / tp)

    kvl = kv_values_per_token_per_layer(m) * prec.kv.bytes
    shard = lay.kv_shard(m)
    qo = T * (m.n_heads * (m.v_head_dim if m.is_mla else m.hd)) * 2 * ab / tp
    cp = pair_flops(m, phase)
    kv_full = kvl * (np.asarray(kv_read_full) + new_tokens) * S / shard
    add("attention", m.n_full_layers, cp * np.asarray(pairs_full) * S / tp, kv_full + qo, pk_a,
        note="scores and values over the cached context (full layers)", kv=kv_full)
    if m.n_sliding_layers:
        kv_loc = kvl * (np.asarray(kv_read_sliding) + new_tokens) * S / shard
        add("attention_local", m.n_sliding_layers, cp * np.asarray(pairs_sliding) * S / tp, kv_loc + qo, pk_a,
            note=f"scores and values over at most {m.sliding_window} tokens (sliding-window layers)", kv=kv_loc)
    add("norms", m.n_layers, 0.0, 6 * T * d * ab, pk_a, note="2 norms and residual adds (elementwise)")

    if P.n_dense_layers and P.dense_ffn_per_layer:
        F = m.ffn_intermediate
        add("ffn", P.n_dense_layers, 2 * P.dense_ffn_per_layer * T / tp,
            P.dense_ffn_per_layer * wb / tp + T * (2 * d + 2 * F / tp) * ab, pk_w, note="dense FFN",
            weights=P.dense_ffn_per_layer * wb / tp)
    if P.n_moe_layers:
        E, k = m.n_experts, m.experts_per_token
        Tst = T * ep
        touched = E * (1.0 - (1.0 - k / E) ** Tst)
        eb = prec.expert.bytes
        Fe = m.moe_intermediate
        add("router", P.n_moe_layers, 2 * P.router_per_moe_layer * T, P.router_per_moe_layer * wb + T * d * ab, pk_w,
            note="expert gate (replicated)", weights=P.router_per_moe_layer * wb)
        add("experts", P.n_moe_layers, 2 * Tst * k * P.expert / (ep * tp),
            touched * P.expert * eb / (ep * tp) + Tst * k * (2 * d + 2 * Fe / tp) * ab / ep, pk_e,
            note=f"routed experts: a pass touches E(1-(1-k/E)^T) of {E} experts", weights=touched * P.expert * eb / (ep * tp))
        if P.shared_per_moe_layer:
            Fs = m.shared_width
            add("shared_experts", P.n_moe_layers, 2 * P.shared_per_moe_layer * T / tp,
                P.shared_per_moe_layer * wb / tp + T * (2 * d + 2 * Fs / tp) * ab, pk_w, note="shared expert(s)",
                weights=P.shared_per_moe_layer * wb / tp)
    logits_tokens = T if phase == "decode" else S
    W_lm = m.vocab_size * d
    add("lm_head", 1, 2 * W_lm * logits_tokens / tp, W_lm * wb / tp + logits_tokens * (d + m.vocab_size / tp) * ab, pk_w,
        note="logits (prefill: last position only)", weights=W_lm * wb / tp)

    if np.any(tp > 1):
        add("tp_allreduce", 2 * m.n_layers, 0.0, 0.0, pk_a,
            comm=coll.all_reduce(T * d * ab, tp, hw, eff.link_bw), note="2 all-reduces of activations per layer")
    if P.n_moe_layers and np.any(ep > 1):
        k = m.experts_per_token
        add("ep_alltoall", P.n_moe_layers, 0.0, 0.0, pk_a,
            comm=2 * coll.all_to_all(T * k * d * ab / tp, tp * ep, hw, eff.link_bw),
            note="dispatch + combine all-to-all per MoE layer")
    return out


# ---- how much context a step attends ------------------------------------------------------------------------
def decode_context(input_len, output_len, window: int = 0):
    """Mean tokens attended per decode step while the context grows from input_len+1 to input_len+output_len,
    for a full layer and for a sliding layer of `window` tokens (exact mean of min(c, window))."""
    a = np.asarray(input_len, float)
    n = np.maximum(np.asarray(output_len, float), 1.0)
    full = a + (n + 1) / 2
    if not window:
        return full, full
    w = float(window)
    kk = np.clip(w - a, 0, n)              # steps whose context is still inside the window
    total = kk * (a + 1 + a + kk) / 2 + (n - kk) * w
    return full, total / n


def prefill_pairs(input_len, window: int = 0):
    """Causal (query, key) pairs in a prompt of L tokens: L(L+1)/2, or with a window sum of min(p, w)."""
    L = np.asarray(input_len, float)
    full = L * (L + 1) / 2
    if not window:
        return full, full
    k = np.minimum(L, window)
    return full, k * (k + 1) / 2 + (L - k) * window
