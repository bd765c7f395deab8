"""The text of `tokenmath kvcache` (no physics: the analysis' figures, laid out)."""
from __future__ import annotations

from tokenmath.base import units as u
from tokenmath.faces.names import chip_label, name_ids


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def kv_offload_text(r) -> str:
    d = r.to_dict()
    t, su = d["trace"], r.setup
    L = [f"Prefix reuse of {t['name']} ({t['requests']:,} requests over {t['duration_s'] / 60:,.1f} min, "
         f"{u.count(t['input_tokens'])} input tokens, {t['block_tokens']}-token blocks)",
         f"  on {su.chips} x {chip_label(su.hardware)} serving {su.model.name}",
         f"  the trace's own reuse (every block ever seen still held): {_pct(d['unbounded_hit_rate'])} of input tokens",
         "  hit rate by cache capacity (tokens): " + ", ".join(f"{u.count(c['capacity_tokens'])} {_pct(c['hit_rate'])}"
                                                      for c in d["curve"])]
    names = {x["tier"]: x["name"] for x in d["tiers"]}
    caps = {x["tier"]: x["capacity_tokens"] for x in d["tiers"]}
    for w in d["what_ifs"]:
        label = " + ".join(f"{names[k]} ({u.count(caps[k])} tokens)" for k in w["tiers"])
        L.append(f"  {label}: hit rate {_pct(w['hit_rate'])}, recomputed {_pct(w['recomputed'])}")
        for s in w["served"]:
            extra = ""
            if "reload_link_load" in s:
                cost = s.get("cost_per_mtok_hit_usd")
                extra = (f"; its links busy {_pct(s['reload_link_load'])} reloading at the trace's pace"
                         + (f"; a hit costs ${cost:.3g}/Mtok (held + moved)" if cost is not None else ""))
            L.append(f"    {names[s['tier']]} serves {_pct(s['share_of_input'])}{extra}")
        if w["reload_binds"]:
            L.append(f"    reload bandwidth binds: {', '.join(names[k] for k in w['reload_binds'])} cannot feed its "
                     "hits at the trace's pace")
    if d["list_cached_input"]:
        L.append("  list cached-input prices: " + ", ".join(
            f"{p['provider']} ${p['cached_input_usd_per_mtok']:g} ({p['cached_share_of_input']:.0%} of input)"
            for p in d["list_cached_input"]))
    L.extend(f"  note: {name_ids(n, su.hardware, su.model)}" for n in d["notes"])
    return "\n".join(L)
