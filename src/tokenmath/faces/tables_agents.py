"""The agent-capacity answer as text: the table (agents_text) and the arithmetic behind each row (explain_agents).
Formatting only: every figure comes from analyses/serving/agent_capacity.py's result."""
from __future__ import annotations

from tokenmath.base import units as u
from tokenmath.faces.plain_table import box_table, wrapped


def _n(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _title(d: dict) -> str:
    w, t = d["workload"], d["targets"]
    ttft = f", TTFT <= {u.seconds(t['ttft_s'])}" if t.get("ttft_s") else ""
    return (f"Agent sessions: {d['model']} at >= {t['min_tokens_per_s_per_user']:g} tokens/s per user{ttft}; a turn "
            f"{w['context_len']:,} tokens ({w['prefix_hit']:g} cached), {w['output_len']:,} out, {w['tool_gap_s']:g} s "
            f"tool gap; idle prefixes: {d['offload']}")


def _short_layout(layout: str) -> str:
    """'tp=2 pp=1 ep=32 dp=1' -> 'tp2 ep32' (the degrees above 1; 'tp1' when none): the table fits 100 columns."""
    parts = [p.replace("=", "") for p in layout.split() if not p.endswith("=1")]
    return " ".join(parts) or "tp1"


# the binding constraint in a word or two (the JSON and --explain keep analyses/serving/agents.failing's words)
_BINDS = {"KV memory (idle sessions)": "idle-KV", "KV memory (turns in flight)": "KV", "decode speed": "speed",
          "engine max_running": "max-running", "interconnect (decode step's communication)": "interconnect"}


def agents_text(r) -> str:
    d = r.to_dict()
    rows = []
    for s in d["systems"]:
        b = s["best"]
        if b is None:
            rows.append([s["system"], "-", "-", "-", "-", "-", "-", "-", "no fit", "-", "-"])
            continue
        wi = s["what_if"]
        rows.append([s["system"], _short_layout(b["layout"]), _n(b["sessions_per_gpu"]), _n(b["sessions_per_kw"], 2),
                     _n(b["sessions_per_usd_hour"], 2), _n(b["sessions_per_system"], 0), f"{s['system_chips']}",
                     _n(b["tokens_per_s_per_user"]), _BINDS.get(b["binding"], b["binding"]),
                     _n(wi["dram"]["sessions_per_system"], 0),
                     _n(wi["nvme"]["sessions_per_system"], 0)])
    head = ["system", "replica", "/GPU", "/kW", "/($/h)", "/system", "GPUs", "tok/s/user", "binds", "+DRAM",
            "+NVMe"]
    out = [wrapped("", _title(d)), box_table("", head, rows, right=(2, 3, 4, 5, 6, 7, 9, 10)),
           wrapped("  ", "sessions per GPU, per kW (whole nodes x PUE), per $/h of chips, per system; binds: what "
                   "stops one more turn in flight")]
    for s in d["systems"]:
        if s["best"] is None:
            out.append(wrapped("  note: ", f"{s['system']}: {s.get('why', 'does not fit')}"))
        p = s["power"]
        if p.get("basis") != "node":
            out.append(wrapped("  note: ", f"{s['system']}: {p.get('why')}"))
        if s.get("price_usd_per_chip_hour") is None:
            out.append(wrapped("  note: ", f"{s['system']}: no price in the catalog (per $/h left out; "
                                           "--price-usd-per-hour sets one)"))
    out += [wrapped("  note: ", n) for n in d["notes"]]
    out.append(f"  searched in {d['search_s']:.1f} s; --explain shows the arithmetic, --json every figure")
    return "\n".join(out)


def explain_agents(r) -> str:
    d = r.to_dict()
    w, t = d["workload"], d["targets"]
    L, c, n, O, G = w["context_len"], w["cached_tokens"], w["new_tokens"], w["output_len"], w["tool_gap_s"]
    lines = [_title(d), "",
             f"A turn: L = {L:,} prompt tokens, c = h L = {w['prefix_hit']:g} x {L:,} = {c:,} cached (held between "
             f"turns), n = {n:,} computed, O = {O:,} generated, then G = {G:g} s of tools.",
             "Sources: " + "; ".join(f"{k}: {v}" for k, v in w["sources"].items()), ""]
    for s in d["systems"]:
        b = s["best"]
        lines.append(f"{s['system']} ({s['system_chips']} x {s['chip']}):")
        if b is None:
            lines += [f"  {s.get('why')}", ""]
            continue
        C, T, R = b["concurrency"], b["turn_s"], b["reload_s"]
        if not C:       # even one turn in flight fails a constraint: no speed or TTFT to show
            lines += [f"  replica {b['layout']} ({b['replica_chips']} chips; traced: {', '.join(s['layouts_traced'])})",
                      f"  C = 0: one turn in flight already fails: {b['binding']} (at C = 1: KV pool "
                      f"{b['kv_pool_tokens']:,.0f} tokens, a running turn holds {b['kv_held_tokens_per_turn']:,.0f}, "
                      f"idle prefixes {b['idle_prefix_tokens']:,.0f} tokens)", ""]
            continue
        lines += [
            f"  replica {b['layout']} ({b['replica_chips']} chips; traced: {', '.join(s['layouts_traced'])})",
            f"  C = {C:,} turns in flight (the most meeting every constraint): TPOT {u.seconds(b['tpot_s'])} -> "
            f"{b['tokens_per_s_per_user']:.1f} tokens/s per user, TTFT {u.seconds(b['ttft_s'])}",
            f"  turn T = TTFT + (O - 1) x TPOT = {T:.2f} s; reload R = {R * 1e3:.1f} ms",
            f"  sessions S = C x (T + R + G) / (T + R) = {C:,} x ({T:.2f} + {R:.3f} + {G:g}) / ({T:.2f} + {R:.3f}) "
            f"= {b['sessions']:,.1f}",
            f"  KV pool {b['kv_pool_tokens']:,.0f} tokens; a running turn holds {b['kv_held_tokens_per_turn']:,.0f}; "
            f"HBM left for idle prefixes {b['hbm_free_tokens']:,.0f}; idle prefixes (S - C) x c = "
            f"{b['idle_prefix_tokens']:,.0f} tokens"]
        for tr in b["tiers"]:
            lines.append(f"    {tr['id']}: holds {tr['tokens']:,.0f} tokens ({tr['share']:.0%} of idle), reload link "
                         f"{tr['link_load']:.0%} busy")
        p = s["power"]
        kw = p.get("kw")
        lines += [
            f"  per GPU = S / {b['replica_chips']} = {_n(b['sessions_per_gpu'], 2)}; per system = S x "
            f"{b['replicas']} replicas = {_n(b['sessions_per_system'], 0)}",
            f"  power: {p.get('formula', p.get('why'))} = {_n(kw, 1)} kW -> per kW = {_n(b['sessions_per_kw'], 2)}",
            f"  price: ${s['price_usd_per_chip_hour']}/GPU-hour -> per $/h = {_n(b['sessions_per_usd_hour'], 2)}"
            if s.get("price_usd_per_chip_hour") else "  price: none in the catalog",
            f"  binds at C + 1 = {C + 1:,}: {b['binding']}",
            "  what-if: " + "; ".join(f"{v['tiers']} {_n(v['sessions_per_system'], 0)} ({v['binding']})"
                                      for v in s["what_if"].values()), ""]
    lines += [f"note: {x}" for x in d["notes"]]
    return "\n".join(lines)
