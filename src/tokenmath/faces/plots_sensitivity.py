"""The tornado chart of `tokenmath sensitivity` (analyses/serving/sensitivity.py): one bar per input, from the answer
with that input 20% down to the answer with it 20% up, the largest swing on top, a line at the base answer."""
from __future__ import annotations

from tokenmath.faces.plots import pyplot, save_figure


def tornado_plot(r, path) -> str:
    plt = pyplot()
    rows = [x for x in r.rows if x.answer_low is not None and x.answer_high is not None][::-1]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(rows) + 1.6))
    pct = f"{r.delta:.0%}"
    for i, x in enumerate(rows):
        ax.barh(i, x.answer_low - r.base_answer, left=r.base_answer, color="C0", height=0.6,
                label=f"input -{pct}" if i == 0 else None)
        ax.barh(i, x.answer_high - r.base_answer, left=r.base_answer, color="C3", height=0.6,
                label=f"input +{pct}" if i == 0 else None)
    ax.axvline(r.base_answer, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)), [x.name + (" (+ clipped at 1)" if x.note.startswith("a fraction") else "")
                                      for x in rows], fontsize=8)
    ax.set_xlabel(r.label)
    ax.set_title(f"{r.model} on {r.hardware} ({r.layout}, batch {r.batch:,})\nwhat moves {r.label}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)
