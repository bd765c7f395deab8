"""The --explain texts of the serving-economics questions: one `explain_<result>` per analysis result (hyperbola,
slowmode, pareto, input vs output prices, context, fleet, provider price), read from the result alone."""
from __future__ import annotations

from tokenmath.base import units as u
from tokenmath.engine.economics import HOURS_PER_YEAR, usd_per_gib_hour, usd_per_s
from tokenmath.faces.explain_kv import kv_kinds_terms
from tokenmath.faces.names import chip_label, name_ids
from tokenmath.specs.kv_cache import index_key_bytes, kv_main_values, recurrent_state_values
from tokenmath.analyses.serving.context import Context
from tokenmath.analyses.serving.fleet import Fleet
from tokenmath.analyses.serving.hyperbola import Hyperbola
from tokenmath.analyses.serving.input_vs_output import Prices
from tokenmath.analyses.serving.pareto import Pareto
from tokenmath.analyses.serving.provider_price import PriceResult
from tokenmath.analyses.serving.slowmode import SlowMode


def explain_hyperbola(h: Hyperbola) -> str:
    su = h.setup
    m, hw = su.model, su.hardware
    L = [f"Decode cost vs batch: {m.name} on {su.chips} x {chip_label(hw)}, context {h.context:,} tokens per sequence",
         f"  {su.engine_note}"]
    L.append(f"  batch 1: weight fetch {u.seconds(h.weight_fetch_s_b1)} of a {u.seconds(float(h.step_s[0]))} step "
             f"({h.weight_share[0]:.0%} of it); every sequence added shares that fetch")
    L.append(f"  per-token time = step / B: {u.seconds(float(h.per_token_s[0]))} at B=1, "
             f"{u.seconds(float(h.per_token_s[-1]))} at B={int(h.batch[-1])} (largest that fits)")
    if h.critical_batch:
        where = "inside" if h.critical_batch_fits else "beyond"
        L.append(f"  critical batch ~{h.critical_batch}: the weight matmuls turn compute-bound "
                 f"(FLOPs per weight byte reach the ridge; {where} what memory allows: max batch {h.max_batch})")
    else:
        L.append("  the weight matmuls never turn compute-bound")
    if h.floor_bottleneck == "memory":
        L.append("  at this context the whole step stays memory-bound: KV reads grow with the batch as fast as FLOPs")
    floor_cost = h.floor_cost_per_mtok_output_usd
    L.append(f"  floor as B -> infinity: {u.seconds(h.floor_per_token_s)} per token ({h.floor_bottleneck}-bound)"
             + (f" = ${floor_cost:.4g} per Mtok" if floor_cost else ""))
    if h.experts_touched is not None:
        mid = min(len(h.batch) - 1, 15)
        L.append(f"  MoE: experts read per layer {h.experts_touched[0]:.1f} at B=1, "
                 f"{h.experts_touched[mid]:.1f} at B={int(h.batch[mid])}, "
                 f"{h.experts_touched[-1]:.1f} at B={int(h.batch[-1])} of {m.n_experts} "
                 "(E(1-(1-k/E)^B): small batches fetch few experts)")
    cost = h.cost_per_mtok_output_usd
    if cost is not None:
        L.append(f"  $/Mtok = per-token time x {su.chips} chips x ${hw.price_usd_per_hour}/h / 3600 x 1e6: "
                 f"${cost[0]:.4g} at B=1 -> ${cost[-1]:.4g} at B={int(h.batch[-1])}")
    return "\n".join(L)


def explain_slowmode(s: SlowMode) -> str:
    kind = "per request" if s.per_request else "per output token"
    L = [f"Slow mode for {s.setup.model.name} on {chip_label(s.setup.hardware)}: cheapest cost for a latency budget {kind}",
         f"  {s.setup.engine_note}"]
    for r in s.rows:
        if r["feasible"]:
            L.append(f"  budget {u.seconds(r['budget_s']):>8}: {r['cost_label']} with {r['chips']} chips ({r['layout']}), "
                     f"batch {r['batch']}{' (memory-limited)' if r['memory_limited'] else ''}, step {u.seconds(r['decode_step_s'])}"
                     + _saving_text(r["saving_vs_tightest"], r["budget_s"]))
        else:
            L.append(f"  budget {u.seconds(r['budget_s']):>8}: infeasible: {r['reason']}")
    if s.saturation_budget_s:
        t = s.saturation
        L.append(f"  beyond ~{u.seconds(s.saturation_budget_s)} waiting buys nothing (the cheapest cost falls by less "
                 f"than 1% beyond it; {t['layout']}, batch {t['batch']}, step {u.seconds(t['decode_step_s'])}"
                 f"{_saving_text(t['saving_vs_tightest'], None)}): {s.why}")
    f = s.fastest
    if f is not None:
        saves = (f"; waiting until ~{u.seconds(s.saturation_budget_s)} saves {f['saturation_saves']:.0%} of it"
                 if f.get("saturation_saves") is not None and s.saturation_budget_s else "")
        L.append(f"  the fastest point: {u.seconds(f['latency_s'])} {kind} with {f['chips']} chips ({f['layout']}), "
                 f"batch {f['batch']}, at {f['cost_label']}{saves}")
    return "\n".join(L)


def _saving_text(v: dict, budget_s: float | None) -> str:
    """'; 3.2x cheaper than within 10 ms (saves 69%)' from slowmode's saving_vs_tightest; at the reference budget
    itself, that it is the reference."""
    if budget_s == v["reference_budget_s"]:
        return "; the tightest budget met: the reference for the savings below"
    return (f"; {v['cost_ratio']:.3g}x cheaper than within {u.seconds(v['reference_budget_s'])} "
            f"(saves {v['saving']:.0%})")


def explain_pareto(p: Pareto) -> str:
    f = p.frontier
    L = [f"Pareto frontier on {p.chips} x {chip_label(p.setup.hardware)} for {p.setup.model.name} "
         f"({len(p.points)} feasible (layout, batch) points, {len(f)} on the frontier)", f"  {p.setup.engine_note}"]
    L.append("  per user: 1 / decode step; per chip: batch x output / (TTFT + output x step) / chips")
    if f:
        a, b = f[0], f[-1]
        L.append(f"  most interactive: {a['output_tokens_per_s_per_user']:,.0f} tok/s/user at "
                 f"{a['output_tokens_per_s_per_chip']:,.0f} tok/s/chip ({a['layout']}, batch {a['batch']})")
        L.append(f"  most productive: {b['output_tokens_per_s_per_chip']:,.0f} tok/s/chip at "
                 f"{b['output_tokens_per_s_per_user']:,.1f} tok/s/user ({b['layout']}, batch {b['batch']})")
        L.append("  moving along the frontier trades latency for cost: more concurrent sequences share each "
                 "weight fetch until memory (KV) or compute runs out")
    return "\n".join(L)


def pareto_text(p: Pareto) -> str:
    """The default text: the explanation, then the frontier as a table (about 20 rows)."""
    rows = ["$/Mtok: whole request (prefill + decode chip time) per output token",
            f"{'tok/s/user':>11} {'tok/s/chip':>11} {'$/Mtok':>9}  layout               batch  bound"]
    step = max(1, len(p.frontier) // 20)
    shown = p.frontier[::step] + ([p.frontier[-1]] if (len(p.frontier) - 1) % step else [])
    for f in shown:
        rows.append(f"{f['output_tokens_per_s_per_user']:>11,.1f} {f['output_tokens_per_s_per_chip']:>11,.0f} "
                    f"{u.usd(f['cost_per_mtok_output_request_usd']) if f['cost_per_mtok_output_request_usd'] is not None else 'n/a':>9}  "
                    f"{f['layout']:<20} {f['batch']:>5}  {f['bottleneck']}")
    return explain_pareto(p) + "\n" + "\n".join(rows)


_PRE = {"compute": "each weight meets all B x L prompt tokens at once, near peak FLOP/s",
        "memory": "the prompts are too short to reuse each weight read",
        "communication": "its collectives outlast its arithmetic", "overhead": "fixed launch and sync time dominates"}
_DEC = {"memory": "every weight (and the KV) is fetched for only B tokens per step, so an output token holds the chip "
                  "far longer than an input token",
        "compute": "the batch is large enough that an output token costs about an input token's FLOPs (plus attention "
                   "over its context), so the ratio falls towards 1",
        "communication": "its collectives are paid for only B tokens per step",
        "overhead": "the fixed per-layer launch and sync time of a step is shared by only B tokens"}


def _why_prices(rows: list[dict], speed_set: bool) -> list[str]:
    """One line per (prefill, decode) bottleneck pair found, naming the contexts it holds for."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        if r["fits"]:
            groups.setdefault((r["bottleneck_prefill"], r["bottleneck_decode"]), []).append(r["input_len"])
    out = []
    for (pre, dec), ctx in groups.items():
        at = "every context" if len(groups) == 1 else "context " + ", ".join(f"{c:,}" for c in ctx)
        hint = ("; a speed per user (--min-tokens-per-s-per-user) picks a smaller, interactive batch"
                if dec == "compute" and not speed_set else "")
        out.append(f"  why ({at}): prefill is {pre}-bound ({_PRE.get(pre, pre)}); decode is {dec}-bound "
                   f"({_DEC.get(dec, dec)}{hint}).")
    return out


def explain_prices(p: Prices) -> str:
    su = p.setup
    speed = (f", batch: the largest giving >= {p.min_tokens_per_s_per_user:g} tokens/s per user"
             if p.min_tokens_per_s_per_user is not None else "")
    L = [f"Cost of input vs output tokens: {su.model.name} on {su.chips} x {chip_label(su.hardware)}{speed}"]
    for r in p.rows:
        if not r["fits"]:
            L.append(f"  context {r['input_len']:>7,}: " + r.get("reason", "does not fit at batch 1"))
            continue
        L.append(f"  context {r['input_len']:>7,}, batch {r['batch']:>4}: input {r['input_label']}, output {r['output_label']}"
                 f" -> output/input = {r['output_input_ratio']:.1f}x; cached-hit floor {r['cached_label']}"
                 f" ({r['cached_input_tier'].replace('_', ' ')})")
    L.append("  output/input = prompt tokens/s of prefill / output tokens/s of decode (the same chips, either job)")
    L.extend(_why_prices(p.rows, p.min_tokens_per_s_per_user is not None))
    names = ", ".join(f"{t.name} ({u.bytes_(t.capacity_bytes_per_chip)}/chip"
                      + (f", {u.rate(t.reload_bw_per_chip, 'B/s')} reload" if not t.in_place else "")
                      + (f", ${usd_per_gib_hour(t.usd_per_byte_s):.4g}/GiB-h" if t.usd_per_byte_s is not None and t.id != "hbm"
                         else ", the chip's $/s per HBM byte" if t.in_place else "") + ")" for t in p.tiers)
    L.append(f"  cached input = the cheaper of recomputing it (the input price) and holding its KV for "
             f"{p.cache_ttl_s:g} s in the cheapest tier that holds the batch's prompts and reloads them before their "
             f"prefill would finish: {names}")
    for n in p.notes:
        L.append(f"  note: {name_ids(n, su.hardware, su.model)}")
    return "\n".join(L)


def explain_context(c: Context) -> str:
    su = c.setup
    m = su.model
    how = (f"MLA latent (kv_lora {m.kv_lora_rank} + rope {m.qk_rope_head_dim})" if m.is_mla
           else f"2 x {m.kv_heads} KV heads x {m.hd}")
    L = [f"Context costs for {m.name} on {su.chips} x {chip_label(su.hardware)} ({su.precision.kv.name} KV)", f"  {su.engine_note}"]
    local = "chunked-attention layers keep only their current chunk of" if m.local_kind == "chunked" else \
        "sliding layers stop growing at"
    layers = f"{m.n_attention_layers} {'attention ' if m.n_linear_layers else ''}layers"
    per = f"{kv_main_values(m)} values x {layers} x {su.precision.kv.bytes:g} B"
    if m.has_full_shapes:
        how, per = kv_kinds_terms(m, su.precision.kv.bytes)
    if m.is_sparse_attention:
        per = (f"({kv_main_values(m)} values x {su.precision.kv.bytes:g} B + indexer key {m.index_head_dim} x FP8 "
               f"+ scales = {index_key_bytes(m):g} B) x {layers}")
    L.append(f"  KV per token = {how} = {per} = {u.bytes_(c.kv_bytes_per_token)}"
             + (f"; {m.n_sliding_layers} {local} {m.sliding_window} tokens" if m.n_sliding_layers else ""))
    L.extend(_context_design_lines(m, c))
    window = m.max_context
    mc = (f"at most {c.max_context_at_batch:,} tokens of context" if c.max_context_at_batch
          else "any context (every layer's KV is capped by its window)")
    if c.max_context_at_batch and window and c.max_context_at_batch > window:
        mc += f" by memory, but the model attends to {window:,} at most (its max_position_embeddings)"
    L.append(f"  at {c.context:,} tokens: at most {c.max_batch_at_context} sequences fit; at batch {c.batch}: {mc}")
    cost = (f", ${c.decode_usd_per_mtok_at_context:,.4g} per Mtok of output" if c.decode_usd_per_mtok_at_context
            is not None else "")
    L.append(f"  decode at {c.context:,} tokens, batch {c.batch}: step {u.seconds(c.decode_step_s_at_context)}{cost}"
             + ("" if c.fits_at_context else " (does not fit in memory: a bound, not a configuration)"))
    if c.crossover_context:
        beyond = c.max_context_at_batch and c.crossover_context > c.max_context_at_batch
        L.append(f"  KV read per decode step equals the weight read at ~{c.crossover_context:,} tokens of context "
                 f"(batch {c.batch}): beyond it, context, not model size, drives the cost"
                 + (" (beyond what fits at this batch)" if beyond else ""))
    else:
        L.append(f"  KV reads stay below weight reads at batch {c.batch} over the range evaluated")
    L.extend(f"  note: {name_ids(n, su.hardware, m)}" for n in c.notes if n != su.engine_note)
    return "\n".join(L)


def _context_design_lines(m, c: Context) -> list[str]:
    """What the attention design does to the context limit: recurrent state (fixed per sequence) and sparse reads."""
    L = []
    if m.n_linear_layers:
        st, conv = recurrent_state_values(m)
        L.append(f"  + {m.n_linear_layers} recurrent {m.linear_kind} layers keep no KV: a fixed state of "
                 f"{m.linear_heads} x {m.linear_key_dim} x {m.linear_value_dim} + conv {conv:,} = {st + conv:,} values "
                 f"per layer, {u.bytes_(c.state_bytes_per_sequence)} per sequence at any context (read and written "
                 "once per decode step); only the attention layers' KV grows with context")
    if m.is_sparse_attention:
        L.append(f"  sparse attention: each decode step reads every cached index key ({m.index_head_dim} values per "
                 f"token per layer) but only the top {m.index_topk:,} tokens' latents, so past {m.index_topk:,} tokens "
                 "a step's KV read grows by the index keys alone; memory still holds every token's latent")
    return L


def explain_fleet(f: Fleet) -> str:
    r = f.result
    hw = f.setup.hardware
    L = [f"Fleet for {r['demand_output_tokens_per_s']:,.3g} output tokens/s of {f.setup.model.name} on {chip_label(hw)} "
         f"(>= {r['min_tokens_per_s_per_user']:g} tok/s per user, {r['input_len']:,} in / {r['output_len']:,} out)",
         f"  {f.setup.engine_note}"]
    L.append(f"  replica: {r['replica_chips']} chips ({r['layout']}), batch {r['batch']}, "
             f"{r['replica_output_tokens_per_s']:,.0f} output tok/s, {r['tokens_per_s_per_user']:,.1f} tok/s per user, "
             f"TTFT {u.seconds(r['ttft_s'])} (the whole batch's prefill: a static batch)")
    if r.get("static_ttft_note"):
        L.append(f"  note: {r['static_ttft_note']}")
    L.append(f"  replicas = ceil({r['demand_output_tokens_per_s']:,.4g} / {r['replica_output_tokens_per_s']:,.0f}) = "
             f"{r['replicas']:,}; chips = {r['chips']:,}; scale-up domains of {r['domain_size']}: {r['domains']:,}")
    if r["megawatts"] is not None:
        L.append("  power = " + _fleet_power(r))
    if r["usd_per_year"] is not None:
        L.append(f"  cost = {r['chips']:,} chips x ${hw.price_usd_per_hour}/h x {HOURS_PER_YEAR} h = "
                 f"${r['usd_per_year']:,.0f} per year (${r['fleet_cost_per_mtok_output_usd']:.4g} per Mtok output over the "
                 f"demand; one replica at full load ${r['cost_per_mtok_output_request_usd']:.4g} per Mtok, whole request)")
    c = r.get("continuously_batched")
    if c is not None:
        L.append(f"  the replica above is a static batch (its speed the decode alone); batching continuously, the "
                 f"prompts admitted among the decodes slow every user: {c['replica_chips']} chips ({c['layout']}) at "
                 f"{c['concurrency']:,} users, {c['tokens_per_s_per_user']:,.1f} tok/s per user, TTFT "
                 f"{u.seconds(c['ttft_s'])}, {c['replica_output_tokens_per_s']:,.0f} output tok/s -> {c['replicas']:,} "
                 f"replica{'' if c['replicas'] == 1 else 's'}, {_fleet_size(c)}"
                 " (prefill on its own chips avoids the slowdown: plan --disaggregated)")
    elif f.setup.engine is not None:
        L.append("  batching continuously, no traced replica meets the speed target (the prompts admitted among the "
                 "decodes slow every user below it)")
    d = r.get("disaggregated")
    if d is not None:
        dec, pre = d["decode"], d["prefill"]
        L.append(f"  prefill on chips of its own: decode {dec['instances']:,} x {dec['instance_chips']} chips "
                 f"({dec['layout']}, batch {dec['batch']:,}, {dec['tokens_per_s_per_user']:,.1f} tok/s per user, "
                 f"{dec['instance_output_tokens_per_s']:,.0f} output tok/s each) + prefill {pre['instances']:,} x "
                 f"{pre['instance_chips']} chips ({pre['layout']}, batches of {pre['batch']:,} prompts in "
                 f"{u.seconds(pre['ttft_s'])}, {pre['instance_prompt_tokens_per_s']:,.0f} prompt tok/s each) = "
                 f"{_fleet_size(d)}; KV moved between the pools {u.rate(d['kv_transfer_bytes_per_s'], 'B/s')}")
    return "\n".join(L)


def _fleet_power(r: dict) -> str:
    """The megawatts of fleet's answer written out, on the basis the answer gives (whole nodes, or chip TDP)."""
    p = r["power"]
    if p["basis"] == "node":
        return (f"{r['nodes']:,} nodes (ceil({r['chips']:,} chips / {p['node_chips']})) x {p['node_kw']:g} kW "
                f"({p['system']}: whole system, vendor's max) x PUE {p['pue']:g} = {r['megawatts']:,.2f} MW")
    return (f"{r['chips']:,} x {p['chip_tdp_w']:g} W x PUE {p['pue']:g} = {r['megawatts']:,.2f} MW ({p['why']})")


def _fleet_size(x: dict) -> str:
    """'N chips, M MW, $ per year' of one of fleet's sizings (MW and $ when the chip has a TDP and a price)."""
    return (f"{x['chips']:,} chips" + (f", {x['megawatts']:,.2f} MW" if x["megawatts"] is not None else "")
            + (f", ${x['usd_per_year']:,.0f} per year" if x["usd_per_year"] is not None else ""))


def explain_price(p: PriceResult) -> str:
    r = p.result
    su = p.setup
    return "\n".join([
        f"Serving {su.model.name} on {chip_label(su.hardware)} at >= {r['min_tokens_per_s_per_user']:g} tokens/s per user "
        f"({r['input_len']:,} in / {r['output_len']:,} out)",
        f"  {su.engine_note}",
        f"  cheapest layout meeting the target: {r['layout']} on {r['chips']} chips, batch {r['batch']}, "
        f"decode step {u.seconds(r['decode_step_s'])}, prefill of the whole batch {u.seconds(r['ttft_s'])} "
        "(a static batch)",
        *([f"  note: {r['static_ttft_note']}"] if r.get("static_ttft_note") else []),
        f"  $/s = {r['chips']} x ${su.hardware.price_usd_per_hour}/h / 3600 = "
        f"{usd_per_s(r['chips'], su.hardware.price_usd_per_hour):.5f}",
        f"  output cost (decode only) = $/s x step / batch x 1e6 = ${r['cost_per_mtok_output_usd']:.4g}/Mtok; "
        f"input cost = $/s x TTFT / (batch x input) x 1e6 = ${r['cost_per_mtok_input_usd']:.4g}/Mtok",
        f"  price = cost / (utilization {r['utilization']:g} x (1 - margin {r['margin']:g})): "
        f"input ${r['price_per_mtok_input_usd']:.4g}, output ${r['price_per_mtok_output_usd']:.4g} per Mtok "
        f"(output/input {r['output_input_ratio']:.2f}x)",
        *_price_continuous(r), *_price_listed(r)])


def _price_listed(r: dict) -> list[str]:
    lp = r.get("list_prices")
    if lp is None:
        return ["  list prices: none in the catalog for this model (tokenmath prices' data/api_prices.toml)"]
    lo, hi = lp["rows"][0], lp["rows"][-1]
    return [f"  list prices of this request per output token ({lp['basis']}): "
            f"${lo['request_usd_per_mtok_output']:.4g} ({lo['provider']}, {lo['model']}) to "
            f"${hi['request_usd_per_mtok_output']:.4g} ({hi['provider']}, {hi['model']}), {len(lp['rows'])} listed"]


def _price_continuous(r: dict) -> list[str]:
    c = r.get("continuously_batched")
    if c is None:
        return []
    return [f"  whole request per output token: static batch ${r['cost_per_mtok_output_request_usd']:.4g}/Mtok; batching "
            f"continuously at the same speed ({c['layout']}, {c['concurrency']:,} users, "
            f"{c['tokens_per_s_per_user']:,.1f} tok/s/user, TTFT {u.seconds(c['ttft_s'])}) "
            f"${c['cost_per_mtok_output_request_usd']:.4g}/Mtok, priced ${c['price_per_mtok_output_request_usd']:.4g}/Mtok"]
