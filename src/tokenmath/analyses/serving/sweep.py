"""Sweep: the full Cartesian product of batches, lengths and layouts in one vectorized engine call.

    cols = tokenmath.sweep("llama-2-70b", "a100-80gb", batch=[1, 8, 64], input_len=[512, 2048],
                           output_len=[128], tp=[1, 2, 4, 8])
    len(cols)                       # 24 configurations
    cols["decode_step_s"]           # numpy array, same keys as `infer --json`
    cols.to_pandas()                # when pandas is installed

Layouts the model does not admit (tp not dividing the heads, ep on a dense model, ...) stay in the table with
valid = False and NaN figures, so the product keeps its shape.

decode_only=True skips the prefill pass: decode step, floor, tokens/s per user, $/Mtok output, memory and fit are
unchanged; ttft_s, output_tokens_per_s and cost_per_mtok_input_usd (which need the prefill) are NaN and
bottleneck_prefill is "", in every row: read-only broadcast views, like the other constant columns below.

Columns: the axes and `chips` are int64, the figures float64, `valid` and `fits` bool; `bottleneck_prefill` and
`bottleneck_decode` are object arrays of str; params_total, params_active, weights_bytes and kv_bytes_per_token,
the same for every row, are read-only broadcast views of one number (np.array(...) for a writable copy).

How it stays fast (benchmarks/sweep_speed.py: millions of configurations per second on one core): the engine is
evaluated on the axes themselves, each shaped to broadcast along its own dimension of the product (batch x
input_len x output_len x tp x pp x ep x dp), in blocks of consecutive rows (the longest axis of a block innermost).
A term that depends only on (tp, ep), or only on the batch, is computed once per value and broadcast, not once per
configuration; only what depends on everything (attention over the context, the sums over operations, the
columns themselves) is evaluated on the full block. A small product (FLAT rows or fewer) runs as one call on flat
columns instead, where plain contiguous loops beat broadcasting. Every figure is the same elementwise arithmetic
as the scalar path (`infer`), so the results are identical to it bit for bit.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.heap import kept_heap
from tokenmath.engine.economics import decode_cost_per_mtok, prefill_cost_per_mtok, usd_per_s
from tokenmath.engine.forward import BOTTLENECKS
from tokenmath.engine.memory import RESERVE_FRACTION, weight_bytes_total
from tokenmath.engine.static_batch import serve_batch
from tokenmath.specs.hardware import catalog as hardware_catalog
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.mapping.layout import Layout, admissible
from tokenmath.specs.model_catalog import catalog as model_catalog
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.specs.serving_engines import engine_dict
from tokenmath.analyses.setup import resolve_precision, serving_efficiency

AXES = ("batch", "input_len", "output_len", "tp", "pp", "ep", "dp")
FIGURES = ("memory_per_chip_bytes", "ttft_s", "decode_step_s", "decode_floor_s", "output_tokens_per_s",
           "output_tokens_per_s_per_user", "cost_per_mtok_input_usd", "cost_per_mtok_output_usd", "max_batch")


class Columns(dict):
    """dict of equal-length numpy arrays; len() is the number of configurations. `engine`: {id, name} of the
    serving engine the figures assume."""
    engine: dict | None = None

    def __len__(self):
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def to_pandas(self):
        try:
            import pandas as pd
        except ImportError:
            raise InputError("pandas", "pandas is not installed", "pip install pandas") from None
        return pd.DataFrame({k: v for k, v in self.items()})


def _axis(v, name):
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
        return np.array([v], float)
    if isinstance(v, (list, tuple)) and v and all(type(x) is int and x >= 1 for x in v):
        return np.array(v, float)        # whole numbers >= 1 already: nothing to check
    a = np.atleast_1d(np.asarray(v))
    if a.ndim != 1 or a.size == 0:
        raise InputError(name, f"{v!r} is not a list of numbers", "a number or a non-empty list")
    if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)) or np.any(a < 1) or np.any(a != np.round(a)):
        raise InputError(name, f"{v!r} must hold whole numbers >= 1", "e.g. [1, 2, 4]")
    return a.astype(float)


# catalog entries are immutable (frozen dataclasses built from the shipped catalog): build each once per process;
# files are read every time, since they may change
_catalog_model = lru_cache(maxsize=64)(get_model)
_catalog_hardware = lru_cache(maxsize=64)(get_hardware)


def _along(a, i, ndim):
    """1-d array `a` shaped to broadcast along dimension i of an ndim-dimensional product."""
    return a.reshape((1,) * i + (-1,) + (1,) * (ndim - i - 1))


def _column(a, i, shape):
    """The flat column of axis i over the full product in C order (each value repeated, no meshgrid copies): each
    value repeated over the axes after it (a run), that run repeated over the axes before it. One pass over the
    column: a one-value axis is a fill; long runs are written by broadcasting each value over its run (np.repeat
    copies 8 bytes at a time: ~6 ms for the 1M-row batch column); short runs (the innermost axes) are tiled."""
    inner = int(np.prod(shape[i + 1:], dtype=np.int64))
    outer = int(np.prod(shape[:i], dtype=np.int64))
    if a.size == 1:
        return np.full(outer * inner, a[0])
    if inner >= LONG_RUN:
        out = np.empty((outer, a.size, inner), a.dtype)
        out[...] = a[:, None]
        return out.reshape(-1)
    run = np.repeat(a, inner) if inner > 1 else a
    return np.tile(run, outer) if outer > 1 else np.array(run)


def _blocks(shape, chunk):
    """Split the C-ordered product of `shape` into blocks of consecutive rows of about `chunk` rows, each block a
    sub-box of the product. Yields (flat slice, per-axis slices)."""
    nd = len(shape)
    inner, j = 1, nd
    while j > 0 and inner * shape[j - 1] <= chunk:
        j -= 1
        inner *= shape[j]
    if j == 0:
        yield slice(0, inner), (slice(None),) * nd
        return
    k = j - 1                                     # the axis split into runs; axes before it one value at a time
    step = max(1, chunk // inner)
    rest = (slice(None),) * (nd - k - 1)
    for o, outer in enumerate(np.ndindex(*shape[:k])):
        head = tuple(slice(i, i + 1) for i in outer)
        for a in range(0, shape[k], step):
            b = min(a + step, shape[k])
            yield slice((o * shape[k] + a) * inner, (o * shape[k] + b) * inner), head + (slice(a, b),) + rest


def sweep(model, hardware, *, batch=1, input_len=1024, output_len=256, tp=1, pp=1, ep=1, dp=1, weight_dtype=None,
          kv_dtype=None, efficiency=None, reserve: float = RESERVE_FRACTION, decode_only: bool = False,
          engine=None) -> Columns:
    """Every configuration of the Cartesian product of the axes (C order: batch varies slowest, dp fastest).

    decode_only: skip the prefill pass (ttft_s, output_tokens_per_s, cost_per_mtok_input_usd NaN,
    bottleneck_prefill "": read-only views of one value); every other column is unchanged.
    engine: a serving engine's id or file, "none" or None (the engine-free step; see analyses.setup).
    Columns.engine: {id, name} of the engine the figures assume."""
    m = _catalog_model(model.lower()) if isinstance(model, str) and model.lower() in model_catalog() else get_model(model)
    hw = (_catalog_hardware(hardware.lower()) if isinstance(hardware, str) and hardware.lower() in hardware_catalog()
          else get_hardware(hardware))
    prec = resolve_precision(m, weight_dtype, kv_dtype)
    eff = serving_efficiency(hw, efficiency, engine)
    axes = [_axis(v, n) for v, n in zip((batch, input_len, output_len, tp, pp, ep, dp), AXES)]
    n = int(np.prod([a.size for a in axes]))
    if n <= FLAT:
        return _columns(m, hw, prec, eff, axes, reserve, decode_only)
    with kept_heap():     # each block's temporaries reuse the last block's pages (base/heap.py)
        return _columns(m, hw, prec, eff, axes, reserve, decode_only)


def _columns(m, hw, prec, eff, axes, reserve, decode_only) -> Columns:
    """The columns of sweep() over the product of `axes` (1-d float arrays, in AXES order)."""
    shape = tuple(a.size for a in axes)
    nd = len(shape)
    n = int(np.prod(shape))
    _, _, _, TP, PP, EP, DP = (_along(a, i, nd) for i, a in enumerate(axes))
    valid = np.broadcast_to(admissible(m, TP, PP, EP), shape).reshape(-1)
    cols = Columns()
    cols.engine = engine_dict(eff.engine)
    for i, (name, a) in enumerate(zip(AXES, axes)):
        cols[name] = _column(a.astype(np.int64), i, shape)
    cols["chips"] = np.broadcast_to((TP * PP * EP * DP).astype(np.int64), shape).reshape(-1)
    cols["valid"] = valid
    # the same figure for every configuration: a read-only view of one number, not n copies of it
    def const(v):
        return np.broadcast_to(np.float64(v), (n,))
    for k in FIGURES:       # no prefill pass under decode_only: its figures are NaN in every row, a constant too
        cols[k] = const(np.nan) if decode_only and k in PREFILL_FIGURES else np.empty(n)
    cols["fits"] = np.empty(n, bool)
    codes = {"bottleneck_decode": np.empty(n, np.int8)}
    if not decode_only:
        codes["bottleneck_prefill"] = np.empty(n, np.int8)
    P = count_params(m)
    cols["params_total"] = const(P.total)
    cols["params_active"] = const(P.active)
    cols["weights_bytes"] = const(weight_bytes_total(m, prec.weight.bytes, prec.expert.bytes))
    cols["kv_bytes_per_token"] = const(kv_bytes_per_token(m, prec.kv.bytes))
    if n <= FLAT:
        # a small product: flat columns make every numpy call a plain contiguous loop (cheaper than broadcasting)
        _fill(cols, codes, m, hw, prec, eff, reserve, slice(0, n), (n,), (0,),
              [cols[k].astype(float) for k in AXES], decode_only)
    else:
        for sl, box in _blocks(shape, CHUNK):
            vals = [a[s] for a, s in zip(axes, box)]
            bshape = tuple(v.size for v in vals)
            # inside a block the longest axis is innermost: numpy's broadcast loops then run long, not 2 or 10 wide
            big = int(np.argmax(bshape))
            perm = tuple(i for i in range(nd) if i != big) + (big,)
            _fill(cols, codes, m, hw, prec, eff, reserve, sl, bshape, perm,
                  [_along(vals[i], perm.index(i), nd) for i in range(nd)], decode_only)
    # object arrays of the names (8 bytes a row, not 52 for fixed-width unicode); the values are str
    names = np.array(list(BOTTLENECKS) + [""], dtype=object)
    bad_any = not valid.all()
    if decode_only:         # no prefill pass: "" in every row, a read-only view like the other constants
        cols["bottleneck_prefill"] = np.broadcast_to(names[NO_BOTTLENECK:], (n,))
    for k, c in codes.items():
        if bad_any:
            c[~valid] = NO_BOTTLENECK
        cols[k] = names[c]
    # layouts the model does not admit: no figures (the engine computed them only to stay vectorized)
    if bad_any:
        bad = ~valid
        for k in FIGURES:
            if cols[k].flags.writeable:       # the constant NaN columns of decode_only are NaN already
                cols[k][bad] = np.nan
        cols["fits"][bad] = False
    return cols


NO_BOTTLENECK = len(BOTTLENECKS)   # the code of "" (no pass: decode_only's prefill, a layout not admitted)
PREFILL_FIGURES = ("ttft_s", "output_tokens_per_s", "cost_per_mtok_input_usd")   # NaN under decode_only
FLAT = 1 << 10    # up to this many configurations, one call on flat columns
LONG_RUN = 16     # an axis column whose runs are this long or longer is written by broadcasting, not np.repeat
CHUNK = 1 << 16   # configurations per engine call: large enough to amortize Python, small enough to stay in cache


def _fill(cols, codes, m, hw, prec, eff, reserve, sl, bshape, perm, box, decode_only):
    """Evaluate the rows `sl` (a box of the product of shape bshape in C order) with the engine on arrays laid out
    in the axis order `perm`, and write every column through views of those rows in the same order."""
    b, li, lo, tp, pp, ep, dp = box
    lay = Layout(tp, pp, ep, dp)
    sv = serve_batch(m, hw, lay, prec, eff, b, li, lo, reserve, decode_only=decode_only)

    def view(col):
        return col[sl].reshape(bshape).transpose(perm)

    # views into the columns, written in place (not the constant NaN columns of decode_only's prefill figures)
    out = {k: view(cols[k]) for k in FIGURES if cols[k].flags.writeable}
    total = sv.memory.total
    out["memory_per_chip_bytes"][...] = total
    fits = view(cols["fits"])
    # = sv.fits without a second total and without its batch >= 1, which every sweep row meets (_axis)
    np.less_equal(total, sv.memory.usable, out=fits)
    if sv.engine is not None:
        np.logical_and(fits, sv.runs_at_once, out=fits)                      # the engine runs them all at once
    out["max_batch"][...] = sv.max_batch
    # speeds only where it fits, never an impossible configuration as achievable: NaN elsewhere. Adding this mask
    # (0 where it fits, NaN where not) is np.where(fits, v, nan) in one pass (v + 0.0 == v for the v > 0 here), and
    # every figure computed from a masked step or TTFT is NaN where it does not fit by itself.
    mask = np.where(fits, 0.0, np.nan)

    def put(k, v):
        """out[k] = v + mask; returns the column (masked)."""
        return np.add(v, mask, out=out[k])

    step = put("decode_step_s", sv.decode_step_s)
    put("decode_floor_s", sv.decode_floor_s)
    np.divide(1, step, out=out["output_tokens_per_s_per_user"])
    usd_s = usd_per_s(lay.chips, hw.price_usd_per_hour)
    if usd_s is not None:
        out["cost_per_mtok_output_usd"][...] = decode_cost_per_mtok(usd_s, step, b)
    else:
        out["cost_per_mtok_output_usd"].fill(np.nan)
    view(codes["bottleneck_decode"])[...] = sv.decode_bottleneck_code
    if decode_only:       # the prefill figures and bottleneck_prefill are constant columns (NaN, "")
        return
    ttft = put("ttft_s", sv.ttft_s)
    # b * lo / (ttft + lo * step), the same operations in the same order, written into the column (no temporaries)
    tps = np.multiply(lo, step, out=out["output_tokens_per_s"])
    np.add(ttft, tps, out=tps)
    np.divide(b * lo, tps, out=tps)
    if usd_s is not None:
        out["cost_per_mtok_input_usd"][...] = prefill_cost_per_mtok(usd_s, ttft, b, li)
    else:
        out["cost_per_mtok_input_usd"].fill(np.nan)
    view(codes["bottleneck_prefill"])[...] = sv.prefill.bottleneck_code
