"""The cost of one forward pass (a decode step or a prefill) per chip, operation by operation.

Every quantity is per chip and broadcasts over numpy arrays (batch, context, tp, ep, ...). The operations:

  op            FLOPs (per layer, per chip)                 bytes (per layer, per chip)
  attn_proj     2 x W_attn x T / tp                         W_attn x w / tp + activations
  attention     c_pair x pairs x S / tp                     KV x (read + written tokens) x S / kv_shard + q/o
  indexer       sparse attention's scoring (engine/sparse_attention.py); attention then reads only the top-k
  recurrent     GDN / Mamba-2 layers: projections + a fixed state per sequence (engine/recurrent.py)
  ffn           2 x W_ffn x T / tp                          W_ffn x w / tp + activations
  router        2 x d x E x T                               d x E x w
  experts       2 x T_st x k x W_e / (ep tp)                E_touched x W_e x w_e / (ep tp) + activations
  shared        2 x W_sh x T / tp                           W_sh x w / tp + activations
  lm_head       2 x V x d x T_logits / tp                   V x d x w / tp
  tp_allreduce  2 per layer, ring all-reduce of T x d activations over tp chips
  attn_alltoall / dp_attn_gather: batch- or data-parallel attention inside the TP group (Layout.attn,
                engine/attention_sharding.py): the core runs S_a = ceil(S / tp) whole sequences per rank (KV not
                split, not copied); dp also runs the projections on S_a sequences with replicated weights
  ep_alltoall   dispatch + combine per MoE layer over tp x ep chips
  act_quant, moe_quant, moe_down_quant, moe_permute, moe_unpermute, topk: memory-bound ops of quantized and MoE
                layers (bytes only, engine/activation_ops.py: which quantizes engines fuse away, which stand alone)

T = tokens per attention group (S sequences x new tokens each); T_st = the tokens of the sequences the stage's ep
groups actually hold (stage_seqs x new tokens: B at one replica, not ceil(B/ep) x ep; engine/expert_parallel.py).
E_touched = E (1 - (1 - k/E)^T_st): the expected number of distinct experts a pass touches when each of T_st
tokens picks k of E uniformly (small batches read few experts; large batches read them all).
Collectives are priced where their groups sit on chips (mapping/placement.py: tp, ep, cp, pp, dp from a domain
boundary), for the slowest member of a group that straddles a scale-up domain.
The ops and their sums (time, FLOPs, bytes, bottleneck shares) are engine/pass_cost.py's Op and PassCost.
c_pair (FLOPs per query-key pair): 4 h d_head for GQA/MHA (QK^T and PV, 2 FLOPs per multiply-add);
MLA decode runs the absorbed form, 2 h (2 kv_lora + rope) (DeepSeek-V2 paper, Sec. 2.1.2 / App. on absorption);
MLA prefill decompresses, 2 h (qk_nope + rope) + 2 h v.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.specs.dtypes import DType
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.kv_cache import kv_full_values, kv_main_values
from tokenmath.mapping.layout import Layout
from tokenmath.specs.model import Model, full_layer_shapes
from tokenmath.specs.params import count_params
from tokenmath.engine import activation_ops as aq, collectives as coll
from tokenmath.engine.attention_sharding import sharding_comm
from tokenmath.engine import expert_parallel as xp
from tokenmath.engine.attended import decode_context, prefill_pairs  # noqa: F401  (callers import them from here)
from tokenmath.engine.context_parallel import cp_comm
from tokenmath.engine import recurrent, sparse_attention as dsa
from tokenmath.engine.kernels import op_kernels, op_rates, op_shapes
from tokenmath.engine.pass_cost import BOTTLENECKS, Op, PassCost, sum_terms  # noqa: F401  (callers import them here)
from tokenmath.engine.roofline import kernel_op_time, op_time
from tokenmath.specs.kernels import resolve as resolve_kernels
from tokenmath.mapping.placement import place

ep_dispatch_bytes = xp.ep_dispatch_bytes     # one home (expert_parallel.py); kept here for callers of the engine

ACT_BYTES = 2.0  # activations in bf16


@dataclass(frozen=True)
class Precision:
    """The formats of a pass: dense weights, routed experts, KV cache."""
    weight: DType
    expert: DType
    kv: DType


def _top(rate) -> float:
    """The largest of a rate that may be an array (a kernel model's shape-dependent rates) as a float."""
    return rate if type(rate) is float else float(np.max(rate))


_PLACED: dict = {}


def placed(lay: Layout, domain: int):
    """mapping.placement.place(lay, domain), kept per distinct layout (the degrees' shapes and values): a sweep asks
    again for every block and every pass with the same few layouts, and a placement depends on nothing else."""
    degrees = [np.asarray(x, float) for x in (lay.tp, lay.pp, lay.ep, lay.dp, getattr(lay, "cp", 1))]
    if sum(x.size for x in degrees) > 4096:      # a large grid of layouts: not worth a key of its bytes
        return place(lay, domain)
    key = (int(domain),) + tuple((x.shape, x.tobytes()) for x in degrees)
    pl = _PLACED.get(key)
    if pl is None:
        if len(_PLACED) >= 256:
            _PLACED.clear()
        pl = _PLACED[key] = place(lay, domain)
    return pl


def pair_flops(m: Model, phase: str, local: bool = False) -> float:
    """FLOPs per (query token, attended key) pair in one full layer (all heads); local: in one sliding / chunked
    layer (the same unless the full layers have their own head size: Gemma 4)."""
    h = m.n_heads
    if m.is_mla:
        if phase == "decode":
            return 2.0 * h * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        return 2.0 * h * (m.qk_nope_head_dim + m.qk_rope_head_dim) + 2.0 * h * m.v_head_dim
    return 4.0 * h * (m.hd if local else m.hd_full)


def _attn_io_width(m: Model, tp):
    """Activation values read and written by the attention projections per token (per chip)."""
    h, d = m.n_heads, m.d_model
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        sharded = h * qk + h * (m.qk_nope_head_dim + m.v_head_dim) + h * m.v_head_dim
        return 2 * d + m.kv_lora_rank + m.qk_rope_head_dim + sharded / tp
    return 2 * d + (2 * h * m.hd + 2 * m.kv_heads * m.hd) / tp


# forward_pass's deployment-wide keywords (how a MoE's expert-parallel traffic runs) and their defaults: balanced
# routing, no overlap, one bf16 copy per routed expert, each expert split over its TP group. One place: the serving
# setup's Transport (analyses/setup.py) carries exactly these, and static_batch.pass_options drops the defaults
TRANSPORT_DEFAULTS = {"ep_imbalance": 1.0, "ep_overlap": False, "ep_comm": "bf16", "experts_whole": False}


def forward_pass(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, *, phase: str,
                 seqs, new_tokens, pairs_full, pairs_sliding, kv_read_full, kv_read_sliding,
                 ep_imbalance=1.0, ep_overlap: bool = False, links=None, stage_seqs=None,
                 ep_comm: str = "bf16", experts_whole: bool = False) -> PassCost:
    """Cost per chip of one forward pass over all layers.

    seqs: sequences per attention group in the pass; new_tokens: tokens each sequence processes;
    stage_seqs: sequences the stage's ep groups hold together in the pass (whose tokens reach its MoE layers);
      None: every group holds `seqs` (ep x seqs). Fewer where the batch leaves groups idle (static_batch.py).
    pairs_*: attended (query, key) pairs per sequence in one full / sliding layer;
    kv_read_*: cached tokens per sequence read from HBM in one full / sliding layer.
    ep_imbalance: the busiest expert-parallel rank gets ep_imbalance x the mean routed tokens (1.0: perfectly
      balanced routing; the step waits for the busiest rank, so its expert FLOPs, expert weights touched and
      all-to-all payload set the pace). Applies only where ep > 1. "routing": the measured routing skew,
      expert_parallel.routing_imbalance (DeepSeek-R1's expert-load spread, no EPLB); "eplb": the same with EPLB.
    ep_overlap: two-micro-batch overlap of the EP all-to-all with compute (DeepSeek-V3 / SGLang TBO): exposed
      all-to-all per MoE layer = max(0, all-to-all - compute of that layer); each micro-batch reads the weights
      again, so every weight read is charged twice.
    ep_comm: how the EP all-to-all moves tokens (engine/expert_parallel.EP_COMM: bf16, fp8, deepep).
    experts_whole: the routed experts sit whole on the tp ranks of a TP group (expert parallelism inside the
      attention's tensor parallelism: SGLang's --ep-size or TensorRT-LLM's --ep_size equal to the TP size, no
      attention DP), instead of each expert split tp ways. The tokens are on every rank already (the attention's
      all-reduce put them there) and the experts' outputs are summed by the same all-reduce, so nothing is sent
      beyond TP's collectives; what changes is that each rank reads and multiplies whole experts, ceil(E / (tp ep))
      of them, and the step waits for the rank whose experts the batch touched most
      (expert_parallel.busiest_rank_experts over tp x ep ranks), where the split experts share every touched
      expert evenly. The weight bytes per chip are the same either way (up to that ceil).
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
    Tst = (S * ep if stage_seqs is None else np.asarray(stage_seqs, float)) * np.asarray(new_tokens, float)
    if has_cp and phase == "prefill":
        T = T / cpd   # each context-parallel rank holds 1/cp of every prompt
        Tst = Tst / cpd
    pl = placed(lay, hw.scaleup_domain)     # where each group sits: its collectives are priced for the slowest member

    def group_bw(kind, p):
        return None if links is None else links.group_bw(kind, p)
    d, ab = m.d_model, ACT_BYTES
    bw = hw.memory_bw * eff.memory_bw
    wkey, ekey = prec.weight.compute, prec.expert.compute
    pk_w = hw.peak_flops(wkey) * eff.flops
    pk_e = hw.peak_flops(ekey) * eff.flops
    pk_a = hw.peak_flops("bf16") * eff.flops
    out = PassCost(overhead_s=m.n_layers * eff.layer_overhead_s)
    km = resolve_kernels(eff.kernels, hw)     # None: the flat fractions above, exactly as before
    # two-micro-batch overlap runs the whole pass once per micro-batch: every weight matrix is read twice per pass
    # (what makes it a prefill-side trick: at decode the step is mostly weight reads)
    reread = ep_overlap and P.n_moe_layers and np.any(ep > 1)

    def add(name, count, flops, nbytes, peak, comm=None, note="", weights=0.0, kv=0.0, kind="stream", **shape):
        """nbytes = weights + kv + activation bytes; weights and kv are also kept apart for the analyses.
        kind and shape: how the kernel model times the op (engine/kernels.op_rates); unused without one."""
        if count == 0:
            return
        # arrays keep their own (broadcastable) shapes: a scalar stays a scalar, so sweeps allocate less
        flops = np.asarray(flops, float)
        nbytes = np.asarray(nbytes, float)
        if reread and name != "embed" and np.any(np.asarray(weights) > 0):
            w2 = np.where(ep > 1, np.asarray(weights, float), 0.0)
            nbytes, weights = nbytes + w2, np.asarray(weights, float) + w2
            note = (note + "; " if note else "") + "weights read once per micro-batch (two-micro-batch overlap)"
        kname = "attn_proj_mla" if name == "attn_proj" and m.is_mla else ("attention" if kind == "attention" else name)
        t0, pk, bwo = 0.0, peak, bw
        if km is None:
            t, c, mem = op_time(flops, nbytes, peak, bw)
        else:
            if reread and "M" in shape:     # two micro-batches: each kernel runs on half the rows ...
                shape["M"] = np.where(ep > 1, np.asarray(shape["M"], float) / 2, shape["M"])
            pk, bwo, t0 = op_rates(km, hw, kname, phase, kind, **shape)
            if reread and name != "embed":  # ... and is launched twice (its fixed time twice)
                t0 = np.where(ep > 1, 2.0 * t0, t0)
            t, c, mem = kernel_op_time(flops, nbytes, pk, bwo, t0)
        op = out.ops[name] = Op(name, float(count), flops, nbytes, c, mem,
                                np.asarray(comm, float) if comm is not None else np.float64(0.0), _top(pk),
                                _top(bwo), note, np.asarray(weights, float), np.asarray(kv, float),
                                sum(op_kernels(kname)), t0)
        if comm is None:
            op.time_s = t     # the max(compute, memory) the roofline just took: Op.time_s without a second pass

    wb = prec.weight.bytes
    add("embed", 1, 0.0, T * d * (wb + ab), pk_w, note="gather one embedding row per token", weights=T * d * wb)
    # attention sharding (Layout.attn): heads: Sa = S, hs = ws = tp (the lines below as they always were);
    # batch / dp: the core runs Sa = ceil(S / tp) whole sequences per rank (hs = 1); dp also replicates the
    # projections (ws = 1) and runs them on its own Sa sequences only
    Sa, hs, ws, Tp = S, tp, tp, T
    if lay.attn_by_batch:
        Sa, hs, ws = lay.attn_seqs(S), lay.attn_head_split(), lay.attn_weight_split()
        Tp = np.where(np.asarray(lay.attn) == 2, Sa * np.asarray(new_tokens, float), T)
    Ta = T if Sa is S else Sa * np.asarray(new_tokens, float)
    add("attn_proj", m.n_attention_layers, 2 * P.attn_per_layer * Tp / ws,
        P.attn_per_layer * wb / ws + Tp * _attn_io_width(m, ws) * ab, pk_w,
        note="q, k, v, o projections" + ("" if not np.any(np.asarray(lay.attn) == 2) else
                                         " (dp attention: replicated, on the rank's own sequences)"),
        weights=P.attn_per_layer * wb / ws, kind="gemm", key=wkey, M=Tp, shapes=op_shapes(m, "attn_proj", ws))
    qw = aq.activation_bytes(prec.weight, hw)     # 0: the matmuls run at 16 bits, nothing to quantize
    if qw:
        add("act_quant", m.n_attention_layers, 0.0, aq.attn_quant_bytes(m, Tp, ws, qw), pk_a, kind="stream",
            note="quantize the attention output for the o projection (engine/activation_ops.py)")

    # full and local layers may differ in head size and KV heads (Gemma 4): each kind its own KV, q/o and pairs
    kvl, kvl_loc = kv_full_values(m) * prec.kv.bytes, kv_main_values(m) * prec.kv.bytes
    shard_loc = lay.kv_shard(m)
    shard = lay.kv_shard(full_layer_shapes(m)) if m.has_full_shapes else shard_loc
    qo = Ta * (m.n_heads * (m.v_head_dim if m.is_mla else m.hd_full)) * 2 * ab / hs
    qo_loc = Ta * (m.n_heads * m.hd) * 2 * ab / hs if m.has_full_shapes else qo
    cp = pair_flops(m, phase)
    read_full, pairs_main = kv_read_full, pairs_full
    if m.is_sparse_attention:      # the indexer scores every cached token; attention reads the top-k it selects
        read_full, pairs_main = dsa.selected(m, phase, kv_read_full, new_tokens, pairs_full)
        ix = dsa.indexer_op(m, Sa, Ta, kv_read_full, new_tokens, pairs_full, shard, hs, ab)
        add("indexer", m.n_full_layers, ix["flops"] / (cpd if has_cp else 1.0), ix["nbytes"], pk_a,
            note=ix["note"], kv=ix["kv"], kind="stream")
    kv_full = kvl * (np.asarray(read_full) + new_tokens) * Sa / shard
    att_full = cp * np.asarray(pairs_main) * Sa / hs
    if has_cp:
        att_full = att_full / cpd
    fa = {"seq_len": np.asarray(new_tokens, float) / (cpd if has_cp else 1.0),
          "head_dim": m.qk_nope_head_dim + m.qk_rope_head_dim if m.is_mla else m.hd_full}
    add("attention", m.n_full_layers, att_full, kv_full + qo, pk_a,
        note="scores and values over the cached context (full layers)"
        + (f"; only the {m.index_topk} tokens the indexer selects" if m.is_sparse_attention else ""),
        kv=kv_full, kind="attention", **fa)
    if m.n_sliding_layers:
        kv_loc = kvl_loc * (np.asarray(kv_read_sliding) + new_tokens) * Sa / shard_loc
        att_loc = pair_flops(m, phase, local=True) * np.asarray(pairs_sliding) * Sa / hs
        if has_cp:
            att_loc = att_loc / cpd
        what = "chunked-attention layers: within the current chunk of" if m.local_kind == "chunked" else \
            "sliding-window layers: over at most"
        add("attention_local", m.n_sliding_layers, att_loc, kv_loc + qo_loc, pk_a,
            note=f"scores and values ({what} {m.sliding_window} tokens)", kv=kv_loc, kind="attention",
            **{**fa, "head_dim": fa["head_dim"] if m.is_mla else m.hd})
    if m.n_linear_layers:
        rc = recurrent.recurrent_op(m, phase, S, T, tp, wb, ab)
        add("recurrent", m.n_linear_layers, rc["flops"], rc["nbytes"], pk_w, note=rc["note"], weights=rc["weights"],
            kv=rc["kv"], kind="stream")
    add("norms", m.n_layers, 0.0, 6 * T * d * ab, pk_a, note="2 norms and residual adds (elementwise)")

    if P.n_dense_layers and P.dense_ffn_per_layer:
        F = m.ffn_intermediate
        add("ffn", P.n_dense_layers, 2 * P.dense_ffn_per_layer * T / tp,
            P.dense_ffn_per_layer * wb / tp + T * (2 * d + 2 * F / tp) * ab, pk_w, note="dense FFN",
            weights=P.dense_ffn_per_layer * wb / tp, kind="gemm", key=wkey, M=T, shapes=op_shapes(m, "ffn", tp))
    # the ranks the routed experts sit on whole (the ep groups; every rank with experts_whole) and the ways each
    # expert is split (tp; none with experts_whole)
    ranks, etp = (ep * tp, np.ones_like(tp)) if experts_whole else (ep, tp)
    imb = xp.imbalance_factor(m, ranks, ep_imbalance)
    skewed = bool(np.any(imb != 1.0))
    imb_txt = (f"{float(np.max(imb)):.3g}" if np.ndim(imb) == 0 or np.ptp(imb) == 0
               else f"{float(np.min(imb)):.3g}-{float(np.max(imb)):.3g}")
    if P.n_moe_layers:
        E, k = m.n_experts, m.experts_per_token
        # the busiest EP rank: imbalance x the mean tokens, and the distinct experts it reads: the more of the
        # largest of ep ranks' binomial counts at the mean tokens (a small batch's spread) and the skewed tokens' share
        # ceil(E / ranks) / E on the fullest rank (1/ep when ep divides E: Layout.expert_share)
        share = np.ceil(E / ranks) / E if experts_whole else lay.expert_share(m)
        rank_touched = xp.busiest_rank_experts(m, Tst, ranks, share)
        Tst = Tst * imb
        touched = xp.experts_touched(m, Tst)
        rank_touched = np.maximum(rank_touched, touched * share)
        eb = prec.expert.bytes
        Fe = m.moe_intermediate
        add("router", P.n_moe_layers, 2 * P.router_per_moe_layer * T, P.router_per_moe_layer * wb + T * d * ab, pk_w,
            note="expert gate (replicated)", weights=P.router_per_moe_layer * wb, kind="gemm", key=wkey, M=T,
            shapes=op_shapes(m, "router", 1))
        # router -> top-k -> quantize -> permute -> grouped GEMMs (-> quantize the down input) -> unpermute
        rows = Tst * k * share      # (token, expert) rows this rank's experts receive
        add("topk", P.n_moe_layers, 0.0, aq.topk_bytes(m, T, ab), pk_a, note="router top-k over the logits",
            kind="stream")
        qe = aq.activation_bytes(prec.expert, hw)     # 0: the experts multiply at 16 bits
        if qe:
            add("moe_quant", P.n_moe_layers, 0.0, aq.moe_quant_bytes(m, T, qe), pk_a, kind="stream",
                note="quantize the experts' input")
        add("moe_permute", P.n_moe_layers, 0.0, aq.permute_bytes(m, rows, qe or ab), pk_a, kind="stream",
            note="gather each expert's tokens (T k rows of d)")
        add("experts", P.n_moe_layers, 2 * Tst * k * P.expert * share / etp,
            rank_touched * P.expert * eb / etp + Tst * k * (2 * d + 2 * Fe / etp) * ab * share, pk_e,
            note=f"routed experts: a pass touches E(1-(1-k/E)^T) of {E} experts; the busiest EP rank reads the "
            "largest of the ranks' counts" + (f" (busiest EP rank: {imb_txt} x the mean tokens, routing skew)"
                                              if skewed else ""),
            weights=rank_touched * P.expert * eb / etp, kind="grouped", key=ekey, M=Tst * k / touched,
            groups=rank_touched, shapes=op_shapes(m, "experts", etp))
        if qe and not aq.down_quant_fused(prec.expert, hw):
            add("moe_down_quant", P.n_moe_layers, 0.0, aq.moe_down_quant_bytes(m, rows, etp, qe), pk_a,
                kind="stream", note="quantize the experts' down-projection input")
        add("moe_unpermute", P.n_moe_layers, 0.0, aq.unpermute_bytes(m, rows, ab), pk_a, kind="stream",
            note="scatter back: weighted sum of each token's k expert outputs")
        if P.shared_per_moe_layer:
            Fs = m.shared_width
            add("shared_experts", P.n_moe_layers, 2 * P.shared_per_moe_layer * T / tp,
                P.shared_per_moe_layer * wb / tp + T * (2 * d + 2 * Fs / tp) * ab, pk_w, note="shared expert(s)",
                weights=P.shared_per_moe_layer * wb / tp, kind="gemm", key=wkey, M=T,
                shapes=op_shapes(m, "shared_experts", tp))
    logits_tokens = T if phase == "decode" else S
    W_lm = m.vocab_size * d
    add("lm_head", 1, 2 * W_lm * logits_tokens / tp, W_lm * wb / tp + logits_tokens * (d + m.vocab_size / tp) * ab, pk_w,
        note="logits (prefill: last position only)", weights=W_lm * wb / tp, kind="gemm", key=wkey,
        M=logits_tokens, shapes=op_shapes(m, "lm_head", tp))

    if np.any(tp > 1):
        ar = coll.all_reduce(T * d * ab, tp, hw, eff.link_bw, up_bw=group_bw("all_reduce", tp), span=pl.tp)
        extra, kept = {}, 1.0
        if lay.attn_by_batch:
            extra = sharding_comm(m, hw, lay, T, ab, eff.link_bw, a2a_bw=group_bw("all_to_all", tp),
                                  ag_bw=group_bw("all_gather", tp), span=pl.tp)
            kept = extra.pop("tp_allreduce_kept")
            ar = ar * kept
        add("tp_allreduce", 2 * m.n_layers if np.any(kept) else 0, 0.0, 0.0, pk_a, comm=ar,
            note="2 all-reduces of activations per layer", kind="comm")
        for name, (count, comm, note) in extra.items():
            add(name, count, 0.0, 0.0, pk_a, comm=comm, note=note, kind="comm")
    if P.n_moe_layers and np.any(ep > 1):
        note = "dispatch + combine all-to-all per MoE layer"
        if skewed:
            note += f" (busiest rank {imb_txt} x the mean payload)"
        how = xp.transport(ep_comm, phase)     # DeepEP decodes with its low-latency kernels
        disp, comb = xp.alltoall_parts(m, hw, T, tp, ep, eff.link_bw, imbalance=imb,
                                       up_bw=group_bw("all_to_all", tp * ep), span=pl.stage, comm=how)
        a2a = disp + comb
        note += xp.COMM_NOTE["deepep-decode" if how != ep_comm else ep_comm]
        if ep_overlap:
            cu = km.compute_units if km is not None else 0
            slow = cu / (cu - xp.NORMAL_COMM_SMS) if how == "deepep" and cu > xp.NORMAL_COMM_SMS else 1.0
            a, e = xp.overlap_compute(out.ops, m.n_layers)
            a_s, e_s = xp.overlap_compute(out.ops, m.n_layers, slow) if slow != 1.0 else (a, e)
            a2a = np.where(ep > 1, (a_s + e_s - a - e) + xp.overlap_exposed(a_s, e_s, disp, comb), 0.0)
            note += ("; two-micro-batch overlap: exposed = the better schedule's layer time - the layer's compute"
                     + (f" (the transfers hold {xp.NORMAL_COMM_SMS} of {cu} SMs)" if slow != 1.0 else ""))
        add("ep_alltoall", P.n_moe_layers, 0.0, 0.0, pk_a, comm=a2a, note=note, kind="comm")
    if has_cp:
        att = sum_terms(out.ops[k].total_s for k in ("attention", "attention_local") if k in out.ops)
        name, comm, note = cp_comm(m, hw, lay, eff.link_bw, phase, S, T, new_tokens, kvl, shard, cpd,
                                   group_bw("all_gather", cpd), pl.cp, att)
        Tz = np.zeros(np.shape(comm))
        out.ops[name] = Op(name, float(m.n_layers), Tz, Tz, Tz, Tz, comm, pk_a, 0.0, note, kernels=sum(op_kernels(name)))
    return out
