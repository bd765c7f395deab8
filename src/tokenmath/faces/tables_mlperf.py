"""Terminal table for `tokenmath validate`'s held-out section on MLPerf Inference Offline results
(analyses/calibration/mlperf.py), built from its result only."""
from __future__ import annotations

from tokenmath.faces.tables import count_cell as num, held_out_medians, id_table, print_table, ratio_cell


def mlperf_table(mv) -> None:
    """Every result: measured node tokens/s, the band (prompts of 1 token .. at the cap), the prompt that would
    explain the measurement, the held-out prediction (at the dataset's mean prompt, else at the other systems'
    implied prompt) and its ratio; then the median held-out ratio and |error| by vendor, MoE/dense and round, and the
    same at the other systems' implied prompt. mv: MLPerfValidation."""
    from tokenmath.faces.tables import console
    c = console()
    d = mv.to_dict()
    rows, s = d["rows"], d["summary"]
    t = id_table("Held out: MLPerf Inference Offline, one 8-accelerator node, not fitted (output tokens/s; band = "
                 "prompts of 1 token .. at the dataset's cap; held out = predicted at the dataset's mean prompt (d), "
                 "else at the prompt the OTHER systems of the benchmark imply (o))", [r["id"] for r in rows],
                 ("out tok", "measured", "band", "implied prompt", "prompt", "held out", "pred/meas", "pure roofline"))
    for r in rows:
        band = (f"{num(r['predicted_tokens_per_s_prompt_cap'])} - {num(r['predicted_tokens_per_s_prompt_1'])}"
                if r["input_cap"] else f"<= {num(r['predicted_tokens_per_s_prompt_1'])}")
        src = {"dataset mean": " d", None: ""}.get(r["heldout_prompt_source"], " o")
        t.add_row(r["id"], str(r["output_len"]), num(r["measured_tokens_per_s"]), band,
                  num(r["implied_prompt_tokens"]), num(r["heldout_prompt_tokens"]) + src,
                  num(r["heldout_predicted_tokens_per_s"]), ratio_cell(r["heldout_ratio"]),
                  num(r["pure_roofline_tokens_per_s"]))
    print_table(c, t)
    a = s["all"]
    t2 = held_out_medians("MLPerf Offline held out: median predicted / measured (> 1: tokenmath optimistic) and "
                          "median |error|", s, ("vendor", "moe", "round"), ("in band", "in_band"),
                          "median_heldout_ratio", "median_heldout_abs_error")
    c.print(t2)
    c.print(f"MLPerf rows: {a['scored']} of {a['rows']} predicted at a held-out prompt; {a['in_band']} inside their "
            f"band, {a['above_band']} above it (pessimistic whatever the prompts); predictions faster than the pure "
            f"roofline: {len(d['faster_than_pure_roofline'])} (must be 0)")
    if a["others_rows"]:
        c.print(f"at the prompt the other systems imply instead (the level estimated from the measurements, only the "
                f"ranking held out): median |error| {a['median_others_abs_error']:.0%}, ratio "
                f"{a['median_others_ratio']:.2f}, over {a['others_rows']} rows")
    for b in s["bound_only"]:
        c.print(f"no prompt length known, upper bound only: {b['id']} measured {num(b['measured'])} tokens/s, "
                f"{num(b['bound_prompt_1'])} with 1-token prompts ({b['bound_over_measured']:.2f} x)")


def mlperf_server_table(sv: dict) -> None:
    """Every Server (or Interactive) run: the latency limits, measured and predicted node tokens/s, their ratio, and
    its share of Offline measured and predicted; then the medians by vendor, MoE / dense and round, and the upper
    bounds of the runs without a held-out prompt. sv: mlperf_server.validate_server's dict."""
    from tokenmath.faces.tables import console
    c = console()
    rows, s = sv["rows"], sv["summary"]
    name = sv["title"].split(",")[0].removeprefix("MLPerf Inference ")
    t = id_table(f"Held out: MLPerf Inference {name}, not fitted (output tokens/s within the run's TTFT / TPOT limits, "
                 f"at Offline's held-out prompt: the dataset's mean, else what the other systems imply; "
                 f"{name.lower()}/offline = what the limits cost)",
                 [r["id"] for r in rows], ("limits", "measured", "predicted", "pred/meas", "users",
                                           f"{name.lower()}/offline meas.", "pred."))
    for r in rows:
        share = r["predicted_server_over_offline"]
        t.add_row(r["id"], f"{r['ttft_limit_s']:g} s / {r['tpot_limit_s'] * 1e3:g} ms", num(r["measured_tokens_per_s"]),
                  num(r["predicted_tokens_per_s"]), ratio_cell(r["ratio"]), num(r["users"]),
                  f"{r['measured_server_over_offline']:.2f}", "-" if share is None else f"{share:.2f}")
    print_table(c, t)
    c.print(held_out_medians(f"MLPerf {name} held out: median predicted / measured and median |error|", s,
                             ("vendor", "moe", "round"), ("predicted", "predicted"), "median_ratio",
                             "median_abs_error"))
    for b in sv.get("bound_only_rows", []):
        bound, meas = b["predicted_tokens_per_s"], b["measured_tokens_per_s"]
        c.print(f"no prompt length known, upper bound only (1-token prompts, {b['ttft_limit_s']:g} s / "
                f"{b['tpot_limit_s'] * 1e3:g} ms): {b['id']} measured {num(meas)} tokens/s, bound {num(bound)}"
                + (f" ({bound / meas:.2f} x)" if bound else ""))
    a = s["all"]
    if a["median_measured_server_over_offline"] is not None and a["median_predicted_server_over_offline"] is not None:
        c.print(f"the {name} limits cost a median {1 - a['median_measured_server_over_offline']:.0%} of Offline's "
                f"throughput measured, {1 - a['median_predicted_server_over_offline']:.0%} predicted (in the model the "
                "limits hardly bind at capacity; in the measured runs the 99th-percentile time per output token does)")
