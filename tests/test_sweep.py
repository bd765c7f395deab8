"""tokenmath.sweep: one vectorized call over the Cartesian product equals the scalar path element by element."""
import numpy as np
import pytest

import tokenmath as tm


def test_sweep_equals_infer_elementwise():
    c = tm.sweep("mixtral-8x7b", "h100-sxm", batch=[1, 16, 200], input_len=[256, 4096], output_len=[64, 512],
                 tp=[1, 2, 3, 8], ep=[1, 2])
    assert len(c) == 3 * 2 * 2 * 4 * 2
    for i in range(len(c)):
        if not c["valid"][i]:
            assert c["tp"][i] == 3 and np.isnan(c["decode_step_s"][i])
            continue
        # chips named: the sweep's tp x ep (left out, infer would take the fewest that hold the batch)
        r = tm.infer("mixtral-8x7b", "h100-sxm", chips=int(c["tp"][i] * c["ep"][i]), tp=int(c["tp"][i]),
                     ep=int(c["ep"][i]), batch=int(c["batch"][i]),
                     input_len=int(c["input_len"][i]), output_len=int(c["output_len"][i]), engine="none")
        d = r.to_dict()
        assert bool(c["fits"][i]) == d["fits"]
        assert c["memory_per_chip_bytes"][i] == pytest.approx(d["memory_per_chip_bytes"])
        if d["fits"]:
            for k in ("ttft_s", "decode_step_s", "output_tokens_per_s", "cost_per_mtok_output_usd"):
                assert c[k][i] == pytest.approx(d[k], rel=1e-12), k
            assert c["bottleneck_decode"][i] == d["bottleneck_decode"]
        else:
            assert np.isnan(c["decode_step_s"][i])


def test_sweep_rejects_bad_axes():
    with pytest.raises(tm.InputError) as e:
        tm.sweep("llama-3.1-8b", "h100-sxm", batch=[0, 1])
    assert e.value.field == "batch"


def _same(a, b):
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else np.array_equal(x, y), k


def test_sweep_blocks_equal_flat(monkeypatch):
    """The blocked, broadcast evaluation (large products) gives the flat evaluation's numbers to the bit."""
    from tokenmath.analyses.serving import sweep as S
    kw = dict(batch=[1, 3, 64, 700], input_len=[200, 5000], output_len=[1, 300], tp=[1, 2, 4, 8, 16],
              pp=[1, 3], ep=[1, 4, 8], dp=[1, 2, 5])
    monkeypatch.setattr(S, "FLAT", 10 ** 9)
    flat = tm.sweep("qwen3-30b-a3b", "h100-sxm", **kw)
    monkeypatch.setattr(S, "FLAT", 0)
    for chunk in (1, 37, 1000, 10 ** 6):       # blocks of one row, of partial axes, of whole axes, one block
        monkeypatch.setattr(S, "CHUNK", chunk)
        _same(flat, tm.sweep("qwen3-30b-a3b", "h100-sxm", **kw))


def test_sweep_large_matches_infer():
    c = tm.sweep("llama-3.1-70b", "h100-sxm", batch=list(range(1, 201)), input_len=[128, 4096], output_len=[64, 512],
                 tp=[1, 2, 4, 8, 16], dp=[1, 4])
    assert len(c) == 8000
    rng = np.random.default_rng(0)
    for i in rng.choice(len(c), 25, replace=False):
        d = tm.infer("llama-3.1-70b", "h100-sxm", tp=int(c["tp"][i]), dp=int(c["dp"][i]), batch=int(c["batch"][i]),
                     input_len=int(c["input_len"][i]), output_len=int(c["output_len"][i]), engine="none").to_dict()
        assert bool(c["fits"][i]) == d["fits"]
        assert c["memory_per_chip_bytes"][i] == pytest.approx(d["memory_per_chip_bytes"], rel=1e-12)
        if d["fits"]:
            for k in ("ttft_s", "decode_step_s", "decode_floor_s", "output_tokens_per_s", "cost_per_mtok_input_usd"):
                assert c[k][i] == pytest.approx(d[k], rel=1e-12), k
            assert c["bottleneck_prefill"][i] == d["bottleneck_prefill"]


def test_sweep_decode_only():
    kw = dict(batch=[1, 16, 300], input_len=[128, 4096], output_len=[1, 512], tp=[1, 8], pp=[1, 2])
    full = tm.sweep("deepseek-v3", "h200", **kw)
    dec = tm.sweep("deepseek-v3", "h200", decode_only=True, **kw)
    prefill = ("ttft_s", "output_tokens_per_s", "cost_per_mtok_input_usd")
    for k in prefill:
        assert np.isnan(dec[k]).all()
    assert (dec["bottleneck_prefill"] == "").all()
    _same({k: v for k, v in full.items() if k not in prefill + ("bottleneck_prefill",)},
          {k: v for k, v in dec.items() if k not in prefill + ("bottleneck_prefill",)})
