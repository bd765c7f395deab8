"""The column plumbing of tokenmath.sweep (issue 23, third round): axis columns written in one pass, decode_only's
prefill columns as read-only constants. Same values as the plain constructions they replace."""
import numpy as np
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.sweep import AXES, FLAT, LONG_RUN, PREFILL_FIGURES


def test_axis_columns_are_the_c_ordered_product():
    # 40 batches x 2 inputs x 1 output x 2 tp x 1 pp x 1 ep x 16 dp = 2,560 rows (> FLAT: the blocked path). The
    # batch column's runs are 2 x 2 x 16 = 64 rows long (>= LONG_RUN: broadcast), dp's are 1 row (tiled), pp's
    # axis has one value (a fill): all three constructions against numpy's own meshgrid in C ("ij") order
    axes = dict(batch=list(range(1, 41)), input_len=[128, 4096], output_len=[64], tp=[2, 4], pp=1, ep=1,
                dp=list(range(1, 17)))
    c = tm.sweep("llama-3.1-70b", "h100-sxm", **axes)
    assert len(c) == 40 * 2 * 2 * 16 == 2560 > FLAT and 2 * 2 * 16 >= LONG_RUN
    grids = np.meshgrid(*[np.atleast_1d(axes[k]) for k in AXES], indexing="ij")
    for k, g in zip(AXES, grids):
        assert c[k].dtype == np.int64 and c[k].flags.writeable and np.array_equal(c[k], g.reshape(-1)), k
    # row 1,000: batch index 1000 // 64 = 15 (batch 16), then (1000 % 64) // 32 = 1 (input 4096),
    # (1000 % 32) // 16 = 0 (tp 2), 1000 % 16 = 8 (dp 9); chips = tp x pp x ep x dp = 18
    assert [int(c[k][1000]) for k in ("batch", "input_len", "tp", "dp", "chips")] == [16, 4096, 2, 9, 18]


@pytest.mark.parametrize("batch", [[1, 16, 128], list(range(1, 401))])      # flat (<= FLAT) and blocked
def test_decode_only_prefill_columns_are_read_only_constants(batch):
    # tp 3 does not divide llama-3.1-70b's 64 heads: those rows are not admitted (NaN figures, fits False)
    kw = dict(batch=batch, input_len=[512, 8192], output_len=[256], tp=[1, 2, 3, 8])
    full = tm.sweep("llama-3.1-70b", "h100-sxm", **kw)
    dec = tm.sweep("llama-3.1-70b", "h100-sxm", decode_only=True, **kw)
    n = len(dec)
    assert n == len(batch) * 8 and (~dec["valid"]).sum() == len(batch) * 2
    for k in PREFILL_FIGURES:
        assert dec[k].shape == (n,) and np.isnan(dec[k]).all() and not dec[k].flags.writeable, k
        with pytest.raises(ValueError):
            dec[k][0] = 1.0
    b = dec["bottleneck_prefill"]
    assert b.shape == (n,) and b.dtype == object and (b == "").all() and not b.flags.writeable
    # every other column is the full sweep's, to the bit (NaN where the layout is not admitted or does not fit)
    for k in full:
        if k in PREFILL_FIGURES or k == "bottleneck_prefill":
            continue
        a, d = full[k], dec[k]
        assert a.dtype == d.dtype and (np.array_equal(a, d, equal_nan=True) if a.dtype.kind == "f" else (a == d).all()), k
    bad = ~dec["valid"]
    assert np.isnan(dec["decode_step_s"][bad]).all() and not dec["fits"][bad].any()
    assert (dec["bottleneck_decode"][bad] == "").all() and (dec["bottleneck_decode"][~bad] != "").all()
