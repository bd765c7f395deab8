"""Sweep: the full Cartesian product of batches, lengths and layouts in one vectorized engine call.

    cols = tokenmath.sweep("llama-2-70b", "a100-80gb", batch=[1, 8, 64], input_len=[512, 2048],
                           output_len=[128], tp=[1, 2, 4, 8])
    len(cols)                       # 24 configurations
    cols["decode_step_s"]           # numpy array, same keys as `infer --json`
    cols.to_pandas()                # when pandas is installed

Layouts the model does not admit (tp not dividing the heads, ep on a dense model, ...) stay in the table with
valid = False and NaN figures, so the product keeps its shape.
"""
from __future__ import annotations

import numpy as np

from ..engine.serving import serve
from ..engine.step import BOTTLENECKS
from ..errors import InputError
from ..kv_cache import kv_bytes_per_token
from ..mapping import Layout
from ..params import count_params
from .common import resolve_precision
from ..efficiency import DEFAULT
from ..engine.memory import RESERVE_FRACTION, weight_bytes_total
from ..hardware import get_hardware
from ..model import get_model

AXES = ("batch", "input_len", "output_len", "tp", "pp", "ep", "dp")


class Columns(dict):
    """dict of equal-length numpy arrays; len() is the number of configurations."""

    def __len__(self):
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def to_pandas(self):
        try:
            import pandas as pd
        except ImportError:
            raise InputError("pandas", "pandas is not installed", "pip install pandas") from None
        return pd.DataFrame({k: v for k, v in self.items()})


def _axis(v, name):
    a = np.atleast_1d(np.asarray(v))
    if a.ndim != 1 or a.size == 0:
        raise InputError(name, f"{v!r} is not a list of numbers", "a number or a non-empty list")
    if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)) or np.any(a < 1) or np.any(a != np.round(a)):
        raise InputError(name, f"{v!r} must hold whole numbers >= 1", "e.g. [1, 2, 4]")
    return a.astype(float)


def sweep(model, hardware, *, batch=1, input_len=1024, output_len=256, tp=1, pp=1, ep=1, dp=1, weight_dtype=None,
          kv_dtype=None, efficiency=None, reserve: float = RESERVE_FRACTION) -> Columns:
    m = get_model(model)
    hw = get_hardware(hardware)
    prec = resolve_precision(m, weight_dtype, kv_dtype)
    eff = efficiency or DEFAULT
    axes = [_axis(v, n) for v, n in zip((batch, input_len, output_len, tp, pp, ep, dp), AXES)]
    shape = tuple(a.size for a in axes)
    n = int(np.prod(shape))
    # one column per axis: each value repeated in the C order of the full product (no meshgrid copies)
    flat = []
    for i, a in enumerate(axes):
        reps_in = int(np.prod(shape[i + 1:]))
        flat.append(np.tile(np.repeat(a, reps_in), n // (a.size * reps_in)))
    B, Li, Lo, TP, PP, EP, DP = flat
    valid = (m.n_heads % TP == 0) & (PP <= m.n_layers)
    if not m.is_mla:
        valid &= (m.kv_heads % TP == 0) | (TP % m.kv_heads == 0)
    valid &= (EP == 1) if not m.is_moe else (m.n_experts % EP == 0)
    cols = Columns()
    for name, arr in zip(AXES, flat):
        cols[name] = arr.astype(np.int64)
    cols["chips"] = (TP * PP * EP * DP).astype(np.int64)
    cols["valid"] = valid
    for k in ("memory_per_chip_bytes", "ttft_s", "decode_step_s", "decode_floor_s", "output_tokens_per_s",
              "output_tokens_per_s_per_user", "cost_per_mtok_input_usd", "cost_per_mtok_output_usd", "max_batch"):
        cols[k] = np.empty(n)
    cols["fits"] = np.empty(n, bool)
    codes = {"bottleneck_prefill": np.empty(n, np.int8), "bottleneck_decode": np.empty(n, np.int8)}
    P = count_params(m)
    cols["params_total"] = np.full(n, P.total)
    cols["params_active"] = np.full(n, P.active)
    cols["weights_bytes"] = np.full(n, weight_bytes_total(m, prec.weight.bytes, prec.expert.bytes))
    cols["kv_bytes_per_token"] = np.full(n, kv_bytes_per_token(m, prec.kv.bytes))
    for a in range(0, n, CHUNK):
        _fill(cols, codes, m, hw, prec, eff, reserve, slice(a, min(a + CHUNK, n)), B, Li, Lo, TP, PP, EP, DP)
    names = np.append(BOTTLENECKS, "")
    for k, c in codes.items():
        c[~valid] = 3
        cols[k] = names[c]
    # layouts the model does not admit: no figures (the engine computed them only to stay vectorized)
    bad = ~valid
    if bad.any():
        for k in ("memory_per_chip_bytes", "ttft_s", "decode_step_s", "decode_floor_s", "output_tokens_per_s",
                  "output_tokens_per_s_per_user", "cost_per_mtok_input_usd", "cost_per_mtok_output_usd", "max_batch"):
            cols[k][bad] = np.nan
        cols["fits"][bad] = False
    return cols


CHUNK = 1 << 15   # configurations per engine call: large enough to amortize Python, small enough to stay in cache


def _fill(cols, codes, m, hw, prec, eff, reserve, sl, B, Li, Lo, TP, PP, EP, DP):
    b, li, lo = B[sl], Li[sl], Lo[sl]
    lay = Layout(TP[sl], PP[sl], EP[sl], DP[sl])
    sv = serve(m, hw, lay, prec, eff, b, li, lo, reserve)
    fits = np.asarray(sv.fits)
    ttft, step = np.asarray(sv.ttft_s), np.asarray(sv.decode_step_s)
    nan = np.nan
    cols["memory_per_chip_bytes"][sl] = sv.memory.total
    cols["fits"][sl] = fits
    cols["max_batch"][sl] = sv.max_batch
    # speeds only where it fits: never present an impossible configuration as achievable
    cols["ttft_s"][sl] = np.where(fits, ttft, nan)
    cols["decode_step_s"][sl] = np.where(fits, step, nan)
    cols["decode_floor_s"][sl] = np.where(fits, sv.decode_floor_s, nan)
    cols["output_tokens_per_s"][sl] = np.where(fits, b * lo / (ttft + lo * step), nan)
    cols["output_tokens_per_s_per_user"][sl] = np.where(fits, 1 / step, nan)
    if hw.price_usd_per_hour is not None:
        usd_s = lay.chips * (hw.price_usd_per_hour / 3600)
        cols["cost_per_mtok_input_usd"][sl] = np.where(fits, usd_s * ttft / (b * li) * 1e6, nan)
        cols["cost_per_mtok_output_usd"][sl] = np.where(fits, usd_s * step / b * 1e6, nan)
    else:
        cols["cost_per_mtok_input_usd"][sl] = nan
        cols["cost_per_mtok_output_usd"][sl] = nan
    codes["bottleneck_prefill"][sl] = sv.prefill.bottleneck_code
    codes["bottleneck_decode"][sl] = sv.decode.bottleneck_code
