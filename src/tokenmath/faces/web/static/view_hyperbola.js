// Batch hyperbola (/api/hyperbola): decode cost and speed against batch, your batch and the limits. No physics here.
import { fmt } from "./format.js";
import { $, renderCards } from "./dom.js";
import { common, engineTag, whatIfTag, speculation, batchNum, intOf, hwName, modelName, autoTag } from "./state.js";
import { SPEC_FIELDS, drafter } from "./view_overview.js";

export const panel = {
  endpoint: "hyperbola",
  fields: { context: "h_context", ...SPEC_FIELDS },
  // its own context, 2,048 tokens by default: `tokenmath hyperbola`'s, so the page and the CLI price the same decode
  params: () => Object.assign(common(), { context: intOf("h_context") }, speculation()),
  headline: ["current", "max_batch", "floor"],
  render: renderHyperbola,
};

// ---- hyperbola ---------------------------------------------------------------------------------------------------
export function renderHyperbola(d, root) {
  const pts = d.points || [];
  const priced = pts.length && pts[0].cost_per_mtok_output_usd !== null;
  $(".title", root).textContent = `Decode cost against batch: ${modelName(d.model)} on ${hwName(d.hardware, d.chips)}` + autoTag() + "," +
    ` ${fmt.int(d.context)} tokens of context` + engineTag(d) + whatIfTag(d);
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
    specCard(d.speculative, cur, cfmt),
  ].filter(Boolean), d.explain);
  const spec = specCurve(d.speculative, priced);
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
    series: [{ kind: "line", cls: "s1", label: "cost per token", points: pts.map((p) => [p.batch, cost(p), readCost(p)]) },
             ...(spec ? [{ kind: "line", cls: "s4", label: "speculative", points: spec.cost }] : [])],
    hlines: [{ y: floor, cls: "floor", label: reached ? "floor" : `floor ${cfmt(floor)}: not reached` }],
    vlines: vl, legend: !!spec, legendPos: "bl", mine: mine(cost(cur), readCost(cur)),
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
      ...(spec ? [{ kind: "line", cls: "s4", label: "per user, speculative", points: spec.speed }] : []),
    ],
    vlines: vl.map((v) => Object.assign({}, v, { label: null })),   // named on the cost chart beside it
    mine: mine(cur.tokens_per_s, readSpeed(cur)),
  });
  $(".derivation pre", root).textContent = d.explain;
}

// the speculative curve beside the plain one: cost per token and speed per user at each batch that fits with the
// draft (both left without the engine's launch terms, as the speculative analysis states)
function specCurve(s, priced) {
  if (!s) return null;
  const cost = [], speed = [];
  s.batch.forEach((b, i) => {
    if (!s.fits[i]) return;
    const c = priced ? s.cost_per_mtok_output_usd[i] : s.per_token_s[i] / b;
    const text = `speculative, batch ${fmt.int(b)}: ${priced ? fmt.usd(c) + "/Mtok output" : fmt.seconds(c) + " per token"}, ` +
      `${fmt.num(s.output_tokens_per_s_per_user[i])} tok/s/user, ${fmt.num(s.speedup[i])}\u00d7 the plain step (${s.verify_bottleneck[i]}-bound verify)`;
    cost.push([b, c, text]);
    speed.push([b, s.output_tokens_per_s_per_user[i], text]);
  });
  return { cost, speed };
}

// the card for speculation at your batch (the sweep's point nearest the batch typed)
function specCard(s, cur, cfmt) {
  if (!s) return null;
  const i = s.batch.indexOf(cur.batch);
  if (i < 0 || !s.fits[i]) {
    return { key: "spec", label: `speculative at batch ${fmt.int(cur.batch)}`, value: "does not fit", cls: "bad",
             sub: "the draft's weights and KV do not fit beside the target's at this batch", why: { hl: /fit/ },
             explain: s.explain };
  }
  const c = s.cost_per_mtok_output_usd[i];
  return { key: "spec", label: `speculative at batch ${fmt.int(cur.batch)}`,
           value: c !== null ? cfmt(c) : fmt.num(s.output_tokens_per_s_per_user[i]) + " tok/s/user",
           sub: `${fmt.num(s.speedup[i])}\u00d7 the plain step, ${fmt.num(s.output_tokens_per_s_per_user[i])} tok/s/user; ${drafter(s)}`,
           why: { hl: /speedup|per token|accept/ }, explain: s.explain };
}
