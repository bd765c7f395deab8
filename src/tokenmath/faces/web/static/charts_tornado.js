// A tornado chart (the sensitivity view): one row per input, ranked by swing, a bar from the base answer to the
// answer with the input moved down and another to the answer with it moved up; the same readout as every chart
// (mouse, touch, keys: Charts.readout). Hand-written SVG, no library. Colours live in app.css.
import { el, text } from "./charts_bars.js";

const ok = (v) => typeof v === "number" && isFinite(v);

// rows: [{label, low, high, answerLow, answerHigh, text}] (largest swing first); spec: {base, fmt, title, name}
export function tornado(container, rows, spec) {
  // drawn at the box's own width when it is narrower (a phone), so 11 px text stays 11 px; there each input's name
  // goes above its bars instead of beside them, and the legend under the title
  const W = Math.max(300, Math.min(720, Math.round(container.clientWidth || 720))), narrow = W < 480;
  const rowH = narrow ? 44 : 30, top = narrow ? 50 : 34, H = top + rows.length * rowH + 26;
  const m = { l: narrow ? 8 : 200, r: narrow ? 64 : 70 };
  container.textContent = "";
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart tornado", role: "img", tabindex: 0, id: spec.id,
                          "aria-label": `${spec.name || spec.title}: arrow keys or pointer read the rows` }, container);
  const vals = [spec.base];
  for (const r of rows) for (const v of [r.answerLow, r.answerHigh]) if (ok(v)) vals.push(v);
  let lo = Math.min(...vals), hi = Math.max(...vals);
  const pad = (hi - lo) * 0.08 || Math.abs(spec.base) * 0.05 || 1;
  lo -= pad;
  hi += pad;
  const X = (v) => m.l + (v - lo) / (hi - lo) * (W - m.l - m.r);
  const f = spec.fmt || String;
  if (spec.title) text(svg, 8, 16, spec.title, "axis-label");
  const hits = [];
  rows.forEach((r, i) => {
    const y = top + i * rowH + rowH / 2 + (narrow ? 7 : 0);
    if (narrow) text(svg, m.l, y - 13, r.label, "axis-label");
    else text(svg, m.l - 8, y + 4, r.label, "axis-label", "end");
    const parts = [[r.answerLow, "lowbar"], [r.answerHigh, "highbar"]];
    for (const [v, cls] of parts) {
      if (!ok(v)) continue;
      const x0 = X(Math.min(v, spec.base)), x1 = X(Math.max(v, spec.base));
      el("rect", { x: x0, y: y - 9, width: Math.max(1.5, x1 - x0), height: 18, class: cls }, svg);
    }
    const ends = [r.answerLow, r.answerHigh].filter(ok);
    if (!ends.length) {
      text(svg, X(spec.base) + 6, y + 4, "no answer when moved", "tick");
    } else {
      text(svg, X(Math.max(...ends)) + 4, y + 4, f(Math.max(...ends)), "tick");
    }
    const mid = ends.length ? (Math.min(...ends) + Math.max(...ends)) / 2 : spec.base;
    hits.push({ x: X(mid), y, text: r.text });
  });
  el("line", { x1: X(spec.base), x2: X(spec.base), y1: top - 6, y2: top + rows.length * rowH + 4, class: "base" }, svg);
  text(svg, X(spec.base), H - 8, `base ${f(spec.base)}`, "tick", "middle");
  const legend = el("g", { class: "legend" }, svg);
  const lx = narrow ? 8 : W - 290, ly = narrow ? 24 : 6;
  el("rect", { x: lx, y: ly, width: 12, height: 12, class: "lowbar" }, legend);
  text(legend, lx + 16, ly + 10, spec.lowLabel || "input moved down", "tick");
  el("rect", { x: lx + 150, y: ly, width: 12, height: 12, class: "highbar" }, legend);
  text(legend, lx + 166, ly + 10, spec.highLabel || "input moved up", "tick");
  hits.ranked = true;
  Charts.readout(container, svg, W, H, hits, null);
  return svg;
}
