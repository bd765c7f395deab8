"""Terminal table for `tokenmath validate`'s held-out section on published throughput-vs-interactivity curves
(analyses/calibration/interactivity.py), built from its result only."""
from __future__ import annotations

from tokenmath.faces.tables import count_cell as num, held_out_medians, id_table, print_table


def interactivity_table(iv) -> None:
    """Every point: measured and predicted throughput per GPU (the row's definition) at its tok/s/user, the ratio,
    the best layout; then the median ratio by vendor, MoE/dense and engine. iv: InteractivityValidation."""
    from tokenmath.faces.tables import console
    c = console()
    d = iv.to_dict()
    rows, s = d["rows"], d["summary"]
    t = id_table("Held out: interactivity curves, not fitted (InferenceX pages; throughput per GPU at the stated "
                 "tok/s/user, input + output tokens as published; envelope over layouts of 1-8 chips, and for "
                 "DeepSeek-R1 disaggregated prefill / decode pools of 1-8 chips each)", [r["id"] for r in rows],
                 ("tok/s/user", "conc.", "measured", "predicted", "pred/meas", "pure roofline", "best layout"),
                 left=("best layout",))
    for r in rows:
        fits = r["id"] not in s["does_not_fit"]
        ratio = ("unreachable" if fits else "does not fit") if r["predicted"] is None else f"{r['ratio']:.2f}"
        t.add_row(r["id"], f"{r['interactivity']:g}", "-" if r["concurrency"] is None else f"~{r['concurrency']}",
                  num(r["measured"]), num(r["predicted"]), ratio, num(r["pure_roofline"]),
                  (r["layout"] or "-").replace(" pp=1", "").replace(" dp=1", ""))
    print_table(c, t)
    t2 = held_out_medians("Interactivity curves: median predicted / measured (> 1: tokenmath optimistic) and median "
                          "|error|, reachable rows", s, ("vendor", "moe", "engine"), ("reachable", "reachable"),
                          "median_ratio", "median_ape")
    c.print(t2)
    c.print(f"interactivity rows: {s['unreachable']} not predicted ({len(s['does_not_fit'])} do not fit on 1-8 chips, "
            f"the others too fast per user for any layout); predictions faster than the pure roofline: "
            f"{len(s['faster_than_pure_roofline'])} (must be 0)")
    if s["measured_beats_pure_roofline"]:
        c.print("published points above the envelope's pure roofline (their sweep ran more than 8 chips per pool, "
                "or MTP, which this envelope leaves out): " + ", ".join(s["measured_beats_pure_roofline"]))
