// tokenmath page: the analyses' messages in the page's own words. The analyses speak the command line ("--weight-dtype
// fp8 fits", "widen --margin"); here each flag becomes the name of the field that sets it, and a flag with no field on
// this page is said to be an option of the JSON API or of the command line. Text inside `backticks` (a command to
// run) is left alone. No physics here.
"use strict";

const Words = (() => {
  // flag -> the page's field (its label); the field's id is the element to mark
  const FIELDS = {
    "weight-dtype": ["weights", "weight_dtype"], "kv-dtype": ["KV cache", "kv_dtype"], batch: ["batch", "batch"],
    chips: ["chips", "chips"], tp: ["tp", "tp"], pp: ["pp", "pp"], ep: ["ep", "ep"], cp: ["cp", "t_cp"],
    "input-len": ["input tokens", "input_len"], "output-len": ["output tokens", "output_len"],
    context: ["input + output tokens", "input_len"], engine: ["serving engine", "engine"],
    concurrency: ["users (concurrency)", "s_concurrency"], "arrival-rate": ["arrival rate", "s_rate"],
    margin: ["margin", "margin"], utilization: ["utilization", "utilization"],
    "long-input-price": ["long input $/Mtok", "long_input_price"],
    "long-output-price": ["long output $/Mtok", "long_output_price"],
    "long-context-threshold": ["long tier above (tokens)", "long_context_threshold"],
    "seq-len": ["sequence length", "seq_len"], "micro-batch": ["micro-batch", "micro_batch"],
    recompute: ["recompute", "recompute"], zero: ["ZeRO", "zero"], "target-loss": ["target loss", "target_loss"],
    compute: ["training budget", "compute"], loss: ["target loss", "target_loss"], fit: ["scaling-law fit", "fit"],
    "min-tokens-per-s-per-user": ["min tokens/s/user", "min_tps"],
    draft: ["draft model", "sp_draft"], "spec-k": ["tokens per step", "sp_k"], mtp: ["tokens per step", "sp_k"],
    acceptance: ["acceptance (0-1)", "sp_acceptance"], set: ["What if the chip had", "whatif"],
  };
  // flags with no field on this page, and where they can be given
  const ELSEWHERE = { noise: "the JSON API's noise parameter", "chip-cost": "the JSON API's chip_cost",
                      "max-chips": "the command line's --max-chips", "flop-only": "the command line's --flop-only",
                      params: "the command line's --params", tokens: "the command line's --tokens",
                      search: "the command line's --search", "balanced-stages": "the command line's --balanced-stages",
                      schedule: "the command line's --schedule", "virtual-stages": "the command line's --virtual-stages" };

  // "--weight-dtype fp8 fits" -> "weights = fp8 fits"; "widen --margin" -> "widen margin"
  function web(text) {
    return String(text || "").split(/(`[^`]*`)/).map((part) => (part.startsWith("`") ? part : part
      .replace(/\(e\.g\. --([a-z][a-z-]*)\)/g, (all, f) => (FIELDS[f] ? `(e.g. ${FIELDS[f][0]})` : `(e.g. ${ELSEWHERE[f] || f})`))
      .replace(/--([a-z][a-z-]*)(?: ((?:max|none|selective|full|[a-z]*\d[\w.]*|\d+)))?/g, (all, f, v) => {
        if (FIELDS[f]) return v ? `${FIELDS[f][0]} = ${v}` : FIELDS[f][0];
        return (ELSEWHERE[f] || f.replace(/-/g, " ")) + (v ? ` ${v}` : "");     // keep the value the flag was given
      }).replace(/\bthe the\b/g, "the"))).join("");
  }

  // an API error {field, problem, valid} in the page's words: the field's label, and an automatic layout's degree
  // that the user never typed blamed on the chips they did type
  function error(err, state, labelOf) {
    const e = Object.assign({}, err || {});
    const auto = ["tp", "ep", "pp"].includes(e.field) && !String(state[e.field] || "").trim();
    if (auto) {
      const c = String(state.chips || "").trim();
      e.problem = `${c ? c + " chips" : "the automatic chip count"} split automatically as ${String(e.problem).replace(/ .*/, "")} (${e.field} left blank), ` +
        `and ${e.problem}`;
      e.valid = `a chip count that splits as ${String(e.valid || "").replace(/^valid: /, e.field + " of ")}, ` +
        `or set ${e.field} yourself`;
      e.field = "chips";
    }
    e.label = labelOf(e.field) || e.field;
    e.problem = web(e.problem);
    e.valid = web(e.valid);
    return e;
  }

  return { web, error, FIELDS };
})();
