"""deduce on the provider table's open-weight endpoints: price alone vs + speed vs + TTFT against prompt length.

    python benchmarks/deduce_provider_table.py [--split check|fit] [--samples N] [--json]

The prefill scale is chosen on the fit split (2026-05-31) leaving each model out; the check split (2026-07-07) is
after the cut-off and never fitted on. About 6-8 minutes on one core at 20,000 samples per deduction.
"""
from __future__ import annotations

import argparse
import json
import sys

from tokenmath.analyses.inverse import table_validation as tv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="check", choices=("check", "fit"))
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    v = tv.validate(a.split, a.samples)
    if a.json:
        print(json.dumps(v.to_dict(), indent=1))
        return 0
    print(f"deduce on the provider table, split {v.split} ({v.rows} open-weight endpoints with catalog truth, SRAM "
          f"hosts left out; {a.samples:,} samples per deduction)")
    print(f"prefill scale chosen on the fit split (leave-one-model-out; all models: {v.scales['*']:g})")
    print(f"  {'evidence':<20} {'rows':>5} {'refused':>7} {'cover80':>8} {'width':>7} {'error':>7}")
    print(f"  {'target':<20} {'':>5} {'':>7} {'>= 80%':>8} {'<= 5x':>7} {'<= 1.5x':>7}")
    for e, s in v.scores.items():
        print(f"  {e:<20} {s['rows']:>5} {s['refused']:>7} {s['coverage_80']:>8.0%} {s['median_width']:>6.1f}x "
              f"{s['median_error_factor']:>6.2f}x")
    print(f"TTFT-vs-prompt evidence contradictory in part or whole: {len(v.contradictory)} of {v.rows} "
          f"({len(v.contradictory) / max(v.rows, 1):.0%})")
    for p, m, why in v.contradictory:
        print(f"  {p} / {m}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
