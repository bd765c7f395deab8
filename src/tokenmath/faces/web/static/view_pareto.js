// Pareto frontier (/api/pareto): throughput per chip against speed per user, your configuration marked. No physics here.
import { fmt } from "./format.js";
import { $, renderCards, table } from "./dom.js";
import { state, common, engineTag, intOf, hwName, modelName, autoTag } from "./state.js";
import { api } from "./api.js";

export const panel = {
  endpoint: "pareto",
  // blank chips means the same here as on every tab: the fewest chips that fit (asked of /api/infer, which also
  // gives "your point"); the pareto then searches the layouts of that many chips
  prepare: async () => {
    const you = await api("infer", Object.assign(common(), { batch: state.batch, input_len: intOf("input_len"),
                                                               output_len: intOf("output_len") }));
    return { you, chips: String(state.chips).trim() || you.chips };
  },
  params: (pre) => ({ model: state.model, hardware: state.hardware, chips: pre.chips, input_len: intOf("input_len"),
                      output_len: intOf("output_len"), weight_dtype: state.weight_dtype, kv_dtype: state.kv_dtype,
                      engine: state.engine }),
  render: renderPareto,
};

// ---- pareto ------------------------------------------------------------------------------------------------------
export function renderPareto(d, root, pre) {
  const f = d.frontier || [];
  $(".title", root).textContent = `Throughput per chip against speed per user: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)}` +
    autoTag() + engineTag(d);
  const a = f[0], z = f[f.length - 1];
  const cards = [{ key: "evaluated", label: "points evaluated", value: fmt.int(d.points_evaluated),
                   sub: `${f.length} on the frontier; ${d.layouts.length} layouts`, why: { hl: /feasible/ } }];
  if (a) {
    cards.push({ key: "interactive", label: "most interactive", value: fmt.num(a.output_tokens_per_s_per_user) + " tok/s/user",
                 sub: `${fmt.num(a.output_tokens_per_s_per_chip)} tok/s/chip, ${a.layout}, batch ${a.batch}`,
                 why: { hl: /most interactive/ } },
               { key: "productive", label: "most productive", value: fmt.num(z.output_tokens_per_s_per_chip) + " tok/s/chip",
                 sub: `${fmt.num(z.output_tokens_per_s_per_user)} tok/s/user, ${z.layout}, batch ${z.batch}` +
                   (z.cost_per_mtok_output_request_usd !== null ? `, ${fmt.usd(z.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : ""),
                 why: { hl: /most productive/ } });
  }
  renderCards($(".cards", root), cards, d.explain);
  // each layout's closed-loop steady state by concurrency (continuous batching), one dashed curve per layout
  const byLayout = {};
  for (const q of d.by_concurrency || []) (byLayout[q.layout] = byLayout[q.layout] || []).push(q);
  const curves = Object.entries(byLayout).map(([lay, qs], i) => ({
    kind: "line", dots: true, r: 2.5, cls: "s3", label: i === 0 ? "by concurrency (engine steady state)" : null,
    points: qs.map((q) => [q.output_tokens_per_s_per_user, q.output_tokens_per_s_per_chip,
      `${lay}, ${q.concurrency} users: ${fmt.num(q.output_tokens_per_s_per_user)} tok/s/user, ` +
      `${fmt.num(q.output_tokens_per_s_per_chip)} tok/s/chip, TTFT ${fmt.seconds(q.ttft_s)} (${q.limit})`]) }));
  // your point: the overview's configuration (its layout and batch), the same numbers as its cards
  const you = pre && pre.you;
  const mine = you && you.fits && you.output_tokens_per_s_per_user ? {
    x: you.output_tokens_per_s_per_user, y: you.output_tokens_per_s / you.chips, label: `you: batch ${you.batch}`,
    text: `your configuration: tp ${you.tp} pp ${you.pp} ep ${you.ep} dp ${you.dp}, batch ${fmt.int(you.batch)}: ` +
      `${fmt.num(you.output_tokens_per_s_per_user)} tok/s/user, ${fmt.num(you.output_tokens_per_s / you.chips)} tok/s/chip` +
      (you.cost_per_mtok_output_request_usd ? `, ${fmt.usd(you.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : "") } : null;
  Charts.plot($("#pareto-chart"), {
    id: "pareto-svg", legendPos: "bl", name: "Pareto frontier: throughput per chip against speed per user", mine,
    x: { log: true, label: "output tokens/s per user (interactivity)", name: "tok/s/user" },
    y: { log: true, label: "output tokens/s per chip (throughput)", name: "tok/s/chip" },
    series: [
      ...curves,
      { kind: "scatter", cls: "cloud", r: 2, label: "(layout, batch) that fits",
        points: (d.chart.points || []).map((p, i) => {
          const l = (d.chart.labels || [])[i] || [];
          return [p[0], p[1], `${l[0] || "layout"}, batch ${fmt.int(l[1])}: ${fmt.num(p[0])} tok/s/user, ` +
            `${fmt.num(p[1])} tok/s/chip` + (l[2] !== null && l[2] !== undefined ? `, ${fmt.usd(l[2])}/Mtok (whole request)` : "")];
        }) },
      { kind: "line", dots: true, r: 3, cls: "frontier", label: "frontier",
        points: f.map((p) => [p.output_tokens_per_s_per_user, p.output_tokens_per_s_per_chip,
          `${p.layout}, batch ${p.batch}: ${fmt.num(p.output_tokens_per_s_per_user)} tok/s/user, ` +
          `${fmt.num(p.output_tokens_per_s_per_chip)} tok/s/chip` +
          (p.cost_per_mtok_output_request_usd !== null ? `, ${fmt.usd(p.cost_per_mtok_output_request_usd)}/Mtok (whole request)` : "") + `, ${p.bottleneck}-bound`]) },
    ],
  });
  const step = Math.max(1, Math.floor(f.length / 20));
  const shown = f.filter((_, i) => i % step === 0 || i === f.length - 1);
  table($(".ops .table-box", root), ["tok/s/user", "tok/s/chip", "$/Mtok (whole request)", "layout", "batch", "bound"],
        shown.map((p) => [fmt.num(p.output_tokens_per_s_per_user), fmt.num(p.output_tokens_per_s_per_chip),
                          fmt.usd(p.cost_per_mtok_output_request_usd), p.layout, fmt.int(p.batch), p.bottleneck]));
  $(".derivation pre", root).textContent = d.explain;
}
