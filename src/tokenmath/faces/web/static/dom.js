// Small DOM helpers: elements, the cards with their derivation buttons, tables and notes. No physics here.
export const $ = (sel, root) => (root || document).querySelector(sel);
export const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

// ---- small DOM helpers ------------------------------------------------------------------------------------------
export function h(tag, attrs, ...kids) {
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
export function sections(text) {
  const out = { 0: [] };
  let cur = 0;
  for (const line of (text || "").split("\n")) {
    const m = /^(\d+)\. /.exec(line);
    if (m) cur = Number(m[1]);
    (out[cur] = out[cur] || []).push(line);
  }
  return out;
}

export function derivationNode(text, why) {
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

// cards: [{key, label, value, sub, why: {sections, hl}, cls, explain}]; a card's button shows its derivation below the
// row (from its own explain text when it has one: a speculative card's is the speculative derivation)
export function renderCards(box, cards, explainText) {
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
                    derivationNode(c.explain || explainText, c.why));
      whyBox.hidden = false;
    });
    box.append(card);
  }
  box.append(whyBox);
}

export function table(box, head, rows) {
  box.textContent = "";
  const t = h("table");
  t.append(h("thead", {}, h("tr", {}, ...head.map((x) => h("th", { text: x })))));
  const tb = h("tbody");
  for (const r of rows) tb.append(h("tr", {}, ...r.map((x) => h("td", { text: x }))));
  t.append(tb);
  box.append(t);
}

export function setNotes(box, lines) {
  box.textContent = "";
  for (const [cls, text] of lines) box.append(h("p", { class: cls, text }));
}
