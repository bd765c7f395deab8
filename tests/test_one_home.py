"""One home each: the bytes a chip may use and the KV cache they leave (engine/memory.py: usable_bytes, fixed_bytes,
kv_bytes_left, kv_capacity), and every conversion of chip time into dollars (engine/economics.py). The questions that
report these figures (infer, context, the simulator's replica, moe, training, deduce) agree with the home and with
each other, and the home agrees with the arithmetic written out by hand."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tokenmath.analyses.inverse.deduce import deduce
from tokenmath.analyses.inverse.forward_model import predict
from tokenmath.analyses.inverse.priors import Priors
from tokenmath.analyses.serving.context import context
from tokenmath.analyses.serving.infer import infer
from tokenmath.analyses.serving.simulation.replica import kv_capacity_tokens
from tokenmath.analyses.setup import setup
from tokenmath.analyses.training.training_cost import training_cost
from tokenmath.engine import economics as ec
from tokenmath.engine.closed_form import prefill_chip_s_per_token
from tokenmath.engine.memory import (fixed_bytes, held_per_sequence_per_chip, kv_bytes_left, kv_capacity, kv_context,
                                     room_beside, running_cap, usable_bytes)
from tokenmath.mapping.layout import with_attention
from tokenmath.specs.hardware import get_hardware

INPUT, OUTPUT = 2048, 256

# (model, hardware, layout, engine, attention sharding): a "total" and a "free" memory fraction, data parallel,
# expert parallel, MLA, and attention sharded over the batch (each rank holds its own sequences)
CASES = [
    ("llama-3.1-70b", "h100-sxm", dict(chips=8), "vllm", None),
    ("llama-3.1-70b", "h100-sxm", dict(chips=8), "tensorrt-llm", None),
    ("llama-3.1-8b", "h100-sxm", dict(chips=2, tp=1, dp=2), "sglang", None),
    ("deepseek-v3", "h200", dict(chips=8, ep=8), "vllm", None),
    ("deepseek-v3", "h200", dict(chips=8), "sglang", "dp"),
]


def _home_max_batch(su, ctx):
    """Max batch straight from the one home: the KV bytes left per chip over one sequence's, per rank and group."""
    m, hw, lay, prec, eng = su.model, su.hardware, su.layout, su.precision, su.engine
    fixed = fixed_bytes(m, lay, prec.weight.bytes, prec.expert.bytes, hw.memory_bytes, eng)
    per_seq = held_per_sequence_per_chip(m, lay, prec.kv.bytes, kv_context(ctx, eng))
    ranks = lay.attn_ranks() if lay.attn_by_batch else 1.0
    return int(kv_capacity(kv_bytes_left(hw.memory_bytes, su.reserve, fixed, eng), per_seq, ranks,
                           int(lay.dp * lay.ep), running_cap(hw.memory_bytes, eng)))


@pytest.mark.parametrize("model,hw,lay,engine,attn", CASES)
def test_infer_context_and_replica_agree_on_kv_capacity(model, hw, lay, engine, attn):
    r = infer(model, hw, **lay, engine=engine, attention_sharding=attn, input_len=INPUT, output_len=OUTPUT)
    su = setup(model, hw, **lay, engine=engine)
    if attn is not None:
        su = replace(su, layout=with_attention(su.model, su.layout, attn))
    ctx = INPUT + OUTPUT
    home = _home_max_batch(su, ctx)
    assert home >= 1
    assert r.max_batch == home
    if attn is None:      # context asks about heads-sharded attention
        assert context(model, hw, **lay, engine=engine, context=ctx).max_batch_at_context == home
    # the simulator's replica counts the same room in tokens: per rank floor(left / one token's bytes); whole
    # sequences of ctx tokens (in whole KV blocks) of it give the same max batch
    lay_ = su.layout
    ranks, groups = int(lay_.attn_ranks()), int(lay_.dp * lay_.ep)
    tokens = kv_capacity_tokens(su)
    assert tokens % (ranks * groups) == 0
    per_rank_seqs = (tokens // (ranks * groups)) // int(kv_context(ctx, su.engine))
    assert min(per_rank_seqs * ranks, running_cap(su.hardware.memory_bytes, su.engine)) * groups == home
    # and infer's usable bytes per chip are the home's
    fixed = fixed_bytes(su.model, lay_, su.precision.weight.bytes, su.precision.expert.bytes,
                        su.hardware.memory_bytes, su.engine)
    assert float(np.max(r.memory.usable)) == float(np.max(usable_bytes(su.hardware.memory_bytes, su.reserve, fixed,
                                                                      su.engine)))


def test_usable_bytes_by_hand():
    hbm = 80e9
    # no engine: HBM x (1 - reserve) = 80 GB x 0.9 = 72 GB
    assert usable_bytes(hbm, 0.1) == pytest.approx(72e9)
    # a fraction of the total (vLLM 0.9): 0.9 x 80 GB = 72 GB, whatever the weights
    vllm = setup("llama-3.1-8b", "h100-sxm", engine="vllm").engine
    assert usable_bytes(hbm, 0.1, 30e9, vllm) == pytest.approx(vllm.kv_memory_fraction * 80e9)
    # a fraction of what the weights leave (TensorRT-LLM 0.9 of free): 30 + 0.9 x (80 - 30) = 75 GB; KV gets 45 GB
    trt = setup("llama-3.1-8b", "h100-sxm", engine="tensorrt-llm").engine
    f = trt.kv_memory_fraction
    assert usable_bytes(hbm, 0.1, 30e9, trt) == pytest.approx(30e9 + f * 50e9)
    assert kv_bytes_left(hbm, 0.1, 30e9, trt) == pytest.approx(f * 50e9)
    assert kv_bytes_left(hbm, 0.1, 90e9) == 0.0
    # 45 GB of KV at 327,680 B per token (Llama 3.1 70B, bf16, on one chip): floor(45e9 / 327680) = 137,329 tokens
    assert int(kv_capacity(45e9, 327680.0)) == 137329
    # room beside 10 GB of KV under the free fraction: x with 10 = f (80 - 30 - x): x = 50 - 10 / f GB
    assert room_beside(hbm, 0.1, 30e9, 10e9, trt) == pytest.approx(50e9 - 10e9 / f)
    # ... and under the reserve: 72 - 30 - 10 = 32 GB
    assert room_beside(hbm, 0.1, 30e9, 10e9) == pytest.approx(32e9)


def test_seconds_to_dollars_by_hand():
    # 8 chips at $2.99 per chip-hour: 8 x 2.99 = $23.92 per hour; / 3600 = $0.0066444 per second
    usd_s = ec.usd_per_s(8, 2.99)
    assert usd_s == pytest.approx(23.92 / 3600, rel=1e-15)
    assert usd_s == pytest.approx(0.00664444444, rel=1e-9)
    # a 2 s step of 1,024 x 4,096 = 4,194,304 tokens: 0.0066444 x 2 = $0.0132889; / 4,194,304 = $3.16832e-9 per
    # token = $0.00316832 per million tokens
    assert ec.cost_per_token(usd_s, 2.0, 4_194_304) == pytest.approx(3.168318e-9, rel=1e-6)
    assert ec.decode_cost_per_mtok(usd_s, 2.0, 4_194_304) == pytest.approx(3.168318e-3, rel=1e-6)
    assert ec.per_token(ec.per_mtok(3.168318e-9)) == pytest.approx(3.168318e-9, rel=1e-15)
    # 1,000 chip-hours at $2.99 = $2,990; 8 chips for 125 hours (450,000 s) are those 1,000 chip-hours
    assert ec.usd_of_chip_hours(float(ec.chip_hours(8, 450_000.0)), 2.99) == pytest.approx(2990.0)
    # HBM of a $3.60/h chip with 100 GB: 3.6 / 3600 = $0.001 per second; / 1e11 B = 1e-14 $ per byte-second
    hbm = ec.usd_per_byte_s_of(ec.usd_per_s(1, 3.6), 1e11)
    assert hbm == pytest.approx(1e-14)
    # holding 100 kB per token for 300 s: 1e5 x 300 x 1e-14 = $3e-7 per token = $0.30 per million tokens
    assert ec.holding_cost_per_mtok(1e5, 300.0, hbm) == pytest.approx(0.30)
    # host DRAM at $0.004237 per GiB-hour: / 2^30 / 3600 = 1.0961e-15 $ per byte-second, and back
    dram = ec.usd_per_byte_s_from_gib_hour(0.004237)
    assert dram == pytest.approx(1.096115e-15, rel=1e-6)
    assert ec.usd_per_gib_hour(dram) == pytest.approx(0.004237, rel=1e-12)
    # 0.0002 chip-seconds per token at $0.001 per chip-second: $2e-7 per token = $0.20 per million
    assert ec.cost_per_mtok(2e-4, 1e-3) == pytest.approx(0.20)
    assert ec.chip_s_of_usd(ec.usd_of_chip_s(2e-4, 1e-3), 1e-3) == pytest.approx(2e-4)


def test_training_cost_dollars_are_economics():
    hw = get_hardware("h100-sxm")
    tc = training_cost(1e9, 2e10, hw)
    # the formula written out: chips x $/chip-hour / 3600 x step / tokens per step
    by_hand = tc.chips * hw.price_usd_per_hour / 3600 * tc.step_time_s / tc.global_batch_tokens
    assert tc.usd_per_token == pytest.approx(by_hand, rel=1e-12)
    assert tc.usd_per_token == ec.cost_per_token(ec.usd_per_s(tc.chips, hw.price_usd_per_hour), tc.step_time_s,
                                                 tc.global_batch_tokens)
    assert tc.to_dict()["usd_per_mtok"] == ec.per_mtok(tc.usd_per_token)


def test_deduce_dollars_are_economics():
    d = deduce(0.6, 2.4, hardware="h100-sxm")
    sc, pr = d.scenario, d.priors
    usd_s = ec.usd_per_s(1, sc["usd_per_hour"] * sc["cost_factor"])
    assert sc["usd_per_chip_s"] == usd_s
    assert sc["usd_per_chip_s"] == pytest.approx(sc["usd_per_hour"] * sc["cost_factor"] / 3600, rel=1e-15)
    # the input price bought back as chip-seconds: $0.6 per Mtok = $6e-7 per token, x (1 - margin) x utilization
    # (what the chips cost the provider for the time they served it), over $ per chip-second
    assert sc["chip_s_in"] == ec.chip_s_of_usd(ec.per_token(0.6) * (1 - sc["margin"]) * sc["utilization"],
                                               usd_s) / pr.cost_scale
    assert sc["chip_s_in"] == pytest.approx(0.6e-6 * (1 - sc["margin"]) * sc["utilization"] / usd_s / pr.cost_scale)


def test_deduce_forward_model_by_hand():
    # one scenario: a $3.60/h chip ($0.001 per chip-second), utilization 0.5, margin 0.5 (price = cost / 0.25)
    a = lambda x: np.array([float(x)])  # noqa: E731
    s = {"Na": a(1e10), "Nt": a(1e10), "q": a(1.0), "K": a(1e5), "g": a(0.0), "F": a(1e15), "W": a(2e12),
         "B": a(64), "L": a(1000), "ctx": a(2000), "usd_h": a(3.6), "util": a(0.5), "margin": a(0.5),
         "hbm": a(1e11), "ttl": a(300.0)}
    obs = SimpleNamespace(cached_input_price=0.1, long_threshold=None, batch_discount=None, output_speed=None,
                          ttft_s=None, context_window=None)
    pr = replace(Priors(), cost_scale=1.0)
    out = predict(s, obs, pr)
    # cached input: 1e5 B per token x 300 s x (0.001 $/s / 1e11 B) = $3e-7 per token; / 0.25 = $1.2e-6; = $1.20/Mtok
    assert float(out["cached_input_price"][0]) == pytest.approx(1.2)
    # input: the prefill's chip-seconds per token x $0.001 / 0.25 per chip-second x 1e6
    cs = prefill_chip_s_per_token(s["Na"], s["Nt"], s["q"], s["K"], s["L"], s["B"], s["F"], s["W"], s["g"])
    assert float(out["input_price"][0]) == float(ec.cost_per_mtok(cs, 0.001 / 0.25)[0])
