"""The predicted-vs-measured chart of `tokenmath validate --inferencex --plot FILE`: one log-log panel per grouping
(chip, engine, engine version, model family, technique), each run a point colored by its group, built from the
report's chart_points only (analyses/calibration/inferencex_report.py)."""
from __future__ import annotations

from tokenmath.faces.plots import pyplot, save_figure

MAX_GROUPS = 10      # colors a panel tells apart; smaller groups are drawn grey, as "other"


def inferencex_plot(rep, path) -> str:
    """rep: InferenceXReport. Returns the path written."""
    import numpy as np
    plt = pyplot()
    groups = rep.chart_points()
    medians = rep.summary()["groups"]          # each group's median |error|, as the report's tables give it
    fig, axes = plt.subplots(2, 3, figsize=(16, 10))
    allpts = [xy for g in groups.values() for pts in g.values() for xy in pts]
    lo = min(min(m, p) for m, p in allpts) / 1.3
    hi = max(max(m, p) for m, p in allpts) * 1.3
    for ax, (name, gs) in zip(axes.flat, groups.items()):
        for i, (label, pts) in enumerate(gs.items()):
            m, p = np.array(pts).T
            err = medians[name][label]["median_ape"]
            other = i >= MAX_GROUPS
            ax.scatter(m, p, s=6, alpha=0.5, color="0.6" if other else f"C{i}",
                       label=None if other else f"{label} ({len(pts)}): {err:.0%}")
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.plot([lo, hi], [lo * 1.2, hi * 1.2], "k:", lw=0.6)
        ax.plot([lo, hi], [lo / 1.2, hi / 1.2], "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(f"by {name} (median |error| per group; dotted: +-20%)", fontsize=9)
        ax.set_xlabel("measured throughput per GPU (tokens/s, input + output)", fontsize=8)
        ax.set_ylabel("tokenmath, held out (same unit)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left", markerscale=2)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.suptitle("InferenceX runs predicted at their own configuration, nothing fitted on them", fontsize=11)
    return save_figure(fig, path)
