// The views by tab, and how one is asked and drawn: ask its endpoint when the request changed, else redraw the
// newest answer; errors in the page's words; the sticky summary a phone shows while its inputs are edited.
import { ApiError, api } from "./api.js";
import { $, $$, h } from "./dom.js";
import { state, labelOf, common } from "./state.js";
import { panel as overview } from "./view_overview.js";
import { panel as hyperbola } from "./view_hyperbola.js";
import { panel as pareto } from "./view_pareto.js";
import { panel as simulate } from "./view_simulate.js";
import { panel as context } from "./view_context.js";
import { panel as prices } from "./view_prices.js";
import { panel as sensitivity } from "./view_sensitivity.js";
import { panel as deduce } from "./view_deduce.js";
import { panel as train } from "./view_train.js";
import { panel as agents } from "./view_agents.js";

const main = () => $("#main");
export const PANELS = { overview, hyperbola, pareto, simulate, context, prices, sensitivity, deduce, train, agents };

export const last = {};      // endpoint -> the request key of its newest answer
export const cache = {};     // endpoint -> {key, data, pre}: the newest answer, to redraw without asking again
export const seq = {};

export function markInvalid(fieldMap, err) {
  $$(".invalid").forEach((e) => e.classList.remove("invalid"));
  if (!err || !err.field) return;
  const key = (fieldMap && fieldMap[err.field]) || err.field;
  const input = document.getElementById(key);
  if (input && input.dataset.state) input.classList.add("invalid");
}

export function showError(root, errSel, spec, e) {
  const errBox = $(errSel || ".error", root);
  let raw = e.err || {};
  // a what-if figure's error names its field on the left (w_memory_bw_tbs), whether the API names it in the field
  // ("set.memory_bw_tbs") or names the parameter sent and starts its problem with the figure ("set", "memory_bw_tbs: ...")
  let wf = /^set\.(.+)$/.exec(raw.field || "");
  const lead = raw.field === "set" && /^([\w.]+): (.*)$/s.exec(raw.problem || "");
  if (lead) {
    wf = lead;
    raw = Object.assign({}, raw, { problem: lead[2] });
  }
  const fieldId = (spec.fields && spec.fields[raw.field]) || (wf ? "w_" + wf[1].replace(/\./g, "_") : raw.field);
  const err = Words.error(Object.assign({}, raw, { field: fieldId }), state, labelOf);
  errBox.textContent = "";
  errBox.append(h("strong", { text: err.field ? err.label + ": " : "" }), (err.problem || e.message) + "",
                err.valid ? h("span", { class: "valid", text: " \u2014 " + err.valid }) : "");
  errBox.hidden = false;
  root.classList.add("stale");
  markInvalid(null, err);
  summary(root, err.field ? `${err.label}: ${err.problem}` : String(err.problem || e.message), true);
}

export function rendered(spec, data, root, pre) {
  spec.render(data, root, pre);
  main().dataset.renders = String(Number(main().dataset.renders) + 1);
  summary(root);
}

// one panel: ask its endpoint when the request changed; when only what the page draws from the answer changed (the
// batch marked on the hyperbola, a new tab, a narrower window), draw the newest answer again
export async function runPanel(tab, spec, root, errSel, force) {
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
export const viewKey = () => JSON.stringify(Object.assign({}, state, { tab: "" })) + "|" + window.innerWidth;

export function refresh(force) {
  const tab = state.tab;
  const spec = PANELS[tab];
  const root = $("#tab-" + tab);
  const jobs = [runPanel(tab, spec, root, ".error:not(.ot-error)", force)];
  if (spec.also) jobs.push(runPanel(tab, spec.also, root, spec.also.error, force));
  return Promise.all(jobs);
}

// the sticky summary (a phone's view of the results while its inputs are edited): the panel's title and first
// cards, or the error that stopped it
export function summaryShown() {
  const cards = $(`#tab-${state.tab} .cards`);
  const r = cards && cards.getBoundingClientRect();
  $("#summary").hidden = !r || (r.bottom > 0 && r.top < window.innerHeight - 60);
}

export function summary(root, errorText, bad) {
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
