#!/usr/bin/env python
"""Malformed files for every option that reads one (issue 40): each loads or is refused naming a field, and the
command that reads it answers (exit 0) or refuses (exit 2) - never an internal error, a traceback or a hang.

    python benchmarks/fuzz_files.py                   # 1,000 files per kind, seed 0
    python benchmarks/fuzz_files.py -n 200 --kinds trace,results --seed 7 --json

Kinds (the option, the loader, the command run on a file):
  trace        simulate --trace F (CSV and JSONL)     workload.read_trace        simulate --trace F
  block_trace  kvcache --trace F (Mooncake JSONL)     block_trace.read_block_trace   kvcache --trace F
  hardware     --hardware F (.toml / .json)           hardware.get_hardware      infer --hardware F
  model        --model F (config.json / .toml)        model_catalog.get_model    infer --model F
  system       --system F (.toml)                     systems.get_system         train --system F
  engine       --engine F (.toml)                     serving_engines.get_engine infer --engine F
  scenarios    scenarios --file F (.toml / .json)     scenarios.read_scenarios   scenarios --file F --workers 1
  results      calibrate F (vllm / SGLang / AIPerf)   benchmarks.readers.read_file   calibrate F -H l40s --chips 4
  profile      infer --profile NAME (the cache's profiles/NAME.toml)   profiles.load_profile   infer --profile NAME
Each file starts from real data (the fixtures, the catalogs, a calibrate run's profile) and is mutated with
benchmarks/fuzz_loaders.py's mutations (keys deleted, values swapped for absurd ones, numbers scaled, types changed,
nesting, truncation, bytes flipped, other encodings, deep nesting, padding, over the size limit).

Every file goes through its loader in this process (a crash: anything but InputError naming a field, or over
--timeout s); every file the loader accepts, and --cli-rejected of those it refuses, then go through the command
in this process (tests/test_cli_fuzz.run_main): exit 1, a traceback, "internal error" or a numpy warning is an
internal error. (calibrate exits 1 when it refuses a fit at a bound: an answer it prints, counted apart.)
"""
from __future__ import annotations

import argparse
import collections
import gzip
import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
KINDS = ("trace", "block_trace", "hardware", "model", "system", "engine", "scenarios", "results", "profile")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class Seeds:
    """The real files each kind's mutations start from."""

    def __init__(self, bench, loaders_tests):
        self.bench, self.lt = bench, loaders_tests

    def texts(self, kind: str, rng: random.Random) -> tuple[str, str | dict, bool]:
        """(file suffix, a seed as text or as a dict to mutate, whether it is TOML)."""
        b, lt = self.bench, self.lt
        if kind == "trace":
            jsonl = rng.random() < 0.5
            return (".jsonl" if jsonl else ".csv"), lt._trace_text(rng, jsonl), False
        if kind == "block_trace":
            with gzip.open(FIX / "mooncake" / rng.choice(["synthetic_trace.jsonl.gz", "conversation_trace.jsonl.gz"]),
                           "rt") as fh:
                lines = [next(fh) for _ in range(rng.randint(1, 12))]
            if rng.random() < 0.5:
                row = json.loads(rng.choice(lines))
                row = b.mutate_dict(row, rng, ["timestamp", "input_length", "output_length", "hash_ids"], False)
                lines[rng.randrange(len(lines))] = json.dumps(row, allow_nan=True) + "\n"
            return ".jsonl", "".join(lines), False
        if kind == "hardware":
            rec = rng.choice(b.hw_seeds())
            toml = rng.random() < 0.6
            return (".toml" if toml else ".json"), b.mutate_dict(rec, rng, b.HW_KEYS, False), toml
        if kind == "model":
            toml = rng.random() < 0.2
            return (".toml" if toml else ".json"), b.mutate_dict(rng.choice(b.hf_seeds()), rng, b.HF_KEYS, False), toml
        if kind == "system":
            text = rng.choice([lt.SYSTEM, lt.TORUS])
            d = tomllib.loads(text)
            return ".toml", b.mutate_dict(d, rng, list(d) + ["chips", "pue"], False), True
        if kind == "engine":
            d = tomllib.loads(lt._engine_text())
            return ".toml", b.mutate_dict(d, rng, list(d), False), True
        if kind == "scenarios":
            d = {"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engines": ["vllm"],
                 "layouts": [{"chips": 1}, {"chips": 2, "tp": 2}],
                 "workloads": [{"concurrency": 4, "requests": 12}, {"arrival_rate": 2.0, "burstiness": 0.5,
                                                                    "requests": 12, "input_len": "uniform:100-300"}]}
            toml = rng.random() < 0.5
            keys = ["models", "hardware", "engines", "layouts", "workloads", "method", "concurrency", "requests"]
            return (".toml" if toml else ".json"), b.mutate_dict(d, rng, keys, False), toml
        if kind == "results":
            src = rng.choice(["vllm_llmd_l40s_llama32_3b.jsonl", "aiperf_writer_keys.json",
                              "sglang_bench_serving_writer_keys.jsonl"])
            text = (FIX / "benchmarks" / src).read_text()
            if src.endswith(".jsonl"):
                rows = [json.loads(x) for x in text.splitlines() if x.strip()]
                i = rng.randrange(len(rows))
                rows[i] = b.mutate_dict(rows[i], rng, sorted(rows[i]), False)
                return ".jsonl", "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows), False
            d = json.loads(text)
            return ".json", b.mutate_dict(d, rng, sorted(d), False), False
        if kind == "profile":
            d = dict(PROFILE)
            d["values"] = dict(PROFILE["values"])
            return ".toml", b.mutate_dict(d, rng, sorted(d) + ["values"], False), True
        raise AssertionError(kind)

    def file(self, kind: str, rng: random.Random) -> tuple[str, bytes]:
        suffix, seed, toml = self.texts(kind, rng)
        b = self.bench
        if isinstance(seed, str):
            text = seed
        elif toml:
            text = b.to_toml(seed) if kind != "profile" else _profile_toml(seed, b)
        else:
            text = json.dumps(seed, allow_nan=True)
        return suffix, b.mutate_text(text, rng, toml=toml, slow_ok=False)


# a profile as `tokenmath calibrate --profile` writes it (analyses/benchmarks/profiles.save_profile)
PROFILE = {"name": "fuzz", "fitted": "2026-01-01", "runs": 9, "model": "llama-3.2-3b", "hardware": "l40s",
           "engine": "vllm", "chips": 4, "dp": 4, "heldout_default_median_ape": 0.2,
           "heldout_calibrated_median_ape": 0.1,
           "values": {"compute_scale": 1.0, "bw_scale": 0.9, "step_cpu_s": 0.001, "layer_overhead_s": 1e-5,
                      "step_cpu_per_seq_s": 1e-6}}


def _profile_toml(d, b) -> str:
    head = "# tokenmath calibration profile written by `tokenmath calibrate`\n"
    if not isinstance(d, dict):
        return head + b.to_toml(d)
    values = d.get("values")
    top = {k: v for k, v in d.items() if k != "values"}
    text = head + b.to_toml(top)
    if isinstance(values, dict):
        text += "\n[values]\n" + b.to_toml(values)
    elif values is not None:
        text += b.to_toml({"values": values})
    return text


def _loaders():
    from tokenmath.analyses.benchmarks.profiles import load_profile
    from tokenmath.analyses.benchmarks.readers import read_file
    from tokenmath.analyses.serving.block_trace import read_block_trace
    from tokenmath.analyses.serving.scenarios import read_scenarios
    from tokenmath.analyses.serving.simulation.workload import read_trace
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.serving_engines import get_engine
    from tokenmath.specs.systems import get_system
    return {"trace": read_trace, "block_trace": read_block_trace, "hardware": get_hardware, "model": get_model,
            "system": get_system, "engine": get_engine, "scenarios": read_scenarios, "results": read_file,
            "profile": lambda p: load_profile(Path(p).stem)}


def _command(kind: str, path: str) -> list[str]:
    return {"trace": ["simulate", "--trace", path], "block_trace": ["kvcache", "--trace", path],
            "hardware": ["infer", "--hardware", path], "model": ["infer", "--model", path],
            "system": ["train", "--system", path], "engine": ["infer", "--engine", path],
            "scenarios": ["scenarios", "--file", path, "--workers", "1"],
            "results": ["calibrate", path, "--hardware", "l40s", "--chips", "4", "--dp", "4"],
            "profile": ["infer", "--profile", Path(path).stem, "--hardware", "l40s", "--model", "llama-3.2-3b"],
            }[kind]


def fuzz_kind(kind: str, n: int, seed: int, work: Path, seeds: Seeds, bench, cli_tests, timeout: float,
              cli_rejected: int, cli_loaded: int) -> dict:
    rng = random.Random(f"{seed}:{kind}")
    load = _loaders()[kind]
    out = {"files": 0, "loaded": 0, "rejected": 0, "crashes": [], "cli_runs": 0, "cli_exit": collections.Counter(),
           "cli_internal": [], "cli_fit_refused": 0, "max_load_s": 0.0, "max_cli_s": 0.0}
    folder = work / ("profiles" if kind == "profile" else kind)
    folder.mkdir(parents=True, exist_ok=True)
    ran_rejected = ran_loaded = 0
    for i in range(n):
        suffix, data = seeds.file(kind, rng)
        path = folder / (f"p{i}{suffix}" if kind == "profile" else f"{kind}{i}{suffix}")
        path.write_bytes(data)
        o = bench.attempt(load, str(path), lambda got: None, timeout=timeout)
        out["files"] += 1
        out["max_load_s"] = max(out["max_load_s"], round(o.seconds, 3))
        if o.kind == "crash":
            out["crashes"].append(f"{path.name}: {o.detail}")
        else:
            out[o.kind] += 1
        run = (o.kind == "loaded" and ran_loaded < cli_loaded) or (o.kind == "rejected" and ran_rejected < cli_rejected) \
            or o.kind == "crash"
        if run:
            ran_loaded += o.kind == "loaded"
            ran_rejected += o.kind == "rejected"
            t0 = time.perf_counter()
            code, text, err = cli_tests.run_main(_command(kind, str(path)), limit_s=int(max(timeout * 6, 60)))
            out["max_cli_s"] = max(out["max_cli_s"], round(time.perf_counter() - t0, 2))
            out["cli_runs"] += 1
            out["cli_exit"][str(code)[:40]] += 1
            fit_refused = kind == "results" and code == 1 and "refused:" in text
            out["cli_fit_refused"] += fit_refused
            bad = (code not in (0, 2) and not fit_refused) or "Traceback" in text + err \
                or "internal error" in text + err or "Warning" in err
            if bad:
                tail = (err.strip().splitlines() or text.strip().splitlines() or [""])[-1][:200]
                out["cli_internal"].append(f"{path.name} (exit {code}): {tail}")
                keep = work.parent / "kept"
                keep.mkdir(exist_ok=True)
                shutil.copy(path, keep / path.name)
        if not run or kind != "profile":
            path.unlink()
        else:
            path.unlink(missing_ok=True)
    out["cli_exit"] = dict(out["cli_exit"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=1000, help="files per kind (default 1,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds a loader may take on one file")
    ap.add_argument("--cli-rejected", type=int, default=50, help="refused files also run through the command, per kind")
    ap.add_argument("--cli-loaded", type=int, default=1000, help="accepted files run through the command, per kind")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the source tree to fuzz (default this checkout's)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, a.src)
    os.chdir(ROOT)
    work = Path(tempfile.mkdtemp(prefix="tokenmath-fuzz-files-"))
    os.environ["TOKENMATH_CACHE_DIR"] = str(work / "cache")      # profiles/ lives here; the user's cache untouched
    (work / "cache").mkdir()
    sys.path.insert(0, str(ROOT / "tests"))
    bench = _load("tokenmath_fuzz_loaders", ROOT / "benchmarks" / "fuzz_loaders.py")
    lt = _load("tokenmath_fuzz_loaders_tests", ROOT / "tests" / "test_fuzz_loaders.py")
    cli_tests = _load("tokenmath_cli_fuzz_tests", ROOT / "tests" / "test_cli_fuzz.py")
    seeds = Seeds(bench, lt)
    t0 = time.perf_counter()
    rep = {"seed": a.seed, "per_kind": a.n, "kinds": {}}
    try:
        for kind in a.kinds.split(","):
            rep["kinds"][kind] = fuzz_kind(kind, a.n, a.seed, work / "cache" if kind == "profile" else work / "files",
                                           seeds, bench, cli_tests, a.timeout, a.cli_rejected, a.cli_loaded)
            k = rep["kinds"][kind]
            print(f"{kind:12s} {k['files']:>5,} files: loaded {k['loaded']:,}, refused {k['rejected']:,}, loader "
                  f"crashes {len(k['crashes'])}; {k['cli_runs']} through the command (exit {k['cli_exit']}), "
                  f"internal errors {len(k['cli_internal'])}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work / "files", ignore_errors=True)
        shutil.rmtree(work / "cache", ignore_errors=True)
    rep["seconds"] = round(time.perf_counter() - t0)
    rep["files"] = sum(k["files"] for k in rep["kinds"].values())
    rep["loader_crashes"] = sum(len(k["crashes"]) for k in rep["kinds"].values())
    rep["internal_errors"] = sum(len(k["cli_internal"]) for k in rep["kinds"].values())
    rep["kept"] = str(work / "kept") if (work / "kept").exists() else None
    if a.json:
        print(json.dumps(rep, indent=2))
    else:
        print(f"{rep['files']:,} files in {rep['seconds']} s: loader crashes {rep['loader_crashes']}, internal errors "
              f"through the command {rep['internal_errors']}" + (f" (files kept in {rep['kept']})" if rep["kept"] else ""))
        for kind, k in rep["kinds"].items():
            for x in k["crashes"][:10] + k["cli_internal"][:10]:
                print(f"  - {kind}: {x}")
    return 1 if rep["loader_crashes"] or rep["internal_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
