"""Text of `tokenmath sensitivity`: the ranked table, and under --explain how each row was made."""
from __future__ import annotations

from tokenmath.faces.names import chip_label, model_label, name_ids


def _num(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def sensitivity_text(r) -> str:
    pct = f"{r.delta:.0%}"
    out = [f"{model_label(r.model)} on {chip_label(r.hardware)} ({r.layout}, batch {r.batch:,}): {r.label} = {_num(r.base_answer)}",
           f"each input -{pct} / +{pct}, ranked by how far the answer moves:",
           f"  {'input':30} {'base':>10} {'low':>10} {'high':>10} {'answer at low':>14} {'at high':>10} {'swing':>9}"]
    for x in r.rows:
        share = x.swing / abs(r.base_answer) if r.base_answer else 0.0
        out.append(f"  {x.name:30} {_num(x.base):>10} {_num(x.low):>10} {_num(x.high):>10} "
                   f"{_num(x.answer_low):>14} {_num(x.answer_high):>10} {share:>8.1%}" + (f"  ({x.note})" if x.note else ""))
    out.append("swing: |answer at high - answer at low| / base answer")
    out += [f"note: {name_ids(n, r.model, r.hardware)}" for n in r.notes]
    return "\n".join(out)


def explain_sensitivity(r) -> str:
    pct = f"{r.delta:.0%}"
    return "\n".join([
        sensitivity_text(r), "",
        "How each row is made:",
        f"  hardware figures: the chip's figure x (1 - {pct}) and x (1 + {pct}), applied as `--set` would (checked",
        "    like a hardware file), the same question asked again through the one engine; the chip keeps its",
        "    family's calibrated efficiencies, so only the changed figure's physics moves the answer.",
        f"  efficiencies ({r.efficiency_source}):",
        f"    each achievable fraction of peak x (1 -/+ {pct}), capped at 1; layer_overhead_s likewise.",
        "  memory_gb moves the answer only through the batch that fits (with --batch max).",
        "  A zero swing means the input is not on this question's critical path (e.g. scale-out bandwidth when",
        "  every collective stays inside one domain)."])
