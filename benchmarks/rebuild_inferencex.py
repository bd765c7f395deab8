"""Rebuild src/tokenmath/data/inferencex_runs.csv.gz from a local git snapshot of the InferenceX app.

    python benchmarks/rebuild_inferencex.py PATH_TO_GIT_DIR [--repo OWNER/NAME] [--out FILE]

What it reads: the API captures the InferenceX web app commits as its end-to-end test fixtures,
packages/app/cypress/fixtures/api/benchmarks.json (the latest run of every configuration) and benchmarks-history.json
(earlier runs), at every commit of the snapshot that changed them (`git log --all -- <files>`). Each record is one
benchmark of the InferenceX CI (github.com/SemiAnalysisAI/InferenceX/actions): a serving configuration (chip,
framework, model, precision, speculative method, disaggregated or not, prefill and decode TP / EP / DP-attention /
workers / GPUs), one concurrency and input / output length, its date, its run's URL, the Docker image (engine and
version; absent before 2025-12-08) and the measured metrics (throughput per GPU, per-user interactivity, TTFT, TPOT,
end-to-end latency, all latencies in seconds).

Nothing is estimated. Kept as published, per row: the values above, and the file and commit it was read from. Two
things are derived, each named in its column:
- gpus: the GPUs InferenceX divides by for tput_per_gpu (utils/process_result.py of github.com/SemiAnalysisAI/
  InferenceX: TP x PP for a single-node run, PREFILL_GPUS + DECODE_GPUS for a disaggregated one). The dump's
  num_prefill_gpu of a single-node run defaults to TP x EP, which is not what the throughput was divided by.
- image_from: "row" when the record carries its image; "run" when it does not (the history file has no image field)
  and every record of the same workflow run and configuration that does carries one and the same image; else "".
Records that repeat (same configuration, lengths, concurrency, date and run) are kept once, the first read (newest
commit first, benchmarks.json before the history file).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

FILES = ("packages/app/cypress/fixtures/api/benchmarks.json",
         "packages/app/cypress/fixtures/api/benchmarks-history.json")
CONFIG = ("hardware", "framework", "model", "precision", "spec_method", "disagg", "is_multinode",
          "prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_num_workers",
          "decode_tp", "decode_ep", "decode_dp_attention", "decode_num_workers", "num_prefill_gpu", "num_decode_gpu")
METRICS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "median_intvty", "median_ttft",
           "median_tpot", "median_e2el", "p99_ttft")
COLUMNS = (CONFIG + ("gpus", "isl", "osl", "conc", "image", "image_from") + METRICS
           + ("date", "run_url", "source_repo", "source_commit", "source_file"))
OUT = Path(__file__).resolve().parents[1] / "src" / "tokenmath" / "data" / "inferencex_runs.csv.gz"


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def commits(gitdir: str) -> list[tuple[str, str]]:
    """(sha, committer date) of every commit that changed FILES, newest first."""
    out = git(gitdir, "log", "--all", "--format=%H %cI", "--", *FILES)
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()]


def gpus(r: dict) -> int:
    """What tput_per_gpu was divided by (InferenceX utils/process_result.py)."""
    if r["disagg"]:
        return int(r["num_prefill_gpu"]) + int(r["num_decode_gpu"])
    return int(r["decode_tp"])


def key(r: dict) -> tuple:
    return tuple(r[k] for k in CONFIG) + (r["isl"], r["osl"], r["conc"], r["date"], r.get("run_url"))


def read(gitdir: str, repo: str) -> list[dict]:
    rows, seen = [], set()
    for sha, _ in commits(gitdir):
        for f in FILES:
            try:
                data = json.loads(git(gitdir, "show", f"{sha}:{f}"))
            except subprocess.CalledProcessError:
                continue
            for r in data:
                k = key(r)
                if k in seen:
                    continue
                seen.add(k)
                m = r["metrics"]
                row = {c: r[c] for c in CONFIG}
                row.update(gpus=gpus(r), isl=r["isl"], osl=r["osl"], conc=r["conc"], image=r.get("image") or "",
                           image_from="row" if r.get("image") else "")
                row.update({c: m.get(c, "") for c in METRICS})
                row.update(date=r["date"], run_url=r.get("run_url") or "", source_repo=repo, source_commit=sha,
                           source_file=f)
                rows.append(row)
    # the image of a record without one: the one image of its run and configuration, where there is exactly one
    images: dict = {}
    for row in rows:
        if row["image"]:
            images.setdefault((row["run_url"],) + tuple(row[c] for c in CONFIG), set()).add(row["image"])
    for row in rows:
        if not row["image"]:
            got = images.get((row["run_url"],) + tuple(row[c] for c in CONFIG), set())
            if len(got) == 1:
                row["image"], row["image_from"] = next(iter(got)), "run"
    rows.sort(key=lambda r: (r["model"], r["hardware"], r["framework"], r["precision"], r["spec_method"],
                             str(r["disagg"]), r["date"], r["isl"], r["osl"], r["conc"], r["run_url"]))
    return rows


def write(rows: list[dict], out: Path) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (("true" if v else "false") if isinstance(v, bool) else
                        (repr(v) if isinstance(v, float) else v)) for k, v in r.items()})
    with open(out, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue().encode("utf-8"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gitdir", help="a local git snapshot (bare or not) of the InferenceX app holding the fixtures")
    ap.add_argument("--repo", default="vngcloud/InferenceX-app",
                    help="owner/name of the snapshot, recorded on every row (default: the one read for the shipped "
                         "file, a fork that carries SemiAnalysisAI/InferenceX-app's fixture commits)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    rows = read(a.gitdir, a.repo)
    if not rows:
        print("no fixture rows found", file=sys.stderr)
        return 1
    write(rows, Path(a.out))
    print(f"{len(rows)} rows from {len(commits(a.gitdir))} commits -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
