// Simulate, against load (/api/simulate_sweep): one simulation per concurrency (closed loop) or arrival rate (open
// loop), drawn as throughput per chip and TTFT / inter-token latency p50 and p99 against that load, your point
// ringed. No physics here: every figure is a field of one simulation's result.
import { fmt } from "./format.js";
import { $, table, setNotes } from "./dom.js";
import { state, common } from "./state.js";

// the concurrencies of InferenceMAX-style curves (the API's default, analyses/serving/by_concurrency.py), with the
// one typed on the tab added so that your point is simulated too
export const USERS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];
// an open loop: the typed rate from an eighth to eight times
export const RATE_STEPS = [0.125, 0.25, 0.5, 1, 2, 4, 8];

const open = () => state.s_mode === "open";
// the typed load as a number, or null when it is not one (the simulation above then shows the error in place)
function typed() {
  const v = Number(String(open() ? state.s_rate : state.s_concurrency).trim());
  return isFinite(v) && v > 0 ? v : null;
}

export const sweep = {
  endpoint: "simulate_sweep",
  fields: { concurrencies: "s_concurrency", arrival_rates: "s_rate", burstiness: "s_burstiness",
            requests: "s_requests", input_len: "s_input", output_len: "s_output", ttft_ms: "s_ttft",
            itl_ms: "s_itl", seed: "s_seed" },
  params: () => {
    const you = typed();
    let axis;
    if (open()) {
      axis = { arrival_rates: you === null ? state.s_rate : RATE_STEPS.map((f) => +(you * f).toPrecision(6)).join(",") };
    } else {
      const c = you === null ? null : Math.round(you);
      axis = { concurrencies: c === null ? state.s_concurrency : [...new Set([...USERS, c])].sort((a, b) => a - b).join(",") };
    }
    return Object.assign(common(), axis, {
      burstiness: open() ? state.s_burstiness : "", requests: state.s_requests,
      input_len: state.s_input || state.input_len, output_len: state.s_output || state.output_len,
      ttft_ms: state.s_ttft, itl_ms: state.s_itl, seed: state.s_seed });
  },
  render: renderSweep,
  error: ".sw-error",
};

export function renderSweep(d, root) {
  const byRate = d.over === "arrival_rate";
  const xv = (p) => (byRate ? p.arrival_rate : p.concurrency);
  const xname = byRate ? "arrival rate (req/s)" : "users (concurrency)";
  const load = (v) => (byRate ? `${fmt.num(v)} req/s` : `${fmt.int(v)} user${v === 1 ? "" : "s"}`);
  const pts = d.points || [];
  const says = (p) => `${load(xv(p))}: ${fmt.num(p.output_tokens_per_s_per_chip, 4)} tok/s per chip; ` +
    `TTFT p50 ${fmt.seconds(p.ttft_s.p50)}, p99 ${fmt.seconds(p.ttft_s.p99)}; ` +
    `ITL p50 ${fmt.seconds(p.itl_s.p50)}, p99 ${fmt.seconds(p.itl_s.p99)}; goodput ${fmt.num(p.goodput_rps)} req/s` +
    (p.queue_grows ? "; the queue grows" : "");
  $(".sw-title", root).textContent = `Against ${byRate ? "the arrival rate" : "users"}: one simulation per point ` +
    `(${fmt.int(d.requests_per_point)} requests each), the same replica, workload and seed`;
  const you = typed();
  const mineP = pts.find((p) => you !== null && Math.abs(xv(p) - (byRate ? you : Math.round(you))) <= 1e-9 * xv(p));
  const mine = (y) => mineP && { x: xv(mineP), y: y(mineP), text: "your point, " + says(mineP) };
  const x = { log: true, label: xname, name: byRate ? "arrival rate" : "users",
              fmt: (v) => (byRate ? Charts.short(v) : fmt.int(v)) };
  Charts.plot($("#simulate-sweep-tput"), {
    id: "simulate-sweep-tput-svg", width: 520, height: 340, legend: false,
    title: "output tokens/s per chip", name: `Simulated throughput per chip against ${xname}`,
    x, y: { log: false, zero: true, label: "output tokens/s per chip", name: "tok/s per chip" },
    series: [{ kind: "line", cls: "s1", dots: true, label: "tokens/s per chip",
               points: pts.map((p) => [xv(p), p.output_tokens_per_s_per_chip, says(p)]) }],
    mine: mine((p) => p.output_tokens_per_s_per_chip),
  });
  const lat = (key, q, cls, label) => ({ kind: "line", cls, dots: true, label,
    points: pts.map((p) => [xv(p), p[key][q], `${label} ${fmt.seconds(p[key][q])} at ${load(xv(p))} (${says(p)})`]) });
  const slo = d.slo || {};
  Charts.plot($("#simulate-sweep-lat"), {
    id: "simulate-sweep-lat-svg", width: 520, height: 340, legendPos: "tl",
    title: "latency, p50 and p99", name: `Simulated latency percentiles against ${xname}`,
    x, y: { log: true, label: "seconds", fmt: fmt.seconds, name: "latency" },
    series: [lat("ttft_s", "p50", "s1", "TTFT p50"), lat("ttft_s", "p99", "s2", "TTFT p99"),
             lat("itl_s", "p50", "s3", "ITL p50"), lat("itl_s", "p99", "s4", "ITL p99")],
    hlines: [{ y: slo.ttft_target_s, label: "TTFT target", noFit: true }],
    mine: mine((p) => p.ttft_s.p50),
  });
  setNotes($(".sw-notes", root), (d.notes || []).map((a) => ["note", "note: " + Words.web(a)]));
  table($(".sw-table .table-box", root),
        [xname, "tok/s per chip", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "goodput (req/s)", "queue"],
        pts.map((p) => [byRate ? fmt.num(xv(p)) : fmt.int(xv(p)), fmt.num(p.output_tokens_per_s_per_chip, 4),
                        fmt.seconds(p.ttft_s.p50), fmt.seconds(p.ttft_s.p99), fmt.seconds(p.itl_s.p50),
                        fmt.seconds(p.itl_s.p99), fmt.num(p.goodput_rps), p.queue_grows ? "grows" : "steady"]));
}
