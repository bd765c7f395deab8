#!/usr/bin/env python
"""tokenmath vs llm-analysis on the same 1,000 serving configurations, in one process (issue 10, part 2).

    python benchmarks/vs_llm_analysis.py              # creates benchmarks/.venv-llm-analysis on first use
    python benchmarks/vs_llm_analysis.py --rounds 7 --json vs_llm_analysis.json

llm-analysis (https://github.com/cli99/llm-analysis, pip package `llm-analysis`, pinned below) lives in its own
virtual environment, benchmarks/.venv-llm-analysis, created here with `python -m venv` and pip from the package
registry when it is missing (network needed once). The script then re-runs itself with that environment's
python, with this checkout's src/ first on sys.path, so both tools run in the same interpreter with the same numpy.

Configurations (1,000): a Llama-2-70B-class model in bf16 on A100-SXM-80GB and H100-SXM (2)
x tensor parallel {4, 8} x batch {1, 2, 4, 8, 16, 24, 32, 48, 64, 128} x input length {128, 256, 512, 1024, 2048}
x output length {32, 64, 128, 256, 512}; every one fits in memory in both tools.

- tokenmath: tokenmath.sweep, one call per chip (the other axes are the Cartesian product), catalog ids
  llama-2-70b, a100-80gb and h100-sxm. Each configuration gets the prefill and mean decode pass per operation,
  memory per chip and fit, largest batch, tokens/s, $/Mtok and bottlenecks.
- llm-analysis: its Python API as documented, LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=tp))
  built once per (chip, tp) and .inference(batch_size_per_gpu, seq_len, num_tokens_to_generate) per
  configuration, with its logger at ERROR (printing nothing costs it least). GPUs a100-sxm-80gb and h100-sxm-80gb
  from its catalog, dtype w16a16e16. Its model zoo entry for Llama-2-70B has a 2-matrix MLP of 4 x d (54 B
  parameters), and its inference() has no gated-MLP option, so the model is given as the real Llama-2-70B with the
  SwiGLU MLP (3 x 8192 x 28672) expressed as a 2-matrix MLP of the same size (ffn 43008): 69 B parameters like the
  real checkpoint and tokenmath's catalog entry.

Timing: --rounds interleaved rounds (tokenmath, then llm-analysis), after one warm-up of each; the medians of wall
time (and of CPU time) per round are compared. Both tools must give a finite decode latency and prefill time for
every configuration. The side-by-side table shows that they compute the same kind of number: llm-analysis assumes
100% of peak FLOP/s and HBM bandwidth by default, so tokenmath is shown both at its default (measured kernel
ceilings) and at 100% of every peak (efficiency=PEAK).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "benchmarks" / ".venv-llm-analysis"
LLM_ANALYSIS = "llm-analysis==0.2.2"

CHIPS = (("a100-80gb", "a100-sxm-80gb"), ("h100-sxm", "h100-sxm-80gb"))   # (tokenmath id, llm-analysis name)
TP = [4, 8]
BATCH = [1, 2, 4, 8, 16, 24, 32, 48, 64, 128]
INPUT = [128, 256, 512, 1024, 2048]
OUTPUT = [32, 64, 128, 256, 512]


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def bootstrap(argv, script: str | Path = __file__) -> None:
    """Re-run `script` in the llm-analysis environment (created on first use); shared by the benchmarks."""
    py = venv_python()
    if not py.exists():
        print(f"creating {VENV.relative_to(ROOT)} with {LLM_ANALYSIS} (once; needs the package registry)",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", LLM_ANALYSIS], check=True)
    os.execv(str(py), [str(py), str(Path(script).resolve()), *argv, "--in-venv"])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds (medians compared)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")   # llm-analysis imports transformers
    try:
        import llm_analysis  # noqa: F401
    except ImportError:
        if a.in_venv:
            sys.exit(f"llm_analysis is not importable in {sys.executable}; delete {VENV} and run again")
        bootstrap([x for x in argv if x != "--in-venv"])
    sys.path.insert(0, str(ROOT / "src"))          # this checkout's tokenmath, in the same interpreter
    run(a)


def la_setup():
    import logging

    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import (
        ModelConfig,
        ParallelismConfig,
        get_dtype_config_by_name,
        get_gpu_config_by_name,
    )
    from llm_analysis.logger import logger
    logger.setLevel(logging.ERROR)
    # Llama-2-70B: 80 layers, d 8192, 64 heads, 8 KV heads, vocab 32000, SwiGLU 28672 (3 matrices). llm-analysis
    # models a 2-matrix MLP and wants ffn % d == 0 at construction, so build with 5 d and set the isoparametric
    # width (1.5 x 28672 = 43008, expansion 5.25) afterwards; everything downstream reads these two fields.
    mc = ModelConfig(name="llama-2-70b", num_layers=80, n_head=64, hidden_dim=8192, vocab_size=32000,
                     max_seq_len=4096, num_key_value_heads=8, ffn_embed_dim=5 * 8192, model_type="llama")
    mc.ffn_embed_dim = 3 * 28672 // 2
    mc.expansion_ratio = mc.ffn_embed_dim / mc.hidden_dim
    dt = get_dtype_config_by_name("w16a16e16")
    gpus = {g: get_gpu_config_by_name(g) for _, g in CHIPS}
    return LLMAnalysis, ParallelismConfig, mc, dt, gpus


def run_llm_analysis(la):
    LLMAnalysis, ParallelismConfig, mc, dt, gpus = la
    out = []
    for _, g in CHIPS:
        for tp in TP:
            an = LLMAnalysis(mc, gpus[g], dt, ParallelismConfig(tp_size=tp))
            for b in BATCH:
                for li in INPUT:
                    for lo in OUTPUT:
                        out.append(an.inference(batch_size_per_gpu=b, seq_len=li, num_tokens_to_generate=lo))
    return out


def run_tokenmath(tm, **opts):
    return [tm.sweep("llama-2-70b", hw, batch=BATCH, input_len=INPUT, output_len=OUTPUT, tp=TP, **opts)
            for hw, _ in CHIPS]


FIRST_CALL = {
    # each in a fresh interpreter: import the tool, set it up and answer the 1,000 configurations once
    "tokenmath": ("import time; t0 = time.perf_counter()\n"
                  "import sys; sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})\n"
                  "import tokenmath as tm; import vs_llm_analysis as v\n"
                  "v.run_tokenmath(tm); print(time.perf_counter() - t0)"),
    "llm-analysis": ("import time; t0 = time.perf_counter()\n"
                     "import sys; sys.path.insert(0, {bench!r})\n"
                     "import vs_llm_analysis as v\n"
                     "v.run_llm_analysis(v.la_setup()); print(time.perf_counter() - t0)"),
}


def first_call(name: str, runs: int = 3) -> float:
    """Median seconds from a new interpreter's first import of the tool to its first 1,000 answers (imports, catalog
    or config set-up and the first run: what a user waits for in a fresh notebook or script), less the bare
    interpreter's start (both timed from inside the process)."""
    code = FIRST_CALL[name].format(src=str(ROOT / "src"), bench=str(ROOT / "benchmarks"))
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error", OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    out = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                check=True).stdout.split()[-1]) for _ in range(runs)]
    return statistics.median(out)


def rows(cols_list):
    """tokenmath rows in the same order as the llm-analysis loop (chip, tp, batch, input, output)."""
    import numpy as np
    out = []
    for cols in cols_list:
        order = np.lexsort((cols["output_len"], cols["input_len"], cols["batch"], cols["tp"]))
        out.extend({k: cols[k][i] for k in ("tp", "batch", "input_len", "output_len", "decode_step_s", "ttft_s",
                                            "fits", "params_total")} for i in order)
    return out


def run(a):
    from importlib.metadata import PackageNotFoundError, version

    import llm_analysis
    import numpy as np

    import tokenmath as tm
    from tokenmath.specs.efficiency import PEAK
    try:
        la_version = version("llm-analysis")
    except PackageNotFoundError:
        la_version = "?"
    n = len(CHIPS) * len(TP) * len(BATCH) * len(INPUT) * len(OUTPUT)
    la = la_setup()
    print(f"tokenmath (this checkout, {Path(tm.__file__).parent}) vs llm-analysis {la_version} "
          f"({Path(llm_analysis.__file__).parent})")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; {n:,} configurations: Llama-2-70B bf16 on "
          f"{' and '.join(c for c, _ in CHIPS)}, tp {TP}, batch {BATCH[0]}..{BATCH[-1]} ({len(BATCH)}), "
          f"input {INPUT[0]}..{INPUT[-1]} ({len(INPUT)}), output {OUTPUT[0]}..{OUTPUT[-1]} ({len(OUTPUT)})")

    t0 = time.perf_counter()
    tm_cols = run_tokenmath(tm)
    tm_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    la_res = run_llm_analysis(la)
    la_first = time.perf_counter() - t0
    wall = {"tokenmath": [], "llm-analysis": []}
    cpu = {"tokenmath": [], "llm-analysis": []}
    for _ in range(a.rounds):
        for name, fn in (("tokenmath", lambda: run_tokenmath(tm)), ("llm-analysis", lambda: run_llm_analysis(la))):
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)

    # numbers for every configuration
    tm_rows = rows(tm_cols)
    assert len(tm_rows) == n == len(la_res)
    tm_ok = sum(1 for r in tm_rows if r["fits"] and math.isfinite(r["decode_step_s"]) and math.isfinite(r["ttft_s"]))
    la_ok = sum(1 for r in la_res if math.isfinite(r["decode_latency"]) and math.isfinite(r["prefill_latency"]))
    for r, s in zip(tm_rows, la_res):   # same configuration in the same place
        assert (r["tp"], r["batch"], r["input_len"], r["output_len"]) == (
            s["tp_size"], s["batch_size_per_gpu"], s["seq_len"], s["num_tokens_to_generate"])

    med = {k: statistics.median(v) for k, v in wall.items()}
    medc = {k: statistics.median(v) for k, v in cpu.items()}
    ratio, ratio_cpu = med["llm-analysis"] / med["tokenmath"], medc["llm-analysis"] / medc["tokenmath"]
    print()
    print(f"{'':14s} {'wall, median of ' + str(a.rounds):>22s} {'per config':>11s} {'CPU, median':>12s} "
          f"{'first run':>10s} {'numbers':>11s}")
    for name, first, ok in (("tokenmath", tm_first, tm_ok), ("llm-analysis", la_first, la_ok)):
        print(f"{name:14s} {med[name] * 1e3:>19.2f} ms {med[name] / n * 1e6:>8.2f} us {medc[name] * 1e3:>9.2f} ms "
              f"{first * 1e3:>7.1f} ms {ok:>5d}/{n:<5d}")
    print(f"tokenmath is {ratio:,.0f}x faster (wall time; CPU time {ratio_cpu:,.0f}x); "
          f"both give numbers for {'every' if tm_ok == la_ok == n else 'NOT every'} configuration")
    fc = {name: first_call(name) for name in FIRST_CALL}
    print(f"first call in a fresh process (import + set-up + the 1,000 configurations, median of 3): tokenmath "
          f"{fc['tokenmath'] * 1e3:,.0f} ms, llm-analysis {fc['llm-analysis'] * 1e3:,.0f} ms: tokenmath "
          f"{fc['llm-analysis'] / fc['tokenmath']:,.1f}x faster including each tool's first call")

    # side by side: the same kind of figure
    peak_rows = rows(run_tokenmath(tm, efficiency=PEAK))
    p_tm = float(tm_rows[0]["params_total"])
    p_la = la[0](la[2], la[4][CHIPS[0][1]], la[3], la[1](tp_size=1)).get_num_params_total()
    print()
    print(f"parameters: tokenmath {p_tm / 1e9:.2f} B, llm-analysis {p_la / 1e9:.2f} B. Decode latency per token "
          f"(ms) and prefill of the batch (ms); llm-analysis at its default 100% of peak FLOP/s and HBM bandwidth:")
    print(f"{'chip':10s} {'tp':>3s} {'batch':>5s} {'in':>5s} {'out':>4s} | {'decode: tokenmath':>17s} "
          f"{'tm@100%':>8s} {'llm-an.':>8s} | {'prefill: tm':>11s} {'tm@100%':>8s} {'llm-an.':>8s}")
    per_chip = len(TP) * len(BATCH) * len(INPUT) * len(OUTPUT)
    picks = [(c, tp, b, li, lo) for c in range(len(CHIPS)) for (tp, b, li, lo) in
             ((4, 1, 128, 128), (8, 1, 2048, 512), (8, 16, 1024, 256), (8, 128, 2048, 512))]
    for c, tp, b, li, lo in picks:
        i = c * per_chip + (((TP.index(tp) * len(BATCH) + BATCH.index(b)) * len(INPUT) + INPUT.index(li))
                            * len(OUTPUT) + OUTPUT.index(lo))
        r, p, s = tm_rows[i], peak_rows[i], la_res[i]
        print(f"{CHIPS[c][0]:10s} {tp:>3d} {b:>5d} {li:>5d} {lo:>4d} | {r['decode_step_s'] * 1e3:>17.2f} "
              f"{p['decode_step_s'] * 1e3:>8.2f} {s['decode_latency'] * 1e3:>8.2f} | {r['ttft_s'] * 1e3:>11.1f} "
              f"{p['ttft_s'] * 1e3:>8.1f} {s['prefill_latency'] * 1e3:>8.1f}")
    dec = np.array([s["decode_latency"] / p["decode_step_s"] for p, s in zip(peak_rows, la_res)])
    pre = np.array([s["prefill_latency"] / p["ttft_s"] for p, s in zip(peak_rows, la_res)])
    print(f"llm-analysis / tokenmath@100% over all {n:,}: decode median {np.median(dec):.2f} "
          f"(range {dec.min():.2f}-{dec.max():.2f}), prefill median {np.median(pre):.2f} "
          f"(range {pre.min():.2f}-{pre.max():.2f})")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "configurations": n, "rounds": a.rounds, "llm_analysis_version": la_version,
            "wall_s": wall, "cpu_s": cpu, "median_wall_s": med, "median_cpu_s": medc,
            "ratio_wall": ratio, "ratio_cpu": ratio_cpu, "first_run_s": {"tokenmath": tm_first, "llm-analysis": la_first},
            "first_call_fresh_process_s": fc, "ratio_first_call": fc["llm-analysis"] / fc["tokenmath"],
            "numbers": {"tokenmath": tm_ok, "llm-analysis": la_ok},
            "decode_ratio_llm_analysis_over_tokenmath_peak": {"median": float(np.median(dec)), "min": float(dec.min()),
                                                               "max": float(dec.max())},
        }, indent=2))
    return ratio


if __name__ == "__main__":
    main()
