// tokenmath charts: zoom on a log x axis (buttons, keys, wheel, pinch), for charts.js's plot(). Plain script,
// loaded before charts.js.
"use strict";

const ChartsZoom = (() => {
  // zoom on a log x axis, in decades: the + / − buttons and keys halve (double) the decades shown around the
  // middle; ctrl + wheel (a trackpad's pinch reaches the page so) zooms around the pointer, and so does a plain wheel
  // on a focused chart (an unfocused one lets the wheel scroll the page, so a chart never traps a scrolling reader);
  // two fingers on a touch screen pinch around their midpoint; "all" shows every point again
  const MIN_DECADES = 0.25;
  function bar(container, spec, full, now, plot) {
    const bar = document.createElement("div");
    bar.className = "zoom";
    const name = spec.name || spec.title || "chart";
    const lf = full.map(Math.log10), ln = now.map(Math.log10);
    // show [lo, lo + span] decades, the span clamped to [MIN_DECADES, all] and the window kept inside the data
    const show = (lo, span, focusSel) => {
      span = Math.max(MIN_DECADES, Math.min(span, lf[1] - lf[0]));
      lo = Math.max(lf[0], Math.min(lo, lf[1] - span));
      const all = span >= lf[1] - lf[0] - 1e-9;
      plot(container, Object.assign({}, spec, { zoom: all ? undefined : [Math.pow(10, lo), Math.pow(10, lo + span)] }));
      const b = focusSel && container.querySelector(focusSel);
      if (b) b.focus();
    };
    // zoom by f (< 1: in) keeping the point at fraction c of the axis where it is
    const by = (f, c, focusSel) => {
      const span = ln[1] - ln[0], at = ln[0] + c * span;
      show(at - c * span * f, span * f, focusSel);
    };
    const svg = container.querySelector("svg.chart");
    if (svg) {
      const frac = (clientX) => {
        const r = svg.getBoundingClientRect(), W = svg.viewBox.baseVal.width;
        const fr = svg.querySelector("rect.frame");
        const x0 = fr ? Number(fr.getAttribute("x")) : 0, w = fr ? Number(fr.getAttribute("width")) : W;
        const vx = (clientX - r.left) / r.width * W;
        return Math.max(0, Math.min(1, (vx - x0) / w));
      };
      svg.style.touchAction = "pan-x pan-y";     // two fingers are the chart's; one finger still scrolls the page
      svg.addEventListener("wheel", (ev) => {
        if (!ev.ctrlKey && !ev.metaKey && document.activeElement !== svg) return;
        ev.preventDefault();
        by(ev.deltaY < 0 ? 0.5 : 2, frac(ev.clientX), "svg.chart");
      }, { passive: false });
      svg.addEventListener("keydown", (ev) => {
        const f = { "+": 0.5, "=": 0.5, "-": 2 }[ev.key];
        if (!f) return;
        ev.preventDefault();
        by(f, 0.5, "svg.chart");
      });
      // pinch: the gesture lives on the container (each step redraws the chart, and the fingers' events keep going
      // to the svg they started on): the decades shown scale by the fingers' first distance over their distance now
      const gap = (t) => Math.max(8, Math.abs(t[0].clientX - t[1].clientX));
      svg.addEventListener("touchstart", (ev) => {
        if (ev.touches.length !== 2) return;
        const c = frac((ev.touches[0].clientX + ev.touches[1].clientX) / 2);
        container.pinch = { d0: gap(ev.touches), lo: ln[0], span: ln[1] - ln[0], c, at: ln[0] + c * (ln[1] - ln[0]) };
      }, { passive: true });
      svg.addEventListener("touchmove", (ev) => {
        const g = container.pinch;
        if (!g || ev.touches.length !== 2) return;
        ev.preventDefault();
        const span = g.span * g.d0 / gap(ev.touches);
        if (g.raf) cancelAnimationFrame(g.raf);
        g.raf = requestAnimationFrame(() => { g.raf = 0; show(g.at - g.c * span, span); });
      }, { passive: false });
      const end = (ev) => { if (ev.touches.length < 2) container.pinch = null; };
      svg.addEventListener("touchend", end);
      svg.addEventListener("touchcancel", end);
    }
    for (const [label, f, aria] of [["+", 0.5, "zoom in"], ["\u2212", 2, "zoom out"], ["all", 0, "show all"]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.z = String(f);
      b.setAttribute("aria-label", `${aria}: ${name}`);
      b.addEventListener("click", () => (f ? by(f, 0.5, `.zoom button[data-z="${f}"]`)
                                           : show(lf[0], lf[1] - lf[0], '.zoom button[data-z="0"]')));
      bar.append(b);
    }
    container.prepend(bar);
  }

  return { bar };
})();
