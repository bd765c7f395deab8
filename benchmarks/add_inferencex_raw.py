"""Add the InferenceX runs of models beyond DeepSeek-R1 to src/tokenmath/data/inferencex_runs.csv.gz, from a local
git snapshot of gminneci/mantile, which keeps InferenceX CI runs' own aggregated results.

    python benchmarks/rebuild_inferencex.py PATH_TO_APP_GIT_DIR          # the app's DeepSeek-R1 runs (first)
    python benchmarks/add_inferencex_raw.py PATH_TO_MANTILE_GIT_DIR      # then these, appended

What it reads: reconcile/sources/inferencemax/raw/run_<id>/agg_bmk.json, each the agg_bmk.json artifact of the
InferenceX GitHub Actions run <id> (github.com/SemiAnalysisAI/InferenceX/actions/runs/<id>), downloaded by mantile's
extract_inferencemax_data.py: one record per benchmark (chip, framework, model, precision, speculative method,
disaggregated or not, TP / EP / DP attention or the prefill / decode workers, lengths, concurrency, Docker image and
the measured metrics). A run's date is not in its artifact; mantile's reconcile/by_model/openai_GPT-OSS-120B/
inferencemax.csv carries it (benchmark_date per run_id), so only the runs it dates are read (5 of 36 on the
snapshot read: 2025-12-17 to 2026-01-14; the other runs' records are left out, undated). Only the models the app's
dump does not already hold are kept (MODELS: gpt-oss-120b); DeepSeek-R1 records of the same runs would repeat it.

Kept as published, per row, in rebuild_inferencex.py's columns: the configuration and metrics, with
- hardware: the record's hw without the framework suffix some carry ("b200-trt" -> "b200");
- a single engine instance: prefill and decode columns both its TP / EP / DP attention, no workers, gpus = TP (what
  InferenceX divides its throughput by); disaggregated: the record's prefill / decode columns, gpus = their sum;
- image: as published, "nvcr.io#nvidia/..." written "nvcr.io/nvidia/..." as the app's dump writes it;
- date, run_url, source_repo / source_commit / source_file: the run's date, its Actions URL and the artifact read.
Rows already in the file from this source are replaced; records that repeat (same configuration, lengths,
concurrency, date and run) are kept once.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rebuild_inferencex import COLUMNS, git, write  # noqa: E402

REPO = "gminneci/mantile"
RAW = "reconcile/sources/inferencemax/raw"
DATES = "reconcile/by_model/openai_GPT-OSS-120B/inferencemax.csv"
MODELS = ("gptoss",)
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "tokenmath", "data",
                   "inferencex_runs.csv.gz")


def dates(gitdir: str) -> dict[str, str]:
    """run id -> YYYY-MM-DD, from mantile's extracted CSV."""
    out = {}
    for r in csv.DictReader(io.StringIO(git(gitdir, "show", f"HEAD:{DATES}"))):
        if r.get("run_id") and r.get("benchmark_date"):
            out[r["run_id"]] = r["benchmark_date"][:10]
    return out


def _b(v) -> str:
    return "true" if str(v).lower() == "true" else "false"


def row(rec: dict, run: str, date: str, commit: str, path: str) -> dict:
    single = not rec["disagg"]
    if single:
        tp, ep, dpa = int(rec["tp"]), int(rec["ep"]), _b(rec["dp_attention"])
        shape = {"prefill_tp": tp, "prefill_ep": ep, "prefill_dp_attention": dpa, "prefill_num_workers": 0,
                 "decode_tp": tp, "decode_ep": ep, "decode_dp_attention": dpa, "decode_num_workers": 0,
                 "num_prefill_gpu": tp, "num_decode_gpu": tp, "gpus": tp}
    else:
        shape = {k: rec[k] for k in ("prefill_tp", "prefill_ep", "prefill_num_workers", "decode_tp", "decode_ep",
                                     "decode_num_workers", "num_prefill_gpu", "num_decode_gpu")}
        shape.update(prefill_dp_attention=_b(rec["prefill_dp_attention"]),
                     decode_dp_attention=_b(rec["decode_dp_attention"]),
                     gpus=int(rec["num_prefill_gpu"]) + int(rec["num_decode_gpu"]))
    out = {"hardware": re.sub(r"-(trt|vllm|sglang)$", "", rec["hw"]), "framework": rec["framework"],
           "model": rec["infmax_model_prefix"], "precision": rec["precision"], "spec_method": rec["spec_decoding"],
           "disagg": _b(rec["disagg"]), "is_multinode": _b(rec["is_multinode"]), **shape,
           "isl": rec["isl"], "osl": rec["osl"], "conc": rec["conc"],
           "image": rec.get("image", "").replace("#", "/"), "image_from": "row" if rec.get("image") else "",
           "date": date, "run_url": f"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/{run}",
           "source_repo": REPO, "source_commit": commit, "source_file": path}
    for k in ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "median_intvty", "median_ttft",
              "median_tpot", "median_e2el", "p99_ttft"):
        out[k] = rec.get(k, "")
    return out


def read(gitdir: str) -> list[dict]:
    when = dates(gitdir)
    rows, seen = [], set()
    for path in sorted(git(gitdir, "ls-tree", "-r", "--name-only", "HEAD", "--", RAW).split()):
        m = re.search(r"/run_(\d+)/agg_bmk\.json$", path)
        if not m or m.group(1) not in when:
            continue
        commit = git(gitdir, "log", "-1", "--format=%H", "HEAD", "--", path).strip()
        for rec in json.loads(git(gitdir, "show", f"HEAD:{path}")):
            if rec.get("infmax_model_prefix") not in MODELS:
                continue
            r = row(rec, m.group(1), when[m.group(1)], commit, path)
            k = tuple(r[c] for c in COLUMNS if c not in ("source_commit", "source_file"))
            if k not in seen:
                seen.add(k)
                rows.append(r)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gitdir", help="a git directory of gminneci/mantile")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    with gzip.open(a.out, "rt", newline="") as fh:
        kept = [r for r in csv.DictReader(fh) if r["source_repo"] != REPO]
    new = read(a.gitdir)
    write(kept + new, Path(a.out))
    print(f"{len(kept)} rows kept, {len(new)} added from {REPO}: {a.out}")


if __name__ == "__main__":
    main()
