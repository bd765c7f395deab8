"""Issue 15 items 12 and 13: the default serving layout of a MoE model, dp filling the chips the given degrees
leave, and the web's calibrated=false.

Item 12 rule (mapping/layout.py make_layout): with only `chips`, a dense model is tensor-parallel over all of them;
a MoE model is tensor-parallel only as far as its KV cache splits by heads without copies (up to n_kv_heads for
GQA; 1 for MLA, whose one latent every TP rank would hold whole), its attention data-parallel over the remaining
groups and its experts expert-parallel over them (vLLM "Data Parallel Deployment": DP attention with EP for MoE
models with MLA; SGLang --enable-dp-attention; DeepSeek-V3 report Sec. 3.4)."""
import json

import numpy as np
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.context import context
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.input_vs_output import prices
from tokenmath.base.errors import InputError
from tokenmath.engine.memory import CHUNK_TOKENS
from tokenmath.mapping.layout import make_layout
from tokenmath.specs.efficiency import DEFAULT
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params


def _degrees(lay):
    return int(lay.tp), int(lay.pp), int(lay.ep), int(lay.dp)


# ---- item 12 ------------------------------------------------------------------------------------------------------

def test_deepseek_v3_default_layout_is_dp_attention_with_ep_and_its_max_batch():
    m = get_model("deepseek-v3")
    assert _degrees(make_layout(m, chips=8)) == (1, 1, 8, 1)          # before: (8, 1, 1, 1)
    # max batch at 32,768 in + 256 out on 8 x H200 (fp8 weights, bf16 KV), by hand:
    #   per chip, ep=8, tp=1: non-expert weights whole, 1/8 of the 256 experts (32 each)
    #   activations of one 8,192-token chunk: 8,192 x (8 x 7,168 + 3 x 18,432) x 2 B + 256 x 129,280 x 4 B
    #   KV per sequence: 576 values x 61 layers x 2 B = 70,272 B/token x 33,024 tokens = 2.32 GB, whole on its chip
    #   sequences per chip = floor((0.9 x HBM - weights - activations) / 2.32 GB) = 11 -> 8 groups x 11 = 88
    # (tp=8: every chip keeps the whole latent of every sequence: floor(18.07) = 18)
    P = count_params(m)
    hw = get_hardware("h200")
    wb = 1.000244140625                                   # fp8 with its block scales, B/param
    weights = P.non_expert * wb + P.experts_total * wb / 8
    act = CHUNK_TOKENS * (8 * 7168 + 3 * 18432) * 2 + 256 * 129280 * 4
    per_seq = 70272 * 33024
    by_hand = int((0.9 * hw.memory_bytes - weights - act) // per_seq) * 8
    default = tm.infer("deepseek-v3", "h200", chips=8, input_len=32768, output_len=256, batch="max")
    ep8 = tm.infer("deepseek-v3", "h200", chips=8, ep=8, input_len=32768, output_len=256, batch="max")
    tp8 = tm.infer("deepseek-v3", "h200", chips=8, tp=8, input_len=32768, output_len=256, batch="max")
    assert default.batch == ep8.batch == by_hand
    if hw.memory_bytes == 141e9:
        assert by_hand == 88 and tp8.batch == 18
    assert default.batch > 4 * tp8.batch
    assert default.decode_step_s == ep8.decode_step_s


def test_moe_default_layout_tp_up_to_the_kv_heads_then_ep():
    cases = {
        ("deepseek-v3", 8): (1, 1, 8, 1), ("kimi-k2", 16): (1, 1, 16, 1),        # MLA: no KV heads to split
        ("qwen3-30b-a3b", 8): (4, 1, 2, 1),                                      # 4 KV heads: tp 4, then ep 2
        ("mixtral-8x7b", 8): (8, 1, 1, 1), ("mixtral-8x7b", 16): (8, 1, 2, 1),   # 8 KV heads
        ("mixtral-8x7b", 128): (8, 1, 8, 2),                                     # ep stops at the 8 experts
        ("gpt-oss-120b", 8): (8, 1, 1, 1),
        ("llama-3.1-70b", 8): (8, 1, 1, 1), ("llama-3.1-8b", 2): (2, 1, 1, 1),  # dense: tp
    }
    for (model, chips), want in cases.items():
        assert _degrees(make_layout(get_model(model), chips=chips)) == want, (model, chips)


def test_explicit_degrees_override_the_moe_default():
    m = get_model("deepseek-v3")
    assert _degrees(make_layout(m, chips=8, tp=8)) == (8, 1, 1, 1)
    assert _degrees(make_layout(m, chips=8, ep=4)) == (2, 1, 4, 1)      # ep given: tp takes the rest, as before
    assert _degrees(make_layout(m, chips=16, pp=2)) == (1, 2, 8, 1)     # the rest of pp: the MoE default
    assert _degrees(make_layout(get_model("llama-3.1-70b"), chips=16, pp=2)) == (8, 2, 1, 1)


# ---- item 13 ------------------------------------------------------------------------------------------------------

def test_chips_beyond_the_given_degrees_fill_dp():
    m = get_model("llama-3.1-70b")
    assert _degrees(make_layout(m, chips=8, tp=4)) == (4, 1, 1, 2)      # before: InputError
    assert _degrees(make_layout(m, chips=16, tp=4, pp=2)) == (4, 2, 1, 2)
    assert _degrees(make_layout(get_model("deepseek-v3"), chips=16, tp=1, ep=8)) == (1, 1, 8, 2)
    a = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, tp=4, batch=16)
    b = tm.infer("llama-3.1-70b", "h100-sxm", tp=4, dp=2, batch=16)
    assert a.chips == 8 and a.to_dict() == b.to_dict()
    h = hyperbola("llama-3.1-70b", "h100-sxm", chips=8, tp=4)
    assert (int(h.setup.layout.dp), h.setup.chips) == (2, 8)
    p = prices("llama-3.1-70b", "h100-sxm", chips=8, tp=4)
    assert (int(p.setup.layout.dp), p.setup.chips) == (2, 8)
    c = context("llama-3.1-70b", "h100-sxm", chips=8, tp=4)
    assert int(c.setup.layout.dp) == 2


def test_inconsistent_degrees_still_refused():
    m = get_model("llama-3.1-70b")
    with pytest.raises(InputError) as e:
        make_layout(m, chips=8, tp=4, dp=1)              # dp given: the product must equal chips
    assert e.value.field == "chips"
    with pytest.raises(InputError) as e:
        make_layout(m, chips=6, tp=4)                    # 6 is not a multiple of 4
    assert e.value.field == "chips"
    with pytest.raises(InputError) as e:
        make_layout(m, chips=8, tp=[2, 4])
    assert e.value.field == "tp"


# ---- item 13: the web's calibrated=false ----------------------------------------------------------------------------

def test_web_calibrated_false_uses_the_kernel_ceilings():
    from tokenmath.faces.web.server import start_in_thread
    import http.client
    srv, thread = start_in_thread("127.0.0.1", 0)

    def get(q):
        conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=30)
        try:
            conn.request("GET", "/api/infer?model=llama-3.1-70b&hardware=h100-sxm&chips=8" + q)
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()
    try:
        s0, default = get("")
        s1, cal = get("&calibrated=true")
        s2, unc = get("&calibrated=false")
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    assert s0 == s1 == s2 == 200
    # calibrated (the default, as in the CLI and Python): the Hopper kernel model with the residuals fitted for
    # the page's engine on nvidia-datacenter parts (specs.efficiency.physics_calibrated)
    from tokenmath.specs.efficiency import default_for
    from tokenmath.specs.serving_engines import get_engine
    assert default["decode_step_s"] == cal["decode_step_s"]
    phys = default_for("h100-sxm", get_engine(cal["engine"]["id"]))
    assert cal["efficiency"]["memory_bw"] == phys.memory_bw == pytest.approx(0.90 * phys.kernels.bw_scale)
    # calibrated=false: the CLI's --uncalibrated, DEFAULT: since issue 16 the sourced shape-aware kernel model
    # (specs/kernels.py), 9.69 ms (flat kernel ceilings, memory 0.8, no fixed time: 8.06 ms; before issue 15: ignored,
    # 13.16 ms)
    want = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, efficiency=DEFAULT)
    assert unc["efficiency"] == {"flops": DEFAULT.flops, "memory_bw": DEFAULT.memory_bw, "link_bw": DEFAULT.link_bw,
                                 "source": DEFAULT.source}
    assert unc["decode_step_s"] == pytest.approx(want.decode_step_s, rel=1e-12)
    assert unc["decode_step_s"] == pytest.approx(9.69e-3, rel=2e-3)
    # the fitted residuals (scales <= 1, a gap per layer) only slow the sourced model down
    assert cal["decode_step_s"] > unc["decode_step_s"]
    assert cal["decode_step_s"] == pytest.approx(tm.infer("llama-3.1-70b", "h100-sxm", chips=8,
                                                          engine=cal["engine"]["id"]).decode_step_s, rel=1e-12)
