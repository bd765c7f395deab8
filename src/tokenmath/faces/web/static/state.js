// The page's state: every input, mirrored in the query string, and the readings of it every view shares
// (the one meaning of chips, batch and context on every tab).
import { ApiError } from "./api.js";
import { fmt } from "./format.js";

// ---- state: every input, mirrored in the query string --------------------------------------------------------
export const DEFAULTS = {
  tab: "overview",
  model: "llama-3.1-8b", hardware: "h100-sxm", chips: "", tp: "", ep: "", pp: "",
  batch: "1", input_len: "1024", output_len: "256", weight_dtype: "", kv_dtype: "", engine: "vllm", peak: "",
  input_price: "0.27", output_price: "1.10", cached_input_price: "", output_speed: "",
  long_context_threshold: "", long_input_price: "", long_output_price: "", d_hardware: "", margin: "",
  utilization: "",
  t_chips: "", t_tp: "", t_pp: "", t_dp: "", t_ep: "", t_cp: "", seq_len: "4096",
  global_batch_tokens: "4194304", micro_batch: "1", recompute: "selective", zero: "1", tokens: "1e12",
  compute: "1e24", target_loss: "", inference_tokens: "1e13", fit: "epoch", mfu: "", min_tps: "20",
  s_mode: "closed", s_concurrency: "64", s_rate: "8", s_burstiness: "", s_requests: "1000", s_input: "",
  s_output: "", s_ttft: "", s_itl: "", s_seed: "0",
  w_memory_bw_tbs: "", w_memory_gb: "", w_tflops_bf16: "", w_tflops_fp8: "", w_scaleup_domain: "",
  w_price_usd_per_hour: "",
  sp_mode: "", sp_draft: "llama-3.2-1b", sp_k: "", sp_acceptance: "",
  sn_metric: "cost_per_mtok_output_usd", sn_delta: "0.2",
  h_context: "2048", p_batch: "", p_speed: "", api_model: "",
  a_systems: "hgx-h100,hgx-h200,hgx-b200,gb200-nvl72,mi355x", a_speed: "20", a_gap: "3", a_context: "27000",
};
export const TABS = ["overview", "hyperbola", "pareto", "simulate", "context", "prices", "sensitivity", "deduce", "train", "agents"];
export const state = Object.assign({}, DEFAULTS);
export const catalog = { models: [], hardware: [], meta: null };
export const uploads = {};

export function readURL() {
  const q = new URLSearchParams(location.search);
  for (const k of Object.keys(DEFAULTS)) if (q.has(k)) state[k] = q.get(k);
  if (!TABS.includes(state.tab)) state.tab = "overview";
}
export function writeURL() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v !== DEFAULTS[k]) q.set(k, v);
  const s = q.toString();
  history.replaceState(null, "", s ? "?" + s : location.pathname);
}

export const common = () => ({
  model: state.model, hardware: state.hardware, chips: state.chips, tp: state.tp, ep: state.ep, pp: state.pp,
  weight_dtype: state.weight_dtype, kv_dtype: state.kv_dtype, engine: state.engine, set: whatIf(),
});

// what-if hardware: the fields filled in "What if the chip had", as the API's `set` (the CLI's --set FIELD=VALUE);
// an input's id is w_ + the hardware file's field name (its dot as an underscore)
export const WHAT_IF = { w_memory_bw_tbs: "memory_bw_tbs", w_memory_gb: "memory_gb", w_tflops_bf16: "tflops.bf16",
                         w_tflops_fp8: "tflops.fp8", w_scaleup_domain: "scaleup_domain",
                         w_price_usd_per_hour: "price_usd_per_hour" };
export const whatIf = () => Object.entries(WHAT_IF).filter(([k]) => String(state[k]).trim())
  .map(([k, f]) => `${f}=${String(state[k]).trim()}`).join(",");

// speculative decoding (the overview and the hyperbola): the API's draft / spec_k / acceptance, or mtp
export const speculation = () => {
  if (state.sp_mode === "draft") {
    return { draft: state.sp_draft, spec_k: state.sp_k, acceptance: state.sp_acceptance };
  }
  if (state.sp_mode === "mtp") return { mtp: String(state.sp_k).trim() || "1", acceptance: state.sp_acceptance };
  return {};
};
// the serving engine a view assumed, for its title: " \u2014 engine: vLLM (V1 engine)"; with a release of an earlier
// line its answer took that line's fitted residuals for (engine.line): " \u2014 engine: vLLM 0.7 (vLLM 0.6-0.7, the V0
// engine)"; "" for an answer without one
const engineName = (e) => (e.line ? `${e.name.replace(/ \(.*\)$/, "")} ${e.version} (${e.line.describes})` : e.name);
export const engineTag = (d) => (d.engine ? ` \u2014 engine: ${d.engine.id === "none" ? "none (engine-free step)" : engineName(d.engine)}` : "");
// what-if hardware an answer used, for its title: " — what if: memory_bw_tbs 6.7 TB/s (catalog 3.35)"
export const whatIfTag = (d) => (d.what_if && d.what_if.length ? " — what if: " + d.what_if.map((o) =>
  `${o.field} ${o.value} ${o.unit} (catalog ${o.catalog === null ? "none" : o.catalog})`).join(", ") : "");
// a field's label as the page shows it ("input tokens"), for messages
export const labelOf = (id) => {
  const e = id && document.getElementById(id);
  const l = e && (e.closest("label") || document.querySelector(`label[for="${id}"]`));
  return l ? (l.firstChild && l.firstChild.nodeType === 3 ? l.firstChild.textContent : l.textContent).trim()
    : (e && e.getAttribute("aria-label")) || null;
};
// a whole number a panel computes with (blank: the default); anything else ("12ab", "abc") is refused in place,
// never read as 12 or as the default
export const intOf = (key) => {
  const v = String(state[key] === undefined ? "" : state[key]).trim().replace(/_/g, "");
  if (v === "") return Number(DEFAULTS[key]) || 1;
  if (!/^\d+$/.test(v) || Number(v) < 1) {
    throw new ApiError({ field: key, problem: `"${state[key]}" is not a whole number`, valid: "a whole number from 1" }, 422);
  }
  return Number(v);
};
export const batchNum = () => (String(state.batch).trim().toLowerCase() === "max" ? null : intOf("batch"));
// the one meaning of context: the KV cache of a sequence when its last token is made, the length that has to fit, as
// the command line's --context and the JSON's "context"; the KV & context tab's is the left's input + output, the
// hyperbola's its own (h_context: 2,048 by default, as `tokenmath hyperbola`)
export const contextOf = () => intOf("input_len") + intOf("output_len");

// the chip's catalog name on every tab ("NVIDIA H200 SXM 141GB"), never its id on one and its name on another
// with a count: "8 \u00d7 NVIDIA H200 SXM 141GB"
export function hwName(id, chips) {
  const x = catalog.hardware.find((c) => c.id === id);
  const name = x ? x.name : id;
  return chips === undefined || chips === null ? name : `${chips} \u00d7 ${name}`;
}
// the chips of a layout written "tp=1 pp=1 ep=8 dp=1" (sensitivity's answer)
export const layoutChips = (s) => String(s).match(/\d+/g).reduce((a, b) => a * Number(b), 1);
// "1 chip", "8 chips"
export const chipsWord = (n) => `${fmt.int(n)} ${Number(n) === 1 ? "chip" : "chips"}`;
// a serving title's note when the chips were left blank: the count shown is the fewest that fit (the API chose it)
export const autoTag = () => (String(state.chips).trim() ? "" : " (chips blank: the fewest that fit)");

export function modelName(id) {
  const m = catalog.models.find((x) => x.id === id) || uploads[id];
  return m ? m.name : id;
}
