// Input vs output (/api/prices): what an input, output and cached input token cost by context. No physics here.
import { fmt } from "./format.js";
import { $, renderCards, table } from "./dom.js";
import { state, common, engineTag, intOf, hwName, modelName, autoTag } from "./state.js";

// the question `tokenmath prices` answers, with its defaults: the batch its own (blank: the largest that fits at each
// context, as the command line's; the overview's batch 1 is not this tab's), or a speed per user that picks it
export const panel = {
  endpoint: "prices",
  fields: { batch: "p_batch", min_tokens_per_s_per_user: "p_speed" },
  params: () => {
    const cs = new Set([256, 1024, 4096, 16384, 65536, 131072, intOf("input_len")]);
    return Object.assign(common(), { contexts: Array.from(cs).sort((a, b) => a - b).join(","),
                                     output_len: intOf("output_len"), batch: state.p_batch,
                                     min_tokens_per_s_per_user: state.p_speed });
  },
  render: renderPrices,
};

// the command line that asks the same question ("one question, one answer": its figures are these)
export function pricesCommand(d) {
  const L = intOf("input_len");
  const dflt = [256, 1024, 4096, 16384, 65536, 131072];
  return `tokenmath prices --model ${d.model} --hardware ${d.hardware} --chips ${d.chips}` +
    (dflt.includes(L) ? "" : ` --contexts ${Array.from(new Set([...dflt, L])).sort((a, b) => a - b).join(",")}`) +
    (intOf("output_len") !== 256 ? ` --output-len ${intOf("output_len")}` : "") +
    (String(state.p_batch).trim() ? ` --batch ${String(state.p_batch).trim()}` : "") +
    (String(state.p_speed).trim() ? ` --min-tokens-per-s-per-user ${String(state.p_speed).trim()}` : "") +
    (state.engine && state.engine !== "vllm" ? ` --engine ${state.engine}` : "");
}

// ---- prices ------------------------------------------------------------------------------------------------------
export function renderPrices(d, root) {
  const rows = d.rows || [];
  const unit = rows.length ? rows[0].unit : "$/Mtok";
  const usd = unit.startsWith("$");
  const f = usd ? fmt.usd : (x) => fmt.num(x) + " chip-s";
  $(".title", root).textContent = `Input against output tokens: ${modelName(d.model)} on ${hwName(d.hardware, d.chips)}` +
    autoTag() + ` (${unit})` + engineTag(d);
  $(".cli", root).textContent = pricesCommand(d);
  const how = String(state.p_batch).trim() ? "(the batch above)" : String(state.p_speed).trim() ? "(the largest at that speed per user)" : "(the largest that fits)";
  const L = intOf("input_len");
  const r = rows.find((x) => x.input_len === L) || rows[0];
  const cards = [];
  if (r && r.fits) {
    cards.push(
      { key: "input", label: `input token at ${fmt.int(r.input_len)}`, value: f(r.cost_per_mtok_input),
        sub: `${r.bottleneck_prefill}-bound prefill, batch ${fmt.int(r.batch)} ${how}`,
        why: { hl: new RegExp(`context\\s+${fmt.int(r.input_len)},`) } },
      { key: "output", label: "output token (decode)", value: f(r.cost_per_mtok_output), sub: `${r.bottleneck_decode}-bound decode`,
        why: { hl: new RegExp(`context\\s+${fmt.int(r.input_len)},|why`) } },
      { key: "ratio", label: "output / input", value: fmt.num(r.output_input_ratio) + "\u00d7", sub: "the price ratio this predicts",
        why: { hl: /output\/input|why/ } },
      { key: "cached", label: "cached input token", value: f(r.cost_per_mtok_cached_input),
        sub: cachedWhy(r, d), why: { hl: /cached/ } });
  } else if (r) {
    cards.push({ key: "nofit", label: `at ${fmt.int(r.input_len)} tokens`, value: "does not fit", cls: "bad", why: { hl: /fit/ } });
  }
  renderCards($(".cards", root), cards, d.explain);
  const ok = rows.filter((x) => x.fits);
  Charts.plot($("#prices-chart"), {
    id: "prices-svg",
    x: { log: true, label: "context (prompt tokens)" },
    y: { log: true, label: unit, fmt: usd ? (v) => "$" + Charts.short(v) : undefined },
    series: [
      { kind: "line", dots: true, cls: "s2", label: "output token", points: ok.map((x) => [x.input_len, x.cost_per_mtok_output, `${fmt.int(x.input_len)}: ${x.output_label}`]) },
      { kind: "line", dots: true, cls: "s1", label: "input token", points: ok.map((x) => [x.input_len, x.cost_per_mtok_input, `${fmt.int(x.input_len)}: ${x.input_label}`]) },
      { kind: "line", dots: true, cls: "s3", label: "cached input", points: ok.map((x) => [x.input_len, x.cost_per_mtok_cached_input]) },
    ],
    vlines: [{ x: L, cls: "current", label: `input ${fmt.int(L)}` }],
  });
  table($(".ops .table-box", root), ["context", "batch", "input", "output", "output/input", "cached input", "prefill", "decode"],
        rows.map((x) => [fmt.int(x.input_len), fmt.int(x.batch), x.fits ? f(x.cost_per_mtok_input) : "does not fit",
                         x.fits ? f(x.cost_per_mtok_output) : "", x.fits ? fmt.num(x.output_input_ratio) + "\u00d7" : "",
                         x.fits ? f(x.cost_per_mtok_cached_input) : "", x.bottleneck_prefill, x.bottleneck_decode]));
  $(".derivation pre", root).textContent = d.explain;
}

// why a cached prompt token costs what it does: its KV waits cache_ttl_s for reuse in the cheapest tier that holds it,
// and that waiting is paid for; at a small batch (few tokens per second to share the chip) it can exceed recomputing
export function cachedWhy(r, d) {
  if (r.cached_input_tier === "recompute") return "recomputed: cheaper than holding its KV";
  const ratio = r.cost_per_mtok_input ? r.cost_per_mtok_cached_input / r.cost_per_mtok_input : null;
  const where = `its KV held ${fmt.num(d.cache_ttl_s)} s for reuse in ${r.cached_input_tier.replace(/_/g, " ")}`;
  if (ratio !== null && ratio > 1) {
    return `${fmt.num(ratio)}\u00d7 the uncached input: ${where} costs more than prefilling it again at batch ` +
      `${fmt.int(r.batch)} (memory held, not FLOPs, is what a cache sells)`;
  }
  return `${where}; ${ratio !== null ? fmt.pct(ratio) + " of the uncached input" : ""}`;
}
