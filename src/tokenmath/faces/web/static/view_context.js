// KV & context (/api/context): the decode step and its read shares against context. No physics here.
import { fmt } from "./format.js";
import { $, renderCards } from "./dom.js";
import { common, engineTag, intOf, batchNum, contextOf, hwName, modelName, autoTag } from "./state.js";
import { api } from "./api.js";

export const panel = {
  endpoint: "context",
  // batch "max" means here what it means on the overview: the largest batch that fits (asked of /api/infer)
  prepare: async () => (batchNum() ? null : api("infer", Object.assign(common(), {
    batch: "max", input_len: intOf("input_len"), output_len: intOf("output_len") }))),
  params: (pre) => Object.assign(common(), { batch: batchNum() || pre.batch, context: contextOf() }),
  render: renderContext,
};

// ---- context -----------------------------------------------------------------------------------------------------
export function renderContext(d, root) {
  $(".title", root).textContent = `KV cache and context: ${modelName(d.model)} on ${hwName(d.hardware, d.chips)}` + autoTag() + `, batch ${d.batch}` + engineTag(d);
  renderCards($(".cards", root), [
    { key: "kv_bytes_per_token", label: "KV per token", value: fmt.bytes(d.kv_bytes_per_token),
      sub: `${fmt.bytes(d.kv_bytes_per_sequence_at_context)} per sequence at ${fmt.int(d.context)}`, why: { hl: /KV per token/ } },
    { key: "max_batch_at_context", label: `max batch at ${fmt.int(d.context)} tokens`, value: fmt.int(d.max_batch_at_context),
      sub: "sequences that fit in HBM", why: { hl: /sequences fit/ } },
    { key: "max_context_at_batch", label: `max context at batch ${d.batch}`,
      value: d.max_context_at_batch ? fmt.int(d.max_context_at_batch) : "any", sub: "tokens per sequence",
      why: { hl: /context/ } },
    { key: "crossover_context", label: "KV read = weight read at", value: d.crossover_context ? fmt.int(d.crossover_context) : "never",
      sub: "tokens of context (this batch)", why: { hl: /equals the weight read|below weight reads/ } },
  ], d.explain);
  const curve = d.curve || [];
  const vl = [{ x: d.context, cls: "current", label: `context ${fmt.int(d.context)}` }];
  if (d.crossover_context) vl.push({ x: d.crossover_context, cls: "critical", label: "KV = weights", dy: 16 });
  const ok = curve.filter((c) => c.fits), bad = curve.filter((c) => !c.fits);
  Charts.plot($("#context-step"), {
    id: "context-svg", width: 520, height: 360, title: "decode step against context",
    x: { log: true, label: "context (tokens per sequence)" }, y: { log: true, label: "decode step", fmt: fmt.seconds },
    series: [{ kind: "line", cls: "s1", label: "fits", points: ok.map((c) => [c.context, c.decode_step_s, `${fmt.int(c.context)}: ${fmt.seconds(c.decode_step_s)}`]) },
             { kind: "line", cls: "s3", label: "does not fit", points: bad.map((c) => [c.context, c.decode_step_s]) }],
    vlines: vl, legendLeft: true,
  });
  Charts.plot($("#context-share"), {
    width: 520, height: 360, title: "share of the decode step spent reading",
    x: { log: true, label: "context (tokens per sequence)" }, y: { log: false, label: "share of step", min: 0, max: 1,
                                                                 fmt: (v) => Math.round(v * 100) + "%" },
    series: [{ kind: "line", cls: "s1", label: "weights", points: curve.map((c) => [c.context, c.weight_share]) },
             { kind: "line", cls: "s2", label: "KV cache", points: curve.map((c) => [c.context, c.kv_share]) }],
    vlines: vl, legendLeft: true,
  });
  $(".derivation pre", root).textContent = d.explain;
}
