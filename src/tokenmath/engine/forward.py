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
from functools import cached_property

import numpy as np

from tokenmath.specs.dtypes import DType
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.kv_cache import kv_values_per_token_per_layer
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params
from tokenmath.engine import collectives as coll
from tokenmath.engine.roofline import op_time

ACT_BYTES = 2.0  # activations in bf16
BOTTLENECKS = np.array(["compute", "memory", "communication"])


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
    def has_comm(self) -> bool:
        return not (np.ndim(self.comm_s) == 0 and float(self.comm_s) == 0.0)

    @property
    def time_s(self):
        """Per occurrence."""
        t = np.maximum(self.compute_s, self.memory_s)
        return np.maximum(t, self.comm_s) if self.has_comm else t

    @property
    def total_s(self):
        return self.count * self.time_s


def _sum(terms):
    """sum(terms): the same left-to-right additions, in place once the running total is an array of its own that
    already has the broadcast shape (a sweep's totals are large; this saves a temporary per term)."""
    acc = 0
    own = False
    for x in terms:
        if own:
            try:
                np.add(acc, x, out=acc)     # refused (before any arithmetic) when x would grow the shape
                continue
            except ValueError:
                pass
        acc = acc + x
        own = type(acc) is np.ndarray and acc.size >= 4096 and acc.dtype == np.float64
    return acc


@dataclass
class PassCost:
    """Ops of one pass; totals are computed once (the pass is complete when forward_pass returns it)."""
    ops: dict[str, Op] = field(default_factory=dict)

    @cached_property
    def time_s(self):
        return _sum(op.total_s for op in self.ops.values())

    @cached_property
    def _shares(self):
        def share(v, where):
            t = np.where(where, v, 0.0)
            return t * count if t.ndim == 0 else np.multiply(t, count, out=t)
        cs, ms, ks = [], [], []     # per op: count x (compute time if compute-bound, else 0), likewise memory, comm
        for op in self.ops.values():
            c, m, count = op.compute_s, op.memory_s, op.count
            if not (np.ndim(c) == 0 == np.ndim(m) and c == 0.0 == m):     # a pure collective adds exact zeros
                cs.append(share(c, c >= m))
                ms.append(share(m, m > c))
            if op.has_comm:
                ks.append(count * op.comm_s)
        return _sum(cs) if cs else 0.0, _sum(ms) if ms else 0.0, _sum(ks) if ks else 0.0

    @property
    def compute_bound_s(self):
        """Time in ops whose FLOPs outweigh their bytes."""
        return self._shares[0]

    @property
    def memory_bound_s(self):
        return self._shares[1]

    @property
    def comm_s(self):
        return self._shares[2]

    @cached_property
    def bottleneck_code(self):
        """0 compute, 1 memory, 2 communication (the largest share of the pass's time)."""
        c, m, k = self._shares
        code = np.empty(np.broadcast(c, m, k).shape, np.int8)
        np.greater(m, c, out=code, casting="unsafe")
        np.copyto(code, 2, where=k > np.maximum(c, m), casting="unsafe")
        return code

    @property
    def bottleneck(self):
        return BOTTLENECKS[self.bottleneck_code]

    @property
    def weight_bytes(self):
        return _sum(op.count * op.weight_bytes for op in self.ops.values())

    @property
    def kv_bytes(self):
        return _sum(op.count * op.kv_bytes for op in self.ops.values())

    @property
    def flops(self):
        return _sum(op.count * op.flops for op in self.ops.values())

    @property
    def bytes(self):
        return _sum(op.count * op.bytes for op in self.ops.values())

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
                 seqs, new_tokens, pairs_full, pairs_sliding, kv_read_full, kv_read_sliding,
                 ep_imbalance: float = 1.0, ep_overlap: bool = False, links=None) -> PassCost:
    """Cost per chip of one forward pass over all layers.

    seqs: sequences per attention group in the pass; new_tokens: tokens each sequence processes;
    pairs_*: attended (query, key) pairs per sequence in one full / sliding layer;
    kv_read_*: cached tokens per sequence read from HBM in one full / sliding layer.
    ep_imbalance: the busiest expert-parallel rank gets ep_imbalance x the mean routed tokens (1.0: perfectly
      balanced routing; the step waits for the busiest rank, so its expert FLOPs, expert weights touched and
      all-to-all payload set the pace). Applies only where ep > 1.
    ep_overlap: two-micro-batch overlap of the EP all-to-all with compute (DeepSeek-V3 / SGLang TBO): exposed
      all-to-all per MoE layer = max(0, all-to-all - compute of that layer). The second micro-batch's extra weight
      reads are not charged.
    links: an object with group_bw(kind, p) giving the per-chip scale-up bandwidth of a group of p chips
      (systems.System: mesh and torus topologies); None: every group gets hw.scaleup_bw.
    Context parallelism (lay.cp > 1): prefill splits each prompt over cp chips and passes KV blocks around a ring
      (an all-gather of the layer's KV over cp, overlapped with that layer's attention); decode splits the KV
      reads over cp chips and all-gathers the partial attention outputs per layer.
    """
    P = count_params(m)
    tp = np.asarray(lay.tp, float)
    ep = np.asarray(lay.ep, float)
    S = np.asarray(seqs, float)
    T = S * np.asarray(new_tokens, float)
    cpd = np.asarray(getattr(lay, "cp", 1), float)
    has_cp = bool(np.any(cpd > 1))
    if has_cp and phase == "prefill":
        T = T / cpd   # each context-parallel rank holds 1/cp of every prompt

    def group_bw(kind, p):
        return None if links is None else links.group_bw(kind, p)
    d, ab = m.d_model, ACT_BYTES
    bw = hw.memory_bw * eff.memory_bw
    wkey, ekey = prec.weight.compute, prec.expert.compute
    pk_w = hw.peak_flops(wkey) * eff.flops
    pk_e = hw.peak_flops(ekey) * eff.flops
    pk_a = hw.peak_flops("bf16") * eff.flops
    out = PassCost()

    def add(name, count, flops, nbytes, peak, comm=None, note="", weights=0.0, kv=0.0):
        """nbytes = weights + kv + activation bytes; weights and kv are also kept apart for the analyses."""
        if count == 0:
            return
        # arrays keep their own (broadcastable) shapes: a scalar stays a scalar, so sweeps allocate less
        flops = np.asarray(flops, float)
        nbytes = np.asarray(nbytes, float)
        _, c, mem = op_time(flops, nbytes, peak, bw)
        out.ops[name] = Op(name, float(count), flops, nbytes, c, mem,
                           np.asarray(comm, float) if comm is not None else np.float64(0.0), peak, bw, note,
                           np.asarray(weights, float), np.asarray(kv, float))

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
    att_full = cp * np.asarray(pairs_full) * S / tp
    if has_cp:
        att_full = att_full / cpd
    add("attention", m.n_full_layers, att_full, kv_full + qo, pk_a,
        note="scores and values over the cached context (full layers)", kv=kv_full)
    if m.n_sliding_layers:
        kv_loc = kvl * (np.asarray(kv_read_sliding) + new_tokens) * S / shard
        att_loc = cp * np.asarray(pairs_sliding) * S / tp
        if has_cp:
            att_loc = att_loc / cpd
        add("attention_local", m.n_sliding_layers, att_loc, kv_loc + qo, pk_a,
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
        if ep_imbalance != 1.0:
            # the busiest EP rank: imbalance x the mean tokens, and the distinct experts those tokens touch
            Tst = Tst * np.where(ep > 1, float(ep_imbalance), 1.0)
        touched = E * (1.0 - (1.0 - k / E) ** Tst)
        eb = prec.expert.bytes
        Fe = m.moe_intermediate
        add("router", P.n_moe_layers, 2 * P.router_per_moe_layer * T, P.router_per_moe_layer * wb + T * d * ab, pk_w,
            note="expert gate (replicated)", weights=P.router_per_moe_layer * wb)
        share = lay.expert_share(m)     # 1/ep, or ceil(E/ep)/E on the fullest rank when ep does not divide E
        add("experts", P.n_moe_layers, 2 * Tst * k * P.expert * share / tp,
            touched * P.expert * eb * share / tp + Tst * k * (2 * d + 2 * Fe / tp) * ab * share, pk_e,
            note=f"routed experts: a pass touches E(1-(1-k/E)^T) of {E} experts"
            + (f" (busiest EP rank: {float(ep_imbalance):g} x the mean tokens)" if ep_imbalance != 1.0 else ""),
            weights=touched * P.expert * eb * share / tp)
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
            comm=coll.all_reduce(T * d * ab, tp, hw, eff.link_bw, up_bw=group_bw("all_reduce", tp)),
            note="2 all-reduces of activations per layer")
    if P.n_moe_layers and np.any(ep > 1):
        payload = ep_dispatch_bytes(m, T, tp)
        note = "dispatch + combine all-to-all per MoE layer"
        if ep_imbalance != 1.0:
            payload = payload * np.where(ep > 1, float(ep_imbalance), 1.0)   # the busiest rank receives more
            note += f" (busiest rank {float(ep_imbalance):g} x the mean payload)"
        # rows of a sweep with ep = 1 have no all-to-all (tp alone never dispatches tokens)
        a2a = np.where(ep > 1, 2 * coll.all_to_all(payload, tp * ep, hw, eff.link_bw, up_bw=group_bw("all_to_all", tp * ep)), 0.0)
        if ep_overlap:
            a2a = np.maximum(0.0, a2a - _moe_layer_compute_s(out, m))
            note += "; two-micro-batch overlap: only the part longer than the layer's compute is exposed"
        add("ep_alltoall", P.n_moe_layers, 0.0, 0.0, pk_a, comm=a2a, note=note)
    if has_cp:
        _context_parallel(out, m, hw, lay, eff, phase, S, T, new_tokens, kvl, shard, cpd, group_bw, pk_a)
    return out


def ep_dispatch_bytes(m: Model, tokens, tp=1.0):
    """Bytes one expert-parallel rank sends per MoE layer in the dispatch all-to-all (and receives back in the
    combine): each of its `tokens` goes to top-k experts as d_model activations (ACT_BYTES each), and a rank of a
    tp group sends its 1/tp share of them. The busiest rank's imbalance multiplies this (not included here)."""
    return tokens * m.experts_per_token * m.d_model * ACT_BYTES / tp


def _moe_layer_compute_s(out: PassCost, m: Model):
    """Per-occurrence time of the non-communication work of one MoE layer (what a second micro-batch overlaps)."""
    t = 0.0
    for name in ("attn_proj", "norms", "router", "experts", "shared_experts"):
        if name in out.ops:
            t = t + out.ops[name].time_s
    att = 0.0
    for name in ("attention", "attention_local"):
        if name in out.ops:
            att = att + out.ops[name].total_s
    return t + att / m.n_layers


def _context_parallel(out: PassCost, m: Model, hw: Hardware, lay: Layout, eff: Efficiency, phase, S, T, new_tokens,
                      kvl, shard, cpd, group_bw, pk_a):
    """CP communication per layer. The cp ranks of a sequence sit tp x ep chips apart, so the ring crosses a domain
    boundary when tp x ep x cp > domain; a ring runs at its slowest hop (then the scale-out link)."""
    tp, ep = np.asarray(lay.tp, float), np.asarray(lay.ep, float)
    crosses = tp * ep * cpd > hw.scaleup_domain
    up = group_bw("all_gather", cpd)
    up = hw.scaleup_bw if up is None else up
    if np.any(crosses):
        up = np.where(crosses, coll.scaleout_bandwidth(hw, 1.0), up)
    extra = np.where(crosses, hw.scaleout_latency, 0.0)
    if phase == "prefill":
        # ring attention: every rank receives the other ranks' KV blocks of this layer (cp-1 of cp), overlapped
        # with the attention on the blocks it already has; only the part longer than the attention is exposed
        kv_layer = kvl * np.asarray(new_tokens, float) * S / (shard / cpd)     # one layer's KV of the whole prompts
        ring = coll.all_gather(kv_layer, cpd, hw, eff.link_bw, up_bw=up) + extra
        att = 0.0
        for name in ("attention", "attention_local"):
            if name in out.ops:
                att = att + out.ops[name].total_s
        exposed = np.where(cpd > 1, np.maximum(0.0, ring - att / m.n_layers), 0.0)
        Tz = np.zeros(np.shape(exposed))
        out.ops["cp_ring"] = Op("cp_ring", float(m.n_layers), Tz, Tz, Tz, Tz, exposed, pk_a, 0.0,
                                "ring attention: all-gather of the layer's KV over cp, overlapped with attention")
    else:
        vhd = m.v_head_dim if m.is_mla else m.hd
        partial = T * m.n_heads * (vhd + 1) * 4.0 / tp                  # fp32 partial outputs + log-sum-exp
        comb = np.where(cpd > 1, coll.all_gather(partial * cpd, cpd, hw, eff.link_bw, up_bw=up) + extra, 0.0)
        Tz = np.zeros(np.shape(comb))
        out.ops["cp_combine"] = Op("cp_combine", float(m.n_layers), Tz, Tz, Tz, Tz, comb, pk_a, 0.0,
                                   "all-gather of partial attention outputs over cp (KV stays split)")


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
