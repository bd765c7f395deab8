// Sensitivity (/api/sensitivity): which hardware figure or efficiency moves an answer most, as a tornado. The
// analysis moves each input and asks the engine again; this view only draws its ranked rows. No physics here.
import { fmt } from "./format.js";
import { $, renderCards, setNotes } from "./dom.js";
import { state, common, engineTag, whatIfTag, hwName, modelName, autoTag, layoutChips } from "./state.js";
import { tornado } from "./charts_tornado.js";

export const panel = {
  endpoint: "sensitivity",
  fields: { metric: "sn_metric", delta: "sn_delta" },
  params: () => Object.assign(common(), { batch: state.batch, input_len: state.input_len, output_len: state.output_len,
                                          metric: state.sn_metric, delta: state.sn_delta }),
  headline: ["base", "top"],
  render: renderSensitivity,
};

// an answer in its own unit: $ for a cost, seconds for a time, a plain number for a speed
const answerFmt = (metric) => (metric.startsWith("cost") ? fmt.usd : metric.endsWith("_s") ? fmt.seconds
  : (x) => fmt.num(x, 4));
// an input's value in its unit (hardware figures in the hardware file's units; efficiencies as fractions or seconds)
const UNITS = { memory_bw_tbs: "TB/s", memory_gb: "GB", scaleup_gbs: "GB/s", scaleout_gbs: "GB/s",
                scaleup_latency_us: "\u00b5s", price_usd_per_hour: "$/chip-hour" };
const inputFmt = (name, v) => (name.startsWith("tflops.") ? `${fmt.num(v, 4)} TFLOP/s`
  : name === "efficiency.layer_overhead_s" ? fmt.seconds(v)
  : name.startsWith("efficiency.") ? fmt.pct(v) : `${fmt.num(v, 4)} ${UNITS[name] || ""}`.trim());

export function renderSensitivity(d, root) {
  const f = answerFmt(d.metric);
  const pct = fmt.pct(d.delta);
  $(".title", root).textContent = `What moves ${d.metric_label}: ${modelName(d.model)} on ${hwName(d.hardware, layoutChips(d.layout))} ` +
    `(${d.layout}${autoTag()}, batch ${fmt.int(d.batch)}), each input \u2212${pct} / +${pct}` + engineTag(d) + whatIfTag(d);
  const rows = d.rows || [];
  const top = rows[0];
  const share = (r) => (d.base_answer ? r.swing / Math.abs(d.base_answer) : 0);
  const cards = [{ key: "base", label: d.metric_label, value: f(d.base_answer),
                   sub: `the question as asked: ${d.layout}, batch ${fmt.int(d.batch)}`, why: { hl: /=/ } }];
  if (top) {
    cards.push({ key: "top", label: "moves it most", value: top.input,
                 sub: `${inputFmt(top.input, top.low)} \u2192 ${f(top.answer_low)}; ${inputFmt(top.input, top.high)} ` +
                   `\u2192 ${f(top.answer_high)} (swing ${fmt.pct(share(top))} of the answer)`,
                 why: { hl: new RegExp(top.input.replace(/\./g, "\\.")) } });
    const still = rows.filter((r) => r.swing === 0).map((r) => r.input);
    if (still.length) {
      cards.push({ key: "still", label: "does not move it", value: `${still.length} input${still.length > 1 ? "s" : ""}`,
                   sub: still.join(", "), why: { hl: new RegExp(still.map((s) => s.replace(/\./g, "\\.")).join("|")) } });
    }
  }
  renderCards($(".cards", root), cards, d.explain);
  setNotes($(".notes", root), [...rows.filter((r) => r.note).map((r) => ["note", `note: ${r.input}: ${r.note}`]),
                               ...(d.notes || []).map((a) => ["note", "note: " + Words.web(a)])]);
  tornado($("#sensitivity-chart"), rows.map((r) => ({
    label: r.input, answerLow: r.answer_low, answerHigh: r.answer_high,
    text: `${r.input} ${inputFmt(r.input, r.base)}: at ${inputFmt(r.input, r.low)} ${f(r.answer_low)}, at ` +
      `${inputFmt(r.input, r.high)} ${f(r.answer_high)} (swing ${fmt.pct(share(r))} of ${f(d.base_answer)})` +
      (r.note ? `; ${r.note}` : ""),
  })), { id: "sensitivity-svg", base: d.base_answer, fmt: f, title: d.metric_label,
         name: `Tornado: what moves ${d.metric_label}`, lowLabel: `input \u2212${pct}`, highLabel: `input +${pct}` });
  $(".derivation pre", root).textContent = d.explain;
}
