"""Kernel time as a function of shape (the constants: specs/kernels.py, data/kernels.toml). Arrays broadcast.

An op keeps its FLOPs and bytes; with a kernel model its time is
    t0 x kernels + max(FLOPs / (peak x gemm x utilisation(M, N, K)), bytes / (bandwidth x stream))
- utilisation (tile and wave quantization, NVIDIA Matrix Multiplication Background Guide DU-09799-001 sec. 2.3,
  3.1, 3.2): the output M x N is cut into tile_m x tile_n tiles; padding the last tile of each dimension wastes
  its empty part (tile quantization; tile_n is the candidate that fills the chip best, DeepGEMM's heuristic); the
  tiles run in waves of one per compute unit and a partial last wave idles units (wave quantization). A GEMM with fewer tiles than units splits K (split-K / stream-K) so that
  tiles x splits fill the units, each slice keeping at least split_k_min_k of K. M is the tokens in the matmul
  (per expert for MoE): decode matmuls of a few rows pad to tile_m_small and stay bandwidth-bound (GEMV-like)
  until M* = the crossing of the two terms (`transition_m`).
- depth K (`k_factor`): a GEMM with a short reduction spends more of each tile's time filling its pipeline and
  writing its output; the compute fraction of its GEMM class is multiplied by a factor that falls with K, read in
  log2 K from a measured sweep (data/kernels.toml [gemm_k_dependence]: fp8 only, tilelang on H800, 1 at K >= 8192
  where the large-GEMM fractions were measured).
- grouped GEMM (MoE): each expert's rows pad separately; the compute fraction is multiplied by a factor that
  falls with tokens per expert (DeepGEMM masked rows, data/kernels.toml [grouped_gemm]).
- attention: prefill (causal) runs at the FlashAttention-3 fraction for its sequence length and head dim
  (log-log interpolation in the measured table, held outside it) x the class's scale; decode streams the KV cache
  at attn_decode_bw with a fixed attn_decode_fixed_s per kernel (fitted to FlashInfer's Fig. 6).
- t0: gemm_fixed_s per GEMM kernel, small_kernel_fixed_s per elementwise kernel, attn_decode_fixed_s (decode) or
  gemm_fixed_s (prefill) per attention kernel; the kernels of each op: specs.kernels.kernels_per_op().
- a machine that measured itself (`tokenmath measure`: a hardware file's [kernels] section) has its own GEMM
  efficiency e(M, N K), measured time vs max(FLOPs / peak, bytes / bandwidth) after the per-call t0: a GEMM runs at
  peak x e and bandwidth x stream x e (`measured_share`), in place of tile/wave quantization and the grouped factor.
Every fraction is <= 1 and every t0 >= 0, so no op is ever faster than its pure roofline (PEAK).
"""
from __future__ import annotations

import numpy as np

from tokenmath.specs.kernels import DTYPE_CLASS, KernelModel, fraction_key, kernels_per_op


RUNS_MIN = 4096     # a 1-D M axis this long is priced once per run of equal tile rows (step tables: 1e4-1e6 tokens)


def _runs(M: np.ndarray, tm: np.ndarray, gemv_max_m: float = 0.0):
    """(first index of each run, run of every element) of a 1-D M axis cut where its tile rows (mt = ceil(M / tm),
    tm) change or it crosses gemv_max_m, or None when runs are too short to be worth it (an unordered axis)."""
    mt = np.ceil(M / tm)
    new = np.empty(M.size, bool)
    new[0] = True
    np.not_equal(mt[1:], mt[:-1], out=new[1:])
    new[1:] |= tm[1:] != tm[:-1]
    if gemv_max_m:
        gemv = M <= gemv_max_m
        new[1:] |= gemv[1:] != gemv[:-1]
    first = np.flatnonzero(new)
    if first.size * 4 > M.size:
        return None
    return first, np.cumsum(new) - 1


def gemm_utilization(M, N, K, compute_units, tile_m, tile_n, groups=1, split_k_min_k=256):
    """Share (0, 1] of the chip's tensor throughput that the useful FLOPs of `groups` GEMMs of M x N x K get after
    tile and wave quantization (compute_units 0: no wave quantization)."""
    M = np.maximum(np.asarray(M, float), 1.0)
    N, K = np.asarray(N, float), np.asarray(K, float)
    mt, nt = np.ceil(M / tile_m), np.ceil(N / tile_n)
    tile_util = (M * N) / (mt * tile_m * nt * tile_n)
    if not compute_units:
        return tile_util
    cu = float(compute_units)
    tiles, split, waves = tile_waves(mt, nt, K, cu, groups, split_k_min_k)
    return tile_util * (tiles * split) / (waves * cu)


def tile_waves(mt, nt, K, cu: float, groups=1, split_k_min_k=256):
    """(tiles, split-K slices, waves) of `groups` GEMMs of mt x nt output tiles and depth K on cu compute units: a
    GEMM with fewer tiles than units splits K into slices of at least split_k_min_k so that tiles x slices fill them
    (split-K / stream-K), and the tiles x slices run in waves of one per unit."""
    tiles = mt * nt * np.asarray(groups, float)
    split = np.clip(np.floor(cu / tiles), 1.0, np.maximum(np.floor(np.asarray(K, float) / split_k_min_k), 1.0))
    return tiles, split, np.ceil(tiles * split / cu)


def tile_rows(km: KernelModel, M):
    """Output tile rows for a GEMM of M rows: tile_m_small up to that many rows, else tile_m."""
    return np.where(np.asarray(M, float) <= km.tile_m_small, km.tile_m_small, km.tile_m)


def k_factor(km: KernelModel, compute_key: str, K):
    """Multiplier (0, 1] on the compute fraction of a GEMM of reduction depth K at the dense peak `compute_key`:
    the measured K sweep of its GEMM class (linear in log2 K between the points, held at the ends), 1.0 for a class
    without one."""
    f = km.k_factor.get(DTYPE_CLASS.get(compute_key, "bf16"))
    if not f:
        return 1.0
    return np.minimum(_interp_log(K, km.k_points, f), 1.0)


def gemm_fraction(km: KernelModel, compute_key: str, M, shapes, groups=1):
    """Fraction of the dense peak that an op made of the GEMMs `shapes` ((N, K) per chip, each over M rows)
    reaches: the large-GEMM fraction x the FLOP-weighted (harmonic) utilisation of its GEMMs, each with the tile
    width (one of km.tile_n) that fills the chip best, as the library's heuristic picks it, x its depth factor
    (k_factor)."""
    if km.curve_rows:     # a machine's own measured curve in place of tile and wave quantization
        return km.gemm_fraction(compute_key) * measured_share(km, M, shapes)
    tm = tile_rows(km, M)
    if (np.ndim(M) == 1 and np.size(M) >= RUNS_MIN and np.ndim(groups) == 0
            and all(np.ndim(x) == 0 for shape in shapes for x in shape)):
        # a step table's long token axis, exactly and once per run of equal tile rows: within a run every GEMM's
        # utilisation is M x (its value at the run's first M) / that M, so the harmonic mean is too; a GEMV
        # (M <= gemv_max_m) computes only its rows, at the class fraction itself
        M = np.maximum(np.asarray(M, float), 1.0)
        runs = _runs(M, tm, km.gemv_max_m)
        if runs is not None:
            first, run = runs
            out = M * (gemm_fraction(km, compute_key, M[first], shapes, groups) / M[first])[run]
            if km.gemv_max_m:
                out = np.where(M <= km.gemv_max_m, km.gemm_fraction(compute_key), out)
            return out
    # every candidate tile width at once, on a leading axis in front of every operand's dimensions (one numpy pass
    # instead of one per width)
    nd = max([np.ndim(M), np.ndim(groups), np.ndim(tm)] + [np.ndim(x) for shape in shapes for x in shape])
    tns = np.asarray(km.tile_n, float).reshape((-1,) + (1,) * nd)
    w_sum, t_sum = 0.0, 0.0
    for N, K in shapes:
        w = np.asarray(N, float) * np.asarray(K, float)
        u = gemm_utilization(M, N, K, km.compute_units, tm, tns, groups, km.split_k_min_k).max(axis=0)
        u = u * k_factor(km, compute_key, K)
        if km.gemv_max_m:     # a matrix-vector kernel computes only the rows it has (no tile padding)
            u = np.where(np.asarray(M, float) <= km.gemv_max_m, 1.0, u)
        w_sum, t_sum = w_sum + w, t_sum + w / u
    return km.gemm_fraction(compute_key) * w_sum / t_sum


def _interp_log(x, xs, ys):
    """Linear in log2(x) between the points (xs, ys), held at the ends."""
    return np.interp(np.log2(np.maximum(np.asarray(x, float), 1.0)), np.log2(np.asarray(xs)), np.asarray(ys))


def grouped_factor(km: KernelModel, tokens_per_expert):
    """Multiplier (<= 1) on the GEMM compute fraction of a grouped (MoE) GEMM with this many tokens per expert,
    read at the rows the expert's tiles hold (whole tiles: the measured points are whole tiles, and the time of
    padded rows / factor then never falls as tokens grow)."""
    m = np.maximum(np.asarray(tokens_per_expert, float), 1.0)
    tm = tile_rows(km, m)
    return np.minimum(_interp_log(np.ceil(m / tm) * tm, km.grouped_tokens, km.grouped_factor), 1.0)


def flash_attention_fraction(km: KernelModel, seq_len, head_dim):
    """Fraction of the dense bf16 peak causal prefill attention reaches for prompts of `seq_len` tokens and heads of
    `head_dim`: the FlashAttention-3 table (H100), interpolated in log2 of both, x the class's scale, <= 1."""
    rows = [_interp_log(seq_len, km.fa_seq_len, row) for row in km.fa_causal]
    hd = np.log2(np.clip(np.asarray(head_dim, float), km.fa_head_dim[0], km.fa_head_dim[-1]))
    hs = np.log2(np.asarray(km.fa_head_dim))
    out = 0.0
    for i in range(len(hs)):      # piecewise-linear weights in log2(head_dim)
        w = np.interp(hd, hs, np.eye(len(hs))[i])
        out = out + w * rows[i]
    return np.minimum(out * km.attn_prefill_scale, 1.0)


def flash_attention_backward_ratio(km: KernelModel, seq_len):
    """FlashAttention's backward speed over its forward speed (both in FLOP/s of their own FLOPs) for sequences of
    `seq_len` tokens: linear in log2 of the length between the measured points (data/kernels.toml
    [flash_attention_backward], FA3 on H100), held outside them; 1.0 for a model without the table."""
    if not km.fa_bwd_ratio:
        return 1.0
    return np.minimum(_interp_log(seq_len, km.fa_bwd_seq_len, km.fa_bwd_ratio), 1.0)


def op_kernels(name: str) -> tuple[int, int, int]:
    """(GEMM, elementwise, attention) kernels one occurrence of op `name` launches."""
    return kernels_per_op().get(name, (0, 0, 0))


def fixed_s(km: KernelModel, name: str, phase: str = "decode") -> float:
    """t0 of one occurrence of op `name`: its kernels x their fixed times (s)."""
    g, s, a = op_kernels(name)
    attn = km.attn_decode_fixed_s if phase == "decode" else km.gemm_fixed_s
    return g * km.gemm_fixed_s + s * km.small_kernel_fixed_s + a * attn


def gemm_time(km: KernelModel, M, N, K, peak_flops: float, bandwidth: float, compute_key: str = "bf16",
              w_bytes: float = 2.0, a_bytes: float = 2.0, groups=1, kernels: int = 1, grouped: bool = False):
    """Seconds for `groups` GEMMs of M x N x K (weights w_bytes per value, activations a_bytes) in one kernel
    (grouped: an MoE grouped GEMM, with the grouped factor): kernels x gemm_fixed_s + max(padded FLOPs at the GEMM
    fraction, bytes at the streaming fraction). peak_flops and bandwidth are the chip's peaks."""
    M = np.asarray(M, float)
    flops = 2.0 * M * N * K * groups
    nbytes = groups * (w_bytes * N * K + a_bytes * (M * K + M * N))
    frac = gemm_fraction(km, compute_key, M, ((N, K),), groups)
    share = measured_share(km, M, ((N, K),))      # 1.0 without a measured curve
    if grouped and not km.curve_rows:
        frac = frac * grouped_factor(km, M)
    return kernels * km.gemm_fixed_s + np.maximum(flops / (peak_flops * frac),
                                                  nbytes / (bandwidth * km.stream_bw * share))


def transition_m(km: KernelModel, N, K, peak_flops: float, bandwidth: float, compute_key: str = "bf16",
                 w_bytes: float = 2.0, a_bytes: float = 2.0):
    """M* (rows) where a GEMM of N x K weights turns from bandwidth-bound (GEMV-like) to compute-bound, without tile
    padding: 2 M N K / (peak g) = (w N K + a M (K + N)) / (bw s)  =>  M* = (w N K / (bw s)) / (2 N K / (peak g) -
    a (K + N) / (bw s)), g = the large-GEMM fraction x k_factor(K). inf where the streaming side always wins."""
    N, K = np.asarray(N, float), np.asarray(K, float)
    bw = bandwidth * km.stream_bw
    g = km.gemm_fraction(compute_key) * k_factor(km, compute_key, K)
    den = 2.0 * N * K / (peak_flops * g) - a_bytes * (K + N) / bw
    return np.where(den > 0, (w_bytes * N * K / bw) / np.where(den > 0, den, 1.0), np.inf)


def decode_attention_time(km: KernelModel, nbytes, flops, peak_bf16: float, bandwidth: float, kernels: int = 1):
    """Seconds for decode attention that reads `nbytes` of KV (and q/o) and does `flops`: kernels x t0 +
    max(flops / (peak x attn_decode_flops), bytes / (bw x attn_decode_bw))."""
    return kernels * km.attn_decode_fixed_s + np.maximum(
        np.asarray(flops, float) / (peak_bf16 * km.attn_decode_flops),
        np.asarray(nbytes, float) / (bandwidth * km.attn_decode_bw))


def op_shapes(m, name: str, tp) -> tuple:
    """The (N, K) weight shapes per chip of the GEMMs of op `name` (tp shards N of column-parallel and K of
    row-parallel matmuls; replicated latent projections of MLA stay whole). Only their utilisation is used: the
    op's FLOPs stay the engine's."""
    d = m.d_model
    tp = np.asarray(tp, float)
    if name == "attn_proj":
        if m.is_mla:
            h, qk = m.n_heads, m.qk_nope_head_dim + m.qk_rope_head_dim
            q = ((m.q_lora_rank, d), (h * qk / tp, m.q_lora_rank)) if m.q_lora_rank else ((h * qk / tp, d),)
            return q + ((m.kv_lora_rank + m.qk_rope_head_dim, d),
                        (h * (m.qk_nope_head_dim + m.v_head_dim) / tp, m.kv_lora_rank), (d, h * m.v_head_dim / tp))
        return (((m.n_heads + 2 * m.kv_heads) * m.hd / tp, d), (d, m.n_heads * m.hd / tp))
    width = {"ffn": m.ffn_intermediate, "experts": m.moe_intermediate, "shared_experts": m.shared_width}.get(name)
    if width:
        return (((2 if m.ffn_gated else 1) * width / tp, d), (d, width / tp))
    if name == "router":
        return ((m.n_experts, d),)
    if name == "lm_head":
        return ((m.vocab_size / tp, d),)
    return ()


def op_rates(km: KernelModel, hw, name: str, phase: str, kind: str, *, key: str = "bf16", M=1.0, shapes=(),
             groups=None, seq_len=None, head_dim=None):
    """(achieved FLOP/s, achieved B/s, t0 in s) of one occurrence of op `name` on chip `hw`: _rates x the model's
    residual scales (KernelModel.compute_scale, bw_scale; 1.0 unless fitted), which never touch t0 or a
    collective (whose time is in comm_s)."""
    pk, bw, t0 = _rates(km, hw, name, phase, kind, key=key, M=M, shapes=shapes, groups=groups, seq_len=seq_len,
                        head_dim=head_dim)
    if kind == "comm" or (km.compute_scale == 1.0 and km.bw_scale == 1.0):
        return pk, bw, t0
    return pk * km.compute_scale, bw * km.bw_scale, t0


def _rates(km: KernelModel, hw, name: str, phase: str, kind: str, *, key: str = "bf16", M=1.0, shapes=(),
           groups=None, seq_len=None, head_dim=None):
    """(achieved FLOP/s, achieved B/s, t0 in s) of one occurrence of op `name` on chip `hw`.
    kind: "gemm" (M rows over `shapes`), "grouped" (M rows per expert, `groups` experts), "attention" (decode:
    streaming KV; prefill: FlashAttention-3 at seq_len, head_dim), "stream" (elementwise), "comm" (no fixed time:
    a collective's latency is in its comm_s). key: the compute dtype of the matmuls (Precision .compute)."""
    bw = hw.memory_bw
    peak = hw.peak_flops(key)
    if kind == "comm":
        return peak, bw * km.stream_bw, 0.0
    t0 = fixed_s(km, name, phase)
    if kind == "attention":
        p16 = hw.peak_flops("bf16")
        if phase == "decode":
            return p16 * km.attn_decode_flops, bw * km.attn_decode_bw, t0
        return p16 * flash_attention_fraction(km, seq_len, head_dim), bw * km.stream_bw, t0
    hk = fraction_key(key, hw.flops_key(key))
    if kind == "stream":
        return peak * km.gemm_fraction(hk), bw * km.stream_bw, t0
    if km.curve_rows:     # measured: t = max(F / (P e), B / (BW e)) reproduces the measured GEMM's time
        e = measured_share(km, M, shapes)
        return peak * km.gemm_fraction(hk) * e, bw * km.stream_bw * e, t0
    frac = gemm_fraction(km, hk, M, shapes, 1 if groups is None else groups)
    if kind == "grouped":
        frac = frac * grouped_factor(km, M)
    return peak * frac, bw * km.stream_bw, t0


# ---- a machine's own measured GEMM curve (`tokenmath measure`; specs.kernels_measured.measured_model) -------------------
def measured_share(km: KernelModel, M, shapes):
    """Share (0, 1] of max(FLOPs / peak, bytes / bandwidth) that the GEMMs `shapes` ((N, K) each) over M rows
    reached on the machine that measured itself: its curve, linear in log2 M between the measured rows and in
    log2(N K) between the measured shapes, held at the ends; FLOP-weighted (harmonic) over the shapes, as
    gemm_fraction. 1.0 without a curve. Applied to both the FLOP/s and the bandwidth of the op."""
    if not km.curve_rows:
        return 1.0
    eff = np.asarray(km.curve_efficiency, float)
    lm, le = np.log2(np.maximum(np.asarray(M, float), 1.0)), np.log2(np.asarray(km.curve_elements, float))
    per_shape = [np.interp(lm, np.log2(np.asarray(km.curve_rows, float)), eff[:, j]) for j in range(len(le))]
    w_sum, t_sum = 0.0, 0.0
    for N, K in shapes or ((1.0, km.curve_elements[-1]),):
        w = np.asarray(N, float) * np.asarray(K, float)
        x = np.log2(np.maximum(w, 1.0))
        u = sum(np.interp(x, le, np.eye(len(le))[j]) * per_shape[j] for j in range(len(le)))
        w_sum, t_sum = w_sum + w, t_sum + w / u
    return w_sum / t_sum


# ---- where tile and wave quantization make a step cost more per token (docs/tile_quantization.md) ----------------
# The compute time of G groups of M x N x K GEMMs at tile width tn, from gemm_utilization (P = padded rows,
# mt = P / tile_rows(M) row tiles, nt = ceil(N / tn), s = split-K slices, w = waves, cu = compute units):
#     2 M N K G / (peak g u),  u = (M N / (P nt tn)) x (mt nt G s / (w cu))   =>   2 K P tn w cu / (peak g mt s)
# so it depends on M only through (P, s, w): while they stay put, more rows cost no more time, and the cost per
# token of the GEMM falls. It can rise only where one of them steps up (quantization_state changes), and then by at
# most the rise of the time per useful FLOP (compute_inflation).
def padded_rows(km: KernelModel, M):
    """Token rows a GEMM of M rows (per group) computes: whole output tiles, ceil(M / t) x t with t = tile_rows(M)
    (64 up to 64 rows, else 128 on the NVIDIA classes); M itself on the matrix-vector path (M <= gemv_max_m) and
    with a measured curve (no tiles)."""
    M = np.maximum(np.asarray(M, float), 1.0)
    tm = tile_rows(km, M)
    out = np.ceil(M / tm) * tm
    if km.curve_rows:
        return M
    return np.where(M <= km.gemv_max_m, M, out) if km.gemv_max_m else out


def fills_tiles(km: KernelModel, M):
    """Whether a GEMM of M rows (per group) fills its output tiles exactly (padded_rows == M): no padded row."""
    M = np.maximum(np.asarray(M, float), 1.0)
    return padded_rows(km, M) == M


def quantization_state(km: KernelModel, M, shapes, groups=1):
    """The integers tile and wave quantization fix for `groups` GEMMs of M rows over each (N, K) of `shapes`
    (op_shapes): for each shape and each candidate tile width km.tile_n, (padded rows, split-K slices, waves), stacked
    on a new last axis (3 x len(shapes) x len(tile_n) entries). Two row counts with the same state take the same
    compute time (see above); 0s on the matrix-vector path and with a measured curve, which have no tiles (the
    former's compute time is linear in M, the latter's follows its measured curve). Units and rows as
    gemm_utilization."""
    M = np.maximum(np.asarray(M, float), 1.0)
    pad = padded_rows(km, M)
    untiled = bool(km.curve_rows) or (km.gemv_max_m and M <= km.gemv_max_m)
    cols = []
    for N, K in shapes:
        N, K = np.asarray(N, float), np.asarray(K, float)
        for tn in km.tile_n:
            if km.compute_units:
                _, split, waves = tile_waves(pad / tile_rows(km, M), np.ceil(N / tn), K, float(km.compute_units),
                                             groups, km.split_k_min_k)
            else:
                split = waves = np.ones_like(pad * np.ceil(N / tn) * np.asarray(groups, float))
            cols += [pad, split, waves]
    st = np.stack(np.broadcast_arrays(*cols), axis=-1) if cols else np.zeros(np.shape(M) + (0,))
    return np.where(np.asarray(untiled)[..., None], 0.0, st)


def compute_inflation(km: KernelModel, compute_key: str, M, shapes, groups=1, grouped: bool = False):
    """Time per useful FLOP of an op made of the GEMMs `shapes` over M rows (per group), relative to the class's
    large-GEMM rate at the dense peak `compute_key`: km.gemm_fraction(key) / (gemm_fraction x grouped_factor) >= 1 up
    to the depth factor (tile and wave quantization, split-K, grouped padding; 1 / k_factor(K) at any M). The ratio
    of its values at two row counts (the padded / unpadded compute ratio) is what a compute-bound op's cost per token
    changes by between them, and (tiled path: its bandwidth term does not depend on M) the most the op's cost per
    token can rise by."""
    frac = gemm_fraction(km, compute_key, M, shapes, groups)
    if grouped and not km.curve_rows:
        frac = frac * grouped_factor(km, M)
    return km.gemm_fraction(compute_key) / frac
