// Agent capacity (/api/agents): the most concurrent agent sessions each system keeps at a speed per user, per GPU,
// per kW, per $/hour and per system, what binds, and the offload what-if (HBM only, + host DRAM, + NVMe). No physics here.
import { fmt } from "./format.js";
import { $, table } from "./dom.js";
import { state, modelName, engineTag } from "./state.js";
import { intervals } from "./charts_bars.js";

export const panel = {
  endpoint: "agents",
  fields: { systems: "a_systems", min_tokens_per_s_per_user: "a_speed", tool_gap_s: "a_gap", context_len: "a_context" },
  params: () => ({
    model: state.model, weight_dtype: state.weight_dtype, kv_dtype: state.kv_dtype, engine: state.engine,
    systems: state.a_systems, min_tokens_per_s_per_user: state.a_speed, tool_gap_s: state.a_gap,
    context_len: state.a_context,
  }),
  render: renderAgents,
};

// the command line that asks the same question
export function agentsCommand(d) {
  const w = d.workload;
  return `tokenmath agents --model ${d.model} --systems ${d.systems.map((s) => s.system).join(",")}` +
    ` --min-tokens-per-s-per-user ${d.targets.min_tokens_per_s_per_user}` +
    ` --context-len ${w.context_len} --tool-gap-s ${w.tool_gap_s}` +
    (state.engine && state.engine !== "vllm" ? ` --engine ${state.engine}` : "");
}

const num = (x, k) => (x === null || x === undefined ? "\u2013" : fmt.num(x, k));

export function renderAgents(d, root) {
  $(".title", root).textContent = `Agent sessions: ${modelName(d.model)} at \u2265 ${d.targets.min_tokens_per_s_per_user} ` +
    `tokens/s per user` + engineTag(d.systems.length ? d : {});
  $(".cli", root).textContent = agentsCommand(d);
  const rows = d.systems.map((s) => {
    if (!s.best) return { label: `${s.system} (does not fit)` };
    const wi = s.what_if;
    return { label: s.system, low: wi.hbm.sessions_per_gpu, median: wi.dram.sessions_per_gpu, high: wi.nvme.sessions_per_gpu,
             fmt: (v) => fmt.num(v) };
  });
  intervals($("#agents-chart"), rows, { title: "sessions per GPU: HBM only (left), + host DRAM (tick), + NVMe (right)" });
  table($(".ops .table-box", root),
        ["system", "replica", "per GPU", "per kW", "per $/h", "per system", "tok/s/user", "binds", "+DRAM", "+NVMe"],
        d.systems.map((s) => s.best ? [s.system, s.best.layout, num(s.best.sessions_per_gpu), num(s.best.sessions_per_kw),
                                       num(s.best.sessions_per_usd_hour), num(s.best.sessions_per_system),
                                       num(s.best.tokens_per_s_per_user), s.best.binding,
                                       num(s.what_if.dram.sessions_per_system), num(s.what_if.nvme.sessions_per_system)]
                                    : [s.system, s.why || "does not fit", "", "", "", "", "", "", "", ""]));
  $(".derivation pre", root).textContent = d.explain;
}
