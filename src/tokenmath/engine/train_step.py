"""The cost of one training step per chip: compute, communication, pipeline bubble, optimizer, and memory.

Layout (chips = tp x cp x ep x dp x pp, ranks ordered tp innermost, then ep, cp, dp, pp outermost, as in
Megatron-Core's default "tp-cp-ep-dp-pp" order):
- tp: Megatron tensor parallelism with sequence parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022):
  every matrix split tp ways; activations outside the matmuls sharded along the sequence.
- cp: context parallelism: each sequence split into cp blocks of L/cp tokens; attention needs every key and
  value, so the KV of the whole sequence is gathered per layer (ring attention, Liu et al. 2023).
- ep: expert parallelism for MoE (the serving engine's "DP attention + EP" layout, tokenmath.mapping.layout): attention
  is data-parallel over the ep groups, routed experts are split over them, dispatch + combine all-to-all per
  MoE layer. A dense model has ep = 1.
- dp: data-parallel replicas. Non-expert gradients are reduced over dp x ep x cp chips, expert gradients over
  dp x cp chips.
- pp: pipeline stages of n_layers/pp layers each (or balanced as Llama 3: embedding and head take a layer slot,
  engine/train_memory.py), scheduled 1F1B, interleaved 1F1B with v virtual stages (Narayanan et al. 2021, arXiv
  2104.04473) or zero-bubble ZB-H1 (Qi et al. 2023, arXiv 2401.10241).

One step processes global_batch_tokens G = m x micro_batch b x seq_len L x dp x ep tokens: each of the dp x ep
attention groups runs m micro-batches of b sequences.

Time per micro-batch on the slowest stage (the last: its layers plus the lm_head over every token):
  forward F      engine.forward.forward_pass(phase="prefill") of b sequences of L/cp tokens, its layer ops / pp,
                 plus a training lm_head (logits for every token, not only the last as in serving prefill).
                 Each op is timed by its own roofline max(FLOPs / peak, bytes / bandwidth), summed; with a kernel
                 model (the default efficiency) at the shape-aware fractions of engine/kernels.py, head included.
  fp8 casts      with dtype fp8, the cast-transposes of GEMM inputs (in F, again in a full R) and output gradients
                 (in B): engine/train_overheads.py; unfused attention scores likewise when flash=False.
  elementwise    norms, residual adds, RoPE, SwiGLU/GeLU (dropout masks) as their own kernels, sharded by sequence /
                 tensor parallelism, forward and backward bytes apart; the fp32 cross-entropy with the lm_head
                 (engine/train_elementwise.py; replaces the serving table's unsharded "norms" op).
  backward B     2 x F per GEMM op (the gradient w.r.t. the input and w.r.t. the weights each cost one forward
                 matmul: Kaplan et al. 2020 Sec. 2.1; Chinchilla App. F "backward = 2 x forward"), the dense GEMMs'
                 dgrad and wgrad then re-timed at their own shapes by the kernel model (wgrad reduces over the
                 tokens: engine/train_backward_gemms.py); FlashAttention
                 2.5 x its forward (FlashAttention-2 Sec. 3.1.2); the elementwise kernels their own backward bytes.
  recompute R    full: one more forward of the layers (Chen et al. 2016; Korthikanti et al. 2022 Sec. 5);
                 selective: the attention core only (QK^T, softmax, x V; Korthikanti et al. 2022 Sec. 4.3).
  tp comm        2 all-reduces of the b L/cp x d activations per layer forward, 2 more backward (Megatron,
                 Shoeybi et al. 2019 Fig. 4), 2 more when the full recompute replays the forward. Sequence
                 parallelism turns each all-reduce into a reduce-scatter + all-gather: the same 2(p-1)/p bytes
                 on the wire (Korthikanti et al. 2022 Sec. 4.2.2), so the cost is the same.
                 tp_overlap (Transformer Engine userbuffers, Megatron --tp-comm-overlap): exposed
                 max(comm / tp, comm - the stage's GEMM time), the collectives chunked against the GEMMs.
  ep comm        dispatch + combine all-to-all per MoE layer forward, the same again backward (+ forward on
                 full recompute).
                 ep_comm picks the transport (bf16 | fp8 | deepep, engine/expert_parallel.py; DeepSeek-V3 trained
                 with FP8 dispatch, BF16 combine and node-limited routing, report Sec. 3.2.2 / 3.3.2).
                 ep_overlap (DualPipe, DeepSeek-V3 report Sec. 3.2.1): the all-to-all and p2p of one micro-batch
                 behind the paired micro-batch's F + B + R, the compute on all but the 20 SMs the communication
                 kernels take (Sec. 3.2.2): term = (cu/(cu - 20) - 1)(F + B + R) + max(ep + p2p - cu/(cu - 20)
                 (F + B + R), 0). DualPipe's own bubble ((PP/2 - 1)(F&B + B - 3W), Table 2) is not modelled: the
                 schedule stays as given.
  cp comm        all-gather of the sequence's K and V per layer forward; backward passes K, V again and
                 reduce-scatters dK, dV (2x); recomputing attention gathers once more. With overlap on, ring
                 attention hides it behind the attention core: exposed = max(0, comm - attention time)
                 + OVERLAP_CONTENTION x the hidden part (as for data parallel below).
  pp p2p         the b L/cp x d activations / tp (Megatron's scatter/gather optimisation, Narayanan et al.
                 2021 Sec. 4.1) sent forward and their gradient backward: 2 (x v interleaved) per micro-batch.
                 pp_overlap (Megatron overlap_p2p_comm, interleaved only; NeMo 2 turns it on whenever pp > 1 and
                 vp > 1, nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py): the send / receive of the next
                 chunk is posted before the current chunk runs, so each of the v forward hand-offs hides behind a
                 chunk's forward (F / v) and each backward one behind a chunk's backward ((B + R) / v); exposed
                 v (max(p2p - F/v, 0) + max(p2p - (B + R)/v, 0)).
Step:
  pipeline = m x t_mb + bubble, the bubble by schedule:
             1f1b         (pp - 1) x t_mb: bubble / ideal = (p - 1)/m (Narayanan et al. 2021 Sec. 2.2.1)
             interleaved  (pp - 1)/v x t_mb: v model chunks per rank cut the bubble v-fold (ibid. Sec. 2.2.2; Llama 3
                          Sec. 3.3.2 "(PP-1)/(V*M)"); the p2p traffic grows v-fold
             zb-h1        (pp - 1) x (t_mb - B): the weight-gradient half of the backward (W = B/2) fills the bubble,
                          (p-1)(T_F + T_B - T_W) instead of (p-1)(T_F + T_B + T_W) (Qi et al. 2023 Sec. 3.1)
  dp comm    ZeRO-0/1: one all-reduce of the gradients per step (ZeRO-1 as reduce-scatter + all-gather of the
             updated weights moves the same bytes; Rajbhandari et al. 2020, ZeRO Sec. 7).
             ZeRO-2: reduce-scatter of the gradients every micro-batch (the gradient is not kept whole) and one
             all-gather of the updated bf16 weights per step.
             ZeRO-3: per micro-batch an all-gather of the weights in forward, another in backward, and a
             reduce-scatter of the gradients (1.5x the all-reduce volume per micro-batch, ZeRO Sec. 7.2.2).
             Gradients in bf16 (2 B) unless grad_bytes says otherwise, weights gathered in bf16.
             overlap=True (default, Megatron-Core's overlap_grad_reduce / overlap_param_gather): gradients hide
             behind the last micro-batch's backward (+ recompute), the updated weights' all-gather behind the
             next step's first forward, each exposing at least one chunk (a layer, or one of the v model chunks
             when interleaved): max(comm / chunks, comm - window); the per-micro-batch part behind that
             micro-batch's forward + backward (engine/train_data_parallel.py). overlap=False: all exposed.
             The hidden part slows the compute beside it by OVERLAP_CONTENTION (18.9%, Lee et al. 2025, arXiv
             2507.03114) of its time: dp contention = 0.189 x (dp total - dp exposed).
  optimizer  Adam update, memory-bound: per parameter it reads the fp32 master weight and two moments (12 B)
             and the gradient, and writes the master, the moments and the bf16 weight (14 B); sharded over the
             data-parallel group with ZeRO >= 1.
  step_time = pipeline + dp exposed + dp contention + optimizer.

Memory per chip (weights, gradients, Adam states, activations of the worst pipeline stage): engine/train_memory.py.
Data-parallel collectives and Adam: engine/train_data_parallel.py; the result dataclass: engine/train_step_result.py.

All inputs broadcast (numpy): one call evaluates a whole sweep of layouts.
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.engine.forward import ACT_BYTES, Precision, forward_pass, pair_flops, prefill_pairs
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.kernels import flash_attention_backward_ratio, op_rates, op_shapes
from tokenmath.engine.roofline import kernel_op_time, op_time
from tokenmath.engine.train_backward_gemms import backward_gemm_extra_s
from tokenmath.engine.train_data_parallel import contention_s, data_parallel_cost, strided_collective
from tokenmath.engine.train_step_result import TrainStep, matmul_params
from tokenmath.engine.train_elementwise import FLASH_BWD_FACTOR, cross_entropy_bytes, layer_elementwise_bytes
from tokenmath.engine.train_overheads import fp8_cast_bytes, unfused_attention_bytes
from tokenmath.engine.train_memory import (
    GRAD_BYTES,
    WEIGHT_BYTES,
    recompute_code,
    schedule_code,
    stage_divisor,
    stage_params,
    train_memory,
)
from tokenmath.engine.train_memory_recipe import DEFAULT_RECIPE, MemoryRecipe
from tokenmath.mapping.layout import Layout, train_layout
from tokenmath.specs.dtypes import get_dtype
from tokenmath.specs.efficiency import DEFAULT, Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.kernels import resolve as resolve_kernels
from tokenmath.specs.kv_cache import kv_values_per_token_per_layer
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

ZERO_STAGES = (0, 1, 2, 3)
TRAIN_DTYPES = ("bf16", "fp8")
# norms: train_elementwise; act_quant, moe_quant, moe_down_quant: the FP8 cast-transposes below (train_overheads.py)
LAYER_OPS_EXCLUDED = ("embed", "lm_head", "tp_allreduce", "ep_alltoall", "norms", "act_quant", "moe_quant",
                      "moe_down_quant")
TP_OVERLAP_GEMMS = ("attn_proj", "ffn", "shared_experts", "experts")
ATTN_CORE_OPS = ("attention", "attention_local")
DUALPIPE_COMM_SMS = 20      # SMs DeepSeek-V3's all-to-all kernels take (arXiv 2412.19437 Sec. 3.2.2)


def train_step(m: Model, hw: Hardware, lay: Layout, *, seq_len, micro_batch, global_batch_tokens,
               recompute="selective", zero=1, dtype: str = "bf16", overlap: bool = True,
               eff: Efficiency = DEFAULT, reserve: float = RESERVE_FRACTION,
               grad_bytes: float = GRAD_BYTES, schedule="1f1b", virtual_stages=1, balanced=False, flash=True,
               dropout=False, tp_overlap=False, pp_overlap=False, ep_comm: str = "bf16",
               ep_overlap=False, recipe: MemoryRecipe = DEFAULT_RECIPE, ep_imbalance=1.0) -> TrainStep:
    """Cost of one training step (see the module docstring for every term). Inputs are assumed checked
    (analyses.train does it); arrays broadcast. schedule '1f1b' | 'interleaved' | 'zb-h1' (or codes 0/1/2) with
    virtual_stages v (interleaved only); balanced: Llama 3's stage balancing; flash / dropout: the activation terms
    (engine/train_memory.py) and, flash=False, the unfused scores' HBM traffic (defaults: FlashAttention, no dropout);
    tp_overlap: Transformer Engine's userbuffers overlap of the tensor-parallel collectives with the GEMMs;
    pp_overlap: Megatron's overlap_p2p_comm, the interleaved schedule's hand-offs behind the chunks' compute;
    ep_imbalance: the busiest EP rank's routed tokens / the mean (engine.forward.forward_pass: a number, "routing"
    or "eplb"); ep_comm: the EP all-to-all's transport (engine/expert_parallel.EP_COMM); ep_overlap: DualPipe's overlap of the
    all-to-all and p2p traffic with the paired micro-batch's compute, on all but DUALPIPE_COMM_SMS compute units."""
    P = count_params(m)
    tp, pp, dp, ep, cp = (np.asarray(x, float) for x in (lay.tp, lay.pp, lay.dp, lay.ep, lay.cp))
    b = np.asarray(micro_batch, float)
    rc = recompute_code(recompute)
    sc = np.asarray(schedule_code(schedule))
    z = np.asarray(zero, dtype=np.int64)
    L = np.asarray(seq_len, float)
    G = np.asarray(global_batch_tokens, float)
    vs = np.asarray(virtual_stages, float)
    shape = np.broadcast(tp, pp, dp, ep, cp, b, rc, z, L, G, sc, vs).shape
    tp, pp, dp, ep, cp, b, L, G = (np.broadcast_to(x, shape).astype(float) for x in (tp, pp, dp, ep, cp, b, L, G))
    rc = np.broadcast_to(rc, shape)
    z = np.broadcast_to(z, shape)
    sc = np.broadcast_to(sc, shape)
    bal = np.broadcast_to(np.asarray(balanced, bool), shape) & (pp > 1)
    v = np.where(sc == 1, np.maximum(np.broadcast_to(vs, shape), 1.0), 1.0)
    chips = tp * pp * dp * ep * cp
    D = hw.scaleup_domain
    d, V, ab = m.d_model, m.vocab_size, ACT_BYTES

    w = get_dtype(dtype)
    prec = Precision(w, w, get_dtype("bf16"))
    peak = hw.peak_flops(w.compute)
    Lc = L / cp                          # tokens of each sequence on one chip
    Tmb = b * Lc                         # tokens per chip per micro-batch
    mb = G / (L * b * dp * ep)           # micro-batches per attention group per step

    # ---- one micro-batch forward, all layers, per chip (the engine) -----------------------------------------
    pf, psl = prefill_pairs(L, m.sliding_window)
    kv_read_sl = np.minimum(L - Lc, m.sliding_window) if m.sliding_window else L - Lc
    lay_s = Layout(tp, pp, ep, dp)
    fwd = forward_pass(m, hw, lay_s, prec, eff, phase="prefill", seqs=b, new_tokens=Lc, pairs_full=pf / cp,
                       pairs_sliding=psl / cp, kv_read_full=L - Lc, kv_read_sliding=kv_read_sl, ep_comm=ep_comm,
                       ep_imbalance=ep_imbalance)

    def total(names=None, exclude=(), attr="total_s"):
        acc = np.zeros(shape)
        for name, op in fwd.ops.items():
            if (names is not None and name not in names) or name in exclude:
                continue
            if attr == "total_s":
                acc = acc + op.count * np.maximum(op.compute_s, op.memory_s)
            else:
                acc = acc + op.count * getattr(op, attr)
        return acc

    layer_s = total(exclude=LAYER_OPS_EXCLUDED)                   # all layers, per chip, roofline per op
    layer_flops = total(exclude=LAYER_OPS_EXCLUDED, attr="flops")
    layer_bytes = total(exclude=LAYER_OPS_EXCLUDED, attr="bytes")
    attn_s = total(names=ATTN_CORE_OPS)
    attn_flops = total(names=ATTN_CORE_OPS, attr="flops")
    attn_bytes = total(names=ATTN_CORE_OPS, attr="bytes")
    emb = fwd.ops["embed"]
    emb_s = emb.count * np.maximum(emb.compute_s, emb.memory_s)
    emb_flops, emb_bytes = emb.count * emb.flops, emb.count * emb.bytes

    pk_head = hw.peak_flops("bf16") * eff.flops
    bw = hw.memory_bw * eff.memory_bw
    km = resolve_kernels(eff.kernels, hw)
    stream = hw.memory_bw * (km.stream_bw if km is not None else eff.memory_bw)
    if not flash:       # materialized scores (engine/train_overheads.py)
        unfused = unfused_attention_bytes(m, L, Tmb, tp, dropout) / stream
        layer_s, attn_s = layer_s + unfused, attn_s + unfused
    # FP8: cast-transposes of every GEMM input (forward) and output gradient (backward), engine/train_overheads.py
    cast_f, cast_b = fp8_cast_bytes(m, Tmb, tp) if w.name == "fp8" else (0.0, 0.0)
    cast_f, cast_b = cast_f / stream, cast_b / stream
    # norms, residual adds, RoPE, SwiGLU/GeLU (and dropout masks) as their own kernels, forward and backward apart,
    # and the fp32 cross-entropy on the logits (engine/train_elementwise.py)
    ew_f_b, ew_b_b = layer_elementwise_bytes(m, Tmb, tp, dropout)
    ew_f, ew_b = ew_f_b / stream, ew_b_b / stream
    ce_f_b, ce_b_b = cross_entropy_bytes(m, Tmb, tp)
    ce_s = (ce_f_b + ce_b_b) / stream
    # FlashAttention's backward runs 2.5 x its forward FLOPs (it recomputes the scores); unfused attention keeps the
    # probabilities and its backward is the plain 2 x
    attn_bwd_extra = (FLASH_BWD_FACTOR - 2.0) if flash else 0.0
    # ... and at a lower speed than its forward (FA3's backward / forward, engine/kernels.py): its time is the whole
    # backward attention, 2.5 x the forward's FLOPs, at that ratio of the forward's speed, less the 2 x forward already
    # in B (its FLOPs stay 0.5 x the forward's more: attn_bwd_extra)
    attn_bwd_time = attn_bwd_extra
    if flash and km is not None:
        attn_bwd_time = FLASH_BWD_FACTOR / flash_attention_backward_ratio(km, Lc) - 2.0

    # training lm_head: logits for every token (serving prefill computes only the last position); the
    # cross-entropy reads the bf16 logits and writes their gradient (Chinchilla App. F "final logits")
    head_flops = 2.0 * V * d * Tmb / tp
    head_bytes = V * d * WEIGHT_BYTES / tp + Tmb * d * ab + 3.0 * Tmb * (V / tp) * ab
    if km is None:
        head_s, head_c, head_m = op_time(head_flops, head_bytes, pk_head, bw)
    else:   # the shape-aware kernel model of engine/kernels.py: Tmb rows over the V/tp x d head, bf16
        pk_k, bw_k, t0 = op_rates(km, hw, "lm_head", "prefill", "gemm", key="bf16", M=Tmb,
                                  shapes=op_shapes(m, "lm_head", tp))
        head_s, head_c, head_m = kernel_op_time(head_flops, head_bytes, pk_k, bw_k, t0)
    # the cross-entropy rides with the head: F + B = 3 x the head's forward, so a third of it per head time
    # charges it exactly once per micro-batch on the last stage
    head_s = head_s + ce_s / 3.0

    one = pp == 1
    extra_s = np.where(one, emb_s + head_s, np.maximum(emb_s, head_s))      # the slowest stage's extras
    extra_flops = np.where(one | (head_s >= emb_s), head_flops + np.where(one, emb_flops, 0.0), emb_flops)
    extra_bytes = np.where(one | (head_s >= emb_s), head_bytes + np.where(one, emb_bytes, 0.0), emb_bytes)

    # the slowest stage holds ceil(n_layers / pp) layers (stages need not be equal: Llama 3 405B ran 126 layers
    # on 16 stages); per-stage layer work divides by ps = n_layers / ceil(n_layers / pp) <= pp
    ps = stage_divisor(m, pp, bal)
    # balanced stages: the edge ranks trade one layer for the embedding / head, so the slowest rank runs a full
    # rank's layers or one fewer plus its extra, whichever is longer
    F = layer_s / ps + np.where(bal, np.maximum(extra_s - layer_s / m.n_layers, 0.0), extra_s)
    # dgrad and wgrad at their own shapes (engine/train_backward_gemms.py): the difference from 2 x the forward GEMMs
    bwd_gemm = backward_gemm_extra_s(m, hw, km, fwd.ops, Tmb, tp, w.compute)
    B = 2.0 * F + (cast_b + ew_b + attn_bwd_time * attn_s + bwd_gemm) / ps
    R = np.where(rc == 2, (layer_s + cast_f + ew_f) / ps, np.where(rc == 1, attn_s / ps, 0.0))
    F = F + (cast_f + ew_f) / ps
    replay = (rc == 2).astype(float)     # full recompute replays the forward's collectives

    tp_ar = fwd.ops["tp_allreduce"].total_s if "tp_allreduce" in fwd.ops else np.zeros(shape)
    ep_a2a = fwd.ops["ep_alltoall"].total_s if "ep_alltoall" in fwd.ops else np.zeros(shape)
    tp_total = tp_ar / ps * (2.0 + replay)
    # userbuffers (Transformer Engine, Megatron --tp-comm-overlap): each all-gather / reduce-scatter is split into tp
    # chunks pipelined against the GEMM that consumes / produces them (forward, dgrad and wgrad GEMMs, and the
    # replay); one chunk of tp is not hidden (the pipeline's fill), the rest only where the GEMMs are shorter
    gemm_window = total(names=TP_OVERLAP_GEMMS) / ps * (3.0 + replay)
    tp_c = np.maximum(tp_total / np.maximum(tp, 1.0), tp_total - gemm_window) if tp_overlap else tp_total
    ep_c = ep_a2a / ps * (2.0 + replay)

    # context parallel: gather the whole sequence's K and V per layer (per attention group of tp chips)
    kv_bytes = b * L * kv_values_per_token_per_layer(m) * ab / lay_s.kv_shard(m)
    cp_ag = strided_collective(coll.all_gather, kv_bytes, cp, tp * ep, hw, eff.link_bw)
    cp_passes = 3.0 + (rc >= 1)
    cp_c = m.n_layers / ps * cp_ag * cp_passes
    attn_window = attn_s / ps * cp_passes
    # the hidden part still slows the attention it runs beside (its NCCL kernels share the chip, OVERLAP_CONTENTION)
    if overlap:
        cp_open = np.maximum(cp_c - attn_window, 0.0)
        cp_x = cp_open + contention_s(cp_c, cp_open)
    else:
        cp_x = cp_c

    crosses = chips > D
    p2p_bytes = Tmb * d * ab / tp
    p2p_one = coll.p2p(p2p_bytes, crosses, hw, eff.link_bw)
    p2p_total = np.where(pp > 1, 2.0 * v * p2p_one, 0.0)
    if pp_overlap:   # Megatron overlap_p2p_comm (interleaved only): each hand-off hides behind one chunk's F or B
        hidden = (v > 1) & (pp > 1)
        p2p = np.where(hidden, v * (np.maximum(p2p_one - F / v, 0.0) + np.maximum(p2p_one - (B + R) / v, 0.0)),
                       p2p_total)
    else:
        p2p = p2p_total

    ep_total, p2p_plain = ep_c, p2p
    if ep_overlap:
        # DualPipe (DeepSeek-V3 report, arXiv 2412.19437, Sec. 3.2.1): a forward chunk of one micro-batch runs with a
        # backward chunk of another, each one's all-to-all and PP traffic behind the other's compute ("both all-to-all
        # and PP communication can be fully hidden"); the communication kernels take DUALPIPE_COMM_SMS of the chip's
        # compute units (Sec. 3.2.2: "only 20 SMs are sufficient to fully utilize the bandwidths of IB and NVLink"),
        # so the compute runs on the rest. EP term = that compute slowdown + whatever traffic outlasts the compute.
        cu = km.compute_units if km is not None and km.compute_units > DUALPIPE_COMM_SMS else 0
        slow = cu / (cu - DUALPIPE_COMM_SMS) if cu else 1.0
        comp = F + B + R
        moe = ep > 1
        ep_c = np.where(moe, (slow - 1.0) * comp + np.maximum(ep_c + p2p - slow * comp, 0.0), ep_c)
        p2p = np.where(moe, 0.0, p2p)
    t_mb = F + B + R + tp_c + ep_c + cp_x + p2p
    bubble = (pp - 1.0) * np.where(sc == 1, t_mb / v, np.where(sc == 2, t_mb - B, t_mb))
    pipeline = mb * t_mb + bubble

    # ---- data parallel: gradients and (ZeRO) weights ---------------------------------------------------------
    first_ne, last_ne, e_stage, layers_ne = stage_params(m, pp, bal)
    ne_chip = np.maximum(first_ne, last_ne) / tp
    e_chip = e_stage / (tp * ep)
    g_ne = dp * ep * cp
    g_e = dp * cp

    dpc = data_parallel_cost(hw, ne_chip=ne_chip, e_chip=e_chip, tp=tp, ep=ep, g_ne=g_ne, g_e=g_e, zero=z,
                             micro_batches=mb, fwd_s=F, bwd_s=B, recompute_s=R, grad_bytes=grad_bytes,
                             link_eff=eff.link_bw, memory_bw=bw, overlap=overlap, has_experts=bool(P.n_moe_layers),
                             chunks=np.where(v > 1, v, np.ceil(m.n_layers / ps)))
    dp_step, dp_mb, dp_total, dp_exposed, opt_s = (dpc.step_s, dpc.micro_batch_s, dpc.total_s, dpc.exposed_s,
                                                   dpc.optimizer_s)
    opt_bytes_per_param = dpc.opt_bytes_per_param

    step = pipeline + dp_exposed + dpc.contention_s + opt_s

    # ---- FLOPs ---------------------------------------------------------------------------------------------
    N = matmul_params(m)
    model_flops = 6.0 * N * G
    # PaLM App. B's attention term 12 n_layers H Q L per token counts every query against all L keys; a causal
    # model attends (L + 1)/2 keys on average (the engine's own pair count), so the term is taken on those pairs
    pair = pair_flops(m, "prefill")
    attention_model_flops = 3.0 * pair * (m.n_full_layers * pf + m.n_sliding_layers * psl) / L * G
    per_chip_fwd_avg = (layer_flops + emb_flops + head_flops) / pp
    rec_flops_all = np.where(rc == 2, layer_flops, np.where(rc == 1, attn_flops, 0.0))
    bwd_extra_flops = attn_bwd_extra * attn_flops
    hardware_flops = chips * mb * (3.0 * per_chip_fwd_avg + (rec_flops_all + bwd_extra_flops) / pp)

    # the pure roofline of the slowest stage's own work at 100% of every peak: no prediction may beat it
    stage_fwd_flops = layer_flops / ps + np.where(bal, 0.0, extra_flops)
    stage_fwd_bytes = layer_bytes / ps + np.where(bal, 0.0, extra_bytes)
    rec_bytes = np.where(rc == 2, layer_bytes, np.where(rc == 1, attn_bytes, 0.0)) / ps
    stage_flops = mb * (3.0 * stage_fwd_flops + (rec_flops_all + bwd_extra_flops) / ps)
    stage_bytes = mb * (3.0 * stage_fwd_bytes + rec_bytes + (ew_f_b + ew_b_b) / ps)
    floor = np.maximum(stage_flops / max(peak, hw.peak_flops("bf16")), stage_bytes / hw.memory_bw)

    # ---- memory ---------------------------------------------------------------------------------------------
    mem = train_memory(m, hw.memory_bytes, train_layout(tp, pp, dp, ep, cp), seq_len=L, micro_batch=b,
                       micro_batches=mb, recompute=rc, zero=z, reserve=reserve, grad_bytes=grad_bytes, schedule=sc,
                       virtual_stages=v, balanced=bal, flash=flash, dropout=dropout, recipe=recipe)

    return TrainStep(
        micro_batches=mb, tokens_per_step=G,
        fwd_s=F, bwd_s=B, recompute_s=R, tp_comm_mb_s=tp_c, ep_comm_mb_s=ep_c, cp_comm_mb_s=cp_c,
        cp_exposed_mb_s=cp_x, pp_p2p_mb_s=p2p, microbatch_s=t_mb,
        compute_s=mb * (F + B + R), tp_comm_s=mb * tp_c, ep_comm_s=mb * ep_c, cp_comm_s=mb * cp_x,
        pp_p2p_s=mb * p2p, pp_bubble_s=bubble, bubble_fraction=bubble / pipeline,
        dp_comm_total_s=dp_total, dp_comm_exposed_s=dp_exposed, dp_contention_s=dpc.contention_s,
        optimizer_s=opt_s, step_time_s=step,
        floor_s=floor, model_flops=model_flops + np.zeros(shape),
        attention_model_flops=attention_model_flops + np.zeros(shape), hardware_flops=hardware_flops,
        peak_flops=peak, chips=chips, memory=mem, forward=fwd,
        head={"flops": head_flops, "bytes": head_bytes, "time_s": head_s, "compute_s": head_c, "memory_s": head_m},
        terms={"layer_fwd_s": layer_s, "attn_core_s": attn_s, "embed_s": emb_s, "extra_s": extra_s,
               "tp_allreduce_fwd_s": tp_ar, "tp_comm_total_mb_s": tp_total, "tp_overlap": bool(tp_overlap),
               "ep_overlap": bool(ep_overlap), "ep_comm_total_mb_s": ep_total, "pp_p2p_plain_mb_s": p2p_plain,
               "pp_overlap": bool(pp_overlap), "pp_p2p_total_mb_s": p2p_total,
               "elementwise_fwd_s": ew_f / ps, "elementwise_bwd_s": ew_b / ps, "cross_entropy_s": ce_s,
               "attn_bwd_extra_s": attn_bwd_time * attn_s / ps,
               "bwd_gemm_shape_extra_s": bwd_gemm / ps + np.zeros(shape), "ep_alltoall_fwd_s": ep_a2a,
               "cp_allgather_s": cp_ag,
               "p2p_bytes": p2p_bytes, "dp_step_s": dp_step, "dp_mb_s": dp_mb, "grad_bytes": grad_bytes,
               "params_ne_per_chip": ne_chip, "params_e_per_chip": e_chip, "dp_group": g_ne,
               "expert_dp_group": g_e, "matmul_params": N, "tokens_per_chip_mb": Tmb,
               "opt_bytes_per_param": opt_bytes_per_param, "stage_flops": stage_flops,
               "stage_bytes": stage_bytes},
    )
