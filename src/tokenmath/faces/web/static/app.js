// tokenmath page: inputs -> /api/... -> cards, SVG charts and the --explain text. No physics here.
// The wiring: fields bound to the state, tabs, upload, share; each view lives in its own view_<tab>.js module.
import { fmt } from "./format.js";
import { $, $$, h } from "./dom.js";
import { ApiError, api, busy } from "./api.js";
import { DEFAULTS, TABS, state, catalog, uploads, readURL, writeURL, batchNum, modelName, chipsWord } from "./state.js";
import { refresh, summaryShown } from "./panels.js";
import { syncSimMode } from "./view_simulate.js";

async function uploadConfig(text, name) {
  busy(+1);
  try {
    const r = await fetch("/api/model-config?name=" + encodeURIComponent(name || "config.json"),
                          { method: "POST", headers: { "Content-Type": "application/json" }, body: text });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new ApiError(body && body.error, r.status);
    uploads[body.id] = body;
    try { localStorage.setItem("tokenmath:" + body.id, JSON.stringify({ name, text })); } catch (e) { /* full */ }
    addModelOption(body, true);
    return body;
  } finally {
    busy(-1);
  }
}

function addModelOption(m, uploaded) {
  const sel = $("#model");
  if ($$("option", sel).some((o) => o.value === m.id)) return;
  const label = `${m.name} \u2014 ${fmt.count(m.params_total)}` + (m.is_moe ? ` (${fmt.count(m.params_active)} active)` : "")
    + (uploaded ? " [uploaded]" : "");
  const opt = h("option", { value: m.id, text: label });
  if (uploaded) {
    let g = $("optgroup[data-uploads]", sel);
    if (!g) { g = h("optgroup", { label: "Uploaded", "data-uploads": "1" }); sel.prepend(g); }
    g.append(opt);
  } else sel.append(opt);
}

// ---- wiring ------------------------------------------------------------------------------------------------------
let timer = null;
function changed(delay) {
  writeURL();
  clearTimeout(timer);
  timer = setTimeout(() => refresh(false), delay === undefined ? 0 : delay);
}

function summarize() {
  const m = catalog.models.find((x) => x.id === state.model) || uploads[state.model];
  $("#model-summary").textContent = m ? `${m.summary}` : "";
  $("#model-summary").classList.remove("error-text");
  const hw = catalog.hardware.find((x) => x.id === state.hardware);
  if (hw) {
    const pk = hw.flops.bf16 || hw.flops.fp16 || 0;
    $("#hw-summary").textContent = `${fmt.bytes(hw.memory_bytes)} HBM at ${fmt.rate(hw.memory_bw, "B/s")}; ` +
      `bf16 ${fmt.rate(pk, "FLOP/s")}` + (hw.flops.fp8 ? `, fp8 ${fmt.rate(hw.flops.fp8, "FLOP/s")}` : "") +
      `; ridge ${fmt.num(hw.ridge_point_bf16)} FLOP/B; scale-up ${chipsWord(hw.scaleup_domain)}` +
      (hw.price_usd_per_hour ? `; $${hw.price_usd_per_hour}/h` : "");
    // each what-if field shows the catalog's figure it replaces, in the hardware file's units
    const shown = { w_memory_bw_tbs: hw.memory_bw / 1e12, w_memory_gb: hw.memory_bytes / 1e9,
                    w_tflops_bf16: hw.flops.bf16 / 1e12, w_tflops_fp8: hw.flops.fp8 / 1e12,
                    w_scaleup_domain: hw.scaleup_domain, w_price_usd_per_hour: hw.price_usd_per_hour };
    for (const [id, v] of Object.entries(shown)) $("#" + id).placeholder = v ? fmt.num(v, 4) : "none";
  }
}

// speculative decoding: the draft model matters only with a draft; tokens per step and acceptance only when on
function syncSpecMode() {
  $("#sp_draft").disabled = state.sp_mode !== "draft";
  $("#sp_k").disabled = !state.sp_mode;
  $("#sp_acceptance").disabled = !state.sp_mode;
  $("#sp_acceptance").placeholder = state.sp_mode === "mtp" ? "0.875 (published)" : "needed with a draft";
}

function syncSlider() {
  const b = batchNum();
  const s = $("#batch-slider");
  s.value = String(b ? Math.max(0, Math.min(12, Math.round(Math.log2(b)))) : 12);
}

function bind() {
  for (const e of $$("[data-state]")) {
    const k = e.dataset.state;
    if (e.type === "checkbox") e.checked = state[k] === "1";
    else e.value = state[k];
    const ev = e.tagName === "SELECT" || e.type === "checkbox" ? "change" : "input";
    e.addEventListener(ev, () => {
      state[k] = e.type === "checkbox" ? (e.checked ? "1" : "") : e.value;
      if (k === "batch") syncSlider();
      if (k === "s_mode") syncSimMode();
      if (k === "sp_mode") syncSpecMode();
      if (k === "model" || k === "hardware") summarize();
      if (k === "model") notice("");
      changed(ev === "change" ? 0 : 40);
    });
  }
  $("#batch-slider").addEventListener("input", (ev) => {
    state.batch = String(2 ** Number(ev.target.value));
    $("#batch").value = state.batch;
    changed(40);
  });
  syncSlider();
  syncSimMode();
  syncSpecMode();
  const tabs = $$(".tabs button");
  for (const b of tabs) {
    b.id = "tabbtn-" + b.dataset.tab;
    b.setAttribute("aria-controls", "tab-" + b.dataset.tab);
    $("#tab-" + b.dataset.tab).setAttribute("aria-labelledby", b.id);
    b.addEventListener("click", () => showTab(b.dataset.tab));
    b.addEventListener("keydown", (ev) => {
      const i = tabs.indexOf(b), n = tabs.length;
      const j = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1 + n, ArrowUp: i - 1 + n, Home: 0, End: n - 1 }[ev.key];
      if (j === undefined) return;
      ev.preventDefault();
      const t = tabs[j % n];
      t.focus();
      showTab(t.dataset.tab);
    });
  }
  wireStrip();
  // the sticky summary shows only while the active panel's cards are scrolled away (a phone editing its inputs)
  window.addEventListener("scroll", summaryShown, { passive: true });
  let resized = null;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => refresh(false), 150); });
  for (const f of $$("form")) f.addEventListener("submit", (ev) => ev.preventDefault());
  $("#share").addEventListener("click", async () => {
    writeURL();
    try {
      await navigator.clipboard.writeText(location.href);
      $("#status").textContent = "link copied";
    } catch (e) {
      $("#status").textContent = location.href;
    }
  });
  $("#upload").addEventListener("change", async (ev) => {
    const file = ev.target.files && ev.target.files[0];
    if (!file) return;
    const hint = $("#model-summary");
    try {
      if (file.size > 256 * 1024) throw new ApiError({ field: "config.json", problem: `is ${file.size.toLocaleString("en-US")} bytes`, valid: "at most 262,144 bytes" });
      const info = await uploadConfig(await file.text(), file.name);
      state.model = info.id;
      $("#model").value = info.id;
      notice("");
      summarize();
      changed(0);
    } catch (e) {
      hint.textContent = e.message + (e.err && e.err.valid ? ` (${e.err.valid})` : "");
      hint.classList.add("error-text");
    } finally {
      ev.target.value = "";
    }
  });
}

// a phone: the tab strip scrolls sideways; while views are hidden past its right edge it says so (data-more: a fading
// edge and an arrow that scrolls it), and the inputs, below the results, are one button away (and back)
function wireStrip() {
  const strip = $(".tabstrip"), nav = $(".tabs");
  const mark = () => {
    if (nav.scrollLeft + nav.clientWidth < nav.scrollWidth - 4) strip.dataset.more = "";
    else delete strip.dataset.more;
  };
  nav.addEventListener("scroll", mark, { passive: true });
  window.addEventListener("resize", mark);
  $(".tabs-more").addEventListener("click", () => nav.scrollBy({ left: nav.clientWidth * 0.7, behavior: "smooth" }));
  mark();
  $("#to-inputs").addEventListener("click", () => $("#controls").scrollIntoView({ block: "start" }));
  $("#to-results").addEventListener("click", () => $("#main").scrollIntoView({ block: "start" }));
}

function showTab(tab) {
  state.tab = tab;
  for (const b of $$(".tabs button")) {
    const on = b.dataset.tab === tab;
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1;
    if (on && b.scrollIntoView && b.parentElement.scrollWidth > b.parentElement.clientWidth) {
      b.scrollIntoView({ block: "nearest", inline: "center" });
    }
  }
  for (const t of TABS) $("#tab-" + t).hidden = t !== tab;
  writeURL();
  refresh(false);
}

async function restoreUpload() {
  if (!state.model.toLowerCase().startsWith("upload:")) return;
  let saved = null;
  try { saved = JSON.parse(localStorage.getItem("tokenmath:" + state.model) || "null"); } catch (e) { saved = null; }
  if (saved && saved.text) {
    try { await uploadConfig(saved.text, saved.name); return; } catch (e) { /* fall through */ }
  }
  const missing = state.model;
  state.model = DEFAULTS.model;
  notice(`This link names an uploaded config.json (${missing}) that this browser does not hold, so the page shows ` +
         `${modelName(DEFAULTS.model)} instead: upload that config.json again (Model, on the left) to see the shared view.`);
}

// a page-wide notice above the results; it stays until the model is changed or a config is uploaded
function notice(text) {
  const n = $("#notice");
  n.textContent = text;
  n.hidden = !text;
}

async function start() {
  readURL();
  try {
    const [models, hardware, meta] = await Promise.all([api("models", {}), api("hardware", {}), api("", {})]);
    catalog.models = models.models;
    catalog.hardware = hardware.hardware;
    catalog.meta = meta;
  } catch (e) {
    $("#status").textContent = "cannot reach the tokenmath server: " + e.message;
    return;
  }
  for (const m of catalog.models) addModelOption(m, false);
  const hsel = $("#hardware");
  for (const x of catalog.hardware) {
    hsel.append(h("option", { value: x.id, text: `${x.name}` + (x.price_usd_per_hour ? ` \u2014 $${x.price_usd_per_hour}/h` : "") }));
  }
  const wsel = $("#weight_dtype"), ksel = $("#kv_dtype");
  wsel.append(h("option", { value: "", text: "checkpoint's" }));
  for (const d of catalog.meta.weight_dtypes) wsel.append(h("option", { value: d, text: d }));
  ksel.append(h("option", { value: "", text: "bf16 (default)" }));
  for (const d of catalog.meta.kv_dtypes) ksel.append(h("option", { value: d, text: d }));
  const esel = $("#engine");
  const inferEp = (catalog.meta.endpoints || {})["/api/infer"] || { params: [] };
  const ep = inferEp.params.find((p) => p.name === "engine");
  for (const e of (ep ? ep.choices : ["vllm", "none"])) {
    esel.append(h("option", { value: e, text: e === "none" ? "none (engine-free step)" : e }));
  }
  const dsel = $("#sp_draft");
  for (const m of catalog.models) dsel.append(h("option", { value: m.id, text: m.name }));
  const msel = $("#sn_metric");
  for (const [id, label] of Object.entries(catalog.meta.sensitivity_metrics || {})) {
    msel.append(h("option", { value: id, text: label }));
  }
  const fsel = $("#fit");
  for (const f of catalog.meta.fits) fsel.append(h("option", { value: f, text: f }));
  // deduce: the known API endpoints ("provider: model"), listed "model \u2014 provider"
  const ded = ((catalog.meta.endpoints || {})["/api/deduce"] || { params: [] }).params.find((p) => p.name === "api_model");
  const asel = $("#api_model");
  asel.append(h("option", { value: "", text: "none: the prices typed here" }));
  for (const c of (ded ? ded.choices : [])) {
    const [prov, ...rest] = c.split(": ");
    asel.append(h("option", { value: c, text: `${rest.join(": ")} \u2014 ${prov}` }));
  }
  bind();
  await restoreUpload();
  $("#model").value = state.model;
  summarize();
  showTab(state.tab);
}


start();
