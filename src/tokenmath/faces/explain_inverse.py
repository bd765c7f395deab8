"""The napkin derivation of a price deduction (tokenmath deduce --explain), from the analysis' own scenario."""
from __future__ import annotations

from tokenmath.analyses.inverse.deduce import Deduction
from tokenmath.base import units as u


def explain_deduction(d: Deduction) -> str:
    s, o, sc = d.summary, d.observed, d.scenario
    L = [f"Deduce from input ${o.input_price:g}/Mtok and output ${o.output_price:g}/Mtok"
         + (f", cached ${o.cached_input_price:g}" if o.cached_input_price is not None else "")
         + (f", >{o.long_threshold:,.0f} tokens: ${o.long_input_price:g}/${o.long_output_price:g}" if o.long_threshold else "")
         + (f", {o.output_speed:g} tokens/s per user" if o.output_speed else "")]
    L.append("1. One scenario at the priors' middles (a napkin inversion):")
    L.append(f"  chip {sc['hardware']} at ${sc['usd_per_hour']:.3g}/h x cost factor {sc['cost_factor']:.2f}; margin "
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
    if s["kv_bytes_per_token"]:
        k = s["kv_bytes_per_token"]
        L.append(f"  KV bytes per token: {u.bytes_(k['median'])} ({u.bytes_(k['low'])} - {u.bytes_(k['high'])}), "
                 f"informed by {', '.join(s['kv_informed_by'])}")
    else:
        L.append("  KV bytes per token: not identified (give --cached-input-price, a long-context tier or --output-speed)")
    b = s["batch"]
    L.append(f"  decode batch: {b['median']:.0f} ({b['low']:.0f} - {b['high']:.0f}); P(decode memory-bound) = "
             f"{s['p_decode_memory_bound']:.0%}")
    L.append("  hardware posterior: " + ", ".join(f"{k} {v:.0%}" for k, v in s["hardware_posterior"].items()))
    return "\n".join(L)
