// tokenmath page: inputs -> /api/... -> cards, SVG charts and the --explain text. No physics here.
"use strict";

(() => {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const main = $("#main");

  // ---- state: every input, mirrored in the query string --------------------------------------------------------
  const DEFAULTS = {
    tab: "overview",
    model: "llama-3.1-8b", hardware: "h100-sxm", chips: "", tp: "", ep: "", pp: "",
    batch: "1", input_len: "1024", output_len: "256", weight_dtype: "", kv_dtype: "", engine: "vllm", peak: "",
    input_price: "0.27", output_price: "1.10", cached_input_price: "", output_speed: "",
    long_context_threshold: "", long_input_price: "", long_output_price: "", d_hardware: "", margin: "",
    utilization: "",
    t_chips: "8", t_tp: "", t_pp: "", t_dp: "", t_ep: "", t_cp: "", seq_len: "4096",
    global_batch_tokens: "4194304", micro_batch: "1", recompute: "selective", zero: "1", tokens: "1e12",
    compute: "1e24", target_loss: "", inference_tokens: "1e13", fit: "epoch", mfu: "0.4", min_tps: "20",
    s_mode: "closed", s_concurrency: "64", s_rate: "8", s_burstiness: "", s_requests: "1000", s_input: "",
    s_output: "", s_ttft: "", s_itl: "", s_seed: "0",
  };
  const TABS = ["overview", "hyperbola", "pareto", "simulate", "context", "prices", "deduce", "train"];
  const state = Object.assign({}, DEFAULTS);
  const catalog = { models: [], hardware: [], meta: null };
  const uploads = {};

  function readURL() {
    const q = new URLSearchParams(location.search);
    for (const k of Object.keys(DEFAULTS)) if (q.has(k)) state[k] = q.get(k);
    if (!TABS.includes(state.tab)) state.tab = "overview";
  }
  function writeURL() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) if (v !== DEFAULTS[k]) q.set(k, v);
    const s = q.toString();
    history.replaceState(null, "", s ? "?" + s : location.pathname);
  }

  // ---- numbers at the edges (mirrors tokenmath/units.py) ---------------------------------------------------------
  // one Intl.NumberFormat per precision: toLocaleString builds a new one per call (about a millisecond each), which
  // made a chart's readouts (a few per point) cost half a second per redraw
  const formats = {};
  const nf = (opts) => {
    const k = JSON.stringify(opts);
    return formats[k] || (formats[k] = new Intl.NumberFormat("en-US", opts));
  };
  function sig(v, n) {
    return nf({ maximumSignificantDigits: n || 3 }).format(Number(v.toPrecision(n || 3)));
  }
  function si(x, unit, steps) {
    if (x === null || x === undefined || !isFinite(x)) return "n/a";
    if (x === 0) return "0 " + unit;
    for (const [s, p] of steps) {
      if (s && Math.abs(x) >= s) {
        const v = x / s;
        return (Math.abs(v) < 1000 ? sig(v) : nf({}).format(Math.round(v))) + " " + p + unit;
      }
    }
    return sig(x) + " " + unit;
  }
  const fmt = {
    bytes: (x) => si(x, "B", [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]),
    flops: (x) => si(x, "FLOP", [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]),
    rate: (x, u) => si(x, u, [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]),
    count: (x) => si(x, "", [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]]).trim(),
    seconds: (x) => {
      if (x === null || x === undefined || !isFinite(x)) return "n/a";
      if (x >= 86400 * 2) return sig(x / 86400) + " days";
      if (x >= 1) return sig(x) + " s";
      if (x >= 1e-3) return sig(x * 1e3) + " ms";
      return sig(x * 1e6) + " \u00b5s";
    },
    usd: (x) => (x === null || x === undefined || !isFinite(x)) ? "n/a"
      : x < 1000 ? "$" + sig(x, 4) : "$" + nf({}).format(Math.round(x)),
    num: (x, n) => (x === null || x === undefined || !isFinite(x)) ? "n/a" : sig(x, n || 3),
    int: (x) => (x === null || x === undefined) ? "n/a" : nf({}).format(Number(x)),
    pct: (x) => (x === null || x === undefined || !isFinite(x)) ? "n/a" : (100 * x).toFixed(x < 0.1 ? 1 : 0) + "%",
  };

  // ---- small DOM helpers ------------------------------------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }

  // explain text -> {section number: [lines]} (sections start "1. ", "2. " ...; 0 is the header)
  function sections(text) {
    const out = { 0: [] };
    let cur = 0;
    for (const line of (text || "").split("\n")) {
      const m = /^(\d+)\. /.exec(line);
      if (m) cur = Number(m[1]);
      (out[cur] = out[cur] || []).push(line);
    }
    return out;
  }

  function derivationNode(text, why) {
    const pre = h("pre", { class: "why-text" });
    let lines = (text || "").split("\n");
    if (why && why.sections) {
      const s = sections(text);
      lines = [];
      for (const n of why.sections) if (s[n]) lines.push(...s[n], "");
      if (!lines.length) lines = (text || "").split("\n");
    }
    for (const line of lines) {
      const hit = why && why.hl && why.hl.test(line);
      pre.append(hit ? h("mark", { text: line }) : document.createTextNode(line), "\n");
    }
    return pre;
  }

  // cards: [{key, label, value, sub, why: {sections, hl}, cls}]; a card's button shows its derivation below the row
  function renderCards(box, cards, explainText) {
    box.textContent = "";
    const whyId = "why-" + (box.closest(".tab") || { id: "x" }).id + (box.classList.contains("ot-cards") ? "-ot" : "");
    const whyBox = h("div", { class: "card-why", hidden: true, id: whyId, role: "region", "aria-live": "polite" });
    let open = null;
    for (const c of cards) {
      const btn = h("button", { type: "button", class: "why", "aria-expanded": "false", "aria-controls": whyId,
                                "aria-label": `derivation of ${c.label}`, title: `Show how ${c.label} is derived` }, "derivation");
      const card = h("div", { class: "card " + (c.cls || ""), "data-card": c.key },
        h("div", { class: "label", text: c.label }),
        h("div", { class: "value", text: c.value }),
        c.sub ? h("div", { class: "sub", text: c.sub }) : null,
        btn);
      btn.addEventListener("click", () => {
        for (const b of $$("button.why", box)) b.setAttribute("aria-expanded", "false");
        if (open === c.key) {
          open = null;
          whyBox.hidden = true;
          return;
        }
        open = c.key;
        btn.setAttribute("aria-expanded", "true");
        whyBox.textContent = "";
        whyBox.append(h("div", { class: "why-title", text: `How ${c.label} = ${c.value} is derived` }),
                      derivationNode(explainText, c.why));
        whyBox.hidden = false;
      });
      box.append(card);
    }
    box.append(whyBox);
  }

  function table(box, head, rows) {
    box.textContent = "";
    const t = h("table");
    t.append(h("thead", {}, h("tr", {}, ...head.map((x) => h("th", { text: x })))));
    const tb = h("tbody");
    for (const r of rows) tb.append(h("tr", {}, ...r.map((x) => h("td", { text: x }))));
    t.append(tb);
    box.append(t);
  }

  function setNotes(box, lines) {
    box.textContent = "";
    for (const [cls, text] of lines) box.append(h("p", { class: cls, text }));
  }

  // ---- API ---------------------------------------------------------------------------------------------------------
  let pending = 0;
  function busy(d) {
    pending += d;
    main.dataset.pending = String(pending);
    $("#status").textContent = pending > 0 ? "computing\u2026" : "";
  }

  class ApiError extends Error {
    constructor(err, status) {
      super(err ? `${err.field || "request"}: ${err.problem}` : `HTTP ${status}`);
      this.err = err || {};
      this.status = status;
    }
  }

  async function api(endpoint, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v === "" || v === null || v === undefined || v === false) continue;
      q.set(k, v === true ? "1" : String(v).trim());
    }
    busy(+1);
    try {
      const r = await fetch(`/api/${endpoint}?${q}`, { headers: { Accept: "application/json" } });
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      if (!r.ok) throw new ApiError(body && body.error, r.status);
      return body;
    } finally {
      busy(-1);
    }
  }

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

  // ---- panels ------------------------------------------------------------------------------------------------------
  const common = () => ({
    model: state.model, hardware: state.hardware, chips: state.chips, tp: state.tp, ep: state.ep, pp: state.pp,
    weight_dtype: state.weight_dtype, kv_dtype: state.kv_dtype, engine: state.engine,
  });
  // the serving engine a view assumed, for its title: " \u2014 engine: vLLM (V1 engine)"; "" for an answer without one
  const engineTag = (d) => (d.engine ? ` \u2014 engine: ${d.engine.id === "none" ? "none (engine-free step)" : d.engine.name}` : "");
  // a field's label as the page shows it ("input tokens"), for messages
  const labelOf = (id) => {
    const e = id && document.getElementById(id);
    const l = e && (e.closest("label") || document.querySelector(`label[for="${id}"]`));
    return l ? (l.firstChild && l.firstChild.nodeType === 3 ? l.firstChild.textContent : l.textContent).trim()
      : (e && e.getAttribute("aria-label")) || null;
  };
  // a whole number a panel computes with (blank: the default); anything else ("12ab", "abc") is refused in place,
  // never read as 12 or as the default
  const intOf = (key) => {
    const v = String(state[key] === undefined ? "" : state[key]).trim().replace(/_/g, "");
    if (v === "") return Number(DEFAULTS[key]) || 1;
    if (!/^\d+$/.test(v) || Number(v) < 1) {
      throw new ApiError({ field: key, problem: `"${state[key]}" is not a whole number`, valid: "a whole number from 1" }, 422);
    }
    return Number(v);
  };
  const batchNum = () => (String(state.batch).trim().toLowerCase() === "max" ? null : intOf("batch"));
  // the one meaning of context on every tab: the KV cache of a request when its last token is made (input + output),
  // the length that has to fit, as the command line's --context and the JSON's "context"
  const contextOf = () => intOf("input_len") + intOf("output_len");

  const PANELS = {
    overview: {
      endpoint: "infer",
      params: () => Object.assign(common(), { batch: state.batch, input_len: state.input_len,
                                              output_len: state.output_len, peak: state.peak === "1" }),
      render: renderInfer,
    },
    hyperbola: {
      endpoint: "hyperbola",
      params: () => Object.assign(common(), { context: contextOf() }),
      headline: ["current", "max_batch", "floor"],
      render: renderHyperbola,
    },
    pareto: {
      endpoint: "pareto",
      // blank chips means the same here as on every tab: the fewest chips that fit (asked of /api/infer, which also
      // gives "your point"); the pareto then searches the layouts of that many chips
      prepare: async () => {
        const you = await api("infer", Object.assign(common(), { batch: state.batch, input_len: intOf("input_len"),
                                                                   output_len: intOf("output_len") }));
        return { you, chips: String(state.chips).trim() || you.chips };
      },
      params: (pre) => ({ model: state.model, hardware: state.hardware, chips: pre.chips, input_len: intOf("input_len"),
                          output_len: intOf("output_len"), weight_dtype: state.weight_dtype, kv_dtype: state.kv_dtype,
                          engine: state.engine }),
      render: renderPareto,
    },
    simulate: {
      endpoint: "simulate",
      fields: { concurrency: "s_concurrency", arrival_rate: "s_rate", burstiness: "s_burstiness",
                requests: "s_requests", input_len: "s_input", output_len: "s_output", ttft_ms: "s_ttft",
                itl_ms: "s_itl", seed: "s_seed" },
      params: () => {
        const open = state.s_mode === "open";
        return Object.assign(common(), {
          concurrency: open ? "" : state.s_concurrency, arrival_rate: open ? state.s_rate : "",
          burstiness: open ? state.s_burstiness : "", requests: state.s_requests,
          input_len: state.s_input || state.input_len, output_len: state.s_output || state.output_len,
          ttft_ms: state.s_ttft, itl_ms: state.s_itl, seed: state.s_seed });
      },
      render: renderSimulate,
    },
    context: {
      endpoint: "context",
      // batch "max" means here what it means on the overview: the largest batch that fits (asked of /api/infer)
      prepare: async () => (batchNum() ? null : api("infer", Object.assign(common(), {
        batch: "max", input_len: intOf("input_len"), output_len: intOf("output_len") }))),
      params: (pre) => Object.assign(common(), { batch: batchNum() || pre.batch, context: contextOf() }),
      render: renderContext,
    },
    prices: {
      endpoint: "prices",
      params: () => {
        const cs = new Set([256, 1024, 4096, 16384, 65536, 131072, intOf("input_len")]);
        return Object.assign(common(), { contexts: Array.from(cs).sort((a, b) => a - b).join(","),
                                         output_len: intOf("output_len"), batch: batchNum() || "" });
      },
      render: renderPrices,
    },
    deduce: {
      endpoint: "deduce",
      fields: { hardware: "d_hardware" },
      params: () => ({ input_price: state.input_price, output_price: state.output_price,
                       cached_input_price: state.cached_input_price, output_speed: state.output_speed,
                       long_context_threshold: state.long_context_threshold,
                       long_input_price: state.long_input_price, long_output_price: state.long_output_price,
                       hardware: state.d_hardware, margin: state.margin, utilization: state.utilization }),
      render: renderDeduce,
    },
    train: {
      endpoint: "train",
      fields: { chips: "t_chips", tp: "t_tp", pp: "t_pp", dp: "t_dp", ep: "t_ep", cp: "t_cp" },
      params: () => ({ model: state.model, hardware: state.hardware, chips: state.t_chips, tp: state.t_tp,
                       pp: state.t_pp, dp: state.t_dp, ep: state.t_ep, cp: state.t_cp, seq_len: state.seq_len,
                       global_batch_tokens: state.global_batch_tokens, micro_batch: state.micro_batch,
                       recompute: state.recompute, zero: state.zero, tokens: state.tokens }),
      render: renderTrain,
      also: {
        endpoint: "overtrain",
        fields: { min_tokens_per_s_per_user: "min_tps" },
        params: () => ({ compute: state.target_loss ? "" : state.compute, target_loss: state.target_loss,
                         inference_tokens: state.inference_tokens, fit: state.fit, mfu: state.mfu,
                         min_tokens_per_s_per_user: state.min_tps, hardware: state.hardware }),
        render: renderOvertrain,
        error: ".ot-error",
      },
    },
  };

  const last = {};      // endpoint -> the request key of its newest answer
  const cache = {};     // endpoint -> {key, data, pre}: the newest answer, to redraw without asking again
  const seq = {};

  function markInvalid(fieldMap, err) {
    $$(".invalid").forEach((e) => e.classList.remove("invalid"));
    if (!err || !err.field) return;
    const key = (fieldMap && fieldMap[err.field]) || err.field;
    const input = document.getElementById(key);
    if (input && input.dataset.state) input.classList.add("invalid");
  }

  function showError(root, errSel, spec, e) {
    const errBox = $(errSel || ".error", root);
    const raw = e.err || {};
    const fieldId = (spec.fields && spec.fields[raw.field]) || raw.field;
    const err = Words.error(Object.assign({}, raw, { field: fieldId }), state, labelOf);
    errBox.textContent = "";
    errBox.append(h("strong", { text: err.field ? err.label + ": " : "" }), (err.problem || e.message) + "",
                  err.valid ? h("span", { class: "valid", text: " \u2014 " + err.valid }) : "");
    errBox.hidden = false;
    root.classList.add("stale");
    markInvalid(null, err);
    summary(root, err.field ? `${err.label}: ${err.problem}` : String(err.problem || e.message), true);
  }

  function rendered(spec, data, root, pre) {
    spec.render(data, root, pre);
    main.dataset.renders = String(Number(main.dataset.renders) + 1);
    summary(root);
  }

  // one panel: ask its endpoint when the request changed; when only what the page draws from the answer changed (the
  // batch marked on the hyperbola, a new tab, a narrower window), draw the newest answer again
  async function runPanel(tab, spec, root, errSel, force) {
    const n = (seq[spec.endpoint] = (seq[spec.endpoint] || 0) + 1);
    const errBox = $(errSel || ".error", root);
    try {
      let pre = null;
      const pkey = spec.prepare ? JSON.stringify([common(), state.batch, state.input_len, state.output_len]) : "";
      const c = cache[spec.endpoint];
      if (spec.prepare) {
        pre = !force && c && c.pkey === pkey ? c.pre : await spec.prepare();
        if (n !== seq[spec.endpoint]) return;
      }
      const params = spec.params(pre);
      const key = spec.endpoint + JSON.stringify(params);
      const view = viewKey() + "|" + pkey;    // what the drawing takes besides the answer
      if (!force && c && c.key === key) {
        if (last[spec.endpoint] === key && errBox.hidden && c.shown === view) return;
        Object.assign(c, { shown: view, pre, pkey });
        last[spec.endpoint] = key;
        errBox.hidden = true;
        root.classList.remove("stale");
        markInvalid(null, null);
        rendered(spec, c.data, root, pre);
        return;
      }
      last[spec.endpoint] = key;
      const data = await api(spec.endpoint, params);
      if (n !== seq[spec.endpoint]) return;
      cache[spec.endpoint] = { key, data, pre, pkey, shown: view };
      errBox.hidden = true;
      root.classList.remove("stale");
      markInvalid(null, null);
      rendered(spec, data, root, pre);
    } catch (e) {
      if (n !== seq[spec.endpoint]) return;
      last[spec.endpoint] = null;
      if (!(e instanceof ApiError)) console.error(e);
      showError(root, errSel, spec, e instanceof ApiError ? e : new ApiError({ problem: String(e.message || e) }, 0));
    }
  }
  // what a drawing may read besides its answer: any input (the hyperbola marks the batch, the prices tab picks its
  // row by input tokens) and the width it is drawn at; a change redraws from the newest answer
  const viewKey = () => JSON.stringify(Object.assign({}, state, { tab: "" })) + "|" + window.innerWidth;

  function refresh(force) {
    const tab = state.tab;
    const spec = PANELS[tab];
    const root = $("#tab-" + tab);
    const jobs = [runPanel(tab, spec, root, ".error:not(.ot-error)", force)];
    if (spec.also) jobs.push(runPanel(tab, spec.also, root, spec.also.error, force));
    return Promise.all(jobs);
  }

  // the sticky summary (a phone's view of the results while its inputs are edited): the panel's title and first
  // cards, or the error that stopped it
  function summaryShown() {
    const cards = $(`#tab-${state.tab} .cards`);
    const r = cards && cards.getBoundingClientRect();
    $("#summary").hidden = !r || (r.bottom > 0 && r.top < window.innerHeight - 60);
  }

  function summary(root, errorText, bad) {
    const box = $("#summary");
    summaryShown();
    if (!box || root.hidden) return;
    box.textContent = "";
    box.classList.toggle("bad", !!bad);
    if (bad) {
      box.append(h("strong", { text: "Cannot compute: " }), errorText);
      return;
    }
    const all = $$(".cards .card", root);
    const head = (PANELS[state.tab] || {}).headline || [];
    const cards = [...head.map((k) => all.find((c) => c.dataset.card === k)).filter(Boolean), ...all]
      .filter((c, i, xs) => xs.indexOf(c) === i).slice(0, 3)
      .map((c) => `${$(".label", c).textContent} ${$(".value", c).textContent}`);
    box.append(h("strong", { text: ($(".title", root) || {}).textContent || "" }), h("span", { text: cards.join(" \u00b7 ") }));
  }

  // ---- overview: /api/infer -----------------------------------------------------------------------------------
  function renderInfer(d, root) {
    $(".title", root).textContent = `${d.model_name} on ${d.chips} \u00d7 ${d.hardware_name}` +
      ` (tp ${d.tp}, pp ${d.pp}, ep ${d.ep}, dp ${d.dp}) \u2014 batch ${d.batch}, ` +
      `${fmt.int(d.input_len)} in / ${fmt.int(d.output_len)} out` + engineTag(d);
    const mb = d.memory_breakdown_bytes;
    const cards = [];
    if (d.fits) {
      cards.push(
        { key: "decode_step_s", label: "decode step", value: fmt.seconds(d.decode_step_s),
          sub: `pure roofline ${fmt.seconds(d.decode_floor_s)}; ${d.bottleneck_decode}-bound`, why: { sections: [4] } },
        { key: "output_tokens_per_s_per_user", label: "tokens/s per user", value: fmt.num(d.output_tokens_per_s_per_user, 4),
          sub: "1 / decode step", why: { sections: [5], hl: /per user/ } },
        { key: "output_tokens_per_s", label: "tokens/s (system)", value: fmt.num(d.output_tokens_per_s, 4),
          sub: `batch ${d.batch}, TTFT + all decode steps`, why: { sections: [5], hl: /system/ } },
        { key: "ttft_s", label: "time to first token", value: fmt.seconds(d.ttft_s),
          sub: `whole batch prefill; ${d.bottleneck_prefill}-bound`, why: { sections: [3] } },
        { key: "cost_per_mtok_output_usd", label: "$ per Mtok output (decode only)", value: fmt.usd(d.cost_per_mtok_output_usd),
          sub: d.price_usd_per_chip_hour ? `at $${d.price_usd_per_chip_hour}/chip-hour; whole request ${fmt.usd(d.cost_per_mtok_output_request_usd)}` : "no public price",
          why: { sections: [5], hl: /\$|output \(/ } },
        { key: "cost_per_mtok_input_usd", label: "$ per Mtok input", value: fmt.usd(d.cost_per_mtok_input_usd),
          sub: d.cost_per_mtok_input_usd && d.cost_per_mtok_output_usd
            ? `output (decode) costs ${fmt.num(d.cost_per_mtok_output_usd / d.cost_per_mtok_input_usd)}\u00d7 input` : "",
          why: { sections: [5], hl: /input/ } });
    } else {
      cards.push({ key: "fits", label: "does not fit", value: "no speeds", cls: "bad",
                   sub: "weights + KV exceed HBM: see the advice below", why: { sections: [1, 5] } });
    }
    cards.push(
      { key: "memory_per_chip_bytes", label: "memory per chip", value: fmt.bytes(d.memory_per_chip_bytes),
        sub: `of ${fmt.bytes(d.memory_usable_per_chip_bytes)} usable: weights ${fmt.bytes(mb.weights)}, KV ${fmt.bytes(mb.kv_cache)}`,
        cls: d.fits ? "" : "bad", why: { sections: [1], hl: /per chip/ } },
      { key: "params", label: "parameters", value: fmt.count(d.params_total),
        sub: d.params_active !== d.params_total ? `${fmt.count(d.params_active)} active per token` : "all active",
        why: { sections: [0] } },
      { key: "kv_bytes_per_token", label: "KV cache per token", value: fmt.bytes(d.kv_bytes_per_token),
        sub: `${d.kv_dtype}; weights ${d.weight_dtype}`, why: { sections: [1], hl: /KV per token/ } });
    renderCards($(".cards", root), cards, d.explain);
    setNotes($(".notes", root), [...(d.advice || []).map((a) => ["advice", "advice: " + Words.web(a)]),
                                 ...(d.notes || []).map((a) => ["note", "note: " + Words.web(a)])]);
    drawRoofline($("#roofline"), d);
    const rows = [];
    for (const pass of ["prefill", "decode"]) {
      const p = d.roofline.passes[pass];
      if (!p) continue;
      for (const o of p.ops) {
        rows.push([pass, o.name, fmt.num(o.count), fmt.flops(o.flops), fmt.bytes(o.bytes),
                   o.intensity ? fmt.num(o.intensity) : "\u2014",
                   o.attained_flops_per_s ? fmt.rate(o.attained_flops_per_s, "FLOP/s") : "\u2014",
                   fmt.seconds(o.total_s), o.bound]);
      }
    }
    table($(".ops .table-box", root), ["pass", "op", "\u00d7", "FLOPs/chip", "bytes/chip", "FLOP/B",
                                        "attained", "time (all)", "bound"], rows);
    $(".derivation pre", root).textContent = d.explain;
  }

  function drawRoofline(box, d) {
    const rf = d.roofline;
    const pts = { prefill: [], decode: [] };
    const xs = [];
    for (const pass of ["prefill", "decode"]) {
      const p = rf.passes[pass];
      if (!p) continue;
      for (const o of p.ops) {
        if (!o.intensity || !o.attained_flops_per_s) continue;
        xs.push(o.intensity);
        const tip = `${pass} ${o.name} (\u00d7${fmt.num(o.count)}): ${fmt.flops(o.flops)} / ${fmt.bytes(o.bytes)} = ` +
          `${fmt.num(o.intensity)} FLOP/B; attains ${fmt.rate(o.attained_flops_per_s, "FLOP/s")}; ` +
          `${o.bound}-bound; ${fmt.seconds(o.total_s)} per pass`;
        pts[pass].push([o.intensity, o.attained_flops_per_s, tip, o.name]);
      }
    }
    const ridge = rf.ridge_point;
    xs.push(ridge);
    let xmin = Math.min(...xs) / 4, xmax = Math.max(...xs) * 4;
    xmin = Math.min(xmin, ridge / 30);
    xmax = Math.max(xmax, ridge * 30);
    const bw = rf.memory_bw, bwA = rf.memory_bw_achievable;
    const series = [];
    rf.roofs.forEach((r, i) => {
      const rp = r.peak_flops / bw;
      series.push({ kind: "line", cls: "roof" + (i ? " roof2" : ""), noReadout: true, label: i === 0 ? `roof: ${r.dtype} peak, HBM` : `${r.dtype} peak`,
                    points: [[xmin, bw * xmin], [rp, r.peak_flops], [xmax, r.peak_flops]] });
      if (rf.flops_efficiency < 1 || bwA < bw) {
        const ra = r.achievable_flops / bwA;
        series.push({ kind: "line", cls: "roof-ach", noReadout: true, label: i === 0 ? "achievable (prediction)" : null,
                      points: [[xmin, bwA * xmin], [ra, r.achievable_flops], [xmax, r.achievable_flops]] });
      }
    });
    series.push({ kind: "scatter", cls: "prefill", label: "prefill ops", points: pts.prefill });
    series.push({ kind: "scatter", cls: "decode", marker: "triangle", label: "decode ops", points: pts.decode });
    Charts.plot(box, {
      id: "roofline-svg",
      x: { log: true, label: "arithmetic intensity (FLOP per byte of HBM traffic)", min: xmin, max: xmax },
      y: { log: true, label: "attained FLOP/s per chip", fmt: (v) => Charts.short(v) },
      series, legendPos: "tl",
      vlines: [{ x: ridge, cls: "ridge", bottom: true, label: `ridge ${fmt.num(ridge)} FLOP/B (${rf.ridge_dtype})` }],
    });
  }

  // ---- hyperbola ---------------------------------------------------------------------------------------------------
  function renderHyperbola(d, root) {
    const pts = d.points || [];
    const priced = pts.length && pts[0].cost_per_mtok_output_usd !== null;
    $(".title", root).textContent = `Decode cost against batch: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)},` +
      ` ${fmt.int(d.context)} tokens of context (input + output)` + engineTag(d);
    const b = batchNum();
    const want = b || d.max_batch;
    // the sweep's points are powers of two up to the largest batch that fits: "your batch" is the nearest of them,
    // named as such when it is not the batch typed
    const cur = pts.reduce((best, p) => (Math.abs(Math.log(p.batch / want)) < Math.abs(Math.log(best.batch / want)) ? p : best), pts[0]);
    const cost = (p) => priced ? p.cost_per_mtok_output_usd : p.step_s / p.batch;
    const cfmt = priced ? fmt.usd : fmt.seconds;
    const floor = priced ? d.floor_cost_per_mtok_output_usd : d.floor_per_token_s;
    const cheapest = pts.reduce((a, p) => (cost(p) < cost(a) ? p : a), pts[0]);
    const reached = cost(cheapest) <= floor * 1.05;
    const tooBig = b && b > d.max_batch;
    renderCards($(".cards", root), [
      { key: "max_batch", label: "largest batch that fits", value: fmt.int(d.max_batch),
        sub: `HBM: weights + KV of ${fmt.int(d.context)} tokens each`, why: { hl: /largest|max batch/ } },
      { key: "critical_batch", label: "critical batch", value: d.critical_batch ? fmt.int(d.critical_batch) : "never",
        sub: d.critical_batch ? (d.critical_batch_fits ? "weight matmuls turn compute-bound" : `beyond what fits (${fmt.int(d.max_batch)})`) : "",
        why: { hl: /critical/ } },
      { key: "floor", label: priced ? "floor $/Mtok output" : "floor per token", cls: "",
        value: cfmt(floor),
        sub: `${d.floor_bottleneck}-bound as B \u2192 \u221e` + (reached ? ""
          : `; not reached at the batches that fit: the cheapest, batch ${fmt.int(cheapest.batch)}, costs ${cfmt(cost(cheapest))}`),
        why: { hl: /floor/ } },
      { key: "current", label: `at batch ${fmt.int(cur.batch)}` + (b && cur.batch !== b ? ` (nearest to ${fmt.int(b)})` : b ? "" : " (the largest that fits)"),
        value: cfmt(cost(cur)), cls: tooBig ? "bad" : "",
        sub: (tooBig ? `batch ${fmt.int(b)} does not fit; ` : "") +
          `${fmt.num(cur.tokens_per_s_per_user)} tok/s/user; weights ${fmt.pct(cur.weight_share)} of the step`,
        why: { hl: /\$\/Mtok|per-token time/ } },
      cur.batch !== 1 ? { key: "b1", label: "at batch 1", value: cfmt(cost(pts[0])),
        sub: `${fmt.num(pts[0].tokens_per_s_per_user)} tok/s/user`, why: { hl: /batch 1|B=1/ } } : null,
    ].filter(Boolean), d.explain);
    const vl = [{ x: d.max_batch, cls: "fits", label: `largest that fits ${fmt.int(d.max_batch)}`, dy: 16 }];
    if (d.critical_batch) vl.push({ x: d.critical_batch, cls: "critical", label: `critical ${fmt.int(d.critical_batch)}` });
    const readCost = (p) => `batch ${fmt.int(p.batch)}: ${cfmt(cost(p))}${priced ? "/Mtok output" : " per token"}, ` +
      `${fmt.num(p.tokens_per_s_per_user)} tok/s/user, ${p.bottleneck}-bound`;
    const mine = (y, text) => ({ x: cur.batch, y, label: `your batch ${fmt.int(cur.batch)}`, text: `your batch: ${text}` });
    Charts.plot($("#hyperbola-cost"), {
      id: "hyperbola-svg", width: 520, height: 360, title: priced ? "$ per million output tokens" : "chip time per output token",
      name: "Decode cost per token against batch",
      x: { log: true, label: "batch (concurrent sequences)", name: "batch", fmt: fmt.int },
      y: { log: true, label: priced ? "$/Mtok output" : "seconds per token", fmt: priced ? (v) => "$" + Charts.short(v) : fmt.seconds },
      series: [{ kind: "line", cls: "s1", label: "cost per token", points: pts.map((p) => [p.batch, cost(p), readCost(p)]) }],
      hlines: [{ y: floor, cls: "floor", label: reached ? "floor" : `floor ${cfmt(floor)}: not reached` }],
      vlines: vl, legend: false, mine: mine(cost(cur), readCost(cur)),
    });
    const readSpeed = (p) => `batch ${fmt.int(p.batch)}: ${fmt.num(p.tokens_per_s_per_user)} tok/s per user, ` +
      `${fmt.num(p.tokens_per_s)} tok/s whole system`;
    Charts.plot($("#hyperbola-speed"), {
      width: 520, height: 360, legendPos: "bl", title: "tokens per second", name: "Tokens per second against batch",
      x: { log: true, label: "batch (concurrent sequences)", name: "batch", fmt: fmt.int },
      y: { log: true, label: "tokens/s" },
      series: [
        { kind: "line", cls: "s1", label: "per user", points: pts.map((p) => [p.batch, p.tokens_per_s_per_user, readSpeed(p)]) },
        { kind: "line", cls: "s2", label: "whole system", points: pts.map((p) => [p.batch, p.tokens_per_s, readSpeed(p)]) },
      ],
      vlines: vl.map((v) => Object.assign({}, v, { label: null })),   // named on the cost chart beside it
      mine: mine(cur.tokens_per_s, readSpeed(cur)),
    });
    $(".derivation pre", root).textContent = d.explain;
  }

  // ---- pareto ------------------------------------------------------------------------------------------------------
  function renderPareto(d, root, pre) {
    const f = d.frontier || [];
    const auto = !String(state.chips).trim();
    $(".title", root).textContent = `Throughput per chip against speed per user: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)}` +
      (auto ? " (chips blank: the fewest that fit)" : "") + engineTag(d);
    const a = f[0], z = f[f.length - 1];
    const cards = [{ key: "evaluated", label: "points evaluated", value: fmt.int(d.points_evaluated),
                     sub: `${f.length} on the frontier; ${d.layouts.length} layouts`, why: { hl: /feasible/ } }];
    if (a) {
      cards.push({ key: "interactive", label: "most interactive", value: fmt.num(a.output_tokens_per_s_per_user) + " tok/s/user",
                   sub: `${fmt.num(a.output_tokens_per_s_per_chip)} tok/s/chip, ${a.layout}, batch ${a.batch}`,
                   why: { hl: /most interactive/ } },
                 { key: "productive", label: "most productive", value: fmt.num(z.output_tokens_per_s_per_chip) + " tok/s/chip",
                   sub: `${fmt.num(z.output_tokens_per_s_per_user)} tok/s/user, ${z.layout}, batch ${z.batch}` +
                     (z.cost_per_mtok_output_request_usd !== null ? `, ${fmt.usd(z.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : ""),
                   why: { hl: /most productive/ } });
    }
    renderCards($(".cards", root), cards, d.explain);
    // each layout's closed-loop steady state by concurrency (continuous batching), one dashed curve per layout
    const byLayout = {};
    for (const q of d.by_concurrency || []) (byLayout[q.layout] = byLayout[q.layout] || []).push(q);
    const curves = Object.entries(byLayout).map(([lay, qs], i) => ({
      kind: "line", dots: true, r: 2.5, cls: "s3", label: i === 0 ? "by concurrency (engine steady state)" : null,
      points: qs.map((q) => [q.output_tokens_per_s_per_user, q.output_tokens_per_s_per_chip,
        `${lay}, ${q.concurrency} users: ${fmt.num(q.output_tokens_per_s_per_user)} tok/s/user, ` +
        `${fmt.num(q.output_tokens_per_s_per_chip)} tok/s/chip, TTFT ${fmt.seconds(q.ttft_s)} (${q.limit})`]) }));
    // your point: the overview's configuration (its layout and batch), the same numbers as its cards
    const you = pre && pre.you;
    const mine = you && you.fits && you.output_tokens_per_s_per_user ? {
      x: you.output_tokens_per_s_per_user, y: you.output_tokens_per_s / you.chips, label: `you: batch ${you.batch}`,
      text: `your configuration: tp ${you.tp} pp ${you.pp} ep ${you.ep} dp ${you.dp}, batch ${fmt.int(you.batch)}: ` +
        `${fmt.num(you.output_tokens_per_s_per_user)} tok/s/user, ${fmt.num(you.output_tokens_per_s / you.chips)} tok/s/chip` +
        (you.cost_per_mtok_output_request_usd ? `, ${fmt.usd(you.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : "") } : null;
    Charts.plot($("#pareto-chart"), {
      id: "pareto-svg", legendPos: "bl", name: "Pareto frontier: throughput per chip against speed per user", mine,
      x: { log: true, label: "output tokens/s per user (interactivity)", name: "tok/s/user" },
      y: { log: true, label: "output tokens/s per chip (throughput)", name: "tok/s/chip" },
      series: [
        ...curves,
        { kind: "scatter", cls: "cloud", r: 2, label: "(layout, batch) that fits",
          points: (d.chart.points || []).map((p, i) => {
            const l = (d.chart.labels || [])[i] || [];
            return [p[0], p[1], `${l[0] || "layout"}, batch ${fmt.int(l[1])}: ${fmt.num(p[0])} tok/s/user, ` +
              `${fmt.num(p[1])} tok/s/chip` + (l[2] !== null && l[2] !== undefined ? `, ${fmt.usd(l[2])}/Mtok (whole request)` : "")];
          }) },
        { kind: "line", dots: true, r: 3, cls: "frontier", label: "frontier",
          points: f.map((p) => [p.output_tokens_per_s_per_user, p.output_tokens_per_s_per_chip,
            `${p.layout}, batch ${p.batch}: ${fmt.num(p.output_tokens_per_s_per_user)} tok/s/user, ` +
            `${fmt.num(p.output_tokens_per_s_per_chip)} tok/s/chip` +
            (p.cost_per_mtok_output_request_usd !== null ? `, ${fmt.usd(p.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : "") + `, ${p.bottleneck}-bound`]) },
      ],
    });
    const step = Math.max(1, Math.floor(f.length / 20));
    const shown = f.filter((_, i) => i % step === 0 || i === f.length - 1);
    table($(".ops .table-box", root), ["tok/s/user", "tok/s/chip", "$/Mtok (whole request)", "layout", "batch", "bound"],
          shown.map((p) => [fmt.num(p.output_tokens_per_s_per_user), fmt.num(p.output_tokens_per_s_per_chip),
                            fmt.usd(p.cost_per_mtok_output_request_usd), p.layout, fmt.int(p.batch), p.bottleneck]));
    $(".derivation pre", root).textContent = d.explain;
  }

  // ---- simulate ----------------------------------------------------------------------------------------------------
  function renderSimulate(d, root) {
    $(".title", root).textContent = `Simulated: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)} ` +
      `(tp ${d.tp}, pp ${d.pp}, ep ${d.ep}, dp ${d.dp}), ${d.workload_description}` + engineTag(d);
    const pc = (x) => `p50 ${fmt.seconds(x.p50)}`;
    const tail = (x) => `p90 ${fmt.seconds(x.p90)}, p99 ${fmt.seconds(x.p99)}; mean ${fmt.seconds(x.mean)}`;
    const st = d.steady || {};
    const slo = d.slo || {};
    renderCards($(".cards", root), [
      { key: "throughput", label: "output tokens/s", value: fmt.num(d.output_tokens_per_s, 4),
        sub: `${fmt.num(d.output_tokens_per_s_per_chip, 4)} per chip, ${fmt.num(d.requests_per_s)} req/s over the run` +
          (st.output_tokens_per_s ? `; steady state ${fmt.num(st.output_tokens_per_s, 4)}` : ""),
        why: { hl: /served|steady state/ } },
      { key: "ttft", label: "time to first token", value: pc(d.ttft_s), sub: tail(d.ttft_s),
        why: { hl: /time to first token/ } },
      { key: "itl", label: "inter-token latency", value: pc(d.itl_s), sub: tail(d.itl_s) + "; every gap between two tokens",
        why: { hl: /inter-token/ } },
      { key: "tpot", label: "time per output token", value: pc(d.tpot_s),
        sub: `p99 ${fmt.seconds(d.tpot_s.p99)}; ${d.tpot_s.mean ? fmt.num(1 / d.tpot_s.mean) : "n/a"} tok/s per user (mean)`,
        why: { hl: /time per output token/ } },
      { key: "e2e", label: "end to end", value: pc(d.e2e_s), sub: tail(d.e2e_s), why: { hl: /end to end/ } },
      { key: "goodput", label: "goodput", value: `${fmt.num(d.goodput_rps)} req/s`, cls: d.slo_attainment < 0.9 ? "bad" : "",
        sub: `${fmt.pct(d.slo_attainment)} of requests meet TTFT \u2264 ${fmt.seconds(slo.ttft_target_s)} and ` +
          `time per token \u2264 ${fmt.seconds(slo.tpot_target_s)}`, why: { hl: /goodput/ } },
      { key: "queue", label: "queue", value: `at most ${fmt.int(d.queue_max)} waiting`, cls: d.queue_grows ? "bad" : "",
        sub: `mean ${fmt.num(d.queue_mean)}; KV cache peak ${fmt.pct(d.kv_peak_fraction)}; ${fmt.int(d.preemptions)} preemptions` +
          (d.queue_grows ? "; it grows: arrivals outpace the replica" : ""), why: { hl: /queue|preempt/ } },
    ], d.explain);
    setNotes($(".notes", root), (d.notes || []).map((a) => ["note", "note: " + Words.web(a)]));
    const c = d.cdf || { q: [] };
    const curve = (key) => (c[key] || []).map((v, i) => [v, c.q[i], `${key.replace("_s", "")} ${fmt.seconds(v)} at ${fmt.pct(c.q[i])}`]);
    Charts.plot($("#simulate-cdf"), {
      id: "simulate-cdf-svg", width: 520, height: 360, title: "latency distribution", legendPos: "br",
      x: { log: true, label: "seconds", fmt: fmt.seconds },
      y: { log: false, min: 0, max: 1, label: "fraction of requests (ITL: of gaps)", fmt: (v) => Math.round(v * 100) + "%" },
      series: [
        { kind: "line", cls: "s1", label: "time to first token", points: curve("ttft_s") },
        { kind: "line", cls: "s2", label: "inter-token gap", points: curve("itl_s") },
        { kind: "line", cls: "s3", label: "time per output token", points: curve("tpot_s") },
        { kind: "line", cls: "s4", label: "end to end", points: curve("e2e_s") },
      ],
      vlines: [{ x: slo.ttft_target_s, label: "TTFT target" }, { x: slo.tpot_target_s, label: "token target", dy: 14 }],
    });
    const s = d.series || { t_s: [] };
    const over = (key) => (s[key] || []).map((v, i) => [s.t_s[i], v]);
    Charts.plot($("#simulate-queue"), {
      id: "simulate-queue-svg", width: 520, height: 360, title: "requests over time (largest in each interval)",
      legendPos: "tl", x: { log: false, label: "time (s)" }, y: { log: false, zero: true, label: "requests" },
      series: [
        { kind: "line", cls: "s2", label: "waiting (queue)", points: over("queue") },
        { kind: "line", cls: "s1", label: "running", points: over("running") },
      ],
    });
    Charts.plot($("#simulate-kv"), {
      width: 1060, height: 240, title: "KV cache occupancy (largest in each interval)", legend: false,
      x: { log: false, label: "time (s)" },
      y: { log: false, min: 0, max: 1, label: "share of KV cache", fmt: (v) => Math.round(v * 100) + "%" },
      series: [{ kind: "line", cls: "s3", label: "KV cache", points: over("kv_fraction") }],
    });
    table($(".ops .table-box", root), ["kind", "steps", "time", "mean step", "decodes", "prompt tokens", "bound"],
          (d.steps || []).map((k) => [k.kind, fmt.int(k.steps), fmt.seconds(k.seconds), fmt.seconds(k.mean_step_s),
                                      fmt.num(k.decode_seqs), fmt.num(k.prefill_tokens), k.bottleneck || ""]));
    $(".derivation pre", root).textContent = d.explain;
  }

  function syncSimMode() {
    const open = state.s_mode === "open";
    $("#s_concurrency").disabled = open;
    $("#s_rate").disabled = !open;
    $("#s_burstiness").disabled = !open;
  }

  // ---- context -----------------------------------------------------------------------------------------------------
  function renderContext(d, root) {
    $(".title", root).textContent = `KV cache and context: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)}, batch ${d.batch}` + engineTag(d);
    renderCards($(".cards", root), [
      { key: "kv_bytes_per_token", label: "KV per token", value: fmt.bytes(d.kv_bytes_per_token),
        sub: `${fmt.bytes(d.kv_bytes_per_sequence_at_context)} per sequence at ${fmt.int(d.context)}`, why: { hl: /KV per token/ } },
      { key: "max_batch_at_context", label: `max batch at ${fmt.int(d.context)} tokens`, value: fmt.int(d.max_batch_at_context),
        sub: "sequences that fit in HBM", why: { hl: /sequences fit/ } },
      { key: "max_context_at_batch", label: `max context at batch ${d.batch}`,
        value: d.max_context_at_batch ? fmt.int(d.max_context_at_batch) : "any", sub: "tokens per sequence",
        why: { hl: /context/ } },
      { key: "crossover_context", label: "KV read = weight read at", value: d.crossover_context ? fmt.int(d.crossover_context) : "never",
        sub: "tokens of context (this batch)", why: { hl: /equals the weight read|below weight reads/ } },
    ], d.explain);
    const curve = d.curve || [];
    const vl = [{ x: d.context, cls: "current", label: `context ${fmt.int(d.context)}` }];
    if (d.crossover_context) vl.push({ x: d.crossover_context, cls: "critical", label: "KV = weights", dy: 16 });
    const ok = curve.filter((c) => c.fits), bad = curve.filter((c) => !c.fits);
    Charts.plot($("#context-step"), {
      id: "context-svg", width: 520, height: 360, title: "decode step against context",
      x: { log: true, label: "context (tokens per sequence)" }, y: { log: true, label: "decode step", fmt: fmt.seconds },
      series: [{ kind: "line", cls: "s1", label: "fits", points: ok.map((c) => [c.context, c.decode_step_s, `${fmt.int(c.context)}: ${fmt.seconds(c.decode_step_s)}`]) },
               { kind: "line", cls: "s3", label: "does not fit", points: bad.map((c) => [c.context, c.decode_step_s]) }],
      vlines: vl, legendLeft: true,
    });
    Charts.plot($("#context-share"), {
      width: 520, height: 360, title: "share of the decode step spent reading",
      x: { log: true, label: "context (tokens per sequence)" }, y: { log: false, label: "share of step", min: 0, max: 1,
                                                                   fmt: (v) => Math.round(v * 100) + "%" },
      series: [{ kind: "line", cls: "s1", label: "weights", points: curve.map((c) => [c.context, c.weight_share]) },
               { kind: "line", cls: "s2", label: "KV cache", points: curve.map((c) => [c.context, c.kv_share]) }],
      vlines: vl, legendLeft: true,
    });
    $(".derivation pre", root).textContent = d.explain;
  }

  // ---- prices ------------------------------------------------------------------------------------------------------
  function renderPrices(d, root) {
    const rows = d.rows || [];
    const unit = rows.length ? rows[0].unit : "$/Mtok";
    const usd = unit.startsWith("$");
    const f = usd ? fmt.usd : (x) => fmt.num(x) + " chip-s";
    $(".title", root).textContent = `Input against output tokens: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)} (${unit})` + engineTag(d);
    const L = intOf("input_len");
    const r = rows.find((x) => x.input_len === L) || rows[0];
    const cards = [];
    if (r && r.fits) {
      cards.push(
        { key: "input", label: `input token at ${fmt.int(r.input_len)}`, value: f(r.cost_per_mtok_input),
          sub: `${r.bottleneck_prefill}-bound prefill, batch ${fmt.int(r.batch)}` + (batchNum() ? " (the batch on the left)" : " (the largest that fits)"),
          why: { hl: new RegExp(`context\\s+${fmt.int(r.input_len)},`) } },
        { key: "output", label: "output token (decode)", value: f(r.cost_per_mtok_output), sub: `${r.bottleneck_decode}-bound decode`,
          why: { hl: new RegExp(`context\\s+${fmt.int(r.input_len)},|why`) } },
        { key: "ratio", label: "output / input", value: fmt.num(r.output_input_ratio) + "\u00d7", sub: "the price ratio this predicts",
          why: { hl: /output\/input|why/ } },
        { key: "cached", label: "cached input token", value: f(r.cost_per_mtok_cached_input),
          sub: cachedWhy(r, d), why: { hl: /cached/ } });
    } else if (r) {
      cards.push({ key: "nofit", label: `at ${fmt.int(r.input_len)} tokens`, value: "does not fit", cls: "bad", why: { hl: /fit/ } });
    }
    renderCards($(".cards", root), cards, d.explain);
    const ok = rows.filter((x) => x.fits);
    Charts.plot($("#prices-chart"), {
      id: "prices-svg",
      x: { log: true, label: "context (prompt tokens)" },
      y: { log: true, label: unit, fmt: usd ? (v) => "$" + Charts.short(v) : undefined },
      series: [
        { kind: "line", dots: true, cls: "s2", label: "output token", points: ok.map((x) => [x.input_len, x.cost_per_mtok_output, `${fmt.int(x.input_len)}: ${x.output_label}`]) },
        { kind: "line", dots: true, cls: "s1", label: "input token", points: ok.map((x) => [x.input_len, x.cost_per_mtok_input, `${fmt.int(x.input_len)}: ${x.input_label}`]) },
        { kind: "line", dots: true, cls: "s3", label: "cached input", points: ok.map((x) => [x.input_len, x.cost_per_mtok_cached_input]) },
      ],
      vlines: [{ x: L, cls: "current", bottom: true, label: `input ${fmt.int(L)}` }], legendPos: "tl",
    });
    table($(".ops .table-box", root), ["context", "batch", "input", "output", "output/input", "cached input", "prefill", "decode"],
          rows.map((x) => [fmt.int(x.input_len), fmt.int(x.batch), x.fits ? f(x.cost_per_mtok_input) : "does not fit",
                           x.fits ? f(x.cost_per_mtok_output) : "", x.fits ? fmt.num(x.output_input_ratio) + "\u00d7" : "",
                           x.fits ? f(x.cost_per_mtok_cached_input) : "", x.bottleneck_prefill, x.bottleneck_decode]));
    $(".derivation pre", root).textContent = d.explain;
  }

  // why a cached prompt token costs what it does: its KV waits cache_ttl_s for reuse in the cheapest tier that holds it,
  // and that waiting is paid for; at a small batch (few tokens per second to share the chip) it can exceed recomputing
  function cachedWhy(r, d) {
    if (r.cached_input_tier === "recompute") return "recomputed: cheaper than holding its KV";
    const ratio = r.cost_per_mtok_input ? r.cost_per_mtok_cached_input / r.cost_per_mtok_input : null;
    const where = `its KV held ${fmt.num(d.cache_ttl_s)} s for reuse in ${r.cached_input_tier.replace(/_/g, " ")}`;
    if (ratio !== null && ratio > 1) {
      return `${fmt.num(ratio)}\u00d7 the uncached input: ${where} costs more than prefilling it again at batch ` +
        `${fmt.int(r.batch)} (memory held, not FLOPs, is what a cache sells)`;
    }
    return `${where}; ${ratio !== null ? fmt.pct(ratio) + " of the uncached input" : ""}`;
  }

  // ---- deduce ------------------------------------------------------------------------------------------------------
  function renderDeduce(d, root) {
    const a = d.active_params_b, t = d.total_params_b, k = d.kv_bytes_per_token, b = d.batch;
    const iv = (x, f) => `${f(x.low)} \u2013 ${f(x.high)} (80%)`;
    const B = (x) => fmt.num(x) + " B";
    renderCards($(".cards", root), [
      { key: "active", label: "active parameters", value: B(a.median), sub: iv(a, B), why: { hl: /active params|N_active/ } },
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
    Charts.intervals($("#deduce-chart"), rows, { title: "80% intervals" });
    Charts.stack($("#deduce-hw"), Object.entries(d.hardware_posterior).map(([id, v]) => ({ label: id, value: v })),
                 { title: "hardware posterior", fmt: fmt.pct });
    $(".derivation pre", root).textContent = d.explain;
  }

  // ---- training ----------------------------------------------------------------------------------------------------
  function renderTrain(d, root) {
    $(".title:not(.ot-title)", root).textContent = `Training ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware) || d.system}: ` +
      `tp ${d.tp} pp ${d.pp} dp ${d.dp} ep ${d.ep} cp ${d.cp}`;
    const mb = d.memory_breakdown_bytes;
    const cards = [];
    if (d.fits) {
      cards.push(
        { key: "step_time_s", label: "step time", value: fmt.seconds(d.step_time_s), sub: `pure roofline ${fmt.seconds(d.step_floor_s)}`,
          why: { sections: [2, 3, 5] } },
        { key: "mfu", label: "MFU", value: fmt.pct(d.mfu), sub: `${fmt.num(d.tflops_per_chip)} TFLOP/s per chip; HFU ${fmt.pct(d.hfu)}`,
          why: { sections: [1, 5], hl: /MFU/ } },
        { key: "tokens_per_s", label: "tokens/s", value: fmt.num(d.tokens_per_s, 4), sub: `${fmt.int(d.global_batch_tokens)} tokens per step`,
          why: { sections: [5] } });
    }
    cards.push({ key: "memory", label: "memory per chip", value: fmt.bytes(d.memory_per_chip_bytes),
                 sub: `of ${fmt.bytes(d.memory_usable_per_chip_bytes)} usable` + (d.fits ? "" : " \u2014 does not fit"),
                 cls: d.fits ? "" : "bad", why: { sections: [6] } });
    if (d.train_time_s !== null && d.train_time_s !== undefined) {
      cards.push(
        { key: "train_time", label: "whole run", value: fmt.num(d.train_time_s / 86400) + " days",
          sub: `${fmt.count(d.tokens)} tokens; ${fmt.count(d.chip_hours)} chip-hours`, why: { sections: [7] } },
        { key: "cost", label: "run cost", value: fmt.usd(d.cost_usd),
          sub: d.energy_kwh !== null ? `${fmt.count(d.energy_kwh)} kWh at TDP` : "", why: { sections: [7], hl: /cost/ } });
    }
    renderCards($(".cards:not(.ot-cards)", root), cards, d.explain);
    setNotes($(".notes", root), [...(d.advice || []).map((x) => ["advice", "advice: " + Words.web(x)]),
                                 ...(d.notes || []).map((x) => ["note", "note: " + Words.web(x)])]);
    const bd = d.breakdown_s || {};
    const names = { compute: "compute", tp_comm: "TP", ep_comm: "EP", cp_comm: "CP", pp_bubble: "bubble",
                    pp_p2p: "PP p2p", dp_comm_exposed: "DP exposed", optimizer: "optimizer" };
    Charts.stack($("#train-breakdown"), Object.entries(names).map(([k2, label]) => ({ label, value: bd[k2] })),
                 { title: "step breakdown", fmt: fmt.seconds });
    $(".derivation:not(.ot-derivation) pre", root).textContent = d.explain;
  }

  function renderOvertrain(d, root) {
    const o = d.optimum, c = d.chinchilla;
    renderCards($(".ot-cards", root), [
      { key: "ot_params", label: "optimal model", value: fmt.count(o.params) + " params",
        sub: `${fmt.num(o.tokens_per_param)} tokens/param`, why: { sections: [4] } },
      { key: "ot_total", label: "training + inference", value: fmt.usd(o.total_usd),
        sub: `train ${fmt.usd(o.training_usd)} + serve ${fmt.usd(o.inference_usd)}`, why: { sections: [2, 3, 4] } },
      { key: "ot_chinchilla", label: "Chinchilla-optimal", value: fmt.count(c.params) + " params",
        sub: `${fmt.num(c.tokens_per_param)} tokens/param, total ${fmt.usd(c.total_usd)}`, why: { sections: [1, 4] } },
      { key: "ot_saving", label: "saving", value: fmt.pct(d.saving_fraction), sub: fmt.usd(d.saving_usd),
        why: { sections: [4, 5], hl: /saving/ } },
    ], d.explain);
    const cv = d.chart;
    const P = cv.params.map((n, i) => [n, i]);
    const opt = o.total_usd;
    const series = [
      { kind: "line", cls: "s1", label: "training", points: P.map(([n, i]) => [n, cv.training_usd[i]]) },
      { kind: "line", cls: "s2", label: "inference", points: P.map(([n, i]) => [n, cv.inference_usd[i]]) },
      { kind: "line", cls: "s0", label: "total", points: P.map(([n, i]) => [n, cv.total_usd[i]]) },
      { kind: "scatter", cls: "opt", label: "optimum", points: [[o.params, o.total_usd, `optimum ${fmt.count(o.params)}: ${fmt.usd(o.total_usd)}`]] },
    ];
    if (c.total_usd) series.push({ kind: "scatter", cls: "chin", marker: "square", label: "Chinchilla",
                                   points: [[c.params, c.total_usd, `Chinchilla ${fmt.count(c.params)}: ${fmt.usd(c.total_usd)}`]] });
    Charts.plot($("#overtrain-chart"), {
      id: "overtrain-svg", legendPos: "br", title: `loss ${fmt.num(d.target_loss, 4)} (${d.fit} fit), ${fmt.num(d.inference_tokens)} inference tokens, ${d.hardware}`,
      x: { log: true, label: "model parameters N", fmt: fmt.count },
      y: { log: true, label: "cost (USD)", min: opt / 20, max: opt * 30, fmt: (v) => "$" + Charts.short(v) },
      series,
    });
    $(".ot-derivation pre", root).textContent = d.explain;
  }

  // the chip's catalog name on every tab ("NVIDIA H200 SXM 141GB"), never its id on one and its name on another
  function hwName(id) {
    const x = catalog.hardware.find((c) => c.id === id);
    return x ? x.name : id;
  }

  function modelName(id) {
    const m = catalog.models.find((x) => x.id === id) || uploads[id];
    return m ? m.name : id;
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
        `; ridge ${fmt.num(hw.ridge_point_bf16)} FLOP/B; scale-up ${hw.scaleup_domain} chips` +
        (hw.price_usd_per_hour ? `; $${hw.price_usd_per_hour}/h` : "");
    }
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

  function showTab(tab) {
    state.tab = tab;
    for (const b of $$(".tabs button")) {
      const on = b.dataset.tab === tab;
      b.setAttribute("aria-selected", String(on));
      b.tabIndex = on ? 0 : -1;
      if (on && b.scrollIntoView && b.parentElement.scrollWidth > b.parentElement.clientWidth) {
        b.scrollIntoView({ block: "nearest", inline: "nearest" });
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
    const fsel = $("#fit");
    for (const f of catalog.meta.fits) fsel.append(h("option", { value: f, text: f }));
    bind();
    await restoreUpload();
    $("#model").value = state.model;
    summarize();
    showTab(state.tab);
  }

  start();
})();
