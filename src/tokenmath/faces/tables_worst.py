"""Terminal table of the measurements predicted furthest off when their source is held out (Validation.worst,
analyses/calibration/worst.py), built from its result only."""
from __future__ import annotations

from tokenmath.faces.tables import console, pct_cell, print_table, ratio_cell


def worst_table(rows: list[dict]) -> None:
    """rows: Validation.worst() (largest leave-one-source-out |error| first)."""
    from rich.table import Table
    c = console()
    t = Table(title=f"The {len(rows)} measurements furthest off (held out by source), with the term that dominates "
                    "each prediction and the fitted residuals it takes that sit on a bound")
    for col in ("id", "metric", "measured", "LOSO", "pred/meas", "err", "term", "at a bound"):
        t.add_column(col, justify="right" if col in ("measured", "LOSO", "pred/meas", "err") else "left",
                     overflow="fold")
    for w in rows:
        t.add_row(w["id"], w["metric"], f"{w['measured']:.4g}", f"{w['predicted_loso']:.4g}",
                  ratio_cell(w["ratio"]) + (" fast" if w["optimistic"] else " slow"), pct_cell(w["ape"]),
                  w["term"] or "-", "; ".join(w["at_bound"]) or "-")
    print_table(c, t)
    c.print("pred/meas: of the row's metric (for a time, > 1 is slower); fast / slow: the prediction is faster or "
            "slower than the measurement; a residual at a bound wanted to go further: a term is missing there")
