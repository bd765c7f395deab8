"""Issue 15 item 8: fixed per-layer overhead is its own bottleneck class.

The bottleneck of a pass is the largest of four sums over its operations: compute-bound time (ops whose FLOPs
outweigh their bytes), memory-bound time (the others), communication time, and the fixed overhead
(layers x Efficiency.layer_overhead_s: launches, syncs). Reported wherever bottlenecks are: infer, hyperbola,
sweep, plan, explain, web. The shipped default (the physics set) keeps each kernel's fixed time inside its op and
fits only a small gap per layer, so these tests pin the efficiency whose overhead they are about: the flat
per-family fit (data/calibration.toml [family]) or an explicit one."""
import json

import numpy as np
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.plan import plan
from tokenmath.engine import collectives as coll
from tokenmath.engine.forward import BOTTLENECKS
from tokenmath.faces.explain_infer import explain_infer
from tokenmath.specs.efficiency import DEFAULT, Efficiency, calibrated
from tokenmath.specs.hardware import get_hardware


# 100 us per layer on top of the flat nvidia-datacenter fractions: an overhead-bound batch-1 step, by hand below
SLOW = Efficiency(0.5, 0.8, 0.8, "test: flat fractions + 100 us per layer", 100e-6)


def test_deepseek_tp8_batch1_is_overhead_bound():
    # DeepSeek-V3 fp8, tp=8 on 8 x H200, batch 1, 1,024 in / 256 out, flat nvidia-datacenter fit (memory_bw 0.8,
    # 80 us per layer):
    #   overhead       61 layers x 80 us                                                      = 4.880 ms
    #   memory-bound   weights and KV read: 0.996 ms at 4.8 TB/s (the step's pure roofline) / 0.8 ~ 1.245 ms
    #   communication  2 x 61 all-reduces of 7,168 x 2 B: 6 us + 2 us (sqrt 8 - 1) + 2 x 7/8 x 14,336 / 360e9
    #                  = 9.7268 us x 122                                                       = 1.187 ms
    # largest: overhead (before this fix the label was "communication": overhead was not a class)
    flat = calibrated("h200")
    assert (flat.memory_bw, flat.layer_overhead_s) == (0.8, 80e-6)
    r = tm.infer("deepseek-v3", "h200", chips=8, tp=8, batch=1, efficiency=flat)
    d = r.decode
    assert d.overhead_s == pytest.approx(61 * 80e-6, rel=1e-12)
    hw = get_hardware("h200")
    ar = 122 * float(coll.all_reduce(7168 * 2, 8, hw, 0.8))
    assert ar == pytest.approx(122 * (6e-6 + 2e-6 * (8 ** 0.5 - 1) + 2 * 7 / 8 * 14336 / 360e9), rel=1e-12)
    assert float(d.comm_s) == pytest.approx(ar, rel=1e-12)
    assert float(d.memory_bound_s) == pytest.approx(0.996e-3 / 0.8, rel=0.01)
    assert d.overhead_s > float(d.memory_bound_s) > float(d.comm_s) > float(d.compute_bound_s)
    assert d.bottleneck == "overhead"
    assert r.to_dict()["bottleneck_decode"] == "overhead"
    # the four classes add up to the step (tp only: no pipeline hand-offs)
    assert (float(d.compute_bound_s) + float(d.memory_bound_s) + float(d.comm_s) + d.overhead_s
            == pytest.approx(r.decode_step_s, rel=1e-12))
    text = explain_infer(r)
    assert "-> overhead" in text and "overhead 4.88 ms" in text


def test_llama70b_batch1_overhead_and_without_overhead_memory():
    # Llama 3.1 70B tp=8 on 8 x H100 at batch 1 with SLOW: overhead 80 x 100 us = 8.0 ms > weights 17.38 GB /
    # (3.35 TB/s x 0.8) = 6.48 ms (memory-bound) > 160 all-reduces ~1.56 ms: overhead
    r = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, efficiency=SLOW)
    assert r.decode.overhead_s == pytest.approx(80 * 100e-6, rel=1e-12)
    assert float(r.decode.memory_bound_s) == pytest.approx(5.19e-3 / 0.8, rel=0.01)
    assert r.decode.bottleneck == "overhead"
    # kernel ceilings carry no fixed overhead per layer (each kernel's own fixed time is inside its op): memory
    u = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, efficiency=DEFAULT)
    assert u.decode.overhead_s == 0.0 and u.decode.bottleneck == "memory"


def test_overhead_label_in_hyperbola_sweep_and_plan():
    assert list(BOTTLENECKS) == ["compute", "memory", "communication", "overhead"]
    h = hyperbola("llama-3.1-70b", "h100-sxm", chips=8, efficiency=SLOW)
    assert str(h.bottleneck[0]) == "overhead"                  # batch 1: 8.0 ms overhead > 6.5 ms memory
    assert str(h.bottleneck[-1]) != "overhead"                 # a large batch: the matmuls or the KV
    cols = tm.sweep("llama-3.1-70b", "h100-sxm", batch=[1, 1024], input_len=[1024], output_len=[256], tp=[8],
                    efficiency=SLOW)
    assert list(cols["bottleneck_decode"]) == [h.bottleneck[0], "compute"]
    assert list(cols["bottleneck_prefill"]) == ["compute", "compute"]
    cols = tm.sweep("llama-3.1-70b", "h100-sxm", batch=[1], input_len=[1024], output_len=[256], tp=[8],
                    decode_only=True)
    assert list(cols["bottleneck_prefill"]) == [""]            # no prefill pass: no bottleneck
    p = plan("llama-3.1-70b", "hgx-h100", chips=8, efficiency=SLOW)
    b1 = next(x for x in p.frontier if x["tp"] == 8 and x["batch"] == 1)
    assert b1["bottleneck"] == "overhead"


def test_overhead_label_in_web_api():
    # the web page reports the bottleneck the Python API computes for the same question (its default engine)
    from tokenmath.faces.web.server import start_in_thread
    import http.client
    srv, thread = start_in_thread("127.0.0.1", 0)
    try:
        host, port = srv.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", "/api/infer?model=deepseek-v3&hardware=h200&chips=8&tp=8&batch=1")
        d = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    want = tm.infer("deepseek-v3", "h200", chips=8, tp=8, batch=1, engine=d["engine"]["id"]).to_dict()
    assert d["bottleneck_decode"] == want["bottleneck_decode"] in BOTTLENECKS
    assert d["decode_step_s"] == pytest.approx(want["decode_step_s"], rel=1e-9)


def test_pass_bottleneck_picks_the_largest_of_four_vectorized():
    # one call over batches: the label follows the largest class at each batch, no class is skipped
    r = tm.sweep("deepseek-v3", "h200", batch=[1, 2048], input_len=[1024], output_len=[256], tp=[8],
                 efficiency=calibrated("h200"))
    assert r["bottleneck_decode"][0] == "overhead"
    assert r["bottleneck_decode"][1] in ("compute", "memory", "communication")
    assert np.all(np.isin(r["bottleneck_prefill"], BOTTLENECKS))
