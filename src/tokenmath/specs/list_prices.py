"""Providers' published list prices of catalog models (data/api_prices.toml, every row with its source), to set a
computed cost beside what the market charges for the same model.

Only rows whose catalog_id names the served architecture are used (closed models have none). Prices are $ per
million tokens, standard tier; the cached-input price only where the provider publishes one."""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.specs.catalog import shipped


@dataclass(frozen=True)
class ListPrice:
    model: str                       # the model as the provider names it
    provider: str
    date: str                        # YYYY-MM the price was seen
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cached_input_usd_per_mtok: float | None
    source: str

    @property
    def cached_share_of_input(self) -> float | None:
        """The cached-input price as a fraction of the (cache-miss) input price."""
        c = self.cached_input_usd_per_mtok
        return None if c is None or not self.input_usd_per_mtok else c / self.input_usd_per_mtok

    def request_usd_per_mtok_output(self, input_len: int, output_len: int) -> float:
        """What a whole request of input_len prompt tokens (all cache misses) and output_len output tokens is billed,
        per million output tokens ($/Mtok): output price + input price x input_len / output_len. The measure to
        hold next to a computed whole-request cost per output token (price's cost_per_mtok_output_request_usd)."""
        return self.output_usd_per_mtok + self.input_usd_per_mtok * input_len / output_len


def list_prices(catalog_id: str) -> tuple[ListPrice, ...]:
    """Every shipped list price for the catalog model `catalog_id`, in file order."""
    out = []
    for r in shipped("api_prices.toml").get("price", []):
        if r.get("catalog_id") != catalog_id:
            continue
        cached = r.get("cached_input_usd_per_mtok")
        out.append(ListPrice(str(r["model"]), str(r["provider"]), str(r["date"]), float(r["input_usd_per_mtok"]),
                             float(r["output_usd_per_mtok"]), None if cached is None else float(cached),
                             str(r.get("source", ""))))
    return tuple(out)


def request_list_prices(catalog_id: str, input_len: int, output_len: int) -> dict | None:
    """The providers' list prices of the model billed for one request of these lengths, per million output tokens
    (ListPrice.request_usd_per_mtok_output): the lowest, the highest and each row; None when the catalog lists none."""
    rows = sorted(((p.request_usd_per_mtok_output(input_len, output_len), p) for p in list_prices(catalog_id)),
                  key=lambda x: x[0])
    if not rows:
        return None
    return {"basis": f"output price + input price x {input_len:,} / {output_len:,} (every prompt token a cache miss)",
            "lowest_usd_per_mtok_output": rows[0][0], "highest_usd_per_mtok_output": rows[-1][0],
            "rows": [{"provider": p.provider, "model": p.model, "date": p.date, "request_usd_per_mtok_output": v,
                      "source": p.source} for v, p in rows]}


def list_price_dict(p: ListPrice) -> dict:
    """One list price as the JSON answers carry it."""
    return {"model": p.model, "provider": p.provider, "date": p.date, "input_usd_per_mtok": p.input_usd_per_mtok,
            "output_usd_per_mtok": p.output_usd_per_mtok, "cached_input_usd_per_mtok": p.cached_input_usd_per_mtok,
            "cached_share_of_input": p.cached_share_of_input, "source": p.source}
