// Simulate (/api/simulate): latency percentiles, goodput, queue and KV occupancy over time. No physics here.
import { fmt } from "./format.js";
import { $, renderCards, table, setNotes } from "./dom.js";
import { state, common, engineTag, hwName, modelName, speculation, autoTag } from "./state.js";
import { sweep } from "./view_simulate_sweep.js";
import { SPEC_FIELDS, drafter } from "./view_overview.js";

export const panel = {
  endpoint: "simulate",
  fields: { concurrency: "s_concurrency", arrival_rate: "s_rate", burstiness: "s_burstiness",
            requests: "s_requests", input_len: "s_input", output_len: "s_output", ttft_ms: "s_ttft",
            itl_ms: "s_itl", seed: "s_seed", ...SPEC_FIELDS },
  params: () => {
    const open = state.s_mode === "open";
    return Object.assign(common(), {
      concurrency: open ? "" : state.s_concurrency, arrival_rate: open ? state.s_rate : "",
      burstiness: open ? state.s_burstiness : "", requests: state.s_requests,
      input_len: state.s_input || state.input_len, output_len: state.s_output || state.output_len,
      ttft_ms: state.s_ttft, itl_ms: state.s_itl, seed: state.s_seed }, speculation());
  },
  render: renderSimulate,
  also: sweep,
};

// ---- simulate ----------------------------------------------------------------------------------------------------
export function renderSimulate(d, root) {
  $(".title", root).textContent = `Simulated: ${modelName(d.model)} on ${d.chips} \u00d7 ${hwName(d.hardware)} ` +
    `(tp ${d.tp}, pp ${d.pp}, ep ${d.ep}, dp ${d.dp})` + autoTag() + `, ${d.workload_description}` + engineTag(d);
  const pc = (x) => `p50 ${fmt.seconds(x.p50)}`;
  const tail = (x) => `p90 ${fmt.seconds(x.p90)}, p99 ${fmt.seconds(x.p99)}; mean ${fmt.seconds(x.mean)}`;
  const st = d.steady || {};
  const slo = d.slo || {};
  renderCards($(".cards", root), [
    { key: "throughput", label: "output tokens/s", value: fmt.num(d.output_tokens_per_s, 4),
      sub: `${fmt.num(d.output_tokens_per_s_per_chip, 4)} per chip, ${fmt.num(d.requests_per_s)} req/s over the run` +
        (st.output_tokens_per_s ? `; steady state ${fmt.num(st.output_tokens_per_s, 4)}` : ""),
      why: { hl: /served|steady state/ } },
    { key: "ttft", label: "time to first token", value: pc(d.ttft_s), sub: tail(d.ttft_s),
      why: { hl: /time to first token/ } },
    { key: "itl", label: "inter-token latency", value: pc(d.itl_s), sub: tail(d.itl_s) + "; every gap between two tokens",
      why: { hl: /inter-token/ } },
    { key: "tpot", label: "time per output token", value: pc(d.tpot_s),
      sub: `p99 ${fmt.seconds(d.tpot_s.p99)}; ${d.tpot_s.mean ? fmt.num(1 / d.tpot_s.mean) : "n/a"} tok/s per user (mean)`,
      why: { hl: /time per output token/ } },
    { key: "e2e", label: "end to end", value: pc(d.e2e_s), sub: tail(d.e2e_s), why: { hl: /end to end/ } },
    { key: "goodput", label: "goodput", value: `${fmt.num(d.goodput_rps)} req/s`, cls: d.slo_attainment < 0.9 ? "bad" : "",
      sub: `${fmt.pct(d.slo_attainment)} of requests meet TTFT \u2264 ${fmt.seconds(slo.ttft_target_s)} and ` +
        `time per token \u2264 ${fmt.seconds(slo.tpot_target_s)}`, why: { hl: /goodput/ } },
    { key: "queue", label: "queue", value: `at most ${fmt.int(d.queue_max)} waiting`, cls: d.queue_grows ? "bad" : "",
      sub: `mean ${fmt.num(d.queue_mean)}; KV cache peak ${fmt.pct(d.kv_peak_fraction)}; ${fmt.int(d.preemptions)} preemptions` +
        (d.queue_grows ? "; it grows: arrivals outpace the replica" : ""), why: { hl: /queue|preempt/ } },
    // speculative decoding (the sidebar's drafts): every decode step verifies k + 1 tokens and gains E on average
    ...(d.speculation ? [{ key: "spec", label: "speculative decoding",
      value: `${fmt.num(d.speculation.tokens_per_step)} tokens per step`,
      sub: `${drafter(d.speculation)}; each decode step verifies ${d.speculation.k + 1} tokens per sequence`,
      why: { hl: /speculative|verif/ } }] : []),
  ], d.explain);
  setNotes($(".notes", root), (d.notes || []).map((a) => ["note", "note: " + Words.web(a)]));
  const c = d.cdf || { q: [] };
  const curve = (key) => (c[key] || []).map((v, i) => [v, c.q[i], `${key.replace("_s", "")} ${fmt.seconds(v)} at ${fmt.pct(c.q[i])}`]);
  Charts.plot($("#simulate-cdf"), {
    id: "simulate-cdf-svg", width: 520, height: 360, title: "latency distribution", legendPos: "br",
    x: { log: true, label: "seconds", fmt: fmt.seconds },
    y: { log: false, min: 0, max: 1, label: "fraction of requests (ITL: of gaps)", fmt: (v) => Math.round(v * 100) + "%" },
    series: [
      { kind: "line", cls: "s1", label: "time to first token", points: curve("ttft_s") },
      { kind: "line", cls: "s2", label: "inter-token gap", points: curve("itl_s") },
      { kind: "line", cls: "s3", label: "time per output token", points: curve("tpot_s") },
      { kind: "line", cls: "s4", label: "end to end", points: curve("e2e_s") },
    ],
    vlines: [{ x: slo.ttft_target_s, label: "TTFT target" }, { x: slo.tpot_target_s, label: "token target", dy: 14 }],
  });
  const s = d.series || { t_s: [] };
  const over = (key) => (s[key] || []).map((v, i) => [s.t_s[i], v]);
  Charts.plot($("#simulate-queue"), {
    id: "simulate-queue-svg", width: 520, height: 360, title: "requests over time (largest in each interval)",
    legendPos: "tl", x: { log: false, label: "time (s)" }, y: { log: false, zero: true, label: "requests" },
    series: [
      { kind: "line", cls: "s2", label: "waiting (queue)", points: over("queue") },
      { kind: "line", cls: "s1", label: "running", points: over("running") },
    ],
  });
  Charts.plot($("#simulate-kv"), {
    width: 1060, height: 240, title: "KV cache occupancy (largest in each interval)", legend: false,
    x: { log: false, label: "time (s)" },
    y: { log: false, min: 0, max: 1, label: "share of KV cache", fmt: (v) => Math.round(v * 100) + "%" },
    series: [{ kind: "line", cls: "s3", label: "KV cache", points: over("kv_fraction") }],
  });
  table($(".ops .table-box", root), ["kind", "steps", "time", "mean step", "decodes", "prompt tokens", "bound"],
        (d.steps || []).map((k) => [k.kind, fmt.int(k.steps), fmt.seconds(k.seconds), fmt.seconds(k.mean_step_s),
                                    fmt.num(k.decode_seqs), fmt.num(k.prefill_tokens), k.bottleneck || ""]));
  $(".derivation pre", root).textContent = d.explain;
}

// a closed loop has users, an open loop an arrival rate and its burstiness: the other mode's fields are hidden (and
// disabled, so nothing reads them)
export function syncSimMode() {
  const open = state.s_mode === "open";
  for (const [id, off] of [["s_concurrency", open], ["s_rate", !open], ["s_burstiness", !open]]) {
    $("#" + id).disabled = off;
    $("#" + id).closest("label").hidden = off;
  }
}
