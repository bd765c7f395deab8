"""Time to first token against prompt length: the prefill rate, as an observation of deduce's forward model.

A TTFT is network + queueing + (for reasoning endpoints that hide their thinking) thinking time + the prefill of the
prompt. Only the last grows with the prompt, so the DIFFERENCE between the TTFTs of two prompt lengths L1 < L2 is
the prefill of the extra L2 - L1 tokens on one replica: matmuls, 2 x active params per token at the replica's
FLOP/s, plus attention, whose cost per token grows with the context (g x KV bytes x L / 2 per token, engine/
closed_form.prefill_chip_s_per_token): from 1k to 10k tokens it speaks mostly to active params / replica FLOP/s,
from 10k to 100k also to the attention cost (KV bytes per token and attention FLOPs per KV byte).

Noise model (stated, and tested on synthetic endpoints, tests/test_deduce_prefill_evidence.py): for the two
shortest prompt lengths (the 1k and 10k workloads), log(observed difference / predicted) is Gaussian with sd Priors.prefill_noise; the prediction is the engine's prefill at batch 1
on the scenario's replica, with the scenario's FLOP efficiency, times Priors.prefill_scale: a served request shares
its replica with other traffic (chunked prefill beside decode), so its prefill runs slower than alone. Both numbers
are chosen on the provider table's fit split only (benchmarks/deduce_provider_table.py --fit). Between longer
prompts (10k -> 100k) the difference is only an upper bound (one-sided, the same sd, no scale): the engine's prefill
alone cannot take longer than the TTFT grew. Two-sided, that pair pulled the median of active params 1.6x above
the truth on the fit split (a 100k prompt is queued and chunked behind other traffic far more than the model says).

Contradictory evidence: a TTFT that does not grow with the prompt (the difference is zero or negative: thinking
time, or a cache, dominates) is left out and said so; so is the TTFT of an SRAM-based host (Groq, Cerebras), whose
prefill the HBM roofline does not describe.
"""
from __future__ import annotations

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.engine.closed_form import prefill_chip_s_per_token

PREFIX = "prefill_s_"            # the growth between the two shortest prompt lengths: two-sided
BOUND = "prefill_bound_s_"       # the growth between longer ones: one-sided (an upper bound on the prefill time)


def key(l1: float, l2: float, bound: bool = False) -> str:
    """The observable: seconds the TTFT grows from a prompt of l1 tokens to one of l2."""
    return f"{BOUND if bound else PREFIX}{int(l1)}_{int(l2)}"


def is_prefill(kind: str) -> bool:
    return kind.startswith(PREFIX) or kind.startswith(BOUND)


def is_bound(kind: str) -> bool:
    return kind.startswith(BOUND)


def check_curve(curve, field: str = "ttft_curve") -> tuple:
    """(prompt tokens, TTFT s) points, sorted by prompt length; at least two distinct lengths."""
    try:
        pts = sorted((float(L), float(t)) for L, t in curve)
    except (TypeError, ValueError):
        raise InputError(field, f"{curve!r} is not a list of (prompt tokens, seconds)",
                         "pairs such as ((1000, 0.45), (10000, 0.84))") from None
    for L, t in pts:
        if not (np.isfinite(L) and 1 <= L <= MAX_TOKENS):
            raise InputError(field, f"prompt length {L:g} is out of range", f"tokens from 1 to {MAX_TOKENS:,}")
        if not (np.isfinite(t) and t > 0):
            raise InputError(field, f"TTFT {t:g} is not usable", "seconds, greater than 0")
    if len({L for L, _ in pts}) < 2:
        raise InputError(field, "needs TTFTs at two prompt lengths or more",
                         "e.g. the 1k and 10k workloads of the same endpoint")
    return tuple(pts)


def pairs(curve) -> tuple[tuple, tuple]:
    """Consecutive (l1, l2, seconds the TTFT grew) of a checked curve, and a note for each pair left out."""
    use, notes = [], []
    for (l1, t1), (l2, t2) in zip(curve, curve[1:]):
        if l2 <= l1:
            continue
        if t2 <= t1:
            notes.append(f"TTFT does not grow from {l1:,.0f} to {l2:,.0f} prompt tokens ({t1:g} s -> {t2:g} s): "
                         "thinking time, queueing or a cache dominates it; left out")
            continue
        use.append((l1, l2, t2 - t1))
    return tuple(use), tuple(notes)


def observed(obs) -> dict:
    if not getattr(obs, "ttft_curve", None):
        return {}
    return {key(l1, l2, i > 0): dt for i, (l1, l2, dt) in enumerate(pairs(obs.ttft_curve)[0])}


def prefill_s(s: dict, L: float) -> np.ndarray:
    """Seconds to prefill a prompt of L tokens alone (batch 1) on each scenario's replica."""
    return prefill_chip_s_per_token(s["Na"], s["Nt"], s["q"], s["K"], L, 1.0, s["F"], s["W"], s["g"]) * L / s["chips"]


def predict(s: dict, obs, scale: float = 1.0) -> dict:
    """The predicted growth of the TTFT between each pair of prompt lengths, for each scenario, times `scale`
    (Priors.prefill_scale: how much slower a benchmark request's prefill runs than alone on its replica)."""
    if not getattr(obs, "ttft_curve", None):
        return {}
    return {key(l1, l2, i > 0): (prefill_s(s, l2) - prefill_s(s, l1)) * (1.0 if i else scale)
            for i, (l1, l2, _) in enumerate(pairs(obs.ttft_curve)[0])}
