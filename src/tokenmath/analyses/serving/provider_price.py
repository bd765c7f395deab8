"""The provider's side: what serving a known model costs per million input and output tokens at a latency
target, and the list price that cost implies at a margin and a utilization (to hold next to providers' lists).

price = cost at full load / (utilization x (1 - gross margin)).
The cheapest point is a static batch: its ttft_s is the prefill of its whole batch; past MLPerf's 2 s server limit
`static_ttft_note` says so (grid.static_ttft_note), and the continuously batched cost is what a server meets.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.engine.economics import decode_cost_per_mtok, prefill_cost_per_mtok, usd_per_s
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.specs.list_prices import request_list_prices
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, fmt_layout, setup
from tokenmath.analyses.serving.by_concurrency import cheapest_continuous, continuous_fields
from tokenmath.analyses.serving.grid import attention_arg, meeting_speed, static_ttft_note, up_to
from tokenmath.analyses.serving.speculative import resolve_draft, speculation_notes


@dataclass(frozen=True)
class PriceResult:
    setup: Setup
    result: dict    # the JSON answer: cheapest point meeting the target, its costs and the implied prices

    def to_dict(self):
        return {**self.result, **what_if_dict(self.setup.hardware)}


def price(model, hardware, *, min_tokens_per_s_per_user=20.0, input_len=2000, output_len=500, margin=0.5,
          utilization=0.6, max_chips=None, weight_dtype=None, kv_dtype=None, efficiency=None,
          engine=None, attention_sharding="heads", speculation=None, **knobs) -> PriceResult:
    """speculation: a speculative.Speculation (--draft/--mtp): the static and the continuously batched servers
    both decode with it (fleet's convention)."""
    su = setup(model, hardware, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    dr = resolve_draft(speculation, su.model, su.precision, weight_dtype, kv_dtype)
    if su.hardware.price_usd_per_hour is None:
        raise InputError("hardware", f"{su.hardware.id} has no $/chip-hour in the catalog",
                         "a chip with a price (tokenmath hardware) or a hardware file with price_usd_per_hour")
    target = pos_float(min_tokens_per_s_per_user, "min_tokens_per_s_per_user")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 0.95:
        raise InputError("margin", f"{margin!r} is not a gross margin",
                         "a fraction in [0, 0.95] (0.95 = a price 20x the cost), e.g. 0.5")
    # physical range: below 1% of paid time serving, the price would be over 100x the cost and mean nothing
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0.01 <= utilization <= 1:
        raise InputError("utilization", f"{utilization!r} is out of range",
                         "a fraction from 0.01 to 1 of paid chip time serving at that load, e.g. 0.6")
    input_len, output_len = int_arg(input_len, "input_len"), int_arg(output_len, "output_len")
    top = int_arg(max_chips if max_chips is not None else min(su.hardware.scaleup_domain, 72), "max_chips", 1, MAX_SEARCH_CHIPS)
    g = up_to(su, top, input_len, output_len, draft=dr, attention=attention_arg(attention_sharding))
    ok = meeting_speed(g, target, top, su.hardware.id)
    usd_s = usd_per_s(g.chips, su.hardware.price_usd_per_hour)
    out_cost = decode_cost_per_mtok(usd_s, g.step_s, g.batch)
    in_cost = prefill_cost_per_mtok(usd_s, g.ttft_s, g.batch, input_len)
    li, bi = np.unravel_index(np.argmin(np.where(ok, out_cost, np.inf)), out_cost.shape)
    t = g.layouts[li]
    scale = 1.0 / (utilization * (1.0 - margin))
    c_in, c_out = float(in_cost[li, bi]), float(out_cost[li, bi])
    cont = (_continuous(su, g, np.where(ok, out_cost, np.inf), target, input_len, output_len, scale, dr)
            if su.engine is not None else None)
    ttft, batch = finite(g.ttft_s[li, bi]), int(g.batch[li, bi])
    res = {"model": su.model.id, "hardware": su.hardware.id, "engine": su.engine_dict,
           "notes": [su.engine_note, *speculation_notes(dr)],
           **({} if dr is None else {"speculation": dr.to_dict()}),
           "layout": fmt_layout(*t), "tp": t[0], "pp": t[1],
           "ep": t[2], "dp": t[3], "chips": int(g.chips[li, 0]), "batch": batch,
           "input_len": input_len, "output_len": output_len, "min_tokens_per_s_per_user": target,
           "decode_step_s": finite(g.step_s[li, bi]), "ttft_s": ttft,
           "static_ttft_note": static_ttft_note(ttft, batch, "the continuously batched cost below is what a server "
                                                "meets" if cont is not None else "a server batching continuously "
                                                "(a serving engine) keeps the first token within it"),
           "cost_per_mtok_input_usd": finite(c_in), "cost_per_mtok_output_usd": finite(c_out),
           "margin": margin, "utilization": utilization,
           "price_per_mtok_input_usd": finite(c_in * scale), "price_per_mtok_output_usd": finite(c_out * scale),
           "output_input_ratio": finite(c_out / c_in),
           # the static batch's whole request per output token, to set beside the continuously batched one
           "cost_per_mtok_output_request_usd": finite(
               g.costs_per_mtok(su.hardware.price_usd_per_hour)["cost_per_mtok_output_request_usd"][li, bi]),
           "continuously_batched": cont,
           # what the market bills for the same request (specs/list_prices), beside the implied prices above
           "list_prices": request_list_prices(su.model.id, input_len, output_len)}
    return PriceResult(setup=su, result=res)


def _continuous(su, g, rank, target, input_len, output_len, scale, draft) -> dict | None:
    """The same target met by a server that batches continuously (by_concurrency.cheapest_continuous): a whole
    request's cost per output token there, and the price at the same utilization and margin."""
    c = cheapest_continuous(su, g, rank, target, input_len, output_len, draft)
    if c is None:
        return None
    cost = c["cost_per_mtok_output_request_usd"]
    return {**continuous_fields(c), "chips": c["chips"], "cost_per_mtok_output_request_usd": cost,
            "price_per_mtok_output_request_usd": finite(cost * scale)}
