"""The Artificial Analysis providers table, as shipped in data/provider_table.toml: one row per endpoint (provider x
model) and snapshot, with list prices, median output speed and median first-chunk time per prompt length, each
figure traceable to the snapshot's commit, file and CSV line (benchmarks/build_provider_table.py rebuilds it).

Two splits, never mixed: `fit` (the snapshot of 2026-05-31, the cut-off: what deduce may use and what any fit may
see) and `check` (2026-07-07, kept aside as an independent check). Open-weight endpoints whose architecture is in the
model catalog carry a catalog_id (CATALOG below), so their true active parameters are known.

Prompt lengths are the benchmark's workloads (meta.prompt_tokens: ~1k, ~10k, ~100k input tokens). The speed used
for decode is the one measured with the 1k workload (the site's default); TTFT at the three lengths feeds the
prefill evidence (prefill_evidence.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from tokenmath.base.errors import InputError
from tokenmath.analyses.inverse.evidence import match_endpoint

SPLITS = ("fit", "check")
SIZES = ("medium", "long", "extra_long")
DECODE_SIZE = "medium"        # the 1k-token workload: the table's default and the least prefill-dominated speed

# AA model name (lower case, quantization and reasoning-effort suffixes ignored) -> catalog id, for open-weight
# models whose published architecture is the catalog's (same layers, widths, experts; a fine-tune or a newer
# checkpoint of the same architecture counts). Anything not matched has no known truth.
CATALOG = (
    (r"^llama 3\.1 8b$", "llama-3.1-8b"), (r"^llama 3\.1 70b$", "llama-3.1-70b"), (r"^llama 3\.3 70b$", "llama-3.1-70b"),
    (r"^llama 3\.1 405b$", "llama-3.1-405b"), (r"^llama 3\.2 1b$", "llama-3.2-1b"), (r"^llama 3\.2 3b$", "llama-3.2-3b"),
    (r"^llama 4 scout$", "llama-4-scout"), (r"^llama 4 maverick$", "llama-4-maverick"),
    (r"^qwen2\.5 72b$", "qwen2.5-72b"), (r"^qwen3 8b$", "qwen3-8b"), (r"^qwen3 32b$", "qwen3-32b"),
    (r"^qwen3 30b( a3b 2507)?$", "qwen3-30b-a3b"), (r"^qwen3 coder 30b a3b$", "qwen3-30b-a3b"),
    (r"^qwen3 235b( a22b)?( 2507)?$", "qwen3-235b-a22b"), (r"^qwen3 next 80b a3b$", "qwen3-next-80b-a3b"),
    (r"^qwen3\.5 35b a3b$", "qwen3.5-35b-a3b"),
    (r"^deepseek v3( 0324)?$", "deepseek-v3"), (r"^deepseek v3\.1( terminus)?$", "deepseek-v3"),
    (r"^deepseek r1( 0528)?$", "deepseek-v3"), (r"^deepseek v3\.2( exp)?$", "deepseek-v3.2"),
    (r"^llama 3 8b$", "llama-3.1-8b"), (r"^llama 3 70b$", "llama-3.1-70b"),
    (r"^hermes 3 - llama-3\.1 70b$", "llama-3.1-70b"),
    (r"^kimi k2( 0905| thinking)?$", "kimi-k2"), (r"^gpt-oss-120b$", "gpt-oss-120b"), (r"^gpt-oss-20b$", "gpt-oss-20b"),
    (r"^minimax-m2\.5$", "minimax-m2.5"), (r"^minimax m1 80k$", "minimax-m1"), (r"^glm-4\.5-air$", "glm-4.5-air"),
)
# suffixes that change how an endpoint is served, not the architecture
_SUFFIX = re.compile(r"\s*(\((?:[^()]*)\)|fp8|fp4|int4|vertex|fast|turbo|base|standard|latency optimized)\s*$",
                     re.I)


def base_name(model: str) -> str:
    """'DeepSeek V3.1 Terminus (FP8)' -> 'deepseek v3.1 terminus'; 'gpt-oss-120b (high)' -> 'gpt-oss-120b'."""
    m = model.strip().lower()
    while True:
        n = _SUFFIX.sub("", m).strip()
        if n == m:
            return m
        m = n


def catalog_id_of(model: str, open_weights: bool) -> str:
    if not open_weights:
        return ""
    b = base_name(model)
    return next((cid for pat, cid in CATALOG if re.match(pat, b)), "")


@dataclass(frozen=True)
class TableRow:
    """One endpoint in one snapshot. Prices in $/Mtok; speed in tokens/s; ttft in s; both keyed by prompt size."""
    split: str
    date: str
    commit: str
    file: str
    provider: str
    model: str
    api_id: str
    open_weights: bool
    input_price: float
    output_price: float
    cached_input_price: float | None
    speed: dict = field(default_factory=dict)
    ttft: dict = field(default_factory=dict)
    line: dict = field(default_factory=dict)
    prompt_tokens: dict = field(default_factory=dict)
    catalog_id: str = ""
    sram: bool = False

    @property
    def output_speed(self) -> float | None:
        return self.speed.get(DECODE_SIZE)

    def ttft_points(self) -> tuple:
        """(prompt tokens, median TTFT s) for every prompt length measured, shortest first."""
        return tuple(sorted((float(self.prompt_tokens[k]), float(v)) for k, v in self.ttft.items()))

    def sources(self) -> list[str]:
        """'commit:file#Lline' of each prompt length's CSV row."""
        return [f"{self.commit}:{self.file}#L{self.line[k]}" for k in SIZES if k in self.line]

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["sources"] = self.sources()
        return d


def _sram_providers() -> set:
    """Providers the shipped evidence marks as SRAM-based (data/api_evidence.toml [[hardware]] sram = true)."""
    from tokenmath.specs.catalog import shipped
    return {r["provider"].lower() for r in shipped("api_evidence.toml").get("hardware", []) if r.get("sram")}


def load(split: str = "fit", table: dict | None = None) -> list[TableRow]:
    """The rows of one split of data/provider_table.toml (or of `table`, a parsed file of the same shape)."""
    if split not in SPLITS:
        raise InputError("split", f"{split!r} is not a split", f"one of {', '.join(SPLITS)}")
    from tokenmath.specs.catalog import shipped
    t = table if table is not None else shipped("provider_table.toml")
    snap = next((s for s in t.get("snapshot", []) if s.get("split") == split), None)
    if snap is None:
        raise InputError("split", f"no snapshot for {split!r}", "a provider table with [[snapshot]] rows")
    pt, sram = t["meta"]["prompt_tokens"], _sram_providers()
    out = []
    for r in t.get("rows", {}).get(split, []):
        ow = bool(r.get("open_weights"))
        out.append(TableRow(split=split, date=snap["date"], commit=snap["commit"], file=snap["file"],
                            provider=r["provider"], model=r["model"], api_id=r.get("api_id", ""), open_weights=ow,
                            input_price=float(r["input"]), output_price=float(r["output"]),
                            cached_input_price=r.get("cached"), speed=dict(r.get("speed", {})),
                            ttft=dict(r.get("ttft", {})), line=dict(r.get("line", {})), prompt_tokens=dict(pt),
                            catalog_id=catalog_id_of(r["model"], ow), sram=r["provider"].lower() in sram))
    return out


def find(model: str, provider: str | None = None, split: str = "fit", rows=None) -> TableRow:
    """The endpoint whose model is `model` (case-insensitive, exact; else the one model starting with it) from
    `provider` (default: the first listed)."""
    return match_endpoint(rows if rows is not None else load(split), model, provider, field="table_model",
                          missing_field="table_model", several="matches several models in the provider table",
                          missing="no provider-table row", source="data/provider_table.toml")
