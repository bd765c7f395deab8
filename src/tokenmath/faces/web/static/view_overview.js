// Roofline & cost (/api/infer): the cards, the roofline of every op, the op table. No physics here.
import { fmt } from "./format.js";
import { $, $$, renderCards, table, setNotes } from "./dom.js";
import { state, common, engineTag, whatIfTag, speculation, modelName, autoTag } from "./state.js";

// an error about speculation names its field on the left
export const SPEC_FIELDS = { draft: "sp_draft", spec_k: "sp_k", mtp: "sp_k", acceptance: "sp_acceptance" };

export const panel = {
  endpoint: "infer",
  fields: SPEC_FIELDS,
  params: () => Object.assign(common(), { batch: state.batch, input_len: state.input_len,
                                          output_len: state.output_len, peak: state.peak === "1" }, speculation()),
  render: renderInfer,
};

// what drafts the tokens, for a card: "draft Llama 3.2 1B, 4 per step, ..." or "the MTP head, 1 per step, ..."
export const drafter = (s) => (s.mtp ? "the MTP head" : `draft ${modelName(s.draft_model)}`) + `, ${s.k} per step, ` +
  `acceptance ${fmt.num(s.acceptance)}` + (s.acceptance_source && s.acceptance_source !== "given" ? " (published)" : "");

// the speculative cards beside the plain ones (the answer's speculative part at its one batch)
function speculativeCards(s) {
  const i = 0;
  if (!s.fits[i]) {
    return [{ key: "spec", label: "speculative decoding", value: "does not fit", cls: "bad",
              sub: "the draft's weights and KV do not fit beside the target's", why: { hl: /fit/ } }];
  }
  return [
    { key: "spec_speedup", label: "speculative: tokens/s per user", value: fmt.num(s.output_tokens_per_s_per_user[i], 4),
      sub: `${fmt.num(s.speedup[i])}× plain (${fmt.num(s.output_tokens_per_s_per_user_plain[i], 4)}); ` +
        `${fmt.num(s.tokens_per_step)} tokens per step; ${drafter(s)}`, why: { hl: /speedup|per step|accept/ },
      explain: s.explain },
    { key: "spec_cost", label: "speculative: $ per Mtok output", value: fmt.usd(s.cost_per_mtok_output_usd[i]),
      sub: `plain ${fmt.usd(s.cost_per_mtok_output_usd_plain[i])} (both without the engine's launch terms)`,
      why: { hl: /\$|cost/ }, explain: s.explain },
  ];
}

// ---- overview: /api/infer -----------------------------------------------------------------------------------
export function renderInfer(d, root) {
  $(".title", root).textContent = `${d.model_name} on ${d.chips} \u00d7 ${d.hardware_name}` +
    ` (tp ${d.tp}, pp ${d.pp}, ep ${d.ep}, dp ${d.dp})` + autoTag() + ` \u2014 batch ${d.batch}, ` +
    `${fmt.int(d.input_len)} in / ${fmt.int(d.output_len)} out` + engineTag(d) + whatIfTag(d);
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
  if (d.speculative && d.fits) cards.splice(2, 0, ...speculativeCards(d.speculative));
  renderCards($(".cards", root), cards, d.explain);
  setNotes($(".notes", root), [...(d.advice || []).map((a) => ["advice", "advice: " + Words.web(a)]),
                               ...(d.notes || []).map((a) => ["note", "note: " + Words.web(a)]),
                               ...((d.speculative || {}).notes || []).map((a) => ["note", "speculative: " + Words.web(a)])]);
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

export function drawRoofline(box, d) {
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
