"""Everything public about one API endpoint, joined from data/api_prices.toml (prices, tiers) and
data/api_evidence.toml (speed, TTFT, batch discount, context window, known hardware), as deduce's keyword arguments.

An endpoint is (model, provider) as data/api_prices.toml names it. Several speed rows for it are combined as their
geometric mean (the speed noise model, forward_model.py, covers their spread); the TTFT used is the one of a row that
states its prompt length. Speeds of SRAM-based hosts (`sram = true`: Groq, Cerebras) are kept in the record but not
used: the HBM roofline of the catalog's chips does not describe them. Speed rows measured as a gateway's P50 over
live traffic (`method = "gateway_p50"`, e.g. Vercel AI Gateway) are kept apart (gateway_speeds): at the one endpoint
measured both ways (gpt-oss-120b on Fireworks) the gateway's 79 t/s sits 7.6x below the benchmarks' 525 / 683 t/s,
far outside the speed noise model, so they are recorded but not used as the per-request decode speed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenmath.base.errors import InputError, closest

# The evidence kinds, in the order `deduce --explain` adds them (price first: it is always there).
# Speed rows whose `method` is this are a gateway's P50 over live traffic, not a per-request benchmark (see above).
GATEWAY = "gateway_p50"
KINDS = ("price", "cached", "long_context", "batch", "speed", "ttft", "context_window", "hardware")


@dataclass(frozen=True)
class ApiEvidence:
    """One endpoint's public figures; prices in $/Mtok, speed in tokens/s per user, TTFT in s, window in tokens."""
    model: str
    provider: str
    catalog_id: str
    open_weights: bool
    input_price: float
    output_price: float
    cached_input_price: float | None = None
    long_context_threshold: float | None = None
    long_input_price: float | None = None
    long_output_price: float | None = None
    speeds: tuple = ()                     # every benchmarked output speed (tokens/s per user)
    gateway_speeds: tuple = ()             # gateway P50 throughputs (tokens/s), recorded, not used
    ttft_s: float | None = None
    ttft_prompt_tokens: float | None = None
    batch_discount: float | None = None
    context_window: float | None = None
    chips: tuple = ()                      # chips the provider states it serves on
    sram: bool = False
    sources: tuple = field(default_factory=tuple)   # (kind, date, source) of every figure used

    @property
    def output_speed(self) -> float | None:
        if not self.speeds or self.sram:
            return None
        return math.exp(sum(math.log(v) for v in self.speeds) / len(self.speeds))

    def available(self) -> tuple:
        """The evidence kinds this endpoint has, in KINDS order."""
        have = {"price": True, "cached": self.cached_input_price is not None,
                "long_context": self.long_context_threshold is not None, "batch": self.batch_discount is not None,
                "speed": self.output_speed is not None, "ttft": self.ttft_s is not None and not self.sram,
                "context_window": self.context_window is not None, "hardware": bool(self.usable_chips())}
        return tuple(k for k in KINDS if have[k])

    def usable_chips(self) -> tuple:
        """The stated chips that carry a $/chip-hour in the catalog (deduce prices chip-seconds)."""
        from tokenmath.specs.hardware import get_hardware
        return tuple(c for c in self.chips if get_hardware(c).price_usd_per_hour is not None)

    def deduce_kwargs(self, kinds=None) -> dict:
        """Keyword arguments of analyses.inverse.deduce.deduce using only `kinds` (default: all available)."""
        use = set(self.available() if kinds is None else kinds)
        unknown = use - set(KINDS)
        if unknown:
            raise InputError("evidence", f"unknown kind {sorted(unknown)[0]!r}", f"one of {', '.join(KINDS)}")
        kw = {"input_price": self.input_price, "output_price": self.output_price}
        if "cached" in use and self.cached_input_price is not None:
            kw["cached_input_price"] = self.cached_input_price
        if "long_context" in use and self.long_context_threshold is not None:
            kw.update(long_context_threshold=self.long_context_threshold, long_input_price=self.long_input_price,
                      long_output_price=self.long_output_price)
        if "batch" in use and self.batch_discount is not None:
            kw["batch_discount"] = self.batch_discount
        if "speed" in use and self.output_speed is not None:
            kw["output_speed"] = self.output_speed
        if "ttft" in use and self.ttft_s is not None and not self.sram:
            kw.update(ttft_s=self.ttft_s, ttft_prompt_tokens=self.ttft_prompt_tokens)
        if "context_window" in use and self.context_window is not None:
            kw["context_window"] = self.context_window
        if "hardware" in use and self.usable_chips():
            kw["hardware"] = list(self.usable_chips())
        return kw

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["output_speed"] = self.output_speed
        d["available"] = list(self.available())
        d["speeds"], d["chips"] = list(self.speeds), list(self.chips)
        d["gateway_speeds"] = list(self.gateway_speeds)
        d["sources"] = [list(s) for s in self.sources]
        return d


def _key(model: str, provider: str) -> tuple:
    return (model.strip().lower(), provider.strip().lower())


def load(prices=None, evidence=None) -> list[ApiEvidence]:
    """Every price row joined with its evidence rows (defaults: the shipped files)."""
    from tokenmath.specs.catalog import shipped
    prices = prices if prices is not None else shipped("api_prices.toml").get("price", [])
    ev = evidence if evidence is not None else shipped("api_evidence.toml")
    speed, gateway, ttft, window = {}, {}, {}, {}
    for r in ev.get("speed", []):
        k = _key(r["model"], r["provider"])
        if r.get("method", "benchmark") == GATEWAY:
            gateway.setdefault(k, []).append(r)
            continue
        speed.setdefault(k, []).append(r)
        if r.get("ttft_s") and r.get("prompt_tokens"):
            ttft.setdefault(k, r)
    for r in ev.get("context", []):
        window[_key(r["model"], r["provider"])] = r
    batch = {r["provider"].lower(): r for r in ev.get("batch", [])}
    hw = {r["provider"].lower(): r for r in ev.get("hardware", [])}
    out = []
    for r in prices:
        k = _key(r["model"], r["provider"])
        src = [("price", r.get("date", ""), r.get("source", ""))]
        speeds = [float(x["output_tokens_per_s"]) for x in speed.get(k, [])]
        src += [("speed", x.get("date", ""), x["source"]) for x in speed.get(k, [])]
        src += [("gateway_speed", x.get("date", ""), x["source"]) for x in gateway.get(k, [])]
        if r.get("output_tokens_per_s"):
            speeds.append(float(r["output_tokens_per_s"]))
            src.append(("speed", r.get("date", ""), r.get("speed_source", r.get("source", ""))))
        t, b, c, h = ttft.get(k), batch.get(k[1]), window.get(k), hw.get(k[1], {})
        for kind, row in (("ttft", t), ("batch", b), ("context_window", c), ("hardware", h or None)):
            if row:
                src.append((kind, row.get("date", ""), row["source"]))
        out.append(ApiEvidence(
            model=r["model"], provider=r["provider"], catalog_id=r.get("catalog_id", ""),
            open_weights=bool(r.get("open_weights")), input_price=r["input_usd_per_mtok"],
            output_price=r["output_usd_per_mtok"], cached_input_price=r.get("cached_input_usd_per_mtok") or None,
            long_context_threshold=r.get("long_context_threshold"), long_input_price=r.get("long_input_usd_per_mtok"),
            long_output_price=r.get("long_output_usd_per_mtok"), speeds=tuple(speeds),
            gateway_speeds=tuple(float(x["output_tokens_per_s"]) for x in gateway.get(k, [])),
            ttft_s=t["ttft_s"] if t else None, ttft_prompt_tokens=t["prompt_tokens"] if t else None,
            batch_discount=b["discount"] if b else None, context_window=c["context_window"] if c else None,
            chips=tuple(h.get("chips", ())), sram=bool(h.get("sram", False)), sources=tuple(src)))
    return out


def find(name: str, provider: str | None = None, rows=None) -> ApiEvidence:
    """The endpoint named `name` (exact, case-insensitive; else the one model id that starts with it, e.g.
    'claude-sonnet-4-5' or 'deepseek-chat'); with several providers, the model's own (first listed) unless
    `provider` is given. An InputError lists the closest names."""
    return match_endpoint(rows if rows is not None else load(), name, provider, field="api_model",
                          missing_field="provider" if provider else "api_model", several="matches several models",
                          missing="no price row", source="data/api_prices.toml")


def match_endpoint(rows, name: str, provider: str | None, *, field: str, missing_field: str, several: str,
                   missing: str, source: str):
    """The row of `rows` (each with .model and .provider) whose model is `name` (exact, case-insensitive; else the
    one model starting with it) from `provider` (default: the first listed); InputErrors name `field` (several
    models match) or `missing_field` (none does, with the closest names, else a model of `source`)."""
    n = name.strip().lower()
    hits = [r for r in rows if r.model.lower() == n] or [r for r in rows if r.model.lower().startswith(n)]
    if provider:
        hits = [r for r in hits if r.provider.lower() == provider.strip().lower()]
    if len({r.model for r in hits}) > 1:
        raise InputError(field, f"{name!r} {several}", "one of " + ", ".join(sorted({r.model for r in hits})[:8]))
    if not hits:
        near = closest(name, sorted({r.model for r in rows}))
        raise InputError(missing_field, f"{missing} for {name!r}" + (f" from {provider!r}" if provider else ""),
                         f"did you mean {', '.join(near)}?" if near else f"a model of {source}")
    return hits[0]
