// tokenmath charts: small SVG plots drawn by hand (no library, no network), each with a nearest-point readout
// (mouse, touch, keys). Colours live in app.css.
"use strict";

const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    if (parent) parent.appendChild(e);
    return e;
  }

  function text(parent, x, y, s, cls, anchor) {
    const t = el("text", { x, y, class: cls || "", "text-anchor": anchor || "start" }, parent);
    t.textContent = s;
    return t;
  }

  // compact number: 1.2k, 3.4M, 0.05, 1e-7 ...
  function short(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    const units = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [s, p] of units) if (a >= s) return trim(v / s) + p;
    if (a >= 0.01) return trim(v);
    return v.toExponential(0).replace("e-", "e-");
  }
  function trim(x) {
    const s = Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
    return s.replace(/\.0+$/, "").replace(/(\.\d*?)0+$/, "$1");
  }

  function finite(v) { return typeof v === "number" && isFinite(v); }

  function extent(values, log) {
    let lo = Infinity, hi = -Infinity;
    for (const v of values) {
      if (!finite(v) || (log && v <= 0)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (lo === Infinity) return log ? [1, 10] : [0, 1];
    if (lo === hi) return log ? [lo / 2, hi * 2] : [lo - 1, hi + 1];
    return [lo, hi];
  }

  function scale(axis, d0, d1, r0, r1) {
    if (axis.log) {
      const l0 = Math.log10(d0), l1 = Math.log10(d1);
      const f = (v) => r0 + (Math.log10(v) - l0) / (l1 - l0) * (r1 - r0);
      f.ticks = () => logTicks(d0, d1);
      return f;
    }
    const f = (v) => r0 + (v - d0) / (d1 - d0) * (r1 - r0);
    f.ticks = () => linTicks(d0, d1);
    return f;
  }

  function logTicks(d0, d1) {
    const a = Math.floor(Math.log10(d0)), b = Math.ceil(Math.log10(d1));
    const decades = b - a;
    const step = decades > 8 ? 2 : 1;
    const out = [];
    for (let e = a; e <= b; e += step) {
      for (const m of decades <= 3 ? [1, 2, 5] : [1]) {
        const v = m * Math.pow(10, e);
        if (v >= d0 * 0.999 && v <= d1 * 1.001) out.push(v);
      }
    }
    return out;
  }

  function linTicks(d0, d1) {
    const span = d1 - d0;
    const raw = span / 5;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= 6) || raw;
    const out = [];
    for (let v = Math.ceil(d0 / step) * step; v <= d1 + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  function padLog(lo, hi, f) { return [lo / f, hi * f]; }

  // plot(container, spec): spec = {title, name, x: {label, name, log, min, max, fmt}, y: {...}, series: [...],
  //   vlines, hlines, legend, mine: {x, y, text}}; series = {kind: "line"|"scatter"|"area", points: [[x, y, readout?,
  //   label?]], cls, label, marker, noReadout}. Every point of a series is a readout stop (mouse, touch, arrow keys);
  //   mine is "your point", drawn as a ring and read first. An x axis over more than two decades can be zoomed.
  function plot(container, spec) {
    container.textContent = "";
    // draw at the box's own width when it is narrower than asked, so 11 px text stays 11 px on a phone
    const W0 = spec.width || 720, H0 = spec.height || 400;
    const cw = container.clientWidth || W0;
    const W = cw < W0 ? Math.max(300, Math.round(cw)) : W0;
    const narrow = W < 480;
    // the legend sits below the plot, never over its data: its entries flow into rows across the width
    const legend = spec.legend === false ? [] : spec.series.filter((s) => s.label);
    const legRows = legendRows(legend, W - 16);
    const legH = legRows.length ? legRows.length * 16 + 8 : 0;
    // a title too long for one line wraps (a phone: clear of the zoom buttons, which sit over the top right)
    const titleLines = spec.title ? wrap(spec.title, (W - (narrow ? 16 : 90) - 110) / 7.2) : [];
    const H = (W < W0 ? Math.round(Math.max(260, H0 * Math.max(0.72, W / W0))) : H0) + legH +
      Math.max(0, titleLines.length - 1) * 16;
    const m = { l: narrow ? 56 : 70, r: narrow ? 12 : 20, t: titleLines.length ? 14 + 16 * titleLines.length : 14,
                b: 48 + legH };
    const name = spec.name || spec.title || spec.y.label || "chart";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", tabindex: 0,
                            "aria-label": `${name}: arrow keys or pointer read the points` }, container);
    if (spec.id) svg.setAttribute("id", spec.id);
    const xs = [], ys = [];
    for (const s of spec.series) for (const p of s.points) { xs.push(p[0]); ys.push(p[1]); }
    for (const v of spec.vlines || []) xs.push(v.x);
    for (const h of spec.hlines || []) if (!h.noFit) ys.push(h.y);
    let [x0, x1] = extent(xs, spec.x.log);
    let [y0, y1] = extent(ys, spec.y.log);
    if (spec.x.log) [x0, x1] = padLog(x0, x1, 1.3); else { const p = (x1 - x0) * 0.03; x0 -= p; x1 += p; }
    if (spec.y.log) [y0, y1] = padLog(y0, y1, 1.5); else { const p = (y1 - y0) * 0.06; y0 = Math.min(y0 - p, spec.y.zero ? 0 : y0 - p); y1 += p; }
    if (spec.x.min !== undefined) x0 = spec.x.min;
    if (spec.x.max !== undefined) x1 = spec.x.max;
    if (spec.y.min !== undefined) y0 = spec.y.min;
    if (spec.y.max !== undefined) y1 = spec.y.max;
    const full = [x0, x1];
    const zoomable = spec.x.log && Math.log10(full[1] / full[0]) > 2;
    if (zoomable) m.t = Math.max(m.t, 34);    // the zoom buttons sit over the top margin, not over the points
    if (spec.zoom) [x0, x1] = spec.zoom;
    // the left margin holds the widest y tick ("100 ms") and the rotated axis label beside it
    const yTicks = scale(spec.y, y0, y1, 0, 1).ticks().map(spec.y.fmt || short);
    m.l = Math.max(m.l, 30 + 6.6 * Math.max(0, ...yTicks.map((t) => t.length)));
    const X = scale(spec.x, x0, x1, m.l, W - m.r);
    const Y = scale(spec.y, y0, y1, H - m.b, m.t);
    const fx = spec.x.fmt || short, fy = spec.y.fmt || short;

    titleLines.forEach((s, i) => text(svg, narrow ? 8 : m.l, 18 + 16 * i, s, "chart-title"));
    const grid = el("g", { class: "grid" }, svg);
    const thinTicks = (ts, px) => ts.filter((_, i) => i % Math.max(1, Math.ceil(ts.length * px / (W - m.l - m.r))) === 0);
    for (const t of thinTicks(X.ticks(), narrow ? 44 : 40)) {
      const x = X(t);
      el("line", { x1: x, x2: x, y1: m.t, y2: H - m.b }, grid);
      text(svg, x, H - m.b + 16, fx(t), "tick", "middle");
    }
    for (const t of Y.ticks()) {
      const y = Y(t);
      el("line", { x1: m.l, x2: W - m.r, y1: y, y2: y }, grid);
      text(svg, m.l - 6, y + 4, fy(t), "tick", "end");
    }
    el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: "frame" }, svg);
    text(svg, (m.l + W - m.r) / 2, H - legH - 10, spec.x.label || "", "axis-label", "middle");
    const yl = text(svg, 0, 0, spec.y.label || "", "axis-label", "middle");
    yl.setAttribute("transform", `translate(16 ${(m.t + H - m.b) / 2}) rotate(-90)`);

    const clipId = "clip" + Math.random().toString(36).slice(2, 9);
    const clip = el("clipPath", { id: clipId }, el("defs", {}, svg));
    el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b }, clip);
    const body = el("g", { "clip-path": `url(#${clipId})` }, svg);
    const inside = (p) => finite(p[0]) && finite(p[1]) && (!spec.x.log || p[0] > 0) && (!spec.y.log || p[1] > 0);
    const inView = (p) => p[0] >= Math.min(x0, x1) * (1 - 1e-9) && p[0] <= Math.max(x0, x1) * (1 + 1e-9);

    for (const v of spec.vlines || []) {
      if (!finite(v.x) || (spec.x.log && v.x <= 0)) continue;
      const x = X(v.x);
      el("line", { x1: x, x2: x, y1: m.t, y2: H - m.b, class: "vline " + (v.cls || "") }, body);
      if (v.label) {
        const ty = v.bottom ? H - m.b - 8 - (v.dy || 0) : m.t + 14 + (v.dy || 0);
        const right = x + 4 + v.label.length * 6 > W - m.r;
        text(body, right ? x - 4 : x + 4, ty, v.label, "line-label " + (v.cls || ""), right ? "end" : "start");
      }
    }
    for (const h of spec.hlines || []) {
      if (!finite(h.y) || (spec.y.log && h.y <= 0)) continue;
      const y = Y(h.y);
      el("line", { x1: m.l, x2: W - m.r, y1: y, y2: y, class: "hline " + (h.cls || "") }, body);
      if (h.label) text(body, W - m.r - 6, y - 5, h.label, "line-label " + (h.cls || ""), "end");
    }
    const placed = [];
    const labels = [];
    const hits = [];
    const xn = spec.x.name || spec.x.label || "x", yn = spec.y.name || spec.y.label || "y";
    for (const s of spec.series) {
      const pts = s.points.filter(inside);
      const g = el("g", { class: "series " + (s.cls || "") }, body);
      if (s.kind === "line" || s.kind === "area") {
        // break the path where a point is missing
        let d = "", pen = false;
        for (const p of s.points) {
          if (!inside(p)) { pen = false; continue; }
          d += (pen ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1);
          pen = true;
        }
        if (d) el("path", { d, class: "line" }, g);
        if (s.dots) for (const p of pts) dot(g, X(p[0]), Y(p[1]), s, p);
      } else {
        for (const p of pts) dot(g, X(p[0]), Y(p[1]), s, p);
      }
      // every point's own box first, so that no label covers a point; the labels after all the points
      for (const p of pts) placed.push({ x: X(p[0]) - 5, y: Y(p[1]) - 5, w: 10, h: 10 });
      // a series' points within a few pixels of each other share one label ("ffn, experts +2"), so none overlap
      for (const p of pts) {
        if (!p[3]) continue;
        const x = X(p[0]), y = Y(p[1]);
        const near = labels.find((q) => q[0] === g && Math.abs(q[1] - x) < 12 && Math.abs(q[2] - y) < 12);
        if (near) near[3].push(p[3]); else labels.push([g, x, y, [p[3]]]);
      }
      if (s.noReadout) continue;
      for (const p of pts) {
        if (!inView(p)) continue;
        hits.push({ x: X(p[0]), y: Y(p[1]), cls: s.cls || "",
                    text: p[2] || `${s.label ? s.label + ": " : ""}${xn} ${fx(p[0])}, ${yn} ${fy(p[1])}` });
      }
    }
    for (const [g, x, y, s] of labels) placeLabel(g, x, y, s.length > 2 ? `${s.slice(0, 2).join(", ")} +${s.length - 2}` : s.join(", "));
    let mineHit = null;
    if (spec.mine && inside([spec.mine.x, spec.mine.y])) {
      const g = el("g", { class: "mine" }, body);
      const px = X(spec.mine.x), py = Y(spec.mine.y);
      el("circle", { cx: px.toFixed(1), cy: py.toFixed(1), r: 8, class: "mine-ring" }, g);
      el("circle", { cx: px.toFixed(1), cy: py.toFixed(1), r: 3, class: "mine-dot" }, g);
      if (spec.mine.label) placeLabel(g, px, py, spec.mine.label, "mine-label", true);
      mineHit = { x: px, y: py, cls: "mine", text: spec.mine.text };
      // a series point under the ring is the same stop: keep one, so an arrow key always moves
      for (let i = hits.length - 1; i >= 0; i--) if (Math.abs(hits[i].x - px) < 1 && Math.abs(hits[i].y - py) < 1) hits.splice(i, 1);
      hits.push(mineHit);
    }
    if (legRows.length) {
      const lg = el("g", { class: "legend" }, svg);
      let y = H - legH + 12;
      for (const row of legRows) {
        let lx = 8;
        for (const s of row) {
          const g = el("g", { class: "series " + (s.cls || "") }, lg);
          if (s.kind === "line" || s.kind === "area") el("path", { d: `M${lx} ${y - 4}h18`, class: "line" }, g);
          else dot(g, lx + 9, y - 4, s, null);
          text(g, lx + 24, y, s.label, "legend-text");
          lx += legendWidth(s);
        }
        y += 16;
      }
    }
    readout(container, svg, W, H, hits, mineHit);
    // the x range shown, for tests and scripts: "LO-HI", or "all" (a new answer is drawn unzoomed)
    container.dataset.zoom = zoomable && spec.zoom ? `${x0.toPrecision(3)}-${x1.toPrecision(3)}` : "all";
    if (zoomable) ChartsZoom.bar(container, spec, full, [x0, x1], plot);
    return svg;

    // point labels: try a few spots around the point, skip the label when all collide with earlier ones (or points);
    // `must` (your point's label) takes the first spot inside the frame when every spot collides
    function placeLabel(g, x, y, s, cls, must) {
      const w = s.length * (cls ? 6.8 : 5.6) + 2, hgt = 11;
      const spots = [[7, -6], [7, 12], [-7 - w, -6], [-7 - w, 12], [7, -18], [7, 24]];
      for (const [dx, dy] of spots) {
        const b = { x: x + dx, y: y + dy - hgt + 2, w, h: hgt };
        if (b.x < m.l || b.x + b.w > W - m.r || b.y < m.t || b.y + b.h > H - m.b) continue;
        if (placed.some((o) => b.x < o.x + o.w && o.x < b.x + b.w && b.y < o.y + o.h && o.y < b.y + b.h)) continue;
        placed.push(b);
        text(g, x + dx, y + dy, s, cls || "point-label");
        return;
      }
      const inFrame = spots.find(([dx, dy]) => x + dx >= m.l && x + dx + w <= W - m.r && y + dy - hgt >= m.t);
      if (must && inFrame) text(g, x + inFrame[0], y + inFrame[1], s, cls || "point-label");
    }
  }

  // nearest-point readout: pointer (mouse, pen, touch) and keys (arrows, Home/End, Escape) on the focused chart. The
  // text is HTML beside the SVG (so it wraps), announced politely; data-readout carries it for tests and scripts.
  function readout(container, svg, W, H, hits, mine) {
    if (!hits.length) return;
    // in x order, or as given when the hits are ranked rows (a tornado: largest swing first)
    const order = hits.ranked ? hits.slice() : hits.slice().sort((a, b) => a.x - b.x || a.y - b.y);
    const box = document.createElement("div");
    box.className = "readout";
    box.hidden = true;
    box.setAttribute("role", "status");
    box.setAttribute("aria-live", "polite");
    container.append(box);
    const ring = el("circle", { r: 7, class: "readout-ring", visibility: "hidden" }, svg);
    let cur = -1;
    const show = (i) => {
      cur = i;
      const p = order[i];
      ring.setAttribute("cx", p.x.toFixed(1));
      ring.setAttribute("cy", p.y.toFixed(1));
      ring.setAttribute("visibility", "visible");
      box.textContent = p.text;
      box.hidden = false;
      // centred over the point, kept inside the chart's box (a phone's chart is narrower than the text)
      const cw = container.clientWidth || W, bw = box.offsetWidth;
      const px = p.x / W * cw;
      box.style.left = Math.max(0, Math.min(cw - bw, px - bw / 2)).toFixed(1) + "px";
      const fy = p.y / H;
      box.style.top = (100 * fy).toFixed(2) + "%";
      box.style.transform = `translateY(${fy < 0.4 ? "14px" : "calc(-100% - 14px)"})`;
      container.dataset.readout = p.text;
    };
    const hide = () => {
      ring.setAttribute("visibility", "hidden");
      box.hidden = true;
    };
    const nearest = (ev) => {
      const ctm = svg.getScreenCTM();
      if (!ctm) return -1;
      const pt = svg.createSVGPoint();
      pt.x = ev.clientX;
      pt.y = ev.clientY;
      const q = pt.matrixTransform(ctm.inverse());
      let best = -1, bd = Infinity;
      order.forEach((p, i) => {
        const d = (p.x - q.x) ** 2 + 0.5 * (p.y - q.y) ** 2;
        if (d < bd) { bd = d; best = i; }
      });
      return best;
    };
    svg.addEventListener("pointermove", (ev) => { const i = nearest(ev); if (i >= 0) show(i); });
    svg.addEventListener("pointerdown", (ev) => { const i = nearest(ev); if (i >= 0) show(i); });
    svg.addEventListener("pointerleave", (ev) => { if (ev.pointerType === "mouse") hide(); });
    svg.addEventListener("focus", () => show(cur >= 0 ? cur : mine ? order.indexOf(mine) : 0));
    svg.addEventListener("blur", hide);
    svg.addEventListener("keydown", (ev) => {
      const n = order.length;
      const up = hits.ranked ? -1 : 1;     // ranked rows: ArrowDown goes down the list
      const step = { ArrowRight: 1, ArrowUp: up, ArrowLeft: -1, ArrowDown: -up, PageUp: 10, PageDown: -10 }[ev.key];
      if (step) show(Math.max(0, Math.min(n - 1, (cur < 0 ? 0 : cur) + step)));
      else if (ev.key === "Home") show(0);
      else if (ev.key === "End") show(n - 1);
      else if (ev.key === "Escape") hide();
      else return;
      ev.preventDefault();
    });
  }

  // a legend entry's width (its mark and label, 11 px text) and the entries flowed into rows of `width`
  function legendWidth(s) { return 24 + s.label.length * 6.3 + 14; }
  function legendRows(items, width) {
    const rows = [];
    let row = [], used = 0;
    for (const s of items) {
      const w = legendWidth(s);
      if (row.length && used + w > width) { rows.push(row); row = []; used = 0; }
      row.push(s);
      used += w;
    }
    if (row.length) rows.push(row);
    return rows;
  }
  // words into lines of at most `chars` characters
  function wrap(s, chars) {
    const lines = [];
    let cur = "";
    for (const w of String(s).split(" ")) {
      if (cur && (cur + " " + w).length > chars) { lines.push(cur); cur = w; } else cur = cur ? cur + " " + w : w;
    }
    if (cur) lines.push(cur);
    return lines;
  }

  function dot(g, x, y, s, p) {
    let e;
    if (s.marker === "triangle") {
      e = el("path", { d: `M${x.toFixed(1)} ${(y - 6).toFixed(1)}l5.5 9.5h-11z`, class: "dot" }, g);
    } else if (s.marker === "square") {
      e = el("rect", { x: (x - 4.5).toFixed(1), y: (y - 4.5).toFixed(1), width: 9, height: 9, class: "dot" }, g);
    } else {
      e = el("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: s.r || 4.5, class: "dot" }, g);
    }
    return e;
  }

  return { plot, short, readout };
})();
