"""Charts for plan and moe (matplotlib through faces/plots' helpers). Each takes a result and a .png/.svg path."""
from __future__ import annotations

import numpy as np

from tokenmath.faces.plots import pyplot, save_figure


def _short(layout: str) -> str:
    return " ".join(p for p in layout.split() if not p.endswith("=1")) or "tp=1"


def plan_plot(p, path) -> str:
    """Every (layout, batch) point that fits, the throughput/interactivity frontier, the best point and the targets."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    ax.scatter(p.points["x"], p.points["y"], s=5, color="lightgray", label="(layout, batch) points that fit")
    fx = [q["output_tokens_per_s_per_user"] for q in p.frontier]
    fy = [q["output_tokens_per_s_per_chip"] for q in p.frontier]
    ax.plot(fx, fy, "-o", color="C0", ms=3, label="frontier")
    for q in p.frontier[:: max(1, len(p.frontier) // 6)]:
        ax.annotate(f"{_short(q['layout'])} b={q['batch']}\ncomm {q['communication_share']:.0%}",
                    (q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"]), fontsize=6,
                    xytext=(4, 4), textcoords="offset points")
    b = p.best
    c = b["cost_per_mtok_output_request_usd"]
    ax.plot([b["output_tokens_per_s_per_user"]], [b["output_tokens_per_s_per_chip"]], "*", color="C3", ms=14,
            label=f"best: {_short(b['layout'])} b={b['batch']}" + (f", ${c:.3g}/Mtok" if c is not None else "")
            + f", comm {b['communication_share']:.0%}")
    if p.by_concurrency:
        from tokenmath.faces.plots_concurrency import concurrency_curves
        concurrency_curves(ax, list(p.by_concurrency), layouts={b["layout"]}, engine=p.setup.engine_dict.get("id", ""))
    y = p.targets.get("min_tokens_per_s_per_user")
    if y:
        ax.axvline(y, color="C3", ls=":", label=f"target >= {y:g} tok/s per user")
    if p.disaggregated:
        d = p.disaggregated["decode"]
        ax.plot([d["output_tokens_per_s_per_user"]], [p.disaggregated["decode"]["decode_output_tokens_per_s_per_chip"]],
                "D", color="C2", ms=7, label=f"disaggregated decode pool, decode-only tok/s per chip ({_short(d['layout'])}, prefill:decode "
                f"{p.disaggregated['prefill_to_decode_chip_ratio']:.2f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("interactivity (output tokens/s per user)")
    ax.set_ylabel("throughput (output tokens/s per chip)")
    hw = p.setup.hardware
    ax.set_title(f"{p.setup.model.name} on {p.chips} x {hw.chip or hw.id} ({hw.id}): {p.layouts_evaluated} layouts, "
                 f"{p.points_evaluated:,} points", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    return save_figure(fig, path)


def moe_plot(r, path) -> str:
    """TP vs EP vs PP side by side: per-token latency and throughput per chip, with the communication share."""
    plt = pyplot()
    rows = r.rows
    names = [f"{q['name']}\n{_short(q['layout'])}" for q in rows]
    x = np.arange(len(rows))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 5))
    lat = [q["decode_step_s"] * 1e3 if q["fits"] and q["decode_step_s"] else 0.0 for q in rows]
    comm = [lat_ * (q["communication_share"] or 0.0) if q["fits"] else 0.0 for lat_, q in zip(lat, rows)]
    a1.bar(x, lat, color="C0", label="decode step")
    a1.bar(x, comm, color="C3", label="of which communication")
    a1.set_ylabel("per-token latency (ms)")
    tput = [q["output_tokens_per_s_per_chip"] if q["fits"] and q["output_tokens_per_s_per_chip"] else 0.0 for q in rows]
    a2.bar(x, tput, color="C2")
    a2.set_ylabel("throughput (output tokens/s per chip)")
    for ax in (a1, a2):
        ax.set_xticks(x)
        ax.set_xticklabels(names, fontsize=7, rotation=20, ha="right")
        ax.grid(True, axis="y", alpha=0.3)
    for i, q in enumerate(rows):
        if not q["fits"]:
            a1.annotate("does not fit", (i, 0), ha="center", fontsize=7, xytext=(0, 3), textcoords="offset points")
        else:
            a2.annotate(f"KV {q['kv_per_chip_bytes'] / 1e9:.3g} GB/chip", (i, tput[i]), ha="center", fontsize=6,
                        xytext=(0, 3), textcoords="offset points")
    a1.legend(fontsize=7)
    hw = r.setup.hardware
    fig.suptitle(f"{r.setup.model.name} on {r.chips} x {hw.chip} ({hw.id}, domains of {hw.scaleup_domain}), batch "
                 f"{r.batch}, context {r.context:,}: "
                 + ("fits in one domain" if r.fit["fits_in_one_domain"] else "does not fit in one domain"), fontsize=9)
    return save_figure(fig, path)
