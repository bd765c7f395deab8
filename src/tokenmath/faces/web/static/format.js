// Numbers at the edges of the page (mirrors tokenmath/base/units.py): one formatter per precision.
// ---- numbers at the edges (mirrors tokenmath/units.py) ---------------------------------------------------------
// one Intl.NumberFormat per precision: toLocaleString builds a new one per call (about a millisecond each), which
// made a chart's readouts (a few per point) cost half a second per redraw
export const formats = {};
export const nf = (opts) => {
  const k = JSON.stringify(opts);
  return formats[k] || (formats[k] = new Intl.NumberFormat("en-US", opts));
};
export function sig(v, n) {
  return nf({ maximumSignificantDigits: n || 3 }).format(Number(v.toPrecision(n || 3)));
}
export function si(x, unit, steps) {
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
export const fmt = {
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
