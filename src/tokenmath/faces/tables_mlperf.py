"""Terminal table for `tokenmath validate`'s held-out section on MLPerf Inference Offline results
(analyses/calibration/mlperf.py), built from its result only."""
from __future__ import annotations

from tokenmath.faces.tables import add_id_column, print_table


def mlperf_table(mv) -> None:
    """Every result: measured node tokens/s, the band (prompts of 1 token .. at the cap), the prompt that would
    explain the measurement, the held-out prediction at the other systems' implied prompt and its ratio; then the
    median held-out ratio and |error| by vendor and MoE/dense. mv: MLPerfValidation."""
    from rich.console import Console
    from rich.table import Table
    c = Console()
    d = mv.to_dict()
    rows, s = d["rows"], d["summary"]
    num = lambda v: "-" if v is None else f"{v:,.0f}"                      # noqa: E731
    t = Table(title="Held out: MLPerf Inference Offline, one 8-accelerator node, not fitted (output tokens/s; band = "
                    "prompts of 1 token .. at the dataset's cap; held out = predicted at the prompt the OTHER systems "
                    "of the benchmark imply)")
    add_id_column(t, "id", [r["id"] for r in rows])
    for col in ("out tok", "measured", "band", "implied prompt", "held out", "pred/meas", "pure roofline"):
        t.add_column(col, justify="right")
    for r in rows:
        band = (f"{num(r['predicted_tokens_per_s_prompt_cap'])} - {num(r['predicted_tokens_per_s_prompt_1'])}"
                if r["input_cap"] else f"<= {num(r['predicted_tokens_per_s_prompt_1'])}")
        ratio = "-" if r["heldout_ratio"] is None else f"{r['heldout_ratio']:.2f}"
        t.add_row(r["id"], str(r["output_len"]), num(r["measured_tokens_per_s"]), band,
                  num(r["implied_prompt_tokens"]), num(r["heldout_predicted_tokens_per_s"]), ratio,
                  num(r["pure_roofline_tokens_per_s"]))
    print_table(c, t)
    fmt = lambda x: "-" if x is None else f"{x:.2f}"                       # noqa: E731
    pct = lambda x: "-" if x is None else f"{x:.0%}"                        # noqa: E731
    t2 = Table(title="MLPerf Offline held out: median predicted / measured (> 1: tokenmath optimistic) and median "
                     "|error|")
    for col in ("group", "rows", "in band", "median ratio", "median |error|"):
        t2.add_column(col)
    for grouping in ("vendor", "moe"):
        for g, x in s[grouping].items():
            t2.add_row(f"{grouping}: {g}", str(x["rows"]), str(x["in_band"]), fmt(x["median_heldout_ratio"]),
                       pct(x["median_heldout_abs_error"]))
    a = s["all"]
    t2.add_row("all", str(a["rows"]), str(a["in_band"]), fmt(a["median_heldout_ratio"]),
               pct(a["median_heldout_abs_error"]))
    c.print(t2)
    c.print(f"MLPerf rows: {a['in_band']} of {a['rows']} inside their band, {a['above_band']} above it (pessimistic "
            f"whatever the prompts); predictions faster than the pure roofline: {len(d['faster_than_pure_roofline'])} "
            "(must be 0)")
    for b in s["bound_only"]:
        c.print(f"no published prompt cap, upper bound only: {b['id']} measured {num(b['measured'])} tokens/s, "
                f"{num(b['bound_prompt_1'])} with 1-token prompts ({b['bound_over_measured']:.2f} x)")
