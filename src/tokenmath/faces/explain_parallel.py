"""The texts of the parallelism questions (plan, moe): the default text and the --explain derivation of each."""
from __future__ import annotations

from tokenmath.base import units as u
from tokenmath.faces.names import name_ids, system_label
from tokenmath.analyses.serving.moe import MoeReport
from tokenmath.analyses.serving.plan import Plan


# ---- plan --------------------------------------------------------------------------------------------------------
def _row(p: dict, w: int = 22) -> str:
    c = p["cost_per_mtok_output_request_usd"]
    return (f"{p['layout']:<{w}} {p['batch']:>6} {u.usd(c) if c is not None else 'n/a':>9} "
            f"{p['output_tokens_per_s_per_user']:>9,.1f} {p['output_tokens_per_s_per_chip']:>9,.0f} "
            f"{u.seconds(p['ttft_s']):>9} {p['communication_share']:>6.0%}  {p['bottleneck']}")


def _head(w: int = 22) -> str:
    return f"{'layout':<{w}} {'batch':>6} {'$/Mtok':>9} {'tok/s/u':>9} {'tok/s/c':>9} {'TTFT':>9} {'comm':>6}  bound"


def _width(p: Plan) -> int:
    """The layout column: 22 characters, wider when a layout names its attention sharding (tp=8 ... attn=batch)."""
    return max([22] + [len(q["layout"]) for q in (p.best, *p.runner_ups, *p.frontier)])


def _attention_line(b: dict) -> str | None:
    """What the best point's attention sharding moves (None for heads)."""
    a = b.get("attention_sharding", "heads")
    if a == "batch":
        return ("  attention sharded over the batch (Pope et al. 2022): projections split by heads, each of the tp ranks "
                "holds the whole KV of ceil(S / tp) sequences (no copies); an all-to-all of q before the core and of "
                "its output after it per attention layer (attn_alltoall), TP's all-reduces kept")
    if a == "dp":
        return ("  data-parallel attention (SGLang --enable-dp-attention): attention weights on every rank, each rank "
                "runs attention and holds the KV of its ceil(S / tp) sequences; the MLP/MoE stays tensor-parallel: "
                "all-gather of the hidden states before it and reduce-scatter after it per layer (dp_attn_gather)")
    return None


def plan_text(p: Plan) -> str:
    su = p.setup
    hw = su.hardware
    b = p.best
    L = [f"{su.model.name} on {p.chips} x {system_label(hw)}: {getattr(hw, 'domains', 1)} domain(s) of "
         f"{hw.scaleup_domain}, {p.input_len:,} in / {p.output_len:,} out"]
    tg = []
    if p.targets["ttft_s"] is not None:
        tg.append(f"TTFT <= {p.targets['ttft_s'] * 1e3:g} ms")
    if p.targets["min_tokens_per_s_per_user"] is not None:
        tg.append(f">= {p.targets['min_tokens_per_s_per_user']:g} tok/s per user")
    L.append(f"searched {p.layouts_evaluated} layouts x batch axis = {p.points_evaluated:,} points in one engine call "
             f"({p.search_s * 1e3:,.0f} ms); {p.points_fitting:,} fit; targets: {', '.join(tg) or 'none'}")
    L.append("")
    L.append("$/Mtok: whole request (prefill + decode chip time) per output token")
    w = _width(p)
    L.append("best:        " + _head(w))
    L.append("             " + _row(b, w))
    br = b.get("communication_breakdown_s") or {}
    if br:
        L.append("  communication per decode step: " + ", ".join(f"{k} {u.seconds(v)}" for k, v in br.items())
                 + f" = {b['communication_share']:.0%} of the {u.seconds(b['decode_step_s'])} step")
    L.append(f"  KV per chip {u.bytes_(b['kv_per_chip_bytes'])}, memory per chip {u.bytes_(b['memory_per_chip_bytes'])}")
    c = p.best_by_concurrency
    if c is not None:
        # the static batch above prefills whole batches; a continuously batching server meets the targets so
        cost = c.get("cost_per_mtok_output_request_usd")
        L.append(f"  static batch (TTFT = the whole batch's prefill); batching continuously: {c['layout']} at "
                 f"{c['concurrency']:,} users, {c['output_tokens_per_s_per_user']:,.1f} tok/s/user, TTFT "
                 f"{u.seconds(c['ttft_s'])}" + (f", {u.usd(cost)}/Mtok" if cost is not None else "")
                 + " (By concurrency, below)")
    if p.runner_ups:
        L.append("runner-ups:  " + _head(w))
        for r in p.runner_ups:
            L.append("             " + _row(r, w))
    f = p.frontier
    if f:
        L.append(f"frontier ({len(f)} points, throughput vs interactivity):")
        step = max(1, len(f) // 8)
        for q in f[::step] + ([f[-1]] if (len(f) - 1) % step else []):
            L.append("             " + _row(q, w))
    d = p.disaggregated
    if d:
        L.append("")
        L.append(_disagg_text(d))
    for n_ in p.notes:
        L.append(f"note: {name_ids(n_, hw, su.model)}")
    return "\n".join(L)


def _disagg_text(d: dict) -> str:
    pr, de = d["prefill"], d["decode"]
    L = ["disaggregated serving (separate prefill and decode pools):"]
    L.append(f"  decode pool: {d['decode_chips']} chips, {de['layout']}, batch {de['batch']}: "
             f"{d['decode']['decode_output_tokens_per_s']:,.0f} output tok/s, {de['output_tokens_per_s_per_user']:,.1f} tok/s "
             f"per user -> {d['requests_per_s_per_decode_instance']:,.2f} requests/s")
    L.append(f"  prompts arrive at {d['prompt_tokens_per_s']:,.0f} tok/s; prefill pool ({pr['layout']}, batch {pr['batch']}) "
             f"does {pr['prompt_tokens_per_s_per_chip']:,.0f} prompt tok/s per chip, TTFT {u.seconds(pr['ttft_s'])}")
    L.append(f"  prefill chips = {d['prompt_tokens_per_s']:,.0f} / {pr['prompt_tokens_per_s_per_chip']:,.0f} = "
             f"{d['prefill_chips']:,.2f} -> prefill : decode = {d['prefill_to_decode_chip_ratio']:.3f} : 1")
    L.append(f"  KV moved per request {u.bytes_(d['kv_bytes_per_request'])}"
             + (f" ({d['kv_transfer_share_of_scaleout']:.1%} of the decode pool's scale-out bandwidth)"
                if d["kv_transfer_share_of_scaleout"] is not None else ""))
    c, cc = d["cost_per_mtok_output_request_usd"], d["colocated_cost_per_mtok_output_request_usd"]
    if c is not None and cc is not None:
        L.append(f"  cost {u.usd(c)}/Mtok output (both pools) vs {u.usd(cc)} colocated")
    else:
        L.append(f"  {d['chip_s_per_mtok_output']:,.0f} chip-s/Mtok output (both pools) vs "
                 f"{d['colocated_chip_s_per_mtok_output']:,.0f} colocated")
    return "\n".join(L)


def explain_plan(p: Plan) -> str:
    su = p.setup
    hw = su.hardware
    b = p.best
    L = [plan_text(p), "", "How the best point is derived:"]
    L.append(f"  system: {hw.name}; domain {hw.scaleup_domain} chips at {hw.scaleup_bw / 1e9:,.0f} GB/s per chip "
             f"(one way), scale-out {hw.scaleout_bw / 1e9 if hw.scaleout_bw else float('nan'):,.1f} GB/s per chip; "
             f"latency {hw.scaleup_latency * 1e6:g} us (+{hw.scaleout_latency * 1e6:g} us across domains)")
    L.append(f"  per user: 1 / decode step = 1 / {u.seconds(b['decode_step_s'])} = {b['output_tokens_per_s_per_user']:,.1f} tok/s")
    L.append(f"  per chip: batch x output / (TTFT + output x step) / chips = {b['batch']} x {p.output_len} / "
             f"({u.seconds(b['ttft_s'])} + {p.output_len} x {u.seconds(b['decode_step_s'])}) / {p.chips} = "
             f"{b['output_tokens_per_s_per_chip']:,.1f} tok/s")
    if b["cost_per_mtok_output_request_usd"] is not None:
        L.append(f"  $/Mtok (whole request) = ${hw.price_usd_per_hour}/chip-h / 3600 / {b['output_tokens_per_s_per_chip']:,.1f} tok/s/chip x 1e6 "
                 f"= {u.usd(b['cost_per_mtok_output_request_usd'])}")
    L.append(f"  communication: {b['communication_share']:.1%} of the decode step is exposed communication "
             f"({u.seconds(b['communication_s'])}); its worst-placed replica spans {b['domains_spanned']} domain(s)")
    L.append("  TP: 2 all-reduces of T x d_model activations per layer over tp; EP: dispatch + combine all-to-all of "
             "T x top-k x d_model per MoE layer over tp x ep; PP: (pp-1) hand-offs per token; DP: independent replicas")
    a = _attention_line(b)
    if a:
        L.append(a)
    return "\n".join(L)


# ---- moe ---------------------------------------------------------------------------------------------------------
def _moe_table(r: MoeReport) -> str:
    L = [f"{'layout':<26}{'tp/pp/ep/dp':>13} {'fits':>5} {'ms/token':>9} {'tok/s/user':>11} {'tok/s/chip':>11} "
         f"{'comm':>6} {'KV/chip':>9} {'mem/chip':>9} {'domains':>8}"]
    for p in r.rows:
        lay = f"{p['tp']}/{p['pp']}/{p['ep']}/{p['dp']}"
        if p["fits"]:
            L.append(f"{p['name']:<26}{lay:>13} {'yes':>5} {p['decode_step_s'] * 1e3:>9.2f} "
                     f"{p['output_tokens_per_s_per_user']:>11,.1f} {p['output_tokens_per_s_per_chip']:>11,.0f} "
                     f"{p['communication_share']:>6.0%} {u.bytes_(p['kv_per_chip_bytes']):>9} "
                     f"{u.bytes_(p['memory_per_chip_bytes']):>9} {p['domains_spanned']:>8}")
        else:
            L.append(f"{p['name']:<26}{lay:>13} {'no':>5} {'':>9} {'':>11} {'':>11} {'':>6} "
                     f"{u.bytes_(p['kv_per_chip_bytes']):>9} {u.bytes_(p['memory_per_chip_bytes']):>9} "
                     f"{p['domains_spanned']:>8}")
    return "\n".join(L)


def moe_text(r: MoeReport) -> str:
    su = r.setup
    hw, m = su.hardware, su.model
    f, a, c = r.fit, r.all_to_all, r.capacity
    L = [f"{m.name} on {r.chips} x {system_label(hw)}, domains of {hw.scaleup_domain}: batch {r.batch}, "
         f"context {r.context:,} ({r.input_len:,} in + {r.output_len:,} out)"]
    L.append(f"1. one domain ({f['domain_size']} chips, {u.bytes_(f['domain_usable_bytes'])} usable): experts "
             f"{u.bytes_(f['expert_weights_bytes'])} + other weights {u.bytes_(f['other_weights_bytes'])} + KV "
             f"{u.bytes_(f['kv_bytes'])} = {u.bytes_(f['need_bytes'])} -> "
             + ("fits" if f["fits_in_one_domain"] else f"does NOT fit (needs {f['domains_needed']} domains' HBM"
                + (", and replicated attention weights push the best in-domain layout over" if f["napkin_fits"] else "") + ")")
             + f"; best in-domain layout {f['domain_layout']}: {u.bytes_(f['memory_per_chip_bytes'])} of "
             f"{u.bytes_(f['memory_usable_per_chip_bytes'])} per chip")
    i = a["inside"]
    L.append(f"2. all-to-all per MoE layer (dispatch + combine of T x {a['top_k']} x {a['d_model']} x 2 B per rank, "
             f"{a['moe_layers']} MoE layers):")
    L.append(f"   inside one domain  ep={i['ep']:<5} T={i['tokens_per_rank']:<6} {u.seconds(i['per_layer_s']):>9} per layer, "
             f"{u.seconds(i['per_decode_step_s'])} per decode step")
    if a["across"]:
        x = a["across"]
        L.append(f"   across {x['domains']} domains  ep={x['ep']:<5} T={x['tokens_per_rank']:<6} {u.seconds(x['per_layer_s']):>9} "
                 f"per layer, {u.seconds(x['per_decode_step_s'])} per decode step")
    if a["same_ranks_split_over_two_domains"]:
        s = a["same_ranks_split_over_two_domains"]
        L.append(f"   same {s['ep']} ranks split over 2 domains   {u.seconds(s['per_layer_s']):>9} per layer "
                 f"({s['per_layer_s'] / i['per_layer_s']:.1f}x inside)")
    L.append(f"3. largest expert layer one domain hosts at this batch and context: {u.count(c['max_expert_params'])} "
             f"expert params ({u.count(c['max_expert_params_per_moe_layer'])} per MoE layer; this model has "
             f"{u.count(c['model_expert_params'])}, {c['ratio_to_model']:.2f}x) in {c['expert_dtype']}, layout {c['layout']}")
    L.append("4. TP vs EP vs PP on the same chips and batch (ms/token = decode step; tok/s/chip includes prefill):")
    L.append(_moe_table(r))
    for n_ in r.notes:
        L.append(f"note: {name_ids(n_, hw, m)}")
    return "\n".join(L)


def explain_moe(r: MoeReport) -> str:
    su = r.setup
    hw = su.hardware
    a = r.all_to_all
    i = a["inside"]
    L = [moe_text(r), "", "Derivations:"]
    L.append(f"  KV per sequence = {u.bytes_(r.fit['kv_bytes_per_sequence'])} at {r.context:,} tokens; x batch {r.batch} = "
             f"{u.bytes_(r.fit['kv_bytes'])}")
    L.append(f"  all-to-all inside: each of {i['ep']} ranks holds ceil({r.batch} / {i['ep']}) = {i['tokens_per_rank']} "
             f"tokens; payload = {i['tokens_per_rank']} x {a['top_k']} x {a['d_model']} x 2 B"
             + (f" x imbalance {a['ep_imbalance']:.3g} (busiest rank)" if a["ep_imbalance"] != 1 else "")
             + f" = {u.bytes_(i['payload_bytes_per_rank'])}; (p-1)/p x payload / (scale-up {hw.scaleup_bw / 1e9:,.0f} GB/s x "
             f"{su.efficiency.link_bw:g}) + latency, x 2 (dispatch + combine)")
    if a["across"]:
        L.append(f"  across: a rank whose domain holds c of the p ranks sends (p-c)/p of its payload over the scale-out "
                 f"link ({(hw.scaleout_bw or 0) / 1e9:,.1f} GB/s per chip) while the rest moves on scale-up; ranks sit "
                 f"on chips from a domain boundary and the slowest rank sets the time; + {hw.scaleout_latency * 1e6:g} us")
    L.append("  largest expert layer: (usable HBM - non-expert weights / tp - KV - activations) x domain chips / bytes "
             "per expert parameter, best tp")
    L.append("  table: one engine call over the layouts; communication share = exposed collectives + PP hand-offs over "
             "the decode step")
    return "\n".join(L)
