"""Text of speculative decoding (analyses/serving/speculative.py): the table with and without, and the napkin."""
from __future__ import annotations

import numpy as np

from tokenmath.faces.names import model_label, name_ids


def _ms(x) -> str:
    return f"{x * 1e3:.3g} ms"


def _usd(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"${x:.4g}"


def speculative_text(r) -> str:
    s = r.spec
    how = (f"MTP head x {s.k}" if s.mtp else f"draft {model_label(r.draft)}, k = {s.k}")
    acc = (f"acceptance {', '.join(f'{a:.3g}' for a in s.acceptances)} by position" if s.mtp and s.k > 1
           else f"acceptance {s.acceptance:g}")
    out = ["", f"speculative decoding ({how}, {acc}: {r.tokens_per_step:.3f} tokens per "
               f"verification step) on {r.layout}:",
           f"  {'batch':>7} {'tok/s/user plain':>17} {'speculative':>12} {'speedup':>8} "
           f"{'$/Mtok out plain':>17} {'speculative':>12}  verify bound"]
    plain_c, spec_c = r.cost(r.plain_step_s), r.cost(r.per_token_s)
    for i, b in enumerate(r.batch):
        if not r.fits[i]:
            out.append(f"  {int(b):>7,}  does not fit with the draft's weights and KV")
            continue
        out.append(f"  {int(b):>7,} {1 / r.plain_step_s[i]:>17.1f} {1 / r.per_token_s[i]:>12.1f} "
                   f"{r.speedup[i]:>7.2f}x {_usd(None if plain_c is None else plain_c[i]):>17} "
                   f"{_usd(None if spec_c is None else spec_c[i]):>12}  {r.verify_bottleneck[i]}")
    out += [f"note: {name_ids(n, r.model, r.hardware, r.draft)}" for n in r.notes]
    return "\n".join(out)


def explain_speculative(r) -> str:
    s, E, i = r.spec, r.tokens_per_step, 0
    return speculative_text(r) + "\n" + "\n".join([
        "",
        "Speculative decoding, on a napkin (first batch):",
        *_tokens_lines(s, E),
        f"  acceptance source: {s.acceptance_source}",
        f"  draft: {s.k} decode steps of {model_label(r.draft)}                 = {_ms(r.draft_s[i])}",
        f"  verify: one pass of {model_label(r.model)} over k + 1 = {s.k + 1} tokens per sequence = {_ms(r.verify_s[i])} "
        f"(plain step {_ms(r.plain_step_s[i])}: the weights are read once for all {s.k + 1})",
        f"  per token: ({_ms(r.draft_s[i])} + {_ms(r.verify_s[i])}) / {E:.3f} = {_ms(r.per_token_s[i])} -> "
        f"{r.speedup[i]:.2f}x the plain step",
        "  At small batch the verify pass costs about a plain step (memory-bound: the same weight reads), so the",
        "  tokens come nearly free; once the step is compute-bound it costs ~(k + 1) plain steps and E < k + 1,",
        "  so speculation stops paying (speedup < 1)."])


def _tokens_lines(s, E) -> list[str]:
    """E on a napkin: Leviathan's closed form for one rate throughout, the chain of per-position rates for MTP."""
    if not s.mtp or s.k == 1:
        return [f"  expected tokens per step  E = (1 - a^(k+1)) / (1 - a) = (1 - {s.acceptance:g}^{s.k + 1}) / "
                f"(1 - {s.acceptance:g}) = {E:.4f}   (Leviathan et al. 2023, eq. 1)"]
    rates = s.acceptances
    prods, p = [], 1.0
    for a in rates:
        p *= a
        prods.append(p)
    return [f"  acceptance by position  a = {', '.join(f'{a:.3f}' for a in rates)}   (a chain: position i counts "
            "only if 1..i-1 were accepted)",
            f"  expected tokens per step  E = 1 + sum_i prod_(j<=i) a_j = 1 + "
            f"{' + '.join(f'{x:.3f}' for x in prods)} = {E:.4f}"]


def grid_speculation_text(s) -> str:
    """The closing line of pareto, plan, fleet and slowmode when every point decodes with speculation."""
    how = f"the model's MTP head x {s.k}" if s.mtp else f"draft {model_label(s.draft)}, k = {s.k}"
    acc = (f"acceptance {', '.join(f'{a:.3g}' for a in s.acceptances)} by position" if s.mtp and s.k > 1
           else f"acceptance {s.acceptance:g}")
    return (f"with speculative decoding ({how}, {acc}: "
            f"E = {s.tokens_per_step:.3f} tokens per verification step) at every point: "
            "speeds and $/Mtok are per token, (engine host time + k draft steps + the verification pass) / E; the "
            "draft's weights and cache are in memory; no pipeline-parallel layouts. Without it: leave out "
            "--draft/--mtp.")
