"""The napkin derivation of an infer result, with numbers and units, from the engine's own terms."""
from __future__ import annotations

import numpy as np

from tokenmath.base import units as u
from tokenmath.engine.attention_sharding import batch_alltoall_bytes, reshard_widths
from tokenmath.engine.forward import ACT_BYTES, PassCost
from tokenmath.engine.memory import seqs_per_group
from tokenmath.faces.explain_kv import kv_kinds_terms
from tokenmath.faces.names import name_ids
from tokenmath.mapping.layout import attention_name
from tokenmath.specs.kv_cache import (index_key_bytes, kv_main_values, kv_values_per_token_per_layer,
                                      state_bytes_per_sequence)
from tokenmath.analyses.serving.infer import InferResult


def _f(x) -> float:
    return float(np.asarray(x))


def _pass_lines(pc: PassCost, title: str) -> list[str]:
    lines = [title, f"  {'op':<16}{'x':>5}  {'FLOPs/chip':>12} {'bytes/chip':>11}  {'compute':>9} {'memory':>9} {'comm':>9}  {'total':>9}  bound"]
    for op in pc.ops.values():
        c, m, k = _f(op.compute_s), _f(op.memory_s), _f(op.comm_s)
        bound = "comm" if k > 0 else ("compute" if c >= m else "memory")
        lines.append(f"  {op.name:<16}{op.count:>5.0f}  {u.flops(_f(op.flops)):>12} {u.bytes_(_f(op.bytes)):>11}  "
                     f"{u.seconds(c):>9} {u.seconds(m):>9} {u.seconds(k):>9}  {u.seconds(_f(op.total_s)):>9}  {bound}")
    lines.append(f"  sum of per-op max(compute, memory) + communication = {u.seconds(_f(pc.time_s))}"
                 f"  (compute-bound {u.seconds(_f(pc.compute_bound_s))}, memory-bound {u.seconds(_f(pc.memory_bound_s))},"
                 f" communication {u.seconds(_f(pc.comm_s))}"
                 + (f"; fixed overhead {u.seconds(pc.overhead_s)}, not in this sum" if pc.overhead_s else "")
                 + f") -> {pc.bottleneck}")
    return lines


def _napkin_lines(r: InferResult) -> list[str]:
    """The napkin floor: what one chip on a replica's critical path reads per decode step, over its bandwidth."""
    lay, m, dec = r.layout, r.model, r.decode
    tp, pp, ep, dp = int(lay.tp), int(lay.pp), int(lay.ep), int(lay.dp)
    w, kv = _f(dec.weight_bytes), _f(dec.kv_bytes)
    path = [f"1/{tp} of each layer" if tp > 1 else "every layer"]
    if pp > 1:
        path.append(f"{pp} stages one after the other")
    if r.experts_touched_per_layer is not None:
        path.append(f"routed experts touched ~{r.experts_touched_per_layer:.1f} of {m.n_experts} per MoE layer"
                    + (f", 1/{ep} of them on each EP rank" if ep > 1 else ""))
    if dp > 1:
        path.append(f"one of {dp} replicas")
    return [f"  napkin floor (one replica's critical path, per chip: {', '.join(path)}): weights {u.bytes_(w)} + "
            f"KV {u.bytes_(kv)} = {u.bytes_(w + kv)} / {u.rate(r.hardware.memory_bw, 'B/s')} = "
            f"{u.seconds(r.decode_napkin_floor_s)} per step"]


def _attention_lines(r: InferResult) -> list[str]:
    """Batch- or data-parallel attention inside the TP group: where the KV sits and what moves (engine's terms)."""
    lay, m = r.layout, r.model
    if not lay.attn_by_batch:
        return []
    tp, mode = int(lay.tp), attention_name(lay)
    S = _f(seqs_per_group(r.batch, lay))
    Sa = _f(lay.attn_seqs(S))
    heads_copies = tp if m.is_mla else max(tp // m.kv_heads, 1)
    L = [f"  attention sharding {mode}: each of the {tp} ranks holds the whole KV of ceil({S:,.0f} / {tp}) = "
         f"{Sa:,.0f} sequence(s) (by heads: every rank would hold the KV of all {S:,.0f}"
         + (f", {heads_copies} copies of each KV head)" if heads_copies > 1 else ")")]
    if mode == "batch":
        qw, ow = reshard_widths(m)
        sq, so = (_f(x) for x in batch_alltoall_bytes(m, S, tp, ACT_BYTES))
        L.append(f"    decode: all-to-all of q ({S:,.0f} tokens x {qw:,.0f} values x {ACT_BYTES:g} B / {tp} = "
                 f"{u.bytes_(sq)} per chip) before the core and of its output ({ow:,.0f} values: {u.bytes_(so)}) after "
                 f"it, per attention layer (Pope et al. 2022, Sec. 3.3); projections stay split by heads")
    else:
        L.append(f"    attention weights whole on every rank; the MLP stays tensor-parallel: all-gather of the "
                 f"{S:,.0f} tokens' hidden states ({u.bytes_(S * m.d_model * ACT_BYTES)}) before it and reduce-scatter "
                 f"after it, per layer, instead of TP's two all-reduces (SGLang --enable-dp-attention)")
    return L


def _memory_rule(r: InferResult) -> str:
    e = r.engine
    if e is None:
        return f"{u.bytes_(r.hardware.memory_bytes)} less reserve"
    if e.kv_fraction_of == "total":
        return f"{e.name}: {e.kv_memory_fraction:g} x {u.bytes_(r.hardware.memory_bytes)}"
    return f"{e.name}: weights + activations + {e.kv_memory_fraction:g} x what they leave of {u.bytes_(r.hardware.memory_bytes)}"


def _engine_lines(r: InferResult) -> list[str]:
    """How the engine's step costs turn the device time into the predicted step."""
    e = r.engine
    if e is None or r.decode_device_s is None:
        return []
    L = [f"  engine ({e.name}): device time of the step {u.seconds(r.decode_device_s)}"]
    if r.decode_launch_s:
        per = r.decode_launch_s / max(r.decode_kernels, 1.0)
        L.append(f"    no captured graph for a step of this batch: {r.decode_kernels:,.0f} kernels launched "
                 f"from the CPU x {u.seconds(per)} = {u.seconds(r.decode_launch_s)} -> max(device, launch) = "
                 f"{u.seconds(max(r.decode_device_s, r.decode_launch_s))}")
    else:
        L.append("    a captured graph is replayed at this batch: no per-kernel launch cost")
    cpu = e.step_cpu
    how = "hidden behind the device (overlap scheduling): max" if e.overlap_scheduling else "after the device's work: sum"
    unfitted = " (not fitted: no published measurement of this engine version in data/measurements.toml; 0)"
    L.append(f"    per-step CPU work {u.seconds(cpu)}" + (unfitted if e.step_cpu_s is None else "")
             + f", {how} -> step {u.seconds(r.decode_step_s)}")
    return L


def explain_infer(r: InferResult) -> str:
    m, hw, lay, prec, eff = r.model, r.hardware, r.layout, r.precision, r.efficiency
    chips, tp = r.chips, int(lay.tp)
    L = []
    L.append(f"{m.name} on {chips} x {hw.name} (tp={tp} pp={int(lay.pp)} ep={int(lay.ep)} dp={int(lay.dp)}"
             + (f" cp={int(lay.cp)}" if int(lay.cp) > 1 else "")
             + (f" attn={attention_name(lay)}" if lay.attn_by_batch else "") + "), "
             f"weights {prec.weight.name}" + (f" / experts {prec.expert.name}" if prec.expert != prec.weight else "")
             + f", KV {prec.kv.name}; batch {r.batch}, {r.input_len:,} tokens in, {r.output_len:,} out")
    L.append(f"Model: {m.describe()}")
    L.append(f"Parameters: {u.count(r.params_total)} total, {u.count(r.params_active)} active per token")
    L.append("")
    L.append("1. Bytes")
    L.append(f"  weights = params x bytes/param = {u.bytes_(r.weights_bytes)}"
             f" ({prec.weight.bytes:g} B/param" + (f", experts {prec.expert.bytes:g}" if prec.expert != prec.weight else "")
             + ")")
    kvv = kv_values_per_token_per_layer(m)
    how = (f"(kv_lora {m.kv_lora_rank} + rope {m.qk_rope_head_dim})" if m.is_mla
           else f"2 x {m.kv_heads} KV heads x {m.hd}")
    per = f"{kvv} values x {m.n_attention_layers} layers x {prec.kv.bytes:g} B"
    if m.has_full_shapes:
        how, per = kv_kinds_terms(m, prec.kv.bytes)
    if m.is_sparse_attention:
        per = (f"({kv_main_values(m)} values x {prec.kv.bytes:g} B + index key {m.index_head_dim} x FP8 + scales "
               f"= {index_key_bytes(m):g} B) x {m.n_attention_layers} layers")
    L.append(f"  KV per token = {how} = {per} = "
             f"{u.bytes_(r.kv_bytes_per_token)}" + (f" (sliding layers cap at {m.sliding_window} tokens)" if m.n_sliding_layers else "")
             + (f"; + {m.n_linear_layers} recurrent layers' fixed state {u.bytes_(state_bytes_per_sequence(m))} per sequence"
                if m.n_linear_layers else ""))
    mem = r.memory
    L.append(f"  per chip: weights {u.bytes_(_f(mem.weights))} + KV {u.bytes_(_f(mem.kv))} + activations "
             f"{u.bytes_(_f(mem.activations))} = {u.bytes_(_f(mem.total))} of {u.bytes_(_f(mem.usable))} usable "
             f"({_memory_rule(r)}) -> {'fits' if r.fits else 'DOES NOT FIT'}")
    L.extend(_attention_lines(r))
    if r.running_cap is not None:
        L.append(f"  {r.engine.name} runs at most {r.running_cap:,} sequences per scheduler; largest batch here "
                 f"{r.max_batch:,}")
    L.append("")
    L.append("2. Rates per chip")
    pk = hw.peak_flops(prec.weight.compute)
    L.append(f"  memory {u.rate(hw.memory_bw, 'B/s')} x {eff.memory_bw:g} = {u.rate(hw.memory_bw * eff.memory_bw, 'B/s')};"
             f" matmul ({hw.flops_key(prec.weight.compute)}) {u.rate(pk, 'FLOP/s')} x {eff.flops:g} = {u.rate(pk * eff.flops, 'FLOP/s')};"
             f" ridge {pk / hw.memory_bw:,.0f} FLOP/B at peak, {pk * eff.flops / (hw.memory_bw * eff.memory_bw):,.0f} at these fractions")
    if tp > 1 or int(lay.ep) > 1:
        L.append(f"  scale-up link {u.rate(hw.scaleup_bw, 'B/s')} per direction x {eff.link_bw:g}; "
                 f"collective latency {u.seconds(hw.scaleup_latency)} + 2 us x (sqrt(p)-1)")
    L.append(f"  efficiencies: {eff.source}")
    L.append("")
    if r.decode is not None:
        ch = r.prefill_chunks
        how = "one pass" if ch == 1 else (f"{ch} chunked steps of at most {r.engine.limits_for(hw.memory_bytes)[1]:,} "
                                          f"tokens ({r.engine.name}); one chunk below")
        L.extend(_pass_lines(r.prefill, f"3. Prefill: {r.batch} x {r.input_len:,} tokens in {how} (per chip)"))
        if r.ttft_s is not None:
            L.append(f"  TTFT = {u.seconds(r.ttft_s)}" + (f" = {ch} chunks x their step (each reads the weights "
                                                          "and the chunks before it)" if ch > 1 else "")
                     + (" (pipeline fill included)" if int(lay.pp) > 1 else ""))
        L.append("")
        L.extend(_pass_lines(r.decode, f"4. Decode step at the mean context {r.input_len + (r.output_len + 1) / 2:,.0f} (per chip)"))
    if r.fits:
        L.extend(_napkin_lines(r))
        if eff.layer_overhead_s:
            L.append(f"  + fixed overhead {m.n_layers} layers x {u.seconds(eff.layer_overhead_s)} (launches, syncs; "
                     f"calibrated) = {u.seconds(m.n_layers * eff.layer_overhead_s)} per pass")
        L.extend(_engine_lines(r))
        L.append(f"  pure roofline of this step (100% of peaks) = {u.seconds(r.decode_floor_s)}; predicted "
                 f"{u.seconds(r.decode_step_s)}" + (f" incl. pipeline hand-offs {u.seconds(r.pp_p2p_s)}" if r.pp_p2p_s else ""))
        L.append("")
        L.append("5. Throughput and cost")
        L.append(f"  per user: 1 / {u.seconds(r.decode_step_s)} = {r.output_tokens_per_s_per_user:,.1f} tokens/s")
        L.append(f"  system: {r.batch} x {r.output_len} / (TTFT {u.seconds(r.ttft_s)} + {r.output_len} x "
                 f"{u.seconds(r.decode_step_s)}) = {r.output_tokens_per_s:,.1f} tokens/s")
        p = hw.price_usd_per_hour
        if p is not None:
            L.append(f"  $/s = {chips} chips x ${p:g}/h / 3600 = ${r.chips_usd_per_s:.5f}/s"
                     f" (price {hw.price_date or 'undated'}" + (f", {hw.price_market}" if hw.price_market else "") + ")")
            L.append(f"  output (decode only): $/s x step / batch x 1e6 = {u.usd(r.cost_per_mtok_output_usd)} per Mtok; "
                     f"input: $/s x TTFT / (batch x input) x 1e6 = {u.usd(r.cost_per_mtok_input_usd)} per Mtok")
            L.append(f"  output (whole request, prefill included): $/s / system tokens/s x 1e6 = "
                     f"{u.usd(r.cost_per_mtok_output_request_usd)} per Mtok")
        else:
            L.append("  no public price for this chip: costs are not computed")
    else:
        L.append("Not served: " + "; ".join(name_ids(a, hw, m) for a in r.advice))
    for n in r.notes:
        L.append(f"note: {name_ids(n, hw, m)}")
    return "\n".join(L)
