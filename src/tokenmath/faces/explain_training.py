"""The napkin derivations of the training questions (train, overtrain, chinchilla), with numbers and units, from
the analyses' own terms."""
from __future__ import annotations


from tokenmath.analyses.training.scaling_laws import ChinchillaResult
from tokenmath.analyses.training.train import TrainResult
from tokenmath.base import units as u
from tokenmath.base.validators import finite
from tokenmath.engine.train_data_parallel import OVERLAP_CONTENTION
from tokenmath.engine.train_memory import activation_bytes_per_layer, in_flight_layers, stage_layers
from tokenmath.engine.train_step_result import matmul_params
from tokenmath.faces.names import name_ids
from tokenmath.specs.params import count_params


def explain_train(r: TrainResult) -> str:
    """train's --explain: FLOPs, one micro-batch op by op, pipeline, data parallel, step, memory, the run."""
    m, hw, lay, s = r.model, r.hardware, r.layout, r.step
    f = finite
    tp, pp, dp, ep, cp = (int(x) for x in (lay.tp, lay.pp, lay.dp, lay.ep, lay.cp))
    P = count_params(m)
    N = matmul_params(m)
    G, L, b = r.global_batch_tokens, r.seq_len, r.micro_batch
    mb = f(s.micro_batches)
    T = s.terms
    out = []
    out.append(f"{m.name} on {r.chips} x {hw.name}: tp={tp} pp={pp} dp={dp} ep={ep} cp={cp}; {r.dtype} matmuls, "
               f"recompute {r.recompute}, ZeRO-{r.zero}, overlap {'on' if r.overlap else 'off'}")
    out.append(f"Model: {m.describe()}; {u.count(P.total)} parameters, {u.count(P.active)} active, "
               f"N = {u.count(N)} in matmuls (lm_head counted, embedding lookup not)")
    out.append(f"Batch: {G:,} tokens per step = {G // L:,} sequences of {L:,}; micro-batch {b} sequence(s)")
    out.append("")
    out.append("1. FLOPs per step")
    out.append(f"  model: 6 x N x tokens = 6 x {u.count(N)} x {G:,} = {u.flops(f(s.model_flops))}"
               f"  (+ PaLM's attention term 12 x layers x heads x head_dim per attended key, causal: "
               f"{u.flops(f(s.attention_model_flops))})")
    out.append(f"  executed (causal attention, training lm_head, recompute {r.recompute}) = "
               f"{u.flops(f(s.hardware_flops))}")
    out.append("")
    out.append(f"2. One micro-batch on the slowest stage (per chip: {b} x {L // cp:,} tokens, {m.n_layers // pp} "
               f"of {m.n_layers} layers)")
    out.append(f"  {'op':<16}{'x':>6}  {'FLOPs/chip':>12} {'bytes/chip':>11}  {'compute':>9} {'memory':>9}  "
               f"{'total':>9}  bound")
    for op in s.forward.ops.values():
        if op.name in ("tp_allreduce", "ep_alltoall", "lm_head", "norms"):    # norms: the elementwise line below
            continue
        cnt = op.count / pp if op.name not in ("embed",) else op.count
        c_, m_ = f(op.compute_s), f(op.memory_s)
        out.append(f"  {op.name:<16}{cnt:>6.3g}  {u.flops(f(op.flops)):>12} {u.bytes_(f(op.bytes)):>11}  "
                   f"{u.seconds(c_):>9} {u.seconds(m_):>9}  {u.seconds(cnt * max(c_, m_)):>9}  "
                   f"{'compute' if c_ >= m_ else 'memory'}")
    h = s.head
    out.append(f"  {'lm_head (train)':<16}{1:>6}  {u.flops(f(h['flops'])):>12} {u.bytes_(f(h['bytes'])):>11}  "
               f"{u.seconds(f(h['compute_s'])):>9} {u.seconds(f(h['memory_s'])):>9}  {u.seconds(f(h['time_s'])):>9}  "
               f"{'compute' if f(h['compute_s']) >= f(h['memory_s']) else 'memory'}   (logits for every token)")
    out.append(f"  elementwise kernels (norms, residual adds, RoPE, SwiGLU/GeLU; sequence/tensor parallel /tp): "
               f"forward {u.seconds(f(T['elementwise_fwd_s']))}, backward {u.seconds(f(T['elementwise_bwd_s']))}; "
               f"fp32 cross-entropy {u.seconds(f(T['cross_entropy_s']))} (with the lm_head)")
    out.append(f"  forward F = layers {u.seconds(f(T['layer_fwd_s']))} / pp {pp} + "
               + ("embed + lm_head" if pp == 1 else "max(embed, lm_head)") + f" {u.seconds(f(T['extra_s']))} = "
               f"{u.seconds(f(s.fwd_s))} (with the elementwise forward)")
    out.append(f"  backward B = 2 x F's GEMMs and attention + elementwise backward + FlashAttention's extra 0.5 x "
               f"attention {u.seconds(f(T['attn_bwd_extra_s']))} + dgrad / wgrad at their own shapes "
               f"{u.seconds(f(T['bwd_gemm_shape_extra_s']))} = {u.seconds(f(s.bwd_s))}; recompute ({r.recompute}) R = "
               f"{u.seconds(f(s.recompute_s))}")
    passes = 3 if r.recompute == "full" else 2
    if tp > 1:
        per = f(T["tp_allreduce_fwd_s"]) / (2 * m.n_layers)
        act = u.bytes_(f(T["tokens_per_chip_mb"]) * m.d_model * 2)
        out.append(f"  TP: {passes} x 2 all-reduces x {m.n_layers // pp} layers of {act}"
                   f" over {tp} chips, {u.seconds(per)} each = {u.seconds(f(T['tp_comm_total_mb_s']))}"
                   "  (sequence parallel: reduce-scatter + all-gather, same bytes)")
        if T["tp_overlap"]:
            out.append(f"  TP overlap (userbuffers): exposed max(total / tp, total - GEMM time) = "
                       f"{u.seconds(f(s.tp_comm_mb_s))}")
    if ep > 1:
        out.append(f"  EP: dispatch + combine all-to-all per MoE layer ({r.ep_comm}), x{passes} = "
                   f"{u.seconds(f(T['ep_comm_total_mb_s']))}")
        if T["ep_overlap"]:
            out.append(f"  EP overlap (DualPipe): the all-to-all and p2p behind the paired micro-batch's F + B + R, "
                       f"run on all but 20 SMs: slowdown + traffic left over = {u.seconds(f(s.ep_comm_mb_s))}")
    if cp > 1:
        out.append(f"  CP: K,V all-gather over {cp} chips {u.seconds(f(T['cp_allgather_s']))} per layer pass, "
                   f"total {u.seconds(f(s.cp_comm_mb_s))}, exposed {u.seconds(f(s.cp_exposed_mb_s))}")
    if pp > 1:
        out.append(f"  PP: 2 x {r.virtual_stages} point-to-point hand-offs of {u.bytes_(f(T['p2p_bytes']))} = "
                   f"{u.seconds(f(T['pp_p2p_total_mb_s']))}")
        if T["pp_overlap"] and r.virtual_stages > 1:
            out.append(f"  PP overlap (overlap_p2p_comm): each hand-off behind one chunk's F/v or (B + R)/v, exposed "
                       f"{u.seconds(f(s.pp_p2p_mb_s))}")
    out.append(f"  per micro-batch t_mb = {u.seconds(f(s.microbatch_s))}")
    out.append("")
    out.append("3. Pipeline")
    out.append(f"  micro-batches m = tokens / (L x b x dp x ep) = {G:,} / ({L} x {b} x {dp} x {ep}) = {mb:,.6g}")
    v = r.virtual_stages
    rule = {"1f1b": "(pp-1) x t_mb", "interleaved": f"(pp-1)/v x t_mb with v = {v}",
            "zb-h1": "(pp-1) x (t_mb - B), the weight-gradient half of B fills it"}[r.schedule]
    out.append(f"  schedule {r.schedule}: bubble = {rule} = {u.seconds(f(s.pp_bubble_s))}; pipeline = m x t_mb + "
               f"bubble = {mb:,.6g} x {u.seconds(f(s.microbatch_s))} + {u.seconds(f(s.pp_bubble_s))} = "
               f"{u.seconds(mb * f(s.microbatch_s) + f(s.pp_bubble_s))} (bubble {f(s.bubble_fraction):.1%})")
    out.append("")
    out.append("4. Data parallel and optimizer")
    out.append(f"  per chip {u.count(f(T['params_ne_per_chip']))} non-expert params over {int(f(T['dp_group']))} chips"
               + (f", {u.count(f(T['params_e_per_chip']))} expert params over {int(f(T['expert_dp_group']))}"
                  if m.is_moe else ""))
    what = {0: "all-reduce of the gradients", 1: "all-reduce of the gradients (reduce-scatter + all-gather)",
            2: "reduce-scatter of the gradients per micro-batch + all-gather of the weights per step",
            3: "per micro-batch: 2 all-gathers of the weights + a reduce-scatter of the gradients"}[r.zero]
    out.append(f"  ZeRO-{r.zero}: {what}: {u.seconds(f(s.dp_comm_total_s))} per step, exposed "
               f"{u.seconds(f(s.dp_comm_exposed_s))}" + (" (overlapped with backward)" if r.overlap else ""))
    if r.overlap:
        out.append(f"  hidden traffic slows the compute beside it (its kernels share the chip): {OVERLAP_CONTENTION:.1%} x "
                   f"{u.seconds(f(s.dp_comm_hidden_s))} hidden = "
                   f"{u.seconds(f(s.dp_contention_s))} (Lee et al. 2025, arXiv 2507.03114: 18.9% mean slowdown)")
    out.append(f"  Adam update: {f(T['opt_bytes_per_param']):g} B/param moved at "
               f"{u.rate(hw.memory_bw * r.efficiency.memory_bw, 'B/s')}"
               f" = {u.seconds(f(s.optimizer_s))}")
    out.append("")
    out.append("5. Step")
    out.append(f"  step = pipeline + exposed DP + DP contention + optimizer = {u.seconds(f(s.step_time_s))}"
               f"  (compute {u.seconds(f(s.compute_s))}, TP {u.seconds(f(s.tp_comm_s))},"
               f" EP {u.seconds(f(s.ep_comm_s))},"
               f" CP {u.seconds(f(s.cp_comm_s))}, bubble {u.seconds(f(s.pp_bubble_s))}, p2p {u.seconds(f(s.pp_p2p_s))},"
               f" DP {u.seconds(f(s.dp_comm_exposed_s))}, contention {u.seconds(f(s.dp_contention_s))},"
               f" optimizer {u.seconds(f(s.optimizer_s))})")
    out.append(f"  pure roofline of the same stage's work (100% of peaks) = {u.seconds(f(s.floor_s))}")
    pk = s.peak_flops
    out.append(f"  MFU = 6NG / (step x chips x peak) = {u.flops(f(s.model_flops))} / ({u.seconds(f(s.step_time_s))} x "
               f"{r.chips} x {u.rate(pk, 'FLOP/s')}) = {f(s.mfu):.1%}; with attention {f(s.mfu_with_attention):.1%};"
               f" HFU {f(s.hfu):.1%}")
    out.append(f"  model TFLOP/s per chip = {f(s.tflops_per_chip) / 1e12:,.1f}; "
               f"executed {f(s.hardware_flops_per_chip) / 1e12:,.1f}")
    out.append("")
    mem = s.memory
    out.append("6. Memory per chip (worst pipeline stage)")
    rec = r.recipe
    adam = "fp32 master, m, v" if rec.adam_bytes == 12 else ("fp32 master, bf16 m, v" if rec.adam_bytes == 8 else "")
    out.append(f"  model states: 2 B weights + {f(T['grad_bytes']):g} B grads + {rec.adam_bytes:g} B Adam"
               + (f" ({adam})" if adam else "") + " per param over tp x pp" + (" (experts also over ep)" if m.is_moe else "")
               + f", ZeRO-{r.zero}: weights {u.bytes_(f(mem.weights))}, gradients {u.bytes_(f(mem.gradients))},"
               f" optimizer {u.bytes_(f(mem.optimizer))}"
               + (f", gather buffers {u.bytes_(f(mem.buffers))}" if r.zero == 3 else "")
               + ("; DualPipe: the first and the last stage on one rank, each stage's optimizer over 2 x dp"
                  if rec.dualpipe and pp > 1 else ""))
    per_layer = f(activation_bytes_per_layer(m, L, b, tp, cp, r.recompute, r.flash, r.dropout, rec.act))
    k = 34 if r.dropout else 32
    scores = "4as/h lse" if r.flash else ("5as/h" if r.dropout else "2as/h")
    form = {"none": f"sbh({k} + {scores})/t", "selective": f"{k} sbh/t", "full": "2 sbh/t"}[r.recompute]
    held = f(in_flight_layers(m, pp, mb, r.schedule, r.virtual_stages, r.balanced))
    sched = r.schedule
    if rec.dualpipe and pp > 1:
        held = min(f(mb), pp + 1.0) * f(stage_layers(m, pp, r.balanced)[0])
        sched = "DualPipe, PP + 1 micro-batches of a stage"
    store = {"bf16": "", "fp8": ", FP8 GEMM inputs (Transformer Engine)",
             "deepseek-v3": ", DeepSeek-V3: norms and MLA up-projections recomputed, FP8 caching"}[rec.act]
    out.append(f"  activations (Korthikanti et al. 2022, {form} for a GPT-shaped layer"
               + (", no dropout masks" if not r.dropout else "") + (", FlashAttention" if r.flash else "") + store
               + f"): {u.bytes_(per_layer)} per layer per micro-batch x {held:,.0f} layer-micro-batches in flight on "
               f"the first rank ({sched}" + (", balanced stages" if r.balanced else "") + ")"
               + (" (+ fp32 logits: the last stage is on this rank)" if rec.dualpipe and pp > 1
                  else " (+ fp32 logits on the last stage)")
               + f" = {u.bytes_(f(mem.activations))}")
    out.append(f"  total {u.bytes_(f(mem.total))} of {u.bytes_(mem.usable)} usable -> "
               f"{'fits' if r.fits else 'DOES NOT FIT'}")
    if r.tokens is not None and r.fits:
        out.append("")
        out.append("7. The whole run")
        out.append(f"  steps = {r.tokens:,.0f} / {G:,} = {r.steps:,.1f}; time = steps x step = "
                   f"{r.train_time_s / 86400:,.2f} days")
        out.append(f"  chip-hours = {r.chips} x time = {r.chip_hours:,.0f}; cost = "
                   + (f"{r.chip_hours:,.0f} x ${hw.price_usd_per_hour:g} = {u.usd(r.cost_usd)}"
                      if r.cost_usd is not None else "n/a (no price)")
                   + "; energy = " + (f"{hw.tdp_w:g} W x {r.chips} x time = {r.energy_kwh:,.0f} kWh"
                                      if r.energy_kwh is not None else "n/a (no TDP)"))
    for a in r.advice:
        out.append(f"advice: {name_ids(a, hw, m)}")
    for n_ in r.notes:
        out.append(f"note: {name_ids(n_, hw, m)}")
    return "\n".join(out)


def explain_chinchilla(r: ChinchillaResult) -> str:
    """chinchilla's --explain: the fit, the compute-optimal split (closed form and its numeric check), the loss."""
    f = r.fit
    t = r.loss_terms
    L = [f"Chinchilla scaling law, fit {f.name!r}: L(N, D) = E + A/N^alpha + B/D^beta",
         f"  E = {f.E:.5g}, A = {f.A:.6g}, B = {f.B:.6g}, alpha = {f.alpha:.5g}, beta = {f.beta:.5g}",
         f"  source: {f.source}", ""]
    if r.mode == "loss-target":
        x = t["params_term"]
        L += ["1. Cheapest model reaching the loss (tangency alpha A/N^alpha = beta B/D^beta)",
              f"  A/N^alpha = (l - E) x beta/(alpha+beta) = ({r.loss:.4f} - {f.E:.4f}) x {f.beta / (f.alpha + f.beta):.4f}"
              f" = {x:.4f}",
              f"  N = (A / {x:.4f})^(1/alpha) = {u.count(r.params)};  B/D^beta = (alpha/beta) x {x:.4f} = "
              f"{t['data_term']:.4f} -> D = {u.count(r.tokens)} tokens",
              f"  C = 6 N D = 6 x {r.params:.4g} x {r.tokens:.4g} = {r.compute:.4g} FLOPs", ""]
    else:
        L += ["1. Training compute",
              "  C = 6 N D" + (f" = 6 x {r.params:.4g} x {r.tokens:.4g}" if r.mode == "point" else "")
              + f" = {r.compute:.4g} FLOPs", ""]
    L += ["2. Compute-optimal split of C (minimise L on the line 6ND = C)",
          f"  G = (alpha A / (beta B))^(1/(alpha+beta)) = ({f.alpha:.5g} x {f.A:.6g} / ({f.beta:.5g} x {f.B:.6g}))"
          f"^(1/{f.alpha + f.beta:.5g}) = {f.G:.5g}",
          f"  a = beta/(alpha+beta) = {f.a:.4f},  b = alpha/(alpha+beta) = {f.b:.4f}",
          f"  N_opt = G (C/6)^a = {f.G:.5g} x ({r.compute / 6:.4g})^{f.a:.4f} = {u.count(r.optimum_params)} parameters",
          f"  D_opt = (C/6)^b / G = ({r.compute / 6:.4g})^{f.b:.4f} / {f.G:.5g} = {u.count(r.optimum_tokens)} tokens"
          f"  ({r.optimum_tokens / r.optimum_params:.1f} tokens/param)",
          f"  check: golden-section search on 6ND = C finds N = {u.count(r.numeric_params)} "
          f"(relative difference {abs(r.numeric_params / r.optimum_params - 1):.1e})",
          f"  L(N_opt, D_opt) = {r.optimum_loss:.4f}", ""]
    L += [f"3. Loss of N = {u.count(r.params)}, D = {u.count(r.tokens)} ({r.tokens_per_param:,.1f} tokens/param)",
          f"  L = {f.E:.4f} + {f.A:.6g}/{r.params:.4g}^{f.alpha:.5g} + {f.B:.6g}/{r.tokens:.4g}^{f.beta:.5g}",
          f"    = {f.E:.4f} + {t['params_term']:.4f} + {t['data_term']:.4f} = {r.loss:.4f} nats/token"]
    if r.mode == "point":
        L.append(f"  vs compute-optimal at the same C: {r.loss - r.optimum_loss:+.4f}")
    if r.notes:
        L += ["", *("note: " + name_ids(n) for n in r.notes)]
    return "\n".join(L)


def _why(r) -> str:
    """A miss read as compute: the step's compute share and the compute slowdown the measurement implies."""
    if r.compute_share is None or r.compute_factor is None:
        return ""
    return (f"; step {r.compute_share:.0%} compute, the measurement needs the compute x{r.compute_factor:.2f}"
            " (docs/training.md)")


def training_runs_text(v) -> str:
    """The published-runs table of `tokenmath validate` (analyses.training.validate_runs.RunValidation)."""
    lines = ["", "Training runs: published layouts predicted (MFU on 6N over the dense BF16 peak; nothing fitted on "
             "these runs)", f"{'run':<54}{'layout':<50}{'recompute':<10}{'measured':>9}{'predicted':>10}{'error':>8}"]
    for r in v.rows:
        if r.error_points is None:
            lines.append(f"{r.id:<54}{r.layout:<50}{r.recompute:<10}{'':>9}{'':>10}{'':>8}  {r.note[:140]}")
            continue
        miss = abs(r.error_points) > 8
        lines.append(f"{r.id:<54}{r.layout:<50}{r.recompute:<10}{r.measured_mfu:>9.1%}{r.predicted_mfu:>10.1%}"
                     f"{r.error_points:>+7.1f}p" + (f"  miss: predicted too {'fast' if r.error_points > 0 else 'slow'}"
                                                    f"{' (fp8)' if r.dtype == 'fp8' else ''}{_why(r)}" if miss else ""))
    med, mx = v.median_abs_points, v.max_abs_points
    if med is not None:
        lines.append("median |error| by group: " + "; ".join(f"{k} {m:.1f} ({n} runs)"
                                                           for k, (n, m) in sorted(v.groups().items())))
        lines.append(f"median |error| {med:.1f} points, worst {mx:.1f} (target: median <= 3, none > 8): "
                     + ("met" if v.meets_target else f"missed by {len(v.misses)} of {len(v.rows)} runs: "
                        + ", ".join(r.id for r in v.misses)))
    return "\n".join(lines)
