// Bar charts drawn by hand (no library): 80% intervals on a log axis (deduce) and a stacked breakdown (a training
// step), each with the same readout as every chart (Charts.readout: mouse, touch, keys); and the two SVG helpers the
// tornado (charts_tornado.js) shares. Colours live in app.css.
const NS = "http://www.w3.org/2000/svg";

export function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

export function text(parent, x, y, s, cls, anchor) {
  const t = el("text", { x, y, class: cls || "", "text-anchor": anchor || "start" }, parent);
  t.textContent = s;
  return t;
}

const finite = (v) => typeof v === "number" && isFinite(v);

// a log axis from domain [d0, d1] to range [r0, r1]
function scale(axis, d0, d1, r0, r1) {
  const l0 = Math.log10(d0), l1 = Math.log10(d1);
  return (v) => r0 + (Math.log10(v) - l0) / (l1 - l0) * (r1 - r0);
}

// the width a chart is drawn at: the box's own when it is narrower than 720 (a phone), so 11 px text stays 11 px
export const widthOf = (container) => Math.max(300, Math.min(720, Math.round(container.clientWidth || 720)));

// horizontal interval bars on a (log) axis: rows = [{label, low, median, high, fmt}]; on a narrow box each row's
// name goes above its bar instead of beside it
export function intervals(container, rows, spec) {
  const W = widthOf(container), narrow = W < 480;
  const rowH = narrow ? 62 : 34, first = narrow ? 46 : 24, H = first + 16 + rows.length * rowH - (narrow ? 16 : 0);
  container.textContent = "";
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart intervals", role: "img", tabindex: 0,
                          "aria-label": `${spec.title || "intervals"}: arrow keys or pointer read the rows` }, container);
  const m = { l: narrow ? 40 : 170, r: narrow ? 40 : 30 };
  const hits = [];
  rows.forEach((r, i) => {
    const y = first + i * rowH;
    text(svg, 8, narrow ? y - 29 : y + 4, r.label, "axis-label");
    if (!finite(r.low) || !finite(r.high) || r.low <= 0) {
      text(svg, m.l, y + 4, "not identified", "tick");
      return;
    }
    const lo = Math.min(r.low, r.scaleMin || r.low) / 1.6, hi = Math.max(r.high, r.scaleMax || r.high) * 1.6;
    const X = scale({ log: true }, lo, hi, m.l, W - m.r);
    el("line", { x1: m.l, x2: W - m.r, y1: y, y2: y, class: "track" }, svg);
    el("rect", { x: X(r.low), y: y - 7, width: Math.max(2, X(r.high) - X(r.low)), height: 14, class: "band" }, svg);
    el("line", { x1: X(r.median), x2: X(r.median), y1: y - 10, y2: y + 10, class: "median" }, svg);
    const f = r.fmt || Charts.short;
    hits.push({ x: X(r.median), y, text: `${r.label}: median ${f(r.median)}, 80% from ${f(r.low)} to ${f(r.high)}` });
    text(svg, X(r.low) - 4, y + 20, f(r.low), "tick", "end");
    text(svg, X(r.median), y - 13, f(r.median), "tick median-text", "middle");
    text(svg, X(r.high) + 4, y + 20, f(r.high), "tick");
  });
  Charts.readout(container, svg, W, H, hits, null);
  return svg;
}

// stacked horizontal bar: parts = [{label, value, cls}]
export function stack(container, parts, spec) {
  const W = widthOf(container);
  let H = 84;
  container.textContent = "";
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart stack", role: "img", tabindex: 0,
                          "aria-label": `${spec.title || "breakdown"}: arrow keys or pointer read the parts` }, container);
  const hits = [];
  const total = parts.reduce((a, p) => a + (finite(p.value) ? Math.max(p.value, 0) : 0), 0);
  if (!(total > 0)) return svg;
  let x = 10;
  const w = W - 20;
  let lx = 10, ly = 50;
  parts.forEach((p, i) => {
    const v = finite(p.value) ? Math.max(p.value, 0) : 0;
    const pw = v / total * w;
    const r = el("rect", { x, y: 10, width: Math.max(pw, 0), height: 26, class: "part c" + (i % 8) }, svg);
    const said = `${p.label}: ${spec.fmt ? spec.fmt(v) : Charts.short(v)} (${(100 * v / total).toFixed(1)}%)`;
    el("title", {}, r).textContent = said;
    if (v > 0) hits.push({ x: x + pw / 2, y: 23, text: said });
    x += pw;
    if (v / total >= 0.005) {
      const said = `${p.label} ${(100 * v / total).toFixed(0)}%`;
      const tw = said.length * 6.6;       // the legend wraps onto a new line where the box ends
      if (lx > 10 && lx + 14 + tw > W - 10) { lx = 10; ly += 18; }
      el("rect", { x: lx, y: ly, width: 10, height: 10, class: "part c" + (i % 8) }, svg);
      const t = text(svg, lx + 14, ly + 9, said, "legend-text");
      lx += 24 + Math.max(60, t.getComputedTextLength ? t.getComputedTextLength() : tw);
    }
  });
  H = Math.max(H, ly + 24);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  Charts.readout(container, svg, W, H, hits, null);
  return svg;
}
