// Deduce from prices (/api/deduce): the model behind an API's prices, as 80% intervals. No physics here.
import { fmt } from "./format.js";
import { $, renderCards } from "./dom.js";
import { state, hwName } from "./state.js";
import { intervals, stack } from "./charts_bars.js";

export const panel = {
  endpoint: "deduce",
  fields: { hardware: "d_hardware" },
  // a known API endpoint (the catalog's prices and evidence, as --api-model): the typed prices are not used
  params: () => (state.api_model ? { api_model: state.api_model, hardware: state.d_hardware, margin: state.margin,
                                     utilization: state.utilization } : {
                   input_price: state.input_price, output_price: state.output_price,
                   cached_input_price: state.cached_input_price, output_speed: state.output_speed,
                   long_context_threshold: state.long_context_threshold,
                   long_input_price: state.long_input_price, long_output_price: state.long_output_price,
                   hardware: state.d_hardware, margin: state.margin, utilization: state.utilization }),
  render: renderDeduce,
};

// ---- deduce ------------------------------------------------------------------------------------------------------
export function renderDeduce(d, root) {
  const ev = d.evidence;
  $(".title", root).textContent = ev ? `What hides behind ${ev.provider}'s ${ev.model}: $${fmt.num(ev.input_price)} in / ` +
    `$${fmt.num(ev.output_price)} out per Mtok, with ${ev.available.join(", ")}` +
    (d.true_active_params_b ? ` (open weights: ${fmt.num(d.true_active_params_b)} B active in truth)` : "")
    : "What hides behind an API price";
  for (const id of ["input_price", "output_price", "cached_input_price", "output_speed", "long_context_threshold",
                    "long_input_price", "long_output_price"]) $("#" + id).disabled = !!ev;
  const a = d.active_params_b, t = d.total_params_b, k = d.kv_bytes_per_token, b = d.batch;
  const cal = d.interval_calibration && d.interval_calibration.scales.active_params_b;
  const iv = (x, f) => `${f(x.low)} \u2013 ${f(x.high)} (80%)`;
  const ivc = (x, f) => iv(x, f) + (cal ? `, calibrated on ${cal.fit_rows} endpoints` : "");
  const B = (x) => fmt.num(x) + " B";
  renderCards($(".cards", root), [
    { key: "active", label: "active parameters", value: B(a.median), sub: ivc(a, B), why: { hl: /active params|N_active/ } },
    { key: "total", label: "total parameters", value: B(t.median), sub: iv(t, B) + `; P(MoE) ${fmt.pct(d.p_moe)}`,
      why: { hl: /total params/ } },
    { key: "kv", label: "KV bytes per token", value: k ? fmt.bytes(k.median) : "not identified",
      sub: k ? iv(k, fmt.bytes) : "give a cached or long-context price, or a speed", why: { hl: /KV bytes/ } },
    { key: "batch", label: "decode batch", value: fmt.num(b.median, 2), sub: `P(decode memory-bound) ${fmt.pct(d.p_decode_memory_bound)}`,
      why: { hl: /decode batch|memory-bound/ } },
  ], d.explain);
  const rows = [
    { label: "active params (B)", low: a.low, median: a.median, high: a.high },
    { label: "total params (B)", low: t.low, median: t.median, high: t.high },
    { label: "decode batch", low: b.low, median: b.median, high: b.high },
  ];
  if (k) rows.push({ label: "KV bytes / token", low: k.low, median: k.median, high: k.high, fmt: fmt.bytes });
  intervals($("#deduce-chart"), rows, { title: "80% intervals" });
  stack($("#deduce-hw"), Object.entries(d.hardware_posterior).map(([id, v]) => ({ label: hwName(id), value: v })),
               { title: "hardware posterior", fmt: fmt.pct });
  $(".derivation pre", root).textContent = d.explain;
}
