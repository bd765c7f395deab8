#!/usr/bin/env python
"""Scenario sweep timing: the same sweep in one process, in local processes and on a Dask LocalCluster
(issue 17, part 5).

    python benchmarks/scenario_sweep.py                      # 48 simulations of 2,000 requests each
    python benchmarks/scenario_sweep.py --requests 500 --workers 4 --json sweep.json
    python benchmarks/scenario_sweep.py --cluster tcp://host:8786    # an existing cluster instead of a LocalCluster

The sweep: Llama 3.1 8B and 70B x h100-sxm and h200 x one layout each (1 and 8 chips) x vLLM and SGLang x closed
loops of 16, 64 and 256 users and open loops of 4, 16 and 64 req/s (48 scenarios). Each runner's rows are checked
equal to the one-process rows (same numbers, same order). A LocalCluster's start-up is timed apart from the sweep;
its first sweep includes the workers' imports of tokenmath, so the sweep runs twice there and both are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

try:
    import tokenmath  # noqa: F401
except ImportError:   # a clean checkout run with any python that has numpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenmath.analyses.serving.scenarios import run_scenarios  # noqa: E402


def spec(requests: int) -> dict:
    return {"models": ["llama-3.1-8b", "llama-3.1-70b"], "hardware": ["h100-sxm", "h200"],
            "layouts": [{"chips": 8}], "engines": ["vllm", "sglang"],
            "workloads": [{"concurrency": c} for c in (16, 64, 256)] + [{"arrival_rate": r} for r in (4.0, 16.0, 64.0)],
            "defaults": {"requests": requests, "seed": 1}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=None, help="local processes and LocalCluster workers (default: cores)")
    ap.add_argument("--cluster", help="an existing Dask scheduler's address instead of a LocalCluster")
    ap.add_argument("--json", help="write the timings here")
    a = ap.parse_args(argv)
    workers = a.workers or len(os.sched_getaffinity(0))
    s = spec(a.requests)
    out = {"scenarios": 0, "requests_per_scenario": a.requests, "workers": workers}
    t = time.perf_counter()
    serial = run_scenarios(s, workers=1)
    out["one_process_s"] = time.perf_counter() - t
    out["scenarios"] = len(serial.rows)
    t = time.perf_counter()
    local = run_scenarios(s, workers=workers)
    out["local_processes_s"] = time.perf_counter() - t
    assert local.rows == serial.rows, "local processes differ from one process"
    try:
        import distributed
    except ImportError:
        print("distributed is not installed (pip install 'tokenmath[cluster]'): no Dask timing")
        distributed = None
    if distributed is not None:
        from tokenmath.local.cluster import DaskCluster
        t = time.perf_counter()
        lc = None if a.cluster else distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                             dashboard_address=None, silence_logs=40)
        address = a.cluster or lc.scheduler_address
        with DaskCluster(address) as runner:
            if lc is not None:
                runner.client.wait_for_workers(workers, timeout=120)
                out["dask_start_s"] = time.perf_counter() - t
            for key in ("dask_first_s", "dask_again_s"):
                t = time.perf_counter()
                d = run_scenarios(s, runner=runner)
                out[key] = time.perf_counter() - t
                assert d.rows == serial.rows, "the Dask cluster's rows differ from one process"
            out["dask"] = runner.describe()
        if lc is not None:
            lc.close()
    errors = sum(r["error"] is not None for r in serial.rows)
    print(f"{out['scenarios']} scenarios x {a.requests:,} requests ({errors} could not run), {workers} workers:")
    for key, label in (("one_process_s", "one process"), ("local_processes_s", "local processes"),
                       ("dask_start_s", "Dask LocalCluster start"), ("dask_first_s", "Dask sweep (first)"),
                       ("dask_again_s", "Dask sweep (again)")):
        if key in out:
            print(f"  {label:<26} {out[key]:7.2f} s")
    print("  rows identical on every runner")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
