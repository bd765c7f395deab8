"""Serving-engine profiles (specs/serving_engines.py, data/engines.toml) and what they do to a step and a batch
(engine/static_batch.py, engine/memory.py): hand-computed cases, invariants, the faces."""
import json
from dataclasses import replace

import numpy as np
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.infer import infer
from tokenmath.base.errors import InputError
from tokenmath.engine.memory import max_batch
from tokenmath.engine.static_batch import serve_batch
from tokenmath.mapping.layout import Layout
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.specs.hardware import from_record as hardware_record
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.serving_engines import (DEFAULT_ENGINE, LAUNCH_CPU_S, engine_ids, from_record, get_engine,
                                             resolve_engine)
from tokenmath.analyses.setup import resolve_precision

TINY = Model(id="tiny", name="tiny", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=128)
# 1 GB/s and 1 TFLOP/s: every op of the tiny model is memory-bound, a step takes hundreds of us
SLOW = hardware_record("slow", {"memory_gb": 1, "memory_bw_tbs": 0.001, "tflops": {"bf16": 1}})
# 1 TB/s and 1 PFLOP/s: the tiny model's decode step takes 187 ns on the device, far less than launching its kernels
FAST = hardware_record("fast", {"memory_gb": 1, "memory_bw_tbs": 1, "tflops": {"bf16": 1000}})
# the tiny decode step's bytes at batch 1, context 10 (tests/test_engine.py::test_tiny_decode_step_by_hand)
TINY_STEP_BYTES = 187_464
# kernels of one tiny decode pass (data/kernels.toml [kernels_per_op]): embed 1 + 2 layers x (attn_proj 2 +
# attention 3 + norms 2 + ffn 3) + lm_head 1 (tp = 1: no all-reduce)
TINY_KERNELS = 1 + 2 * (2 + 3 + 2 + 3) + 1

BASE = dict(graphs="all", graph_max_batch=512, max_running=0, max_batched_tokens=8192, chunked_prefill=True,
            mixed_batches=True, kv_memory_fraction=0.9, kv_fraction_of="total", kv_block_tokens=1,
            overlap_scheduling=False, step_cpu_s=0.0)


def engine(**over):
    return from_record("test", {**BASE, **over})


def tiny(hw, eng, **kw):
    w = dict(batch=1, input_len=9, output_len=1)
    w.update(kw)
    return infer(TINY, hw, efficiency=PEAK, engine=eng, **w)


# ---- the decode step ---------------------------------------------------------------------------------------------

def test_eager_step_waits_for_the_cpu_launcher():
    assert tiny(FAST, "none").decode.kernels == TINY_KERNELS == 22
    device = TINY_STEP_BYTES / 1e12                                  # 187.464 ns
    graphed = tiny(FAST, engine(graphs="all"))
    assert graphed.decode_step_s == pytest.approx(device, rel=1e-12) and graphed.decode_launch_s == 0
    eager = tiny(FAST, engine(graphs="none"))
    # 22 kernels x 5 us = 110 us launched from the CPU, against 187 ns of device work: the launcher sets the pace
    assert LAUNCH_CPU_S == 5e-6
    assert eager.decode_launch_s == pytest.approx(22 * 5e-6, rel=1e-12)
    assert eager.decode_step_s == pytest.approx(110e-6, rel=1e-12)
    assert eager.decode_device_s == pytest.approx(device, rel=1e-12)
    # the answer names the host side as the bottleneck; the device's own pass stays memory-bound
    assert eager.to_dict()["bottleneck_decode"] == "overhead" and eager.decode.bottleneck == "memory"
    assert graphed.to_dict()["bottleneck_decode"] == "memory"
    # on slow memory the device takes 187 us, longer than the 110 us of launches: the device sets the pace
    slow = tiny(SLOW, engine(graphs="none"))
    assert slow.decode_step_s == pytest.approx(TINY_STEP_BYTES / 1e9, rel=1e-12)


def test_graphs_at_batch_one_only_and_up_to_a_size():
    one = engine(graphs="batch1", graph_max_batch=1)
    assert list(one.graphs_at(np.array([1, 2, 64]))) == [True, False, False]
    upto = engine(graphs="all", graph_max_batch=128)
    assert list(upto.graphs_at(np.array([1, 128, 129]))) == [True, True, False]
    # SGLang captures up to 256 below tp 4 and 512 from tp 4
    sg = get_engine("sglang")
    assert list(sg.graphs_at(np.array([256, 300, 300]), np.array([2, 2, 8]))) == [True, False, True]
    assert tiny(FAST, one, batch=2).decode_launch_s == pytest.approx(22 * 5e-6, rel=1e-12)
    assert tiny(FAST, one, batch=1).decode_launch_s == 0


def test_per_step_cpu_overlapped_or_serial():
    # 1 ms of CPU work per step against 187 ns of device work
    over = tiny(FAST, engine(overlap_scheduling=True, step_cpu_s=1e-3))
    serial = tiny(FAST, engine(overlap_scheduling=False, step_cpu_s=1e-3))
    assert over.decode_step_s == pytest.approx(1e-3, rel=1e-12)                       # max(187 ns, 1 ms)
    assert serial.decode_step_s == pytest.approx(1e-3 + 187.464e-9, rel=1e-12)        # 1 ms + 187 ns
    # slow memory: 187.464 us of device work hides 100 us of CPU work, or adds to it
    over = tiny(SLOW, engine(overlap_scheduling=True, step_cpu_s=100e-6))
    serial = tiny(SLOW, engine(overlap_scheduling=False, step_cpu_s=100e-6))
    assert over.decode_step_s == pytest.approx(187.464e-6, rel=1e-12)
    assert serial.decode_step_s == pytest.approx(287.464e-6, rel=1e-12)
    # unfitted (None) counts as 0
    assert engine(step_cpu_s="fitted").step_cpu == 0.0


# ---- prefill in chunks -------------------------------------------------------------------------------------------

def test_chunked_prefill_count_and_what_a_chunk_costs():
    # 3 prompts of 1,000 tokens = 3,000 tokens: ceil(3000 / 2048) = 2 chunks, ceil(3000 / 1000) = 3, one at 8192
    for budget, chunks in ((2048, 2), (1000, 3), (8192, 1), (3000, 1)):
        r = tiny(SLOW, engine(max_batched_tokens=budget), batch=3, input_len=1000)
        assert r.prefill_chunks == chunks, budget
    assert tiny(SLOW, engine(chunked_prefill=False, max_batched_tokens=1000), batch=3, input_len=1000).prefill_chunks == 1
    # one prompt of 1,000 tokens in 2 chunks of 500: every byte of the unchunked prefill once more, plus
    #   the weights read again by the second chunk: attn_proj 16,384 x 2 B x 2 layers + ffn 24,576 x 2 B x 2 layers
    #   + lm_head 6,400 x 2 B = 176,640 B, and its logits row (64 + 100) x 2 B = 328 B;
    #   the KV each chunk reads of the chunks before it: on average 250 tokens per chunk, 500 in all, x 256 B per
    #   token per layer (2 x 4 heads x 16 x 2 B) x 2 layers = 256,000 B
    # all memory-bound at 1 GB/s: 432,968 B more = 432.968 us later
    whole = tiny(SLOW, "none", input_len=1000)
    split = tiny(SLOW, engine(max_batched_tokens=500), input_len=1000)
    assert split.prefill_chunks == 2
    assert split.ttft_s - whole.ttft_s == pytest.approx((176_640 + 328 + 256_000) / 1e9, rel=1e-9)
    # each chunk pays the per-step CPU work once: 2 x 1 ms more, serially
    cpu = tiny(SLOW, engine(max_batched_tokens=500, step_cpu_s=1e-3), input_len=1000)
    assert cpu.ttft_s - split.ttft_s == pytest.approx(2e-3, rel=1e-9)


# ---- max batch ---------------------------------------------------------------------------------------------------

def _l8_max(eng, context=1280):
    m, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    pr = resolve_precision(m, None, None)
    return int(max_batch(m, hw.memory_bytes, Layout(1, 1, 1, 1), pr.weight.bytes, pr.expert.bytes, pr.kv.bytes,
                         context, 0.1, engine=eng))


def test_max_batch_from_each_engines_memory_rule():
    # Llama 3.1 8B bf16 on one H100 (85,520,800,000 B as the device reports it), 1,280 tokens per sequence:
    M = 85_520_800_000
    assert get_hardware("h100-sxm").memory_bytes == M
    W = 8_030_261_248 * 2                                     # weights
    A = 8192 * (8 * 4096 + 3 * 14336) * 2 + 256 * 128256 * 4  # one 8,192-token step's activations + logits
    kv = 131_072 * 1280                                       # KV of one sequence (32 layers x 2 x 8 x 128 x 2 B)
    free = int((0.9 * M - W - A) // kv)                       # engine-free: 10% reserve
    assert (free, int((0.9 * M - W - A) // kv)) == (354, 354)
    assert _l8_max(None) == free == 354
    assert _l8_max(get_engine("vllm")) == 354                 # vLLM: 0.9 of total memory = the reserve's rule
    assert _l8_max(get_engine("tensorrt-llm")) == int(0.9 * (M - W - A) // kv) == 365   # 0.9 of what is left
    assert _l8_max(get_engine("sglang")) == int((0.83 * M - W - A) // kv) == 319        # 0.83 of total
    # whole KV blocks: 1,000 tokens hold 63 blocks of 16 = 1,008 tokens (vLLM), 32 of 32 = 1,024 (TRT-LLM)
    assert _l8_max(get_engine("vllm"), 1000) == int((0.9 * M - W - A) // (131_072 * 1008))
    assert _l8_max(get_engine("tensorrt-llm"), 1000) == int(0.9 * (M - W - A) // (131_072 * 1024))


def test_max_running_caps_max_batch_and_batch_max():
    assert _l8_max(engine(max_running=100)) == 100
    assert _l8_max(get_engine("llama.cpp")) == 4              # 4 server slots
    assert infer("llama-3.1-8b", "h100-sxm", batch="max", engine="llama.cpp").batch == 4
    assert infer("llama-3.1-8b", "h100-sxm", batch="max", engine="mlx").batch == 32
    # a batch over the cap does not fit (the engine would not run it at once) and the advice says why
    r = infer("llama-3.1-8b", "h100-sxm", batch=5, engine="llama.cpp")
    assert not r.fits and "at most 4" in r.advice[0]
    # one scheduler per attention group: dp = 2 replicas run 2 x 4
    assert infer("llama-3.1-8b", "h100-sxm", chips=2, tp=1, dp=2, batch="max", engine="llama.cpp").batch == 8
    # vLLM's 1,024 sequences bind for a small model on a large GPU
    assert infer("gpt-2", "h200", batch="max", input_len=64, output_len=64, engine="vllm").batch == 1024


def test_more_running_sequences_never_lower_max_batch():
    caps = [1, 2, 10, 100, 354, 355, 1000, 0]
    got = [_l8_max(engine(max_running=c)) for c in caps]
    assert got == [1, 2, 10, 100, 354, 354, 354, 354]
    assert all(b >= a for a, b in zip(got, got[1:]))


# ---- invariants --------------------------------------------------------------------------------------------------

CASES = [("llama-3.1-8b", "h100-sxm", 1), ("llama-3.1-70b", "h100-sxm", 8), ("mixtral-8x7b", "h100-sxm", 2),
         ("deepseek-v3", "h200", 8), ("gpt-2", "a100-80gb", 1)]


@pytest.mark.parametrize("eff", [PEAK, DEFAULT, None], ids=["peak", "default", "calibrated"])
@pytest.mark.parametrize("model,hw,chips", CASES)
def test_an_engine_never_makes_a_step_faster(model, hw, chips, eff):
    m, h = get_model(model), get_hardware(hw)
    from tokenmath.analyses.setup import setup
    su = setup(m, h, chips=chips, efficiency=eff)
    B = np.array([1, 3, 64, 200, 600, 2048, 9000], float)
    free = serve_batch(m, h, su.layout, su.precision, su.efficiency, B[:, None], np.array([128, 4000]), 64, su.reserve)
    for eid in engine_ids():
        e = replace(su.efficiency, engine=replace(get_engine(eid), step_cpu_s=1e-3))
        sv = serve_batch(m, h, su.layout, su.precision, e, B[:, None], np.array([128, 4000]), 64, su.reserve)
        assert np.all(sv.decode_step_s >= free.decode_step_s * (1 - 1e-12)), eid
        assert np.all(sv.ttft_s >= free.ttft_s * (1 - 1e-12)), eid
        assert np.all(sv.decode_step_s >= sv.decode_floor_s * (1 - 1e-12)), eid      # never below the pure roofline


def test_no_engine_is_the_engine_free_step():
    a = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=600)
    b = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=600, engine="none")
    assert resolve_engine(None) is None and resolve_engine("none") is None and resolve_engine("None") is None
    assert a.decode_step_s == b.decode_step_s and a.ttft_s == b.ttft_s and a.engine is None is b.engine
    assert a.to_dict()["engine"]["id"] == "none"
    # the engine on the efficiency travels; engine="none" removes it
    eff = replace(DEFAULT, engine=get_engine("vllm"))
    assert infer("llama-3.1-8b", "h100-sxm", efficiency=eff).engine.id == "vllm"
    assert infer("llama-3.1-8b", "h100-sxm", efficiency=eff, engine="none").engine is None


def test_vllm_default_changes_no_step_below_its_graph_limit():
    # step_cpu_s unfitted (0) and graphs up to 512: vLLM's decode step is the engine-free one up to batch 512
    for b in (1, 64, 512):
        a = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=b, engine="vllm")
        n = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=b, engine="none")
        assert a.decode_step_s == n.decode_step_s, b
        assert n.ttft_s <= a.ttft_s < 1.05 * n.ttft_s, b          # chunks of 8,192 tokens re-read the weights


# ---- profiles as data: shipped, user files, errors ---------------------------------------------------------------

def test_shipped_profiles_load_with_sources():
    assert set(engine_ids()) >= {"vllm", "sglang", "tensorrt-llm", "llama.cpp", "mlx"}
    assert DEFAULT_ENGINE == "vllm"
    for eid in engine_ids():
        e = get_engine(eid)
        assert e.sources and e.step_cpu_s is None and e.step_cpu_bounds_s == (0.0, 0.005)
        assert 0 < e.kv_memory_fraction <= 1
    v = get_engine("VLLM")
    assert (v.kv_memory_fraction, v.kv_fraction_of, v.kv_block_tokens, v.graph_max_batch) == (0.9, "total", 16, 512)
    assert v.limits_for(80 * 2**30) == (1024, 8192) and v.limits_for(40 * 2**30) == (256, 2048)
    t = get_engine("tensorrt-llm")
    assert (t.kv_fraction_of, t.chunked_prefill, t.overlap_scheduling) == ("free", False, True)


def test_user_engine_file_toml_and_json(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('[my-engine]\nname = "My engine"\ngraphs = "none"\ngraph_max_batch = 0\nmax_running = 7\n'
                 'max_batched_tokens = 512\nchunked_prefill = true\nmixed_batches = false\nkv_memory_fraction = 0.5\n'
                 'kv_fraction_of = "total"\nkv_block_tokens = 64\noverlap_scheduling = true\nstep_cpu_s = 0.002\n')
    e = get_engine(str(p))
    assert (e.id, e.name, e.max_running, e.step_cpu_s) == ("my-engine", "My engine", 7, 0.002)
    r = infer("llama-3.1-8b", "h100-sxm", batch="max", engine=str(p))
    assert r.batch == 7 and r.to_dict()["engine"] == {"id": "my-engine", "name": "My engine", "version": None}
    # overlapped 2 ms of CPU work: the step is at least 2 ms
    assert r.decode_step_s >= 2e-3
    j = tmp_path / "mine.json"
    j.write_text(json.dumps({**BASE, "name": "flat json", "max_running": 3}))
    assert infer("llama-3.1-8b", "h100-sxm", batch="max", engine=str(j)).batch == 3


@pytest.mark.parametrize("over,field,hint", [
    ({"kv_memory_fration": 0.9}, "engine.kv_memory_fration", "kv_memory_fraction"),
    ({"kv_memory_fraction": 1.5}, "engine.kv_memory_fraction", "(0, 1]"),
    ({"graphs": "sometimes"}, "engine.graphs", "all, batch1, none"),
    ({"kv_fraction_of": "most"}, "engine.kv_fraction_of", "total, free"),
    ({"step_cpu_s": 1.0}, "engine.step_cpu_s", "fitted"),
    ({"max_running": -1}, "engine.max_running", "integer"),
    ({"kv_block_tokens": 0}, "engine.kv_block_tokens", "integer"),
    ({"overlap_scheduling": "yes"}, "engine.overlap_scheduling", "true or false"),
])
def test_bad_engine_values_name_the_field(tmp_path, over, field, hint):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({**BASE, **over}))
    with pytest.raises(InputError) as e:
        get_engine(str(p))
    assert e.value.field == field and hint in (e.value.valid or ""), e.value


def test_unknown_engine_name_suggests_the_closest():
    with pytest.raises(InputError) as e:
        get_engine("vlm")
    assert e.value.field == "engine" and "vllm" in e.value.valid
    with pytest.raises(InputError) as e:
        infer("llama-3.1-8b", "h100-sxm", engine="sglan")
    assert "sglang" in e.value.valid


# ---- every serving answer states its engine ----------------------------------------------------------------------

def test_every_serving_result_states_its_engine():
    from tokenmath.analyses.serving.context import context
    from tokenmath.analyses.serving.fleet import fleet
    from tokenmath.analyses.serving.hyperbola import hyperbola
    from tokenmath.analyses.serving.input_vs_output import prices
    from tokenmath.analyses.serving.moe import moe
    from tokenmath.analyses.serving.pareto import pareto
    from tokenmath.analyses.serving.plan import plan
    from tokenmath.analyses.serving.provider_price import price
    from tokenmath.analyses.serving.slowmode import slowmode
    m = "gpt-2"
    results = [hyperbola(m, "h100-sxm", engine="sglang", max_points=16),
               slowmode(m, "h100-sxm", max_chips=2, engine="sglang"),
               pareto(m, "h100-sxm", chips=2, engine="sglang"),
               prices(m, "h100-sxm", contexts=[1024], engine="sglang"),
               context(m, "h100-sxm", engine="sglang"),
               fleet(m, "h100-sxm", demand=1000, max_chips=2, engine="sglang"),
               price(m, "h100-sxm", max_chips=2, engine="sglang"),
               plan(m, "hgx-h100", chips=2, engine="sglang"),
               moe("mixtral-8x7b", "hgx-h100", batch=16, engine="sglang")]
    for r in results:
        d = r.to_dict()
        assert d["engine"] == {"id": "sglang", "name": "SGLang", "version": "defaults read at 2025 commits"}, type(r).__name__
        if "notes" in d:
            assert any("SGLang" in n for n in d["notes"]), type(r).__name__
    cols = tm.sweep(m, "h100-sxm", batch=[1, 5000], engine="sglang")
    assert cols.engine["id"] == "sglang"


def test_sweep_flags_batches_over_the_running_cap():
    cols = tm.sweep("gpt-2", "h100-sxm", batch=[4, 5], input_len=64, output_len=64, engine="llama.cpp")
    assert list(cols["fits"]) == [True, False] and list(cols["max_batch"]) == [4, 4]


def test_cli_engine_option(tmp_path):
    from click.testing import CliRunner
    from tokenmath.faces.cli import cli
    run = CliRunner().invoke
    out = run(cli, ["infer", "--help"]).output
    assert "--engine" in out and "default: vllm" in out
    d = json.loads(run(cli, ["infer", "-m", "llama-3.1-8b", "--json"]).output)
    assert d["engine"]["id"] == "vllm" and d["engine_step"]["prefill_chunks"] == 1
    n = json.loads(run(cli, ["infer", "-m", "llama-3.1-8b", "--engine", "none", "--json"]).output)
    assert n["engine"]["id"] == "none" and "engine_step" not in n
    assert n["decode_step_s"] == infer("llama-3.1-8b", "h100-sxm").decode_step_s
    res = run(cli, ["infer", "--engine", "vlm", "--json"])
    assert res.exit_code == 2 and json.loads(res.output.split("\nerror:")[0])["error"]["field"] == "engine"
    assert "engine: SGLang" in run(cli, ["hyperbola", "-m", "gpt-2", "--engine", "sglang", "--explain"]).output
    for cmd in ("hyperbola", "slowmode", "pareto", "prices", "context", "fleet", "price", "plan", "moe"):
        assert "--engine" in run(cli, [cmd, "--help"]).output, cmd


def test_web_api_takes_an_engine():
    from tokenmath.faces.web.api import Api
    api = Api()
    d = json.loads(api.call("infer", {"model": "gpt-2", "batch": "max", "engine": "llama.cpp"}))
    assert d["engine"]["id"] == "llama.cpp" and d["batch"] == 4
    assert json.loads(api.call("infer", {"model": "gpt-2"}))["engine"]["id"] == "vllm"       # the page's default
    for ep in ("hyperbola", "pareto", "context", "prices"):
        assert json.loads(api.call(ep, {"model": "gpt-2", "engine": "none"}))["engine"]["id"] == "none", ep
    with pytest.raises(InputError) as e:
        api.call("infer", {"engine": "vlm"})
    assert e.value.field == "engine" and "vllm" in e.value.valid
    with pytest.raises(InputError):
        api.call("infer", {"engine": "/etc/passwd"})       # a file path: the web API reads no files
    meta = json.loads(api.meta())
    ps = {p["name"]: p for p in meta["endpoints"]["/api/infer"]["params"]}
    assert ps["engine"]["default"] == "vllm" and "none" in ps["engine"]["choices"]
