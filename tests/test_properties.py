"""Physical invariants under property-based tests (issue 11, part 1).

Hypothesis draws random but *valid* architectures (dense MHA/GQA/MQA, MLA, MoE with or without shared experts and
leading dense layers, sliding-window patterns), random but sane chips (through `hardware.from_record`, the same
path a user's hardware file takes) and random workloads and layouts, and checks what must hold whatever the numbers:

- no prediction beats the pure roofline: the engine's own floor, and an independent napkin floor computed here
  from the model's fields (weights that must be read, KV that must be read, 2 FLOPs per weight per token);
- more memory bandwidth, FLOP/s or link bandwidth is never slower (decode step and TTFT);
- decode cost per token never rises with batch while the batch fits (flat fractions); under the shape-aware kernel
  model only just past a GEMM's tile, split-K or wave step, by at most its padded / unpadded compute ratio;
- KV bytes are linear in context, capped by sliding windows;
- a parallel group inside one scale-up domain is never slower than the same group across domains;
- expert-parallel load imbalance is never faster, and overlapping the EP all-to-all never slower;
- results are finite and positive, and `--json` carries no NaN;
- the vectorized path equals the scalar path element by element (engine.serving.serve over a batch array or a
  layout array vs one call each; analyses.hyperbola's points vs tokenmath.infer at the same batch and context).

Layouts cover tp, pp, ep, dp and cp; efficiencies include a fixed per-layer overhead where the engine has one.
Example counts are bounded (settings below) so the whole file stays well under a minute on two cores; set
TOKENMATH_PROPERTY_SCALE=N for N times as many random (not derandomized) examples.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmath.analyses.setup import resolve_precision
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.infer import infer
from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES
from tokenmath.specs.efficiency import DEFAULT, PEAK, Efficiency
from tokenmath.engine.static_batch import serve_batch as serve
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import Hardware, from_record
from tokenmath.specs.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token
from tokenmath.mapping.layout import Layout, check_layout
from tokenmath.specs.model import Model, validate
from tokenmath.specs.params import count_params

RESERVE = 0.10
HAS_CP = "cp" in {f.name for f in dataclasses.fields(Layout)}                  # context parallelism
HAS_OVERHEAD = "layer_overhead_s" in {f.name for f in dataclasses.fields(Efficiency)}
try:                                      # the largest batch infer() accepts
    from tokenmath.base.validators import MAX_BATCH as INFER_MAX_BATCH
except ImportError:
    INFER_MAX_BATCH = 10_000_000
REL = 1e-9          # slack for float summation order in inequalities
# CI runs a fixed, bounded set of examples (derandomize: the same draws every run). A longer random hunt:
#   TOKENMATH_PROPERTY_SCALE=20 python -m pytest tests/test_properties.py
SCALE = max(1, int(os.environ.get("TOKENMATH_PROPERTY_SCALE", "1")))
PROFILE = dict(deadline=None, derandomize=SCALE == 1,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ---- strategies -------------------------------------------------------------------------------------------------
def _divisors(n: int, upto: int = 10**9) -> list[int]:
    return [d for d in range(1, min(n, upto) + 1) if n % d == 0]


@st.composite
def models(draw, kinds=("mha", "gqa", "mqa", "mla", "moe", "moe_mla")) -> Model:
    kind = draw(st.sampled_from(kinds))
    mla = kind in ("mla", "moe_mla")
    moe = kind in ("moe", "moe_mla")
    n_layers = draw(st.integers(1, 96))
    n_heads = draw(st.sampled_from([1, 2, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64, 96, 128]))
    head_dim = draw(st.sampled_from([32, 64, 80, 96, 128, 256]))
    kw: dict = dict(id="hyp", name="hyp", n_layers=n_layers, n_heads=n_heads,
                    vocab_size=draw(st.integers(256, 262_144)), tie_embeddings=draw(st.booleans()),
                    ffn_gated=draw(st.booleans()), qkv_bias=draw(st.booleans()), o_bias=draw(st.booleans()),
                    mlp_bias=draw(st.booleans()), qk_norm=draw(st.booleans()),
                    norm=draw(st.sampled_from(["rmsnorm", "layernorm"])),
                    attention_sinks=draw(st.booleans()),
                    native_dtype=draw(st.sampled_from(["bf16", "fp16", "fp8"])))
    if draw(st.booleans()):     # head_dim given explicitly, d_model free (Gemma, Qwen3)
        kw.update(d_model=draw(st.integers(16, 16_384)), head_dim=head_dim)
    else:
        kw.update(d_model=n_heads * head_dim)
    if draw(st.booleans()):
        kw.update(positional="learned", max_context=draw(st.integers(128, 131_072)))
    else:
        kw.update(positional="rope", max_context=draw(st.sampled_from([0, 4096, 131_072])))
    if mla:
        kw.update(attention="mla", n_kv_heads=n_heads, head_dim=0,
                  q_lora_rank=draw(st.sampled_from([0, 384, 1536])),
                  kv_lora_rank=draw(st.sampled_from([64, 128, 256, 512])),
                  qk_rope_head_dim=draw(st.sampled_from([16, 32, 64])),
                  qk_nope_head_dim=draw(st.sampled_from([32, 64, 128])),
                  v_head_dim=draw(st.sampled_from([32, 64, 128])))
    elif kind == "mha":
        kw["n_kv_heads"] = draw(st.sampled_from([0, n_heads]))
    elif kind == "mqa":
        kw["n_kv_heads"] = 1
    else:
        kw["n_kv_heads"] = draw(st.sampled_from(_divisors(n_heads)))
    if not mla and draw(st.booleans()):    # sliding windows, any repeating pattern of local and global layers
        kw["sliding_window"] = draw(st.integers(16, 8192))
        kw["attention_pattern"] = tuple(draw(st.lists(st.sampled_from(["sliding", "full"]), min_size=1, max_size=6)))
    if moe:
        E = draw(st.sampled_from([2, 4, 8, 16, 32, 60, 64, 128, 256]))
        kw.update(n_experts=E, experts_per_token=draw(st.integers(1, min(E, 8))),
                  moe_intermediate=draw(st.integers(32, 4096)),
                  first_dense_layers=draw(st.integers(0, min(3, n_layers))),
                  moe_layer_step=draw(st.sampled_from([1, 1, 2])),
                  router_bias=draw(st.booleans()),
                  native_expert_dtype=draw(st.sampled_from(["", "", "mxfp4"])))
        if draw(st.booleans()):
            kw.update(n_shared_experts=draw(st.integers(1, 2)),
                      shared_intermediate=draw(st.sampled_from([0, 1024, 2816])))
        kw["ffn_intermediate"] = draw(st.integers(64, 32_768))   # the dense layers' width (if any)
    else:
        kw["ffn_intermediate"] = draw(st.integers(64, 65_536))
    return validate(Model(**kw))


@st.composite
def hardwares(draw, domain=None) -> Hardware:
    bf16 = draw(st.floats(20, 5000))
    tf = {"bf16": bf16}
    if draw(st.booleans()):
        tf["fp16"] = bf16
    if draw(st.booleans()):
        tf["fp8"] = bf16 * draw(st.sampled_from([1.0, 2.0]))
    if draw(st.booleans()):
        tf["fp4"] = bf16 * 4
    if draw(st.booleans()):
        tf["int8"] = bf16 * 2
    up = draw(st.floats(16, 1800))
    rec = {"memory_gb": draw(st.floats(1, 1024)), "memory_bw_tbs": draw(st.floats(0.3, 20)), "tflops": tf,
           "scaleup_domain": domain or draw(st.sampled_from([1, 2, 4, 8, 16, 64, 72])),
           "scaleup_gbs": up, "scaleout_gbs": up * draw(st.floats(0.01, 1.0)),
           "scaleup_latency_us": draw(st.floats(0, 20)), "scaleout_latency_us": draw(st.floats(0, 100)),
           "tdp_w": draw(st.floats(50, 2000)), "price_usd_per_hour": draw(st.floats(0.1, 20))}
    return from_record("hyp-chip", rec)


def _tp_choices(m: Model) -> list[int]:
    out = []
    for tp in _divisors(m.n_heads, 64):
        if m.is_mla or m.kv_heads % tp == 0 or tp % m.kv_heads == 0:
            out.append(tp)
    return out


@st.composite
def layouts(draw, m: Model, simple: bool = False) -> Layout:
    tp = draw(st.sampled_from(_tp_choices(m)))
    if simple:
        return Layout(tp, 1, 1, 1)
    pp = draw(st.integers(1, min(4, m.n_layers)))
    ep = draw(st.sampled_from(_divisors(m.n_experts, 16))) if m.is_moe else 1
    dp = draw(st.integers(1, 3))
    cp = draw(st.sampled_from([1, 1, 1, 2, 4])) if HAS_CP else 1
    lay = Layout(tp, pp, ep, dp, cp) if HAS_CP else Layout(tp, pp, ep, dp)
    check_layout(m, lay)
    return lay


@st.composite
def cases(draw, kinds=None, simple_layout=False, domain=None):
    m = draw(models(kinds) if kinds else models())
    hw = draw(hardwares(domain))
    lay = draw(layouts(m, simple_layout))
    prec = resolve_precision(m, draw(st.sampled_from((None,) + WEIGHT_DTYPES)), draw(st.sampled_from(KV_DTYPES)))
    wl = dict(batch=draw(st.one_of(st.integers(1, 512), st.integers(512, 200_000))), input_len=draw(st.integers(1, 32_768)),
              output_len=draw(st.integers(1, 2048)))
    return m, hw, lay, prec, wl


def run(m, hw, lay, prec, eff, wl, **over):
    w = {**wl, **over}
    return serve(m, hw, lay, prec, eff, w["batch"], w["input_len"], w["output_len"], RESERVE)


def f(x) -> float:
    return float(np.asarray(x))


def _eff(flops, bw, link, overhead):
    if HAS_OVERHEAD:
        return Efficiency(flops, bw, link, "hypothesis", overhead)
    return Efficiency(flops, bw, link, "hypothesis")


efficiencies = st.builds(_eff, st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.floats(0.05, 1.0),
                         st.sampled_from([0.0, 0.0, 5e-6, 40e-6]))


def cp_of(lay: Layout) -> int:
    return int(getattr(lay, "cp", 1))


def layout_kw(lay: Layout) -> dict:
    kw = dict(tp=int(lay.tp), pp=int(lay.pp), ep=int(lay.ep), dp=int(lay.dp))
    if cp_of(lay) > 1:
        kw["cp"] = cp_of(lay)
    return kw


# ---- 1. nothing beats the pure roofline -------------------------------------------------------------------------
def napkin_decode_floor(m: Model, hw: Hardware, lay: Layout, prec, seqs: float, input_len: int) -> float:
    """An independent lower bound on one decode step per chip, from the model's fields, at 100% of every peak.

    bytes: every non-embedding weight matrix once (shard 1/tp; routed experts: at least top-k per MoE layer, the
    expert shard 1/(tp ep)), the lm_head, and each sequence's KV cache of `input_len` tokens (its TP shard);
    FLOPs: 2 per active weight per token. No norm weights, biases, activations or attention FLOPs: a floor.
    """
    P = count_params(m)
    tp, ep = float(lay.tp), float(lay.ep)
    wb, eb, kvb = prec.weight.bytes, prec.expert.bytes, prec.kv.bytes
    d, V = m.d_model, m.vocab_size
    per_layer_attn = P.attn_per_layer
    dense = P.dense_ffn_per_layer * P.n_dense_layers if m.ffn_intermediate else 0.0
    shared = P.shared_per_moe_layer * P.n_moe_layers
    experts_k = P.expert * m.experts_per_token * P.n_moe_layers
    matmul_w = per_layer_attn * m.n_layers + dense + shared + V * d
    weight_bytes = matmul_w * wb / tp + experts_k * eb / (tp * ep)
    # KV: per layer per token, written out here from the architecture (not from kv_cache.py)
    per_tok_layer = (m.kv_lora_rank + m.qk_rope_head_dim) if m.is_mla else 2 * m.kv_heads * m.hd
    pat = m.attention_pattern or ("full",)
    kinds = [pat[i % len(pat)] if m.sliding_window else "full" for i in range(m.n_layers)]
    held = sum(input_len if k == "full" else min(input_len, m.sliding_window) for k in kinds)
    shard = (1.0 if m.is_mla else min(tp, m.kv_heads)) * cp_of(lay)   # context parallelism splits the KV reads too
    kv = per_tok_layer * held * kvb * seqs / shard
    flops = 2.0 * (matmul_w + experts_k) * seqs / tp
    peak = max(hw.flops.values())
    return max((weight_bytes + kv) / hw.memory_bw, flops / peak)


@settings(max_examples=80 * SCALE, **PROFILE)
@given(cases(), efficiencies)
def test_no_prediction_beats_the_pure_roofline(case, eff):
    m, hw, lay, prec, wl = case
    for e in (DEFAULT, eff, PEAK):
        sv = run(m, hw, lay, prec, e, wl)
        step, floor = f(sv.decode_step_s), f(sv.decode_floor_s)
        assert step >= floor * (1 - REL), (e, step, floor)
        napkin = napkin_decode_floor(m, hw, lay, prec, f(sv.seqs_per_microbatch), wl["input_len"])
        assert step >= napkin * (1 - REL), (e, step, napkin)
        assert floor >= napkin * (1 - REL), ("the engine's floor is below the napkin floor", floor, napkin)
        # the explain text's napkin floor (weights + KV one chip of the critical path reads) never exceeds either
        nap = f(sv.decode.napkin_floor_s(hw))
        assert nap <= floor * (1 + REL) and nap <= step * (1 + REL), (e, nap, floor, step)
        pre_floor = f(sv.prefill.roofline_floor_s(hw, prec))
        assert f(sv.ttft_s) >= pre_floor * (1 - REL)
    # at 100% of every peak, one step can only meet the bound: all ops memory-bound or all compute-bound
    sv = run(m, hw, lay, prec, PEAK, wl)
    assert f(sv.decode_step_s) >= f(sv.decode_floor_s) * (1 - REL)


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(simple_layout=True), st.booleans())
def test_infer_never_reports_below_its_floor(case, peak):
    m, hw, lay, prec, wl = case
    r = infer(m, hw, tp=int(lay.tp), batch=wl["batch"], input_len=wl["input_len"], output_len=wl["output_len"],
              weight_dtype=prec.weight.name, kv_dtype=prec.kv.name, efficiency=PEAK if peak else None)
    if r.fits:
        assert r.decode_step_s >= r.decode_floor_s * (1 - REL)
        assert r.output_tokens_per_s_per_user <= 1 / r.decode_floor_s * (1 + REL)


# ---- 2. more bandwidth, FLOP/s or link speed is never slower ----------------------------------------------------
def faster(hw: Hardware, bw=1.0, fl=1.0, link=1.0) -> Hardware:
    return hw.replace(memory_bw=hw.memory_bw * bw, flops=MappingProxyType({k: v * fl for k, v in hw.flops.items()}),
                      scaleup_bw=hw.scaleup_bw * link,
                      scaleout_bw=None if hw.scaleout_bw is None else hw.scaleout_bw * link)


@settings(max_examples=60 * SCALE, **PROFILE)
@given(cases(), st.floats(1.0, 8.0), st.floats(1.0, 8.0), st.floats(1.0, 8.0), st.sampled_from([DEFAULT, PEAK]))
def test_more_bandwidth_flops_or_link_is_never_slower(case, kb, kf, kl, eff):
    m, hw, lay, prec, wl = case
    base = run(m, hw, lay, prec, eff, wl)
    for better in (faster(hw, bw=kb), faster(hw, fl=kf), faster(hw, link=kl), faster(hw, kb, kf, kl)):
        sv = run(m, better, lay, prec, eff, wl)
        assert f(sv.decode_step_s) <= f(base.decode_step_s) * (1 + REL)
        assert f(sv.ttft_s) <= f(base.ttft_s) * (1 + REL)
        assert f(sv.decode_floor_s) <= f(base.decode_floor_s) * (1 + REL)


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(kinds=("moe", "moe_mla")), st.floats(1.0, 4.0), st.floats(1.0, 4.0), st.sampled_from([DEFAULT, PEAK]))
def test_expert_imbalance_never_faster_and_overlap_never_slower(case, a, b, eff):
    m, hw, lay, prec, wl = case
    lo, hi = sorted((a, b))
    even = run(m, hw, lay, prec, eff, wl)
    t_lo = serve(m, hw, lay, prec, eff, wl["batch"], wl["input_len"], wl["output_len"], RESERVE, ep_imbalance=lo)
    t_hi = serve(m, hw, lay, prec, eff, wl["batch"], wl["input_len"], wl["output_len"], RESERVE, ep_imbalance=hi)
    for name in ("decode_step_s", "ttft_s"):
        assert f(getattr(even, name)) <= f(getattr(t_lo, name)) * (1 + REL)
        assert f(getattr(t_lo, name)) <= f(getattr(t_hi, name)) * (1 + REL)
    ov = serve(m, hw, lay, prec, eff, wl["batch"], wl["input_len"], wl["output_len"], RESERVE, ep_overlap=True)
    # overlap runs every kernel once per micro-batch, on half the rows, reading the weights again
    # (engine/expert_parallel.py): no op costs more than two of its whole-batch self plus that second read, and the
    # all-to-all it leaves exposed is never longer than without it (transport bf16 here: no SMs held)
    for pas in ("decode", "prefill"):
        a, b = getattr(even, pas), getattr(ov, pas)
        for k, op in a.ops.items():
            if k == "ep_alltoall":
                assert f(b.ops[k].total_s) <= f(op.total_s) * (1 + REL) + 1e-15
                continue
            reread = float(np.max(op.count * (np.asarray(b.ops[k].weight_bytes) - np.asarray(op.weight_bytes))))
            bound = 2 * f(op.total_s) + (reread / op.bandwidth if op.bandwidth > 0 else 0.0)
            assert f(b.ops[k].total_s) <= bound * (1 + REL) + 1e-15, k
    assert f(ov.decode_step_s) >= f(ov.decode_floor_s) * (1 - REL)      # overlap hides comm, never beats the roofline


# ---- 3. decode cost per token never rises with batch while it fits ----------------------------------------------
def _batches_that_fit(case, eff):
    """(batches, served batch, n): whole multiples of the attention groups (dp x ep) and pipeline micro-batches (pp)
    from 1 to 65,536 units (an uneven split leaves the busiest group one sequence ahead of the rest, and that group
    sets the pace, by design), served at once; the first n fit (memory grows with the batch)."""
    m, hw, lay, prec, wl = case
    unit = int(lay.dp) * int(lay.ep) * int(lay.pp)
    k = np.unique(np.concatenate([np.arange(1, 65), np.round(np.geomspace(65, 1 << 16, 48))]))
    batch = unit * k
    sv = run(m, hw, lay, prec, eff, wl, batch=batch)
    fits = np.asarray(sv.fits)
    n = int(np.argmin(fits)) if not fits.all() else fits.size
    assert fits[:n].all() and not fits[n:].any()
    return batch, sv, n


# flat fractions only: the kernel model (DEFAULT, issue 16) quantizes matmuls into 128-row tiles, so one token past a
# tile costs a tile more (tests/test_kernels.py checks its per-token cost over whole tiles and its step)
@settings(max_examples=60 * SCALE, **PROFILE)
@given(cases(), st.sampled_from([Efficiency(), PEAK]))
def test_decode_cost_per_token_non_increasing_in_batch_while_it_fits(case, eff):
    m, hw, lay, prec, wl = case
    batch, sv, n = _batches_that_fit(case, eff)
    per_token = np.asarray(sv.decode_step_s)[:n] / batch[:n]
    assert np.all(np.diff(per_token) <= REL * per_token[:-1]), per_token
    # the step itself never gets shorter with more sequences
    step = np.asarray(sv.decode_step_s)
    assert np.all(np.diff(step) >= -REL * step[:-1])


# the shape-aware kernel model: the same, except just past a GEMM's tile, split-K or wave step (tests/tile_steps.py,
# docs/tile_quantization.md), where it may rise by at most that GEMM's padded / unpadded compute ratio
def _kernel_classes():
    from tokenmath.specs.kernels import class_model
    hop = class_model("nvidia-hopper")
    return [dataclasses.replace(DEFAULT, kernels=k) for k in (
        dataclasses.replace(hop, compute_units=132),                        # waves and split-K on 132 SMs
        dataclasses.replace(class_model("amd-cdna3"), compute_units=304, compute_scale=0.8, bw_scale=0.9),
        class_model("generic"),                                             # tiles only, no wave count
        class_model("apple"))]                                              # matrix-vector path up to 8 rows


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(), st.sampled_from(_kernel_classes()))
def test_decode_cost_per_token_rises_only_at_tile_steps_under_the_kernel_model(case, eff):
    import tile_steps
    m, hw, lay, prec, wl = case
    batch, sv, n = _batches_that_fit(case, eff)
    if n < 2:
        return
    per_token = np.asarray(sv.decode_step_s)[:n] / batch[:n]
    state, inflation = tile_steps.quanta(m, hw, lay, prec, eff, sv)
    assert list(tile_steps.violations(per_token, state[:n], inflation[:, :n], rel=REL)) == [], per_token
    if not m.is_moe:
        # the step itself never gets shorter with more sequences. Not asserted for MoE: the grouped factor is read at
        # whole tiles (kernels.grouped_factor), so within one partly filled wave a grouped GEMM crossing 256 rows per
        # expert gets faster (0.85 -> 0.91); a known defect of the kernel model, docs/tile_quantization.md
        step = np.asarray(sv.decode_step_s)
        assert np.all(np.diff(step) >= -REL * step[:-1])


# ---- 4. KV memory is linear in context, capped by windows -------------------------------------------------------
@settings(max_examples=100 * SCALE, **PROFILE)
@given(models(), st.sampled_from([1.0, 2.0, 4.0]), st.lists(st.integers(0, 1_000_000), min_size=2, max_size=8))
def test_kv_bytes_linear_in_context_capped_by_windows(m, kvb, ctxs):
    per_tok = kv_bytes_per_token(m, kvb)
    assert per_tok > 0 and f(kv_bytes_per_sequence(m, 1, kvb)) == pytest.approx(per_tok, rel=1e-12)
    c = np.array(sorted(ctxs), float)
    kv = np.asarray(kv_bytes_per_sequence(m, c, kvb))
    per_layer = ((m.kv_lora_rank + m.qk_rope_head_dim) if m.is_mla else 2 * m.kv_heads * m.hd) * kvb
    w = m.sliding_window
    full_slope = per_layer * m.n_full_layers
    expect = full_slope * c + per_layer * m.n_sliding_layers * (np.minimum(c, w) if w else c)
    np.testing.assert_allclose(kv, expect, rtol=1e-12)
    assert np.all(np.diff(kv) >= 0)                                   # never shrinks
    assert np.all(kv <= per_tok * c * (1 + 1e-12))                    # never more than linear
    if not m.n_sliding_layers:
        np.testing.assert_allclose(kv, per_tok * c, rtol=1e-12)       # exactly linear
    else:
        past = c >= w                                                 # past the window only full layers grow
        if past.sum() >= 2:
            cp, kp = c[past], kv[past]
            np.testing.assert_allclose(np.diff(kp), full_slope * np.diff(cp), rtol=1e-9, atol=1e-6)
        inside = c <= w
        np.testing.assert_allclose(kv[inside], per_tok * c[inside], rtol=1e-12)
    # two halves hold no more than the whole (subadditive): windows only ever cap
    a, b = float(c[0]), float(c[-1])
    assert f(kv_bytes_per_sequence(m, a + b, kvb)) <= (f(kv_bytes_per_sequence(m, a, kvb))
                                                        + f(kv_bytes_per_sequence(m, b, kvb))) * (1 + 1e-12)


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(), st.integers(1, 64))
def test_kv_memory_per_chip_linear_in_batch_and_context(case, k):
    m, hw, lay, prec, wl = case
    groups = int(lay.dp) * int(lay.ep)
    ctx = wl["input_len"] + wl["output_len"]
    one = run(m, hw, lay, prec, DEFAULT, wl, batch=groups)
    many = run(m, hw, lay, prec, DEFAULT, wl, batch=groups * k)
    assert f(many.memory.kv) == pytest.approx(k * f(one.memory.kv), rel=1e-12)
    assert f(many.memory.weights) == pytest.approx(f(one.memory.weights), rel=1e-12)
    expect = f(kv_bytes_per_sequence(m, ctx, prec.kv.bytes)) / (int(lay.pp) * f(lay.kv_shard(m)))
    assert f(one.memory.kv) == pytest.approx(expect, rel=1e-12)


# ---- 5. inside one scale-up domain is never slower than across domains ------------------------------------------
@settings(max_examples=60 * SCALE, **PROFILE)
@given(cases(), st.sampled_from([DEFAULT, PEAK]), st.integers(1, 256))
def test_group_inside_one_domain_never_slower_than_across(case, eff, mid):
    m, hw, lay, prec, wl = case
    assert hw.scaleout_bw <= hw.scaleup_bw       # physical: the scale-out link is the slower one
    inside = run(m, hw.replace(scaleup_domain=1 << 20), lay, prec, eff, wl)
    across = run(m, hw.replace(scaleup_domain=1), lay, prec, eff, wl)
    assert f(inside.decode_step_s) <= f(across.decode_step_s) * (1 + REL)
    assert f(inside.ttft_s) <= f(across.ttft_s) * (1 + REL)
    # any partial domain sits in between (ring collectives and p2p are hierarchical; an EP all-to-all may use both
    # links at once across domains, so the in-between claim is made for layouts without EP)
    if int(lay.ep) == 1:
        part = run(m, hw.replace(scaleup_domain=mid), lay, prec, eff, wl)
        bigger = run(m, hw.replace(scaleup_domain=2 * mid), lay, prec, eff, wl)
        assert f(inside.decode_step_s) <= f(bigger.decode_step_s) * (1 + REL)
        assert f(bigger.decode_step_s) <= f(part.decode_step_s) * (1 + REL)
        assert f(part.decode_step_s) <= f(across.decode_step_s) * (1 + REL)
        assert f(bigger.ttft_s) <= f(part.ttft_s) * (1 + REL)


# ---- 6. finite and positive ------------------------------------------------------------------------------------
@settings(max_examples=60 * SCALE, **PROFILE)
@given(cases(), efficiencies, st.sampled_from([1, 2, 3]))
def test_results_finite_and_positive(case, eff, bmode):
    m, hw, lay, prec, wl = case
    sv = run(m, hw, lay, prec, eff, wl)
    for name in ("ttft_s", "decode_step_s", "decode_floor_s"):
        v = f(getattr(sv, name))
        assert math.isfinite(v) and v > 0, (name, v)
    assert math.isfinite(f(sv.pp_p2p_s)) and f(sv.pp_p2p_s) >= 0
    for part in (sv.memory.weights, sv.memory.kv, sv.memory.activations):
        assert math.isfinite(f(part)) and f(part) > 0
    assert f(sv.max_batch) >= 0
    batch = {1: wl["batch"], 2: "max", 3: 1}[bmode]
    try:
        r = infer(m, hw, batch=batch, input_len=wl["input_len"], output_len=wl["output_len"],
                  weight_dtype=prec.weight.name, kv_dtype=prec.kv.name, efficiency=eff, **layout_kw(lay))
    except InputError as e:          # only an honest, named refusal is allowed (none is expected here)
        pytest.fail(f"valid input refused: {e}")
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    for k in ("params_total", "params_active", "weights_bytes", "kv_bytes_per_token", "memory_per_chip_bytes",
              "memory_usable_per_chip_bytes"):
        assert d[k] is not None and d[k] > 0, k
    if d["fits"]:
        for k in ("ttft_s", "decode_step_s", "decode_floor_s", "output_tokens_per_s", "output_tokens_per_s_per_user",
                  "cost_per_mtok_input_usd", "cost_per_mtok_output_usd",
                  "cost_per_mtok_output_request_usd", "energy_j_per_output_token"):
            assert d[k] is not None and d[k] > 0, (k, d[k])
        assert d["bottleneck_decode"] in ("compute", "memory", "communication", "overhead")
    else:
        assert d["decode_step_s"] is None and r.advice


# ---- 7. vectorized == scalar, element by element ----------------------------------------------------------------
def _fields(sv, i=None):
    def pick(x):
        a = np.asarray(x)
        return a if i is None else (a[i] if a.ndim else a)
    return {"ttft_s": pick(sv.ttft_s), "decode_step_s": pick(sv.decode_step_s),
            "decode_floor_s": pick(sv.decode_floor_s), "pp_p2p_s": pick(sv.pp_p2p_s),
            "mem_total": pick(np.broadcast_to(sv.memory.total, np.shape(sv.batch))),
            "fits": pick(np.broadcast_to(sv.fits, np.shape(sv.batch))), "max_batch": pick(sv.max_batch),
            "bottleneck_decode": pick(np.broadcast_to(sv.decode.bottleneck, np.shape(sv.batch))),
            "bottleneck_prefill": pick(np.broadcast_to(sv.prefill.bottleneck, np.shape(sv.batch)))}


def _same(vec: dict, one: dict, where: str):
    for k in vec:
        a, b = vec[k], one[k]
        if np.asarray(a).dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, err_msg=f"{k} at {where}")
        else:
            assert np.array_equal(a, b), (k, where, a, b)


@settings(max_examples=50 * SCALE, **PROFILE)
@given(cases(), st.lists(st.integers(1, 100_000), min_size=1, max_size=12), st.sampled_from([DEFAULT, PEAK]))
def test_vectorized_batch_equals_scalar(case, batches, eff):
    m, hw, lay, prec, wl = case
    B = np.array(batches, float)
    vec = run(m, hw, lay, prec, eff, wl, batch=B)
    for i, b in enumerate(batches):
        one = run(m, hw, lay, prec, eff, wl, batch=b)
        _same(_fields(vec, i), _fields(one), f"batch {b}")


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(), st.lists(st.tuples(st.integers(1, 65_536), st.integers(1, 4096)), min_size=1, max_size=8))
def test_vectorized_lengths_equal_scalar(case, lengths):
    m, hw, lay, prec, wl = case
    L = np.array([a for a, _ in lengths], float)
    O = np.array([b for _, b in lengths], float)
    vec = run(m, hw, lay, prec, DEFAULT, wl, input_len=L, output_len=O)
    for i, (a, b) in enumerate(lengths):
        one = run(m, hw, lay, prec, DEFAULT, wl, input_len=a, output_len=b)
        _same(_fields(vec, i), _fields(one), f"lengths {a}, {b}")


@settings(max_examples=40 * SCALE, **PROFILE)
@given(cases(simple_layout=True), st.sampled_from([DEFAULT, PEAK]))
def test_vectorized_layouts_equal_scalar(case, eff):
    m, hw, _, prec, wl = case
    tps = _tp_choices(m)
    vec = serve(m, hw, Layout(np.array(tps)), prec, eff, wl["batch"], wl["input_len"], wl["output_len"], RESERVE)
    for i, tp in enumerate(tps):
        one = serve(m, hw, Layout(tp), prec, eff, wl["batch"], wl["input_len"], wl["output_len"], RESERVE)
        _same(_fields(vec, i), _fields(one), f"tp {tp}")


@settings(max_examples=25 * SCALE, **PROFILE)
@given(cases(), st.integers(1, 32_768), st.data())
def test_hyperbola_points_equal_infer(case, context, data):
    m, hw, lay, prec, _ = case
    kw = dict(tp=int(lay.tp), pp=int(lay.pp), ep=int(lay.ep), dp=int(lay.dp), weight_dtype=prec.weight.name,
              kv_dtype=prec.kv.name)
    if "cp" in inspect.signature(hyperbola).parameters and cp_of(lay) > 1:
        kw["cp"] = cp_of(lay)
    try:
        h = hyperbola(m, hw, context=context, max_points=32, **kw)
    except InputError as e:                 # nothing fits at this context: a named refusal, then nothing to compare
        assert e.field == "context"
        return
    pts = h.to_dict()["points"]
    idx = sorted(set(data.draw(st.lists(st.integers(0, len(pts) - 1), min_size=1, max_size=4))) | {0, len(pts) - 1})
    for i in idx:
        b = int(h.batch[i])
        if b > INFER_MAX_BATCH:     # beyond what infer accepts; the hyperbola's grid has no cap
            continue
        r = infer(m, hw, batch=b, input_len=context, output_len=1, **kw)
        assert r.fits, f"hyperbola point batch {b} <= max batch {h.max_batch} does not fit in infer"
        assert r.decode_step_s == pytest.approx(float(h.step_s[i]), rel=1e-12)
        assert pts[i]["tokens_per_s_per_user"] == pytest.approx(r.output_tokens_per_s_per_user, rel=1e-12)
        assert pts[i]["bottleneck"] == str(r.decode.bottleneck)
        if pts[i]["cost_per_mtok_output_usd"] is not None:
            assert pts[i]["cost_per_mtok_output_usd"] == pytest.approx(r.cost_per_mtok_output_usd, rel=1e-12)
    # the floor the curve flattens onto is below every point's per-token time
    assert np.all(h.per_token_s >= h.floor_per_token_s * (1 - 1e-6))
