"""Terminal tables for `tokenmath validate --inferencex` (analyses/calibration/inferencex_report.py), built from its
result only."""
from __future__ import annotations

from tokenmath.faces.tables import count_cell as num, pct_cell, print_table, ratio_cell


def _group_table(title: str, groups: dict, all_: dict):
    from rich.table import Table
    t = Table(title=title)
    for col in ("group", "runs", "predicted", "median ratio", "median |error|", "per user: ratio", "|error|"):
        t.add_column(col, justify="left" if col == "group" else "right")
    for grouping, gs in groups.items():
        for g, x in gs.items():
            t.add_row(f"{grouping}: {g}", str(x["rows"]), str(x["predicted"]), ratio_cell(x["median_ratio"]),
                      pct_cell(x["median_ape"]), ratio_cell(x["median_ratio_per_user"]),
                      pct_cell(x["median_ape_per_user"]))
    t.add_row("all", str(all_["rows"]), str(all_["predicted"]), ratio_cell(all_["median_ratio"]),
              pct_cell(all_["median_ape"]), ratio_cell(all_["median_ratio_per_user"]),
              pct_cell(all_["median_ape_per_user"]))
    return t


def inferencex_table(rep) -> None:
    """The score by group, held out by source / vendor / engine version / model, the worst runs with the term that
    dominates each, and the runs not predicted with why. rep: InferenceXReport."""
    from rich.table import Table
    from tokenmath.faces.tables import console
    c = console()
    d = rep.to_dict()
    s = d["summary"]
    a = s["all"]
    c.print(f"InferenceX runs ({d['source']}), efficiency {d['efficiency']}: {a['rows']:,} runs, {a['predicted']:,} "
            f"predicted, {a['rows'] - a['predicted']:,} not (listed below). Throughput per GPU: median |error| "
            f"{pct_cell(a['median_ape'])}, median predicted / measured {ratio_cell(a['median_ratio'])} (> 1: "
            f"tokenmath optimistic); tok/s per user: median |error| {pct_cell(a['median_ape_per_user'])}.")
    c.print(f"Held out: {d['held_out_note']}.")
    for eng, e in s["engine_profiles"].items():
        pub = [v for v in e["published"] if not v.startswith("unknown")]
        ver = e["version"].replace("the commits below", "the commits data/engines.toml names")
        c.print(f"  {eng} runs predicted with tokenmath's {e['profile']} profile ({e['name']}, {ver}); "
                f"published versions: {', '.join(pub) or 'none named'}"
                + (" and runs without an image" if len(pub) < len(e["published"]) else ""))
    print_table(c, _group_table("InferenceX: predicted vs measured throughput per GPU (and tok/s per user) by group",
                                s["groups"], a))
    print_table(c, _group_table("InferenceX held out: by source, vendor, engine version and model", s["held_out"], a))
    t = Table(title=f"The {len(d['worst'])} runs furthest off (either way), with the term that dominates the "
                    "predicted step")
    for col in ("run", "GPUs", "measured", "predicted", "pred/meas", "term", "layout"):
        t.add_column(col, justify="left" if col in ("run", "term", "layout") else "right")
    for w in d["worst"]:
        t.add_row(w["run"] + ("" if w["self_consistent"] else " (!)"), str(w["gpus"]),
                  num(w["measured_tput_per_gpu"]), num(w["predicted_tput_per_gpu"]),
                  ratio_cell(w["ratio"]), f"{w['phase']}: {w['term']}",
                  w["layout"].replace(" pp=1", "").replace(" dp=1", ""))
    print_table(c, t)
    if s["mtp_on_and_off"]:
        t = Table(title="MTP on and off, same engine, chip, precision, image, layout, lengths and concurrency: "
                        "speedup of tok/s per user")
        for col in ("engine", "pairs", "measured", "predicted", "tokens / step assumed", "implied"):
            t.add_column(col, justify="left" if col == "engine" else "right")
        for eng, x in s["mtp_on_and_off"].items():
            t.add_row(eng, str(x["pairs"]), ratio_cell(x["measured_speedup"]), ratio_cell(x["predicted_speedup"]),
                      f"{x['tokens_per_step_assumed']:.2f}", f"{x['tokens_per_step_implied']:.2f}")
        print_table(c, t)
        c.print("implied: tokenmath's tokens per verification step x measured / predicted speedup, the E at which "
                "its step costs give the measured speedup (medians over the pairs; --json lists each pair)")
    bad = s["self_contradictory"]
    c.print(f"(!) the published throughput is not what the row's own latencies imply (conc x (ISL + OSL) / median "
            f"end-to-end latency / GPUs, off by more than 2x): {len(bad)} such runs, scored all the same"
            + (f": {'; '.join(bad[:5])}{', ...' if len(bad) > 5 else ''}" if bad else ""))
    c.print("Dominant term of the predicted step, over every predicted run: "
            + ", ".join(f"{k} {v:,}" for k, v in s["dominant_terms"].items()))
    if d["skipped"]:
        c.print(f"Not predicted ({a['rows'] - a['predicted']:,} runs), by reason:")
        for why, runs in d["skipped"].items():
            more = f", ... ({len(runs) - 2} more)" if len(runs) > 2 else ""
            c.print(f"  {len(runs):>4} {why}: {'; '.join(runs[:2])}{more}")
