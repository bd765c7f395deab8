// Training (/api/train, /api/overtrain): the step, its memory, and the training + inference optimum. No physics here.
import { fmt } from "./format.js";
import { $, renderCards, setNotes } from "./dom.js";
import { state, hwName, modelName } from "./state.js";
import { stack } from "./charts_bars.js";

export const panel = {
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
};

// ---- training ----------------------------------------------------------------------------------------------------
export function renderTrain(d, root) {
  $(".title:not(.ot-title)", root).textContent = `Training ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware || d.system)}: ` +
    `tp ${d.tp} pp ${d.pp} dp ${d.dp} ep ${d.ep} cp ${d.cp}` + (d.auto_layout ? " (chips and layout blank: the fewest chips that fit)" : "");
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
  stack($("#train-breakdown"), Object.entries(names).map(([k2, label]) => ({ label, value: bd[k2] })),
               { title: "step breakdown", fmt: fmt.seconds });
  $(".derivation:not(.ot-derivation) pre", root).textContent = d.explain;
}

export function renderOvertrain(d, root) {
  const o = d.optimum, c = d.chinchilla;
  renderCards($(".ot-cards", root), [
    { key: "ot_params", label: "optimal model", value: fmt.count(o.params) + " params",
      sub: `${fmt.num(o.tokens_per_param)} tokens/param`, why: { sections: [4] } },
    { key: "ot_total", label: "training + inference", value: fmt.usd(o.total_usd),
      sub: `train ${fmt.usd(o.training_usd)} (MFU ${fmt.pct(d.mfu)}${d.training_model === "engine" ? ", engine" : ""}) + serve ${fmt.usd(o.inference_usd)}`,
      why: { sections: [2, 3, 4] } },
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
    id: "overtrain-svg", legendPos: "br", title: `loss ${fmt.num(d.target_loss, 4)} (${d.fit} fit), ${fmt.num(d.inference_tokens)} inference tokens, ${hwName(d.hardware)}`,
    x: { log: true, label: "model parameters N", fmt: fmt.count },
    y: { log: true, label: "cost (USD)", min: opt / 20, max: opt * 30, fmt: (v) => "$" + Charts.short(v) },
    series,
  });
  $(".ot-derivation pre", root).textContent = d.explain;
}
