"""Rebuild src/tokenmath/data/provider_table.toml from a local copy of the Artificial Analysis providers table.

The table is committed twice a day to github:Nidhal-Jegham/HowHungryisAIDashboard (data/artificialanalysis_DATE.csv,
one file per day since 2026-05-18, with a query_size column). Usage:

    python benchmarks/build_provider_table.py /path/to/HowHungryisAIDashboard/.git [--out FILE]

(the path may be a bare git directory or a checkout). Two snapshots are read, each the last commit of its day's file:
- fit:   2026-05-31, the last snapshot up to the cut-off (what deduce uses and what any fitting may see);
- check: 2026-07-07, the last snapshot that still carries the three prompt lengths scraped from their explicit
  prompt-option pages (from 2026-07-18 the scraper keeps only the default page, labelled "long"), kept aside as an
  independent check and never used to fit.
query_size is the prompt-option page the row was scraped from (ArtificialAnalysisScraping.py of that period):
medium = prompt-options/single/medium, long = prompt-options/single/long, extra_long = prompt-options/single/100k.
Each row keeps the snapshot's commit and file, and the CSV line of each prompt length.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import subprocess
import sys

SNAPSHOTS = (("fit", "2026-05-31"), ("check", "2026-07-07"))
CUTOFF = "2026-05-31"
SIZES = ("medium", "long", "extra_long")
FAMILIES = re.compile(r"gpt-4o|gpt-4\.1|gpt-5|gpt-oss|claude|gemini|grok|deepseek|qwen|kimi|glm|minimax|llama", re.I)
OUT = os.path.join(os.path.dirname(__file__), "..", "src", "tokenmath", "data", "provider_table.toml")


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def num(s: str):
    s = (s or "").strip().replace("$", "").replace(",", "")
    try:
        return float(s)
    except ValueError:
        return None          # "--", "N/A", "" : not measured


def col(row: dict, *names):
    for n in names:            # the header lost or kept its spaces over time
        for k in row:
            if k.replace(" ", "") == n.replace(" ", ""):
                return row[k]
    return ""


def read_snapshot(repo: str, date: str):
    path = f"data/artificialanalysis_{date}.csv"
    commit, when = git(repo, "log", "-1", "--format=%H %aI", "--", path).split()
    text = git(repo, "show", f"{commit}:{path}")
    rd = csv.DictReader(io.StringIO(text))
    rows = []
    for r in rd:
        rows.append((rd.line_num, r))
    return {"commit": commit, "committed": when, "file": path, "date": date}, rows


def endpoints(rows) -> list[dict]:
    """One record per (provider, model): prices from its first row, speed / TTFT / line per prompt length."""
    out: dict = {}
    for line, r in rows:
        model, prov, size = r["Model"].strip(), col(r, "APIProvider").strip(), r["query_size"].strip()
        if size not in SIZES or not FAMILIES.search(model):
            continue
        e = out.setdefault((prov, model), {"provider": prov, "model": model, "api_id": col(r, "APIID").strip(),
                                           "open": col(r, "License").strip() == "Open",
                                           "input": num(col(r, "InputPriceUSD/1M Tokens")),
                                           "output": num(col(r, "OutputPriceUSD/1M Tokens")),
                                           "cached": num(col(r, "Cache Hit PriceUSD/1M Tokens")),
                                           "speed": {}, "ttft": {}, "line": {}})
        if size in e["line"]:
            continue            # a repeated row: the first one stands
        e["line"][size] = line
        sp, tt = num(col(r, "MedianTokens/s")), num(col(r, "MedianFirst Chunk (s)"))
        if sp:
            e["speed"][size] = sp
        if tt:
            e["ttft"][size] = tt
    return [e for e in out.values() if e["input"] and e["output"]]


def q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def inline(d: dict) -> str:
    return "{" + ", ".join(f"{k} = {v:g}" for k, v in d.items()) + "}"


def render(snaps) -> str:
    lines = ["# The Artificial Analysis providers table (https://artificialanalysis.ai/leaderboards/providers), as",
             "# committed by github:Nidhal-Jegham/HowHungryisAIDashboard; built by benchmarks/build_provider_table.py.",
             "# Per endpoint (provider x model) of the families GPT-4o/4.1/5, gpt-oss, Claude, Gemini, Grok, DeepSeek,",
             "# Qwen, Kimi, GLM, MiniMax, Llama: list prices ($/Mtok), median output speed (tokens/s) and median first",
             "# chunk time (s) per prompt length, and the CSV line of each. fit = [...]: dated up to the cut-off;",
             "# check = [...]: later, kept aside (never fitted on). Cached prices: the table had no cache column in these",
             "# snapshots (it appears from 2026-08), so `cached` is absent.",
             "",
             "[meta]",
             'repository = "https://github.com/Nidhal-Jegham/HowHungryisAIDashboard"',
             'table = "https://artificialanalysis.ai/leaderboards/providers"',
             f'cutoff = "{CUTOFF}"',
             "# the workloads of each prompt-option page: ~1k, ~10k, ~100k input tokens",
             "prompt_tokens = {medium = 1000, long = 10000, extra_long = 100000}",
             'prompt_tokens_source = "https://artificialanalysis.ai/methodology/performance-benchmarking"',
             'prompt_tokens_quote = "1k input token workload: Approximately 1,000 input tokens, 1,000 output tokens; '
             '10k input token workload: Approximately 10,000 input tokens, 1,500 output tokens; 100k input token '
             'workload: Approximately 100,000 input tokens, 2,000 output tokens"',
             'medians = "P50 over the past 72 hours (1k, 10k); over the past 14 days for 100k"', ""]
    for meta, eps in snaps:
        lines += ["[[snapshot]]"] + [f"{k} = {q(v)}" for k, v in meta.items()] + [f"endpoints = {len(eps)}", ""]
    lines.append("[rows]")
    for meta, eps in snaps:
        # one endpoint per line, an array per split (fit rows and check rows are never mixed)
        lines.append(f"{meta['split']} = [")
        for e in eps:
            f = [f"provider = {q(e['provider'])}", f"model = {q(e['model'])}", f"api_id = {q(e['api_id'])}",
                 f"open_weights = {'true' if e['open'] else 'false'}", f"input = {e['input']:g}",
                 f"output = {e['output']:g}"]
            if e["cached"]:
                f.append(f"cached = {e['cached']:g}")
            f += [f"{k} = {inline(e[k])}" for k in ("speed", "ttft", "line") if e[k]]
            lines.append("  {" + ", ".join(f) + "},")
        lines += ["]", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo", help="local git directory (bare or checkout) of HowHungryisAIDashboard")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    snaps = []
    for split, date in SNAPSHOTS:
        meta, rows = read_snapshot(a.repo, date)
        meta = {"split": split, **meta}
        eps = endpoints(rows)
        snaps.append((meta, eps))
        print(f"{split}: {meta['file']} @ {meta['commit'][:10]} ({meta['committed']}): {len(eps)} endpoints",
              file=sys.stderr)
    with open(a.out, "w", encoding="utf-8") as fh:
        fh.write(render(snaps))
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
