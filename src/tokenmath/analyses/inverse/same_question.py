"""One question, one answer: `deduce --api-model X` and the same evidence typed as flags are the same deduction.

`--api-model` deduces from every kind of evidence the endpoint has (data/api_prices.toml + data/api_evidence.toml):
with GPT-4o that is the prices AND a cached price, an output speed (the geometric mean of two measurements), the
batch-API discount and the context window. Prices typed as flags are only the prices: a different question, so a
different answer (GPT-4o: 157 B active from everything, 237 B from input, output and cached prices alone). This
module writes the flags that ask `--api-model`'s question, and, for typed prices that are a shipped endpoint's list
prices, names the evidence the typed question leaves out.
"""
from __future__ import annotations

FLAGS = (("input_price", "--input-price"), ("output_price", "--output-price"),
         ("cached_input_price", "--cached-input-price"), ("long_context_threshold", "--long-context-threshold"),
         ("long_input_price", "--long-input-price"), ("long_output_price", "--long-output-price"),
         ("output_speed", "--output-speed"), ("ttft_s", "--ttft"), ("ttft_prompt_tokens", "--ttft-prompt-tokens"),
         ("batch_discount", "--batch-discount"), ("context_window", "--context-window"), ("hardware", "--hardware"),
         ("ttft_curve", "--ttft-curve"))
WORDS = {"cached_input_price": "cached price", "long_context_threshold": "long-context tier",
         "long_input_price": "long-context input price", "long_output_price": "long-context output price",
         "output_speed": "output speed", "ttft_s": "time to first token", "ttft_prompt_tokens": "its prompt length",
         "batch_discount": "batch-API discount", "context_window": "context window", "hardware": "known hardware",
         "ttft_curve": "TTFT against prompt length"}


def fmt(v) -> str:
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], (list, tuple)):
            return ",".join(f"{a:g}:{b:g}" for a, b in v)     # a TTFT curve: tokens:seconds,...
        return ",".join(str(x) for x in v)
    return f"{float(v):.10g}"


def as_flags(kw: dict) -> str:
    """The command line that asks deduce exactly the question of these keyword arguments."""
    return "tokenmath deduce " + " ".join(f"{flag} {fmt(kw[k])}" for k, flag in FLAGS if kw.get(k) is not None)


def matching_endpoints(typed: dict, rows=None) -> list:
    """Shipped endpoints (evidence.load) whose list prices are the typed input and output prices (and the cached one,
    when typed)."""
    from tokenmath.analyses.inverse.evidence import load
    rows = rows if rows is not None else load()

    def same(a, b):
        return a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    out = []
    for r in rows:
        if not (same(typed.get("input_price"), r.input_price) and same(typed.get("output_price"), r.output_price)):
            continue
        if typed.get("cached_input_price") is not None and not same(typed["cached_input_price"], r.cached_input_price):
            continue
        out.append(r)
    return out


def left_out(typed: dict, ev) -> list[str]:
    """What `--api-model` would use for endpoint `ev` that the typed question does not (words, with the value)."""
    full = ev.deduce_kwargs()
    return [f"{WORDS.get(k, k)} {fmt(v)}" for k, v in full.items()
            if k not in ("input_price", "output_price") and typed.get(k) is None]


def note_for_typed(typed: dict, rows=None) -> str | None:
    """A line for the answer to typed prices that are a shipped endpoint's: which evidence its --api-model adds."""
    hits = matching_endpoints(typed, rows)
    if not hits:
        return None
    parts, flags = [], None
    hits = sorted(hits, key=lambda ev: -len(left_out(typed, ev)))     # those whose question differs first
    for ev in hits[:3]:
        more = left_out(typed, ev)
        label = f"{ev.model} ({ev.provider})"
        if not more:
            parts.append(f"{label}: --api-model asks the same question (same answer)")
        else:
            parts.append(f"{label}: --api-model also uses {', '.join(more)}, so its answer differs")
            flags = flags or as_flags(ev.deduce_kwargs())
    more_rows = f" (and {len(hits) - 3} more)" if len(hits) > 3 else ""
    return ("these are the list prices of " + "; ".join(parts) + more_rows
            + (f". Its question as flags: {flags}" if flags else ""))
