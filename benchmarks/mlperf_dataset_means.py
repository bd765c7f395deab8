"""Rebuild the [dataset.*] tables of src/tokenmath/data/mlperf.toml from a local git snapshot of
openshift-psap/performance-dashboard.

    python benchmarks/mlperf_dataset_means.py PATH_TO_GIT_DIR

What it reads: mlperf-data/summaries/<file>.csv (columns input_length, output_length, one row per sample of the
MLPerf evaluation set, written by the repository's mlperf-data/original/generate_dataset_summaries.py from MLCommons'
dataset files' token-length columns), each at the last commit that changed it. It prints, per benchmark, the TOML
block data/mlperf.toml holds: the mean prompt length over every sample (one decimal), the sample count, the mean
reference output (where the file's outputs are token counts, not Llama 3.1 8B's 4-characters-a-token estimate) and
the source URL at that commit. Nothing is fitted or filtered; paste the blocks over the file's.
"""
from __future__ import annotations

import argparse
import csv
import io
import subprocess

REPO = "openshift-psap/performance-dashboard"
# benchmark (MLPerf's name, data/mlperf.toml's `benchmark`) -> (summary file, the dataset file it was written from and
# its length columns, whether its output_length is a token count)
FILES = {
    "llama2-70b-99": ("llama2-70b-99", "open_orca_gpt4_tokenized_llama.sampled_24576.pkl: tok_input_length, "
                      "tok_output_length", True),
    "mixtral-8x7b": ("mixtral-8x7b", "09292024_mixtral_15k_mintoken2_v1.pkl: tok_input_len, tok_ref_output_len", True),
    "deepseek-r1": ("deepseek-r1", "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl: tok_input_len, tok_ref_output_len",
                    True),
    "llama3.1-405b": ("llama3-1-405b", "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl: tok_input_len, "
                      "tok_ref_output_len", True),
    "llama3.1-8b": ("llama3-1-8b-datacenter", "cnn_eval.json: len(tok_input)", False),
}


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout


def block(gitdir: str, bench: str) -> str:
    name, what, outputs_are_tokens = FILES[bench]
    path = f"mlperf-data/summaries/{name}.csv"
    commit = git(gitdir, "log", "-1", "--format=%H", "--all", "--", path).strip()
    rows = list(csv.DictReader(io.StringIO(git(gitdir, "show", f"{commit}:{path}"))))
    n = len(rows)
    mean_in = sum(float(r["input_length"]) for r in rows) / n
    lines = [f'[dataset."{bench}"]', f"input_mean = {mean_in:.1f}", f"samples = {n}"]
    if outputs_are_tokens:
        lines.append(f"reference_output_mean = {sum(float(r['output_length']) for r in rows) / n:.1f}")
    lines.append(f'source = "https://github.com/{REPO}/blob/{commit}/{path} ({what}; mean of {n:,} rows)"')
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gitdir", help="a git directory of openshift-psap/performance-dashboard")
    a = ap.parse_args()
    print("\n\n".join(block(a.gitdir, b) for b in FILES))


if __name__ == "__main__":
    main()
