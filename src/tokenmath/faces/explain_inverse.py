"""The napkin derivation of a price deduction (tokenmath deduce --explain), from the analysis' own scenario."""
from __future__ import annotations

from tokenmath.analyses.inverse.deduce import Deduction
from tokenmath.base import units as u
from tokenmath.faces.names import chip_label, model_label


def explain_deduction(d: Deduction) -> str:
    s, o, sc = d.summary, d.observed, d.scenario
    L = [f"Deduce from input ${o.input_price:g}/Mtok and output ${o.output_price:g}/Mtok"
         + (f", cached ${o.cached_input_price:g}" if o.cached_input_price is not None else "")
         + (f", >{o.long_threshold:,.0f} tokens: ${o.long_input_price:g}/${o.long_output_price:g}" if o.long_threshold else "")
         + (f", {o.output_speed:g} tokens/s per user" if o.output_speed else "")]
    L.append("1. One scenario at the priors' middles (a napkin inversion):")
    L.append(f"  chip {chip_label(sc['hardware'])} at ${sc['usd_per_hour']:.3g}/h x cost factor {sc['cost_factor']:.2f}; margin "
             f"{sc['margin']:.0%}, utilization {sc['utilization']:.0%}: a token's price buys "
             f"price x (1 - m) x u / ($/chip-s) / cost_scale chip-seconds")
    cs = d.priors.cost_scale
    if cs == 1.0:
        L.append("  cost_scale 1.00: uncalibrated, prices are inverted as they are (without --uncalibrated, the scale "
                 "fitted on open-weight prices is used)")
    else:
        L.append(f"  cost_scale {cs:.2f}: list prices sit {cs:.2f}x {'above' if cs > 1 else 'below'} the closed form's "
                 "cost / (u (1 - m)) of a model of the true size at the priors' middles, so each price is divided by "
                 "it before the inversion (fitted on open-weight prices, leave-one-provider-out; --uncalibrated sets 1)")
    L.append(f"  input: ${o.input_price:g}/1e6 x {1 - sc['margin']:.2f} x {sc['utilization']:.2f} / "
             f"${sc['usd_per_chip_s']:.3g}/s / {d.priors.cost_scale:.2f} = {sc['chip_s_in']:.3g} chip-s per token")
    L.append(f"  prefill is compute-bound: N_active = chip-s x FLOP/s x MFU / 2 = {sc['chip_s_in']:.3g} x "
             f"{sc['peak']:.3g} x {sc['flops_eff']:.2f} / 2 = {u.count(sc['n_active_from_input'])} params")
    L.append(f"  output: {sc['chip_s_out']:.3g} chip-s per token; at batch {sc['batch']:.0f} a {u.count(sc['n_active_from_input'])} "
             f"dense model would cost {sc['chip_s_out_pred']:.3g} chip-s: the output/input price ratio "
             f"{o.output_price / o.input_price:.2f} says decode runs "
             + ("memory-bound (weights not fully amortized)" if sc["chip_s_out"] > 1.5 * sc["chip_s_in"] else "near the compute floor"))
    L.append(f"2. Monte Carlo over the priors ({s['samples']:,} samples, effective {s['effective_samples']:,.0f}), "
             "weighted by how well each reproduces the prices:")
    a = s["active_params_b"]
    L.append(f"  active params: {a['median']:.3g} B (80% interval {a['low']:.3g} - {a['high']:.3g} B)")
    t = s["total_params_b"]
    L.append(f"  total params:  {t['median']:.3g} B ({t['low']:.3g} - {t['high']:.3g} B); P(MoE) = {s['p_moe']:.0%}")
    L += calibration_lines(s)
    if s["kv_bytes_per_token"]:
        k = s["kv_bytes_per_token"]
        L.append(f"  KV bytes per token: {u.bytes_(k['median'])} ({u.bytes_(k['low'])} - {u.bytes_(k['high'])}), "
                 f"informed by {', '.join(s['kv_informed_by'])}")
    else:
        L.append("  KV bytes per token: not identified (give --cached-input-price, a long-context tier or --output-speed)")
    b = s["batch"]
    L.append(f"  decode batch: {b['median']:.0f} ({b['low']:.0f} - {b['high']:.0f}); P(decode memory-bound) = "
             f"{s['p_decode_memory_bound']:.0%}")
    L.append("  hardware posterior: " + ", ".join(f"{chip_label(k)} {v:.0%}" for k, v in s["hardware_posterior"].items()))
    L += [f"  TTFT curve: {note}" for note in s.get("ttft_curve_left_out", ())]
    return "\n".join(L)


KIND_WORDS = {"price": "input + output price", "cached": "cached-input price", "long_context": "long-context tier",
              "batch": "batch-API discount", "speed": "output speed", "ttft": "time to first token",
              "context_window": "context window", "hardware": "known hardware"}


def calibration_lines(s: dict) -> list[str]:
    """How the printed 80% interval of active params relates to the posterior's own (interval_calibration.py)."""
    c, own = s.get("interval_calibration"), s.get("active_params_b_posterior")
    if not c or not own or "active_params_b" not in c["scales"]:
        return []
    q = c["scales"]["active_params_b"]
    return [f"  80% intervals calibrated: the posterior's own ({own['low']:.3g} - {own['high']:.3g} B active) scaled "
            f"by q {q['q']:.2f}", f"    so 80% of {q['fit_rows']} endpoints of known size fall inside (set "
            f"'{c['evidence_set']}')"]


def _iv(iv, unit="B") -> str:
    return f"{iv['median']:.3g} {unit} ({iv['low']:.3g} - {iv['high']:.3g})"


def posterior_chart(s: dict, width: int = 40) -> list[str]:
    """The posterior of active params as text bars, one per log bin (edges in billions)."""
    p = s.get("active_params_posterior")
    if not p:
        return []
    e, w = p["edges_b"], p["weights"]
    top = max(w) or 1.0
    lo = next((i for i, x in enumerate(w) if x > 0.002), 0)
    hi = len(w) - next((i for i, x in enumerate(reversed(w)) if x > 0.002), 0)
    return [f"  {e[i]:>8.3g} - {e[i + 1]:<8.3g} B |{'#' * round(width * w[i] / top):<{width}}| {w[i]:.0%}"
            for i in range(lo, hi)]


def explain_api_deduction(r, explain: bool = False) -> str:
    """deduce --api-model: price only vs all evidence; with --explain, each evidence kind's narrowing, the sources,
    and the posterior chart."""
    ev = r.evidence
    L = [f"{ev.model} ({ev.provider}): ${ev.input_price:g} in / ${ev.output_price:g} out per Mtok"
         + (f"; the served architecture is {model_label(ev.catalog_id)}: {r.true_active_params_b:.3g} B active, "
            f"{r.true_total_params_b:.3g} B total" if r.true_active_params_b else "")]
    p0, s = r.price_only.summary, r.final.summary
    L.append(f"  price only:   active {_iv(p0['active_params_b'])}, x{r.price_only.width():.1f} wide")
    last = [x for x in r.steps if x.summary][-1]
    L.append(f"  all evidence: active {_iv(s['active_params_b'])}, x{last.width():.1f} wide "
             f"({', '.join(last.kinds)})")
    L.append(f"  total params: {_iv(s['total_params_b'])}; P(MoE) {s['p_moe']:.0%}")
    L += calibration_lines(s)
    if s.get("kv_bytes_per_token"):
        k = s["kv_bytes_per_token"]
        L.append(f"  KV bytes per token: {u.bytes_(k['median'])} ({u.bytes_(k['low'])} - {u.bytes_(k['high'])})")
    b = s["batch"]
    chip = next(iter(s["hardware_posterior"].items()))
    L.append(f"  decode batch: {b['median']:.0f} ({b['low']:.0f} - {b['high']:.0f}); likeliest chip {chip_label(chip[0])} "
             f"({chip[1]:.0%})" + (f"; replica {s['replica_chips']['median']:.0f} chips "
                                   f"({s['replica_chips']['low']:.0f} - {s['replica_chips']['high']:.0f})"
                                   if s.get("replica_chips") else ""))
    L.append(f"  the same question as flags: {r.flags()}")
    if ev.chips and not ev.usable_chips():
        L.append(f"  known hardware {', '.join(chip_label(c) for c in ev.chips)} has no $/chip-hour in the catalog: not used")
    if ev.sram and ev.speeds:
        L.append("  SRAM-based host: its speed is not a constraint (the HBM roofline does not describe it)")
    if not explain:
        return "\n".join(L)
    L.append("Which evidence narrowed the 80% interval of active params (each step adds one kind):")
    prev = None
    for st in r.steps:
        if st.error:
            L.append(f"  + {KIND_WORDS[st.added]:<22} refused: {st.error} -- left out")
            continue
        a, w = st.summary["active_params_b"], st.width()
        change = ("the starting interval" if not prev else f"x{prev / w:.2f} narrower" if w <= prev
                  else f"x{w / prev:.2f} WIDER (Monte Carlo: fewer effective samples, redrawn)")
        L.append(f"  + {KIND_WORDS[st.added]:<22} {_iv(a)}  x{w:.1f} wide, {change}")
        prev = w
    L.append("Evidence used (kind, date, source):")
    L += [f"  {k:<15} {d:<8} {src}" + ("  (gateway P50: recorded, not used)" if k == "gateway_speed" else "")
          for k, d, src in ev.sources]
    L.append("Posterior of active params (all evidence):")
    L += posterior_chart(s)
    L.append("Noise models: prices log-sd {:.2f}, speed and TTFT log-sd {:.2f}; TTFT, batch discount and context "
             "window are one-sided bounds (analyses/inverse/forward_model.py)".format(
                 r.final.priors.price_noise, r.final.priors.speed_noise))
    return "\n".join(L)


def validation_table(v) -> str:
    """deduce --validate: one line per validation set, with the issue's targets."""
    L = [f"Held out by provider (cost_scale refitted without each provider; {v.samples:,} samples per deduction)",
         f"  {'set':<50} {'rows':>4} {'prov':>4} {'cover80':>8} {'width':>7} {'error':>6}",
         f"  {'target':<50} {'':>4} {'':>4} {'>= 80%':>8} {'<= 5x':>7} {'<= 1.5x':>6}"]
    for s in v.scores:
        m = s.meets()
        mark = lambda k: "" if m[k] else "*"  # noqa: E731
        L.append(f"  {s.label:<50} {s.rows:>4} {s.providers:>4} {s.coverage_80:>7.0%}{mark('coverage_80'):1} "
                 f"{s.median_width:>6.1f}x{mark('median_width'):1} {s.median_error_factor:>5.2f}x"
                 f"{mark('median_error_factor')}")
    L.append("  * misses the target")
    return "\n".join(L)


def width_budget_table(ev, kinds, b) -> str:
    """Text of `deduce --api-model NAME --width-budget`: the 80% interval of active params with each hidden prior
    pinned to its middle (analyses/inverse/width_budget.py), widest-narrowing first."""
    lines = [f"{ev.model} ({ev.provider}), evidence: {', '.join(kinds)}",
             f"  priors as shipped:   active {_iv({'low': b.base_low_b, 'median': b.base_median_b, 'high': b.base_high_b})}"
             f"  x{b.base_width:.3g} wide",
             "  pinned to its middle (one at a time), width of the 80% interval and how much narrower:"]
    for p in sorted(b.pins, key=lambda p: (p.name.startswith("all "), -p.narrower)):
        iv = {"low": p.low_b, "median": p.median_b, "high": p.high_b}
        lines.append(f"    {p.name:<34} {_iv(iv)}  x{p.width:.3g} wide, x{p.narrower:.2f} narrower")
    lines.append(f"  The single unknown that narrows it most: {b.dominant().name}. A pin also moves the median (the "
                 "truth need not sit at the middle): this is the width budget, not a better answer.")
    return "\n".join(lines)


def explain_table_deduction(r: dict, explain: bool = False) -> str:
    """deduce --table-model: one provider-table endpoint, price alone, + speed, + TTFT against prompt length."""
    e = r["endpoint"]
    sizes = sorted(e["ttft"], key=lambda k: e["prompt_tokens"][k])
    ttft = ", ".join(f"{e['ttft'][k]:g} s @ {e['prompt_tokens'][k] / 1000:g}k" for k in sizes)
    speed = e["speed"].get("medium")
    L = [f"{e['model']} ({e['provider']}), Artificial Analysis table of {e['date']}: ${e['input_price']:g} in / "
         f"${e['output_price']:g} out per Mtok" + (f"; {speed:g} tokens/s" if speed else "")
         + (f"; TTFT {ttft}" if ttft else "")]
    if r.get("true_active_params_b"):
        L.append(f"  the served architecture is {model_label(e['catalog_id'])}: {r['true_active_params_b']:.3g} B active")
    words = {"price": "price", "price+speed": "+ output speed", "price+speed+ttft": "+ TTFT vs prompt"}
    for k, st in r["sets"].items():
        if st["summary"] is None:
            L.append(f"  {words[k]:<18} refused: {st['error']}")
            continue
        a = st["summary"]["active_params_b"]
        L.append(f"  {words[k]:<18} active {_iv(a)}, x{a['high'] / a['low']:.1f} wide")
    last = [st for st in r["sets"].values() if st["summary"]]
    L += calibration_lines(last[-1]["summary"]) if last else []
    L.append(f"  the same question as flags: {r['flags']}")
    for c in r["contradictory"]:
        L.append(f"  contradictory: {c}")
    if not explain:
        return "\n".join(L)
    L.append("Sources (commit:file#line of each prompt length's row):")
    L += [f"  {s}" for s in e["sources"]]
    last = [st for st in r["sets"].values() if st["summary"]][-1]
    L.append("Posterior of active params (all evidence):")
    L += posterior_chart(last["summary"])
    p = last["summary"]["priors"]
    L.append(f"Noise models: prices log-sd {p['price_noise']:.2f}, speed {p['speed_noise']:.2f}, the TTFT's growth "
             f"from 1k to 10k tokens {p['prefill_noise']:.2f} two-sided, longer prompts one-sided "
             "(analyses/inverse/prefill_evidence.py)")
    return "\n".join(L)
