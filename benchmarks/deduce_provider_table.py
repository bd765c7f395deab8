"""deduce on the provider table's open-weight endpoints: price alone vs + speed vs + TTFT against prompt length.

    python benchmarks/deduce_provider_table.py [--split check|fit] [--samples N] [--json]
    python benchmarks/deduce_provider_table.py --fit-interval    # refit the interval scales (data/deduce_calibration.toml)

The prefill scale is chosen on the fit split (2026-05-31) leaving each model out; the check split (2026-07-07) is
after the cut-off and never fitted on. About 6-8 minutes on one core at 20,000 samples per deduction.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

from tokenmath.analyses.inverse import table_validation as tv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="check", choices=("check", "fit"))
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit-interval", action="store_true",
                    help="fit each evidence set's interval scale q on the fit split and write it to the data file")
    a = ap.parse_args(argv)
    scales = tv.fit_scale(a.samples)
    if a.fit_interval:
        return fit_interval(a.samples, scales, a.json)
    v = tv.validate(a.split, a.samples, scales)
    if a.json:
        print(json.dumps(v.to_dict(), indent=1))
        return 0
    print(f"deduce on the provider table, split {v.split} ({v.rows} open-weight endpoints with catalog truth, SRAM "
          f"hosts left out; {a.samples:,} samples per deduction)")
    print(f"prefill scale chosen on the fit split (leave-one-model-out; all models: {v.scales['*']:g})")
    _table("active params, the interval deduce prints (calibrated)", v.scores)
    _table("active params, the posterior's own interval", v.posterior)
    _table("total params, calibrated", v.total)
    print(f"TTFT-vs-prompt evidence contradictory in part or whole: {len(v.contradictory)} of {v.rows} "
          f"({len(v.contradictory) / max(v.rows, 1):.0%})")
    for p, m, why in v.contradictory:
        print(f"  {p} / {m}: {why}")
    return 0


def _table(title: str, scores: dict) -> None:
    print(title)
    print(f"  {'evidence':<20} {'rows':>5} {'refused':>7} {'cover80':>8} {'width':>7} {'error':>7}")
    print(f"  {'target':<20} {'':>5} {'':>7} {'>= 80%':>8} {'<= 5x':>7} {'<= 1.5x':>7}")
    for e, s in scores.items():
        print(f"  {e:<20} {s['rows']:>5} {s['refused']:>7} {s['coverage_80']:>8.0%} {s['median_width']:>6.1f}x "
              f"{s['median_error_factor']:>6.2f}x")


DATA = pathlib.Path(__file__).resolve().parents[1] / "src/tokenmath/data/deduce_calibration.toml"


def fit_interval(samples: int, scales: dict, as_json: bool) -> int:
    """Fit q on the fit split, print the held-out scores, and rewrite the [interval] section of the data file."""
    f = tv.fit_interval(samples, scales)
    if as_json:
        print(json.dumps(f, indent=1))
    else:
        for e, qs in f["q"].items():
            print(f"q {e:<18} " + "  ".join(f"{k} {q:.3f}" for k, q in qs.items()))
        _table("fit split, active params, the posterior's own interval",
               {e: d["active_params_b"] for e, d in f["posterior"].items()})
        for g, d in f["held_out"].items():
            _table(f"fit split, active params, each {g} scaled with the q of the others",
                   {e: x["active_params_b"] for e, x in d.items()})
            _table(f"fit split, total params, each {g} scaled with the q of the others",
                   {e: x["total_params_b"] for e, x in d.items()})
    text = DATA.read_text()
    text = text[:text.index("\n[interval]")] if "\n[interval]" in text else text.rstrip("\n")
    head = "\n\n# deduce's interval scale q"         # the previous fit's comment block goes with its values
    text = text[:text.index(head)] if head in text else text
    lo = {g: {e: x["active_params_b"] for e, x in d.items()} for g, d in f["held_out"].items()}
    lines = ["", "", "# deduce's interval scale q per evidence set and quantity (analyses/inverse/interval_calibration.py),",
             f"# fitted {datetime.date.today()} by benchmarks/deduce_provider_table.py --fit-interval on the provider",
             f"# table's fit split ({f['rows']} open-weight endpoints, 2026-05-31; SRAM hosts left out). Held out, active",
             "# params, coverage / median width when each model (vendor) is scaled with the q of the others:"]
    for g, d in lo.items():
        lines.append(f"#   {g}: " + "; ".join(f"{e} {x['coverage_80']:.0%} / {x['median_width']:.1f}x" for e, x in d.items()))
    lines += ["[interval]", f'source = "fitted {datetime.date.today()} on {f["rows"]} endpoints of the provider table, '
              'split fit (2026-05-31)"', f"rows = {f['rows']}"]
    for e, qs in f["q"].items():
        lines += ["", f'[interval."{e}"]'] + [f"{k} = {q:.4f}" for k, q in qs.items()]
    DATA.write_text(text + "\n".join(lines) + "\n")
    print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
