"""The by-concurrency curves (analyses/serving/by_concurrency.py) drawn onto a pareto or plan chart: one line per
layout, a point per concurrency, the concurrencies written along it, as InferenceMAX-style charts show them."""
from __future__ import annotations


def _short(layout: str) -> str:
    return " ".join(p for p in layout.split() if not p.endswith("=1")) or "tp=1"


def concurrency_curves(ax, points: list[dict], layouts=None, engine: str = "") -> None:
    """Draw each layout's steady-state curve (only `layouts` when given) on `ax` (log-log, x per user, y per chip)."""
    by: dict[str, list[dict]] = {}
    for q in points:
        if (layouts is None or q["layout"] in layouts) and q["output_tokens_per_s_per_user"] and \
                q["output_tokens_per_s_per_chip"]:
            by.setdefault(q["layout"], []).append(q)
    for k, (lay, qs) in enumerate(by.items()):
        qs = sorted(qs, key=lambda q: q["concurrency"])
        x = [q["output_tokens_per_s_per_user"] for q in qs]
        y = [q["output_tokens_per_s_per_chip"] for q in qs]
        ax.plot(x, y, "--s", color=f"C{(k + 4) % 10}", ms=3.5, lw=1.2,
                label=f"{_short(lay)} by concurrency" + (f" ({engine}, steady state)" if k == 0 and engine else ""))
        for q in qs:
            ax.annotate(str(q["concurrency"]), (q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"]),
                        fontsize=6, xytext=(3, -8), textcoords="offset points", color=f"C{(k + 4) % 10}")
