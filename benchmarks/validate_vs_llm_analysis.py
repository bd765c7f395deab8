#!/usr/bin/env python
"""tokenmath and llm-analysis predict the same published measurements: one table, every tool's error (issue 7, part 4).

    python benchmarks/validate_vs_llm_analysis.py             # creates benchmarks/.venv-llm-analysis on first use
    python benchmarks/validate_vs_llm_analysis.py --json vs_llm_analysis_validation.json
    python benchmarks/validate_vs_llm_analysis.py --realistic 0.6 0.7   # another "realistic" llm-analysis run

Rows: every [[inference]] row of src/tokenmath/data/measurements.toml (training rows are not compared here).
The environment is the one benchmarks/vs_llm_analysis.py uses (same venv, same pin): llm-analysis lives in
benchmarks/.venv-llm-analysis, created with `python -m venv` and pip when missing, and this script re-runs itself
with that python with this checkout's src/ first on sys.path, so both tools run in one interpreter.

Predictions per row
- tokenmath roofline: `tokenmath.analyses.calibration.validate.validate().rows()` predicted_roofline (documented default
  efficiencies: kernel-microbenchmark ceilings).
- tokenmath calibrated (held out): predicted_calibrated_heldout, from fits that never saw the row's source
  (leave-one-source-out).
- llm-analysis (1.0): its Python API at its defaults, flops_efficiency = hbm_memory_efficiency = 1.0 (100% of peak).
- llm-analysis (realistic): flops_efficiency 0.7, hbm_memory_efficiency 0.9, the values its README gives under
  "How to Set FLOPS and Memory Efficiency" ("up to 0.7 for inference"; "0.9 can be an aggressive target for memory
  efficiency"). Its infer() also warns that "benchmarks show closer to 0.6-0.7 hbm_memory_efficiency in inference
  workloads": rerun with --realistic 0.7 0.65 to see that setting.

How a row is given to llm-analysis (LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=tp), efficiencies)
then .inference(batch_size_per_gpu=batch, seq_len=input_len, num_tokens_to_generate=output_len,
kv_cache_dtype_bytes=...)):
- model: built from tokenmath's catalog entry (n_layers, d_model, n_heads, KV heads, vocab, max_context), the gated
  MLP given as a 2-matrix MLP of the same parameter count (width 1.5 x ffn_intermediate), as in
  benchmarks/vs_llm_analysis.py. llm-analysis derives head_dim = d_model / n_heads; rows whose model has another
  head width are marked (approximation listed below the table).
- hardware: a GPUConfig built from tokenmath's hardware catalog (memory bytes, HBM bandwidth, scale-up bandwidth
  and latency, dense FLOP/s), so both tools see the same peaks. llm-analysis's own a100-sxm-80gb / h100-sxm-80gb
  files have the same FLOP/s, HBM and NVLink figures and differ in reading "80 GB" as 80 GiB and in the minimum
  message latency (8 us; tokenmath 6 us); it has no file for most of the other chips (H200, MI300X, TPU v4, Apple,
  RTX).
- dtype: weight bits from the row (16: bf16/fp16; 8: fp8, int8; 4: int4 and the fp4 formats; fp8 is given as
  8-bit weights) and activation bits chosen so llm-analysis multiplies at the same FLOP/s that tokenmath uses
  for that dtype on that chip (tokenmath/dtypes.py: fp8 and int8 at the 8-bit rate, int4 at the int8 rate, 16-bit
  where the chip lacks a faster path): w16a16, w8a8, w4a8 or w4a16, embedding 16-bit. KV cache bytes from the
  row's kv_dtype.
- metric: from its prefill_latency (ttft) and decode_latency (one decode step of the whole batch) exactly as
  tokenmath's validate maps its own (validate._metric): per-user speed = 1/step, system throughput = batch x
  output / (ttft + output x step), decode throughput = batch / step, e2e = ttft + output x step, scaled by
  value_per_chips / chips where the row is per GPU / per node.
- not expressed (listed with the reason): batch "max" or "unstated" (llm-analysis needs an integer batch and the
  source does not publish the batch the engine reached), MLA attention, MoE (llm-analysis 0.2.2's inference()
  charges every expert's weights on every step and dense-MLP FLOPs; moe_top_k only enters parameter counts),
  pipeline / data / expert parallel layouts (its inference() times one pipeline stage and has no data- or
  expert-parallel serving model), and any row llm-analysis itself rejects (its memory checks: the AssertionError
  text is shown).

Summary: median absolute percentage error per tool over the rows every tool predicted, by regime too, and over
each tool's own rows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_llm_analysis import VENV, bootstrap  # one venv, one pin, one way to enter it

README_REALISTIC = (0.7, 0.9)     # llm-analysis README: flops "up to 0.7 for inference", memory "0.9 ... aggressive"
WEIGHT_BITS = {"bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4, "mxfp4": 4, "nvfp4": 4}
COMPUTE_BITS = {"bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "fp4": 4, "int4": 4}
TOOLS = ("tm_roofline", "tm_calibrated", "la_default", "la_realistic")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--realistic", nargs=2, type=float, metavar=("FLOPS", "HBM"), default=README_REALISTIC,
                    help="llm-analysis flops_efficiency and hbm_memory_efficiency for the second run "
                         "(default: its README's 0.7 and 0.9)")
    ap.add_argument("--json", metavar="FILE", help="also write every row and the summary as JSON")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")   # llm-analysis imports transformers
    try:
        import llm_analysis  # noqa: F401
    except ImportError:
        if a.in_venv:
            sys.exit(f"llm_analysis is not importable in {sys.executable}; delete {VENV} and run again")
        bootstrap([x for x in argv if x != "--in-venv"], __file__)
    sys.path.insert(0, str(ROOT / "src"))          # this checkout's tokenmath, in the same interpreter
    return run(a)


# ---------------------------------------------------------------------------------------------------------------
# llm-analysis side

def la_model(m):
    from llm_analysis.config import ModelConfig
    d = m.d_model
    ffn = m.ffn_intermediate * (3 if m.ffn_gated else 2) // 2     # 2-matrix MLP with the real parameter count
    mc = ModelConfig(name=m.id, num_layers=m.n_layers, n_head=m.n_heads, hidden_dim=d, vocab_size=m.vocab_size,
                     max_seq_len=m.max_context or None, num_key_value_heads=m.kv_heads, ffn_embed_dim=4 * d)
    mc.ffn_embed_dim = ffn                 # set after construction: it asserts ffn % d == 0 (see vs_llm_analysis.py)
    mc.expansion_ratio = ffn / d
    return mc


def la_gpu(hw, compute_key):
    """GPUConfig from tokenmath's figures; the 8- and 4-bit peaks are the rate tokenmath uses for this row."""
    from llm_analysis.config import GPUConfig
    fp16 = hw.peak_flops("bf16") / 1e12
    peak = hw.flops[compute_key] / 1e12 if hw.flops.get(compute_key) else fp16
    bits = COMPUTE_BITS.get(compute_key, 16)
    return GPUConfig(
        name=hw.id, mem_per_GPU_in_GB=hw.memory_bytes / 1024**3,      # llm-analysis multiplies by 1024**3
        hbm_bandwidth_in_GB_per_sec=hw.memory_bw / 1e9,
        intra_node_bandwidth_in_GB_per_sec=hw.scaleup_bw / 1e9, intra_node_min_message_latency=hw.scaleup_latency,
        peak_fp16_TFLOPS=fp16,
        peak_i8_TFLOPS=peak if bits == 8 else 2 * fp16,
        peak_i4_TFLOPS=peak if bits == 4 else 4 * fp16,
        inter_node_bandwidth_in_GB_per_sec=(hw.scaleout_bw or hw.scaleup_bw) / 1e9)


def expressible(row, model):
    """Reasons llm-analysis cannot take this row (empty: it can)."""
    why = []
    b = row.get("batch", 1)
    if not isinstance(b, int) or isinstance(b, bool):
        why.append(f'batch = "{b}": llm-analysis needs an integer batch and the source publishes none'
                   + (" (offline max-throughput run)" if b == "max" else ""))
    if model is None:
        why.append(f"model {row.get('model')!r} is not in tokenmath's catalog")
    else:
        if model.is_mla:
            why.append("MLA attention (llm-analysis models MHA/GQA with head_dim = d_model / n_heads)")
        if model.is_moe:
            why.append("MoE (llm-analysis 0.2.2 inference() reads every expert's weights each step and counts "
                       "dense-MLP FLOPs; moe_top_k only enters parameter counts)")
    for k, what in (("pp", "pipeline parallel (its inference() times one stage of num_layers / pp)"),
                    ("dp", "data parallel replicas"),
                    ("ep", "expert / attention-data parallel groups")):
        if int(row.get(k, 1) or 1) > 1:
            why.append(f"{k} = {row[k]}: {what}")
    if row.get("weight_dtype") not in WEIGHT_BITS:
        why.append(f"weight dtype {row.get('weight_dtype')} (llm-analysis has 16-, 8- and 4-bit weights)")
    return why


def la_predict(row, eff_pairs):
    """{(flops, hbm): metric value} for one row, plus notes; or raises ValueError(reason)."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name

    import tokenmath as tm
    from tokenmath.analyses.calibration.validate import metric_function as _metric
    from tokenmath.specs.dtypes import get_dtype
    model, hw = tm.get_model(row["model"]), tm.get_hardware(row["hardware"])
    wd, kd = get_dtype(row["weight_dtype"]), get_dtype(row.get("kv_dtype", "bf16"))
    key = hw.flops_key(wd.compute)                  # tokenmath's matmul rate for this dtype on this chip
    wbits = WEIGHT_BITS[row["weight_dtype"]]
    abits = max(COMPUTE_BITS.get(key, 16), wbits)   # llm-analysis multiplies at max(weight, activation) bits
    dt = get_dtype_config_by_name(f"w{wbits}a{abits}e16")
    gpu = la_gpu(hw, key)
    notes = []
    if model.hd * model.n_heads != model.d_model:
        notes.append(f"{model.id}: {model.n_heads} heads x {model.hd} != d_model {model.d_model}; llm-analysis uses "
                     f"head_dim {model.d_model // model.n_heads} and d x d q/o projections")
    if abs(wd.bytes - wbits / 8) > 0.01 * wbits / 8:
        notes.append(f"{row['weight_dtype']}: llm-analysis stores {wbits}-bit weights without the scale overhead "
                     f"tokenmath counts ({wd.bytes:.4g} bytes/weight)")
    B = int(row["batch"])
    Li, Lo = max(int(row.get("input_len", 1)), 1), max(int(row.get("output_len", 1)), 1)
    f = _metric(SimpleNamespace(batch=B, input_len=Li, output_len=Lo, chips=row["chips"]), row)
    out = {}
    for fe, me in eff_pairs:
        an = LLMAnalysis(la_model(model), gpu, dt, ParallelismConfig(tp_size=int(row.get("tp", 1))),
                         flops_efficiency=fe, hbm_memory_efficiency=me)
        try:
            s = an.inference(batch_size_per_gpu=B, seq_len=Li, num_tokens_to_generate=Lo,
                             kv_cache_dtype_bytes=kd.bytes)
        except AssertionError as e:
            raise ValueError("llm-analysis rejects it: " + " ".join(str(e).split())) from None
        out[(fe, me)] = float(f(s["prefill_latency"], s["decode_latency"]))
    return out, dt.name, notes


# ---------------------------------------------------------------------------------------------------------------

def ape(pred, meas):
    return abs(pred - meas) / meas if pred is not None and math.isfinite(pred) else None


def fmt(x, w=10):
    return f"{x:>{w}.4g}" if x is not None else f"{'-':>{w}s}"


def pct(x, w=6):
    return f"{x * 100:>{w - 1}.0f}%" if x is not None else f"{'-':>{w}s}"


def run(a):
    import logging
    from importlib.metadata import PackageNotFoundError, version

    from llm_analysis.logger import logger
    logger.setLevel(logging.ERROR)

    import tokenmath as tm
    from tokenmath.analyses.calibration.validate import validate
    from tokenmath.specs.catalog import shipped
    try:
        la_version = version("llm-analysis")
    except PackageNotFoundError:
        la_version = "?"
    eff = [(1.0, 1.0), tuple(a.realistic)]
    data = shipped("measurements.toml")
    raw = {r["id"]: r for r in data.get("inference", [])}
    tmrows = {d["id"]: d for d in validate().rows() if d["kind"] == "inference"}

    table, skips, notes = [], [], {}
    for rid, row in raw.items():
        d = tmrows[rid]
        try:
            model = tm.get_model(row["model"])
        except tm.InputError:     # a row naming an unknown model is a skip, not a crash
            model = None
        rec = {"id": rid, "metric": row["metric"], "regime": row.get("regime", ""), "measured": float(row["value"]),
               "tm_roofline": d.get("predicted_roofline"), "tm_calibrated": d.get("predicted_calibrated_heldout"),
               "tm_peak": d.get("pure_roofline_bound"), "tm_skipped": d.get("skipped"),
               "la_default": None, "la_realistic": None, "la_dtype": None, "la_skipped": None}
        why = expressible(row, model)
        if why:
            rec["la_skipped"] = "; ".join(why)
        else:
            try:
                vals, rec["la_dtype"], nt = la_predict(row, eff)
                rec["la_default"], rec["la_realistic"] = vals[eff[0]], vals[eff[1]]
                for n in nt:
                    notes.setdefault(n, []).append(rid)
            except ValueError as e:
                rec["la_skipped"] = str(e)
        for t in TOOLS + ("tm_peak",):
            rec["ape_" + t] = ape(rec[t], rec["measured"])
        table.append(rec)
        if rec["la_skipped"] or rec["tm_skipped"]:
            skips.append(rec)

    # ---- print ------------------------------------------------------------------------------------------------
    fe, me = eff[1]
    print(f"tokenmath (this checkout) vs llm-analysis {la_version} on the {len(table)} [[inference]] rows of "
          f"data/measurements.toml")
    print("tm roof = tokenmath at its default (kernel-ceiling) efficiencies; tm cal = tokenmath calibrated, held out "
          "(leave-one-source-out);")
    print(f"la 1.0 = llm-analysis at its defaults (100% of peak FLOP/s and HBM bandwidth); la real = llm-analysis at "
          f"flops_efficiency {fe:g}, hbm_memory_efficiency {me:g}"
          + (" (its README's figures)" if tuple(eff[1]) == README_REALISTIC else ""))
    print("Both tools get tokenmath's hardware figures (same peaks); APE = |predicted - measured| / measured.")
    print()
    iw = max(len(r["id"]) for r in table)
    hdr = (f"{'row':{iw}s} {'metric':28s} {'measured':>10s} | {'tm roof':>10s} {'APE':>6s} | {'tm cal':>10s} "
           f"{'APE':>6s} | {'la 1.0':>10s} {'APE':>6s} | {'la real':>10s} {'APE':>6s}")
    print(hdr)
    print("-" * len(hdr))
    for r in table:
        print(f"{r['id']:{iw}s} {r['metric']:28s} {fmt(r['measured'])} | {fmt(r['tm_roofline'])} "
              f"{pct(r['ape_tm_roofline'])} | {fmt(r['tm_calibrated'])} {pct(r['ape_tm_calibrated'])} | "
              f"{fmt(r['la_default'])} {pct(r['ape_la_default'])} | {fmt(r['la_realistic'])} "
              f"{pct(r['ape_la_realistic'])}")

    la_rows = [r for r in table if r["la_default"] is not None]
    print()
    print(f"llm-analysis expressed {len(la_rows)} of {len(table)} rows; dtype configs used: "
          + ", ".join(f"{k} x{v}" for k, v in sorted(_count(r["la_dtype"] for r in la_rows).items())))
    print(f"Rows without a prediction ({len(skips)}), with the reasons:")
    for r in skips:
        if r["la_skipped"]:
            print(f"  {r['id']}: llm-analysis: {r['la_skipped']}")
        if r["tm_skipped"]:
            print(f"  {r['id']}: tokenmath: {r['tm_skipped']}")
    if notes:
        print("Approximations in the llm-analysis input (rows kept):")
        for n, ids in notes.items():
            print(f"  {n} [{len(ids)} row{'s' * (len(ids) > 1)}]")

    # ---- summary ----------------------------------------------------------------------------------------------
    names = {"tm_roofline": "tokenmath roofline (default efficiencies)",
             "tm_calibrated": "tokenmath calibrated (held out)",
             "la_default": "llm-analysis at 1.0 (its default)",
             "la_realistic": f"llm-analysis at {fe:g} / {me:g}",
             "tm_peak": "tokenmath at 100% of every peak (pure roofline)"}
    common = [r for r in table if all(r["ape_" + t] is not None for t in TOOLS)]
    summary = {"rows": len(table), "llm_analysis_rows": len(la_rows), "common_rows": len(common),
               "realistic": {"flops_efficiency": fe, "hbm_memory_efficiency": me}, "common": {}, "own": {}}
    print()
    print(f"Median APE over the {len(common)} rows that all four predict; in brackets the median of predicted speed / "
          f"measured speed (time rows inverted), above 1 = predicts faster than measured:")
    regimes = sorted({r["regime"] for r in common})
    print(f"  {'':50s} {'all':>14s}" + "".join(f" {g + ' (' + str(sum(r['regime'] == g for r in common)) + ')':>16s}"
                                          for g in regimes))
    for t in TOOLS + ("tm_peak",):
        sel = [r for r in common if r["ape_" + t] is not None]
        m = _med([r["ape_" + t] for r in sel])
        ratio = _med([speed_ratio(r, t) for r in sel])
        summary["common"][t] = {"median_ape": m, "median_speed_ratio": ratio, "rows": len(sel),
                                **{f"median_ape_{g}": _med([r["ape_" + t] for r in sel if r["regime"] == g])
                                   for g in regimes}}
        print(f"  {names[t]:50s} {pct(m)} [{ratio:5.2f}]" + "".join(
            f" {pct(summary['common'][t]['median_ape_' + g], 16)}" for g in regimes))
    print("Over each tool's own rows:")
    for t in TOOLS:
        sel = [r["ape_" + t] for r in table if r["ape_" + t] is not None]
        summary["own"][t] = {"rows": len(sel), "median_ape": _med(sel)}
        print(f"  {names[t]:50s} {pct(_med(sel))} over {len(sel)} rows")
    best = _count(min(TOOLS, key=lambda t: r["ape_" + t]) for r in common)
    summary["closest"] = best
    short = {"tm_roofline": "tm roof", "tm_calibrated": "tm cal", "la_default": "la 1.0", "la_realistic": "la real"}
    print(f"Closest to the measurement, row by row, on those {len(common)} rows: "
          + ", ".join(f"{short[t]} {best.get(t, 0)}" for t in TOOLS))
    if a.json:
        Path(a.json).write_text(json.dumps({"llm_analysis_version": la_version, "rows": table, "summary": summary,
                                            "approximations": notes}, indent=2))
    return summary


def speed_ratio(r, t):
    """predicted / measured for throughput metrics, measured / predicted for times: > 1 means optimistic."""
    from tokenmath.analyses.calibration.validate import THROUGHPUT
    q = r[t] / r["measured"]
    return q if r["metric"] in THROUGHPUT else 1 / q


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _count(it):
    out = {}
    for x in it:
        out[x] = out.get(x, 0) + 1
    return out


if __name__ == "__main__":
    main()
