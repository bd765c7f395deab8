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
        r = tm.infer("mixtral-8x7b", "h100-sxm", tp=int(c["tp"][i]), ep=int(c["ep"][i]), batch=int(c["batch"][i]),
                     input_len=int(c["input_len"][i]), output_len=int(c["output_len"][i]))
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
