"""Text for `tokenmath simulate` (the table and the --explain napkin) and for infer's load section. Formatting only:
every number comes from the analysis results (simulation/result.py, load.py)."""
from __future__ import annotations

from tokenmath.base import units as u
from tokenmath.faces.names import chip_label, model_label, name_ids


def _pct(p, scale=1.0) -> str:
    d = p.to_dict()
    return "  ".join(f"{u.seconds(d[k] * scale) if d[k] is not None else 'n/a':>13}" for k in ("p50", "p90", "p99"))


def _engine_name(r) -> str:
    return r.engine.get("name", r.engine.get("id", "?"))


def simulation_table(r) -> str:
    lay = r.layout
    lines = [
        f"{model_label(r.model)} on {r.chips} x {chip_label(r.hardware)} (tp={lay['tp']} pp={lay['pp']} ep={lay['ep']} dp={lay['dp']}"
        + (f" attn={lay['attention_sharding']}" if lay.get("attention_sharding") else "") + "), "
        f"{_engine_name(r)} scheduler ({r.policy})",
        f"workload: {r.workload_description}",
        f"replica: {r.budget_tokens:,} tokens per step, at most {r.max_running:,} running, KV cache "
        f"{r.kv_capacity_tokens:,} tokens" if r.max_running < 1 << 39 else
        f"replica: {r.budget_tokens:,} tokens per step, running limited by memory, KV cache {r.kv_capacity_tokens:,} tokens",
        "",
        f"served {r.requests:,} requests in {u.seconds(r.duration_s)}: "
        f"{u.rate(r.output_tokens_per_s, 'tok/s')} output ({u.rate(r.output_tokens_per_s_per_chip, 'tok/s')} per chip), "
        f"{u.rate(r.total_tokens_per_s, 'tok/s')} prompt + output, {r.requests_per_s:,.3g} req/s",
    ]
    sp = r.speculation
    if sp:
        what = f"{sp['k']} MTP token(s)" if sp["mtp"] else f"draft {model_label(sp['draft_model'])}, k = {sp['k']}"
        lines.insert(3, f"speculative decoding: {what}, acceptance {sp['acceptance']:g} "
                        f"-> {sp['tokens_per_step']:.3f} tokens per verification step (Leviathan et al. 2023)")
    st = r.steady
    if st.get("output_tokens_per_s"):
        lines.append(f"steady state ({u.seconds(st['window_start_s'])} to {u.seconds(st['window_end_s'])}): "
                     f"{u.rate(st['output_tokens_per_s'], 'tok/s')} output, {st['running_mean']:,.1f} running on average, "
                     f"TTFT p50 {u.seconds(st['ttft_p50_s'])} p99 {u.seconds(st['ttft_p99_s'])}")
    lines += [
        "",
        f"  {'latency':<28}{'mean':>9}  {'p50':>13}  {'p90':>13}  {'p99':>13}",
        *(f"  {name:<28}{u.seconds(p.mean) if p.mean is not None else 'n/a':>9}  {_pct(p)}" for name, p in (
            ("time to first token", r.ttft_s), ("inter-token (every gap)", r.itl_s),
            ("time per output token (req)", r.tpot_s), ("end to end", r.e2e_s))),
        "",
        f"goodput (TTFT <= {u.seconds(r.ttft_target_s)} and TPOT <= {u.seconds(r.itl_target_s)}): "
        f"{r.goodput_rps:,.3g} req/s, {r.slo_attainment:.1%} of requests",
        f"queue: at most {r.queue_max:,} waiting (mean {r.queue_mean:,.1f})"
        + ("; it grew through the run" if r.queue_grows else "")
        + f"; KV cache peak {r.kv_peak_fraction:.0%}; preemptions {r.preemptions:,}",
    ]
    pc = r.prefix_cache
    if pc:
        where = (f"{pc['reserve_tokens']:,} tokens of the KV cache kept for it" if pc["reserve_tokens"] else
                 "in the shared KV pool, idle prefixes evicted oldest first when room is needed")
        lines.append(f"prefix cache ({where}): hit rate {pc['hit_rate_tokens']:.1%} of prompt tokens, "
                     f"{pc['hit_rate_requests']:.1%} of requests with a prefix; held at most "
                     f"{pc['peak_tokens']:,} tokens ({pc['peak_fraction']:.1%} of the KV cache, mean "
                     f"{pc['mean_fraction']:.1%}); evictions {pc['evictions']:,}")
    if r.multi_turn:
        lines += _session_lines(r.multi_turn)
    draft = sp["draft_model"] if sp and not sp["mtp"] else None
    lines += [f"note: {name_ids(n, r.model, r.hardware, draft)}" for n in r.notes]
    return "\n".join(lines)


SHOWN_TURNS = 8         # turns per session up to which the text lists each turn (--json lists up to 64)


def _session_lines(mt: dict) -> list[str]:
    """The agent sessions' lines: their wall time (gaps included) and, per turn, history, cached and computed tokens."""
    w = mt["session_s"]
    tool = mt["tool_time_per_session_s"]
    lines = [f"sessions: {mt['sessions_served']:,} of {mt['turns']} turns, tool gaps of mean {mt['tool_gap_s']:g} s "
             f"between turns; a session lasts {u.seconds(w['p50'])} p50, {u.seconds(w['p99'])} p99 (first send to "
             "last token" + (f", {u.seconds(tool) if tool else '0 s'} of it tool time on average)" if tool is not None
                             else ")"),
             f"  per turn: {mt['prompt_tokens_per_turn']:,.0f} prompt tokens, {mt['history_tokens_per_turn']:,.0f} of "
             f"them history ({mt['history_share_of_prompt_tokens']:.1%}: an unbounded cache's hit rate), "
             f"{mt['cached_tokens_per_turn']:,.0f} found cached, {mt['computed_tokens_per_turn']:,.0f} prefilled"]
    rows = mt.get("by_turn") or []
    if rows and mt["turns"] <= SHOWN_TURNS:
        lines.append(f"  {'turn':>6}{'prompt':>10}{'history':>10}{'cached':>10}{'prefilled':>11}{'TTFT':>11}"
                     f"{'end to end':>12}")
        lines += [f"  {x['turn']:>6}{x['prompt_tokens']:>10,.0f}{x['history_tokens']:>10,.0f}"
                  f"{x['cached_tokens']:>10,.0f}{x['computed_tokens']:>11,.0f}{u.seconds(x['ttft_mean_s']):>11}"
                  f"{u.seconds(x['e2e_mean_s']):>12}" for x in rows]
    elif rows:
        lines.append(f"  (each turn's means: --json, multi_turn.by_turn; {mt['turns']} turns)")
    return lines


def _step_lines(s, bw: float) -> list[str]:
    head = {"decode": "decode-only steps", "mixed": "mixed steps (prefill chunks + decodes)",
            "prefill": "prefill-only steps"}[s.kind]
    comp = (f"{s.decode_seqs:,.1f} decodes attending {s.keys_per_decode:,.0f} tokens each"
            + (f" + {s.prefill_tokens:,.0f} prompt tokens in {s.prefill_chunks:,.2f} chunks" if s.prefill_tokens else ""))
    if not s.decode_seqs:
        comp = f"{s.prefill_tokens:,.0f} prompt tokens in {s.prefill_chunks:,.2f} chunks"
    out = [f"  {head}: {s.steps:,} step{'s' if s.steps != 1 else ''}, {u.seconds(s.seconds)} in all, {u.seconds(s.mean_step_s)} each",
           f"    mean composition: {comp}"]
    if s.engine_step_s is not None:
        out.append(f"    the engine at that composition: {u.seconds(s.engine_step_s)} per step -> {s.bottleneck}-bound "
                   f"(compute-bound ops {u.seconds(s.compute_bound_s)}, memory-bound {u.seconds(s.memory_bound_s)}, "
                   f"communication {u.seconds(s.comm_s)}, fixed {u.seconds(s.overhead_s)})")
        out.append(f"    napkin: weights {u.bytes_(s.weight_bytes)} + KV {u.bytes_(s.kv_bytes)} read per chip / "
                   f"{u.rate(bw, 'B/s')} = {u.seconds(s.napkin_s)} at full bandwidth")
    return out


def explain_simulation(r) -> str:
    lay = r.layout
    groups = lay["dp"] * lay["ep"]
    lines = [simulation_table(r), "", "How it was simulated",
             f"  scheduler: {r.policy_description} ({_engine_name(r)}); limits per scheduler x {groups} "
             f"attention group{'s' if groups > 1 else ''}",
             *([f"  attention sharded by {lay['attention_sharding']} inside the TP group of {lay['tp']}: each rank holds "
                f"its own sequences' whole KV (the KV cache above is {lay['tp']} ranks' worth), the fullest rank runs "
                f"the attention core for ceil(S / {lay['tp']}) of a kernel's S sequences"
                + ("; the attention projections replicated, on the rank's own sequences"
                   if lay['attention_sharding'] == "dp" else "")] if lay.get("attention_sharding") else []),
             f"  each step's time: the engine's ops over the step's tokens (weights read once for every token in "
             f"it), attention per kernel (decodes, prompt chunks), plus the engine's launch and CPU costs; "
             f"efficiencies: {r.efficiency_source}",
             f"  decode steps between events run in closed form (the batch is fixed, contexts grow by "
             f"{'E tokens' if r.speculation else 'one token'} a step)"]
    sp = r.speculation
    if sp:
        lines += [f"  speculation: each decode verifies k + 1 = {sp['k'] + 1} tokens a step (a decode-form pass: "
                  f"weights read once for all of them, logits at every position, the i-th query also attends the i "
                  f"drafted tokens before it) after the draft's {sp['k']} steps "
                  f"({'the MTP head' if sp['mtp'] else model_label(sp['draft_model'])}), and gains E = (1 - a^(k+1)) / (1 - a) = "
                  f"{sp['tokens_per_step']:.3f} tokens (the expectation, for every sequence); an inter-token gap "
                  f"is the time between verification steps, TPOT is per token"]
    lines += ["", "What bounded the steps"]
    total = sum(s.seconds for s in r.steps) or 1.0
    for s in r.steps:
        lines += _step_lines(s, r.memory_bw)
        lines.append(f"    share of the run: {s.seconds / total:.0%}")
    return "\n".join(lines)


def load_text(load) -> str:
    """infer's section under load (--concurrency / --arrival-rate)."""
    eng = load.engine.get("name", load.engine.get("id", "?"))
    if load.mode == "closed":
        head = f"under load: {load.concurrency:,} users in a closed loop, {eng} scheduler ({load.source})"
    else:
        head = f"under load: {load.arrival_rate:g} requests/s arriving at random, {eng} scheduler ({load.source})"
    lines = ["", head]
    if load.running is not None:
        lines.append(f"  running at once: {load.running:,.1f}" + (f"; waiting for a slot: {load.queued:,.1f}"
                                                                  if load.queued else ""))
    lines += [f"  time to first token (one request): {u.seconds(load.ttft_s)}"
              + (f" (p99 {u.seconds(load.ttft_p99_s)})" if load.ttft_p99_s is not None else ""),
              f"  time per output token: {u.seconds(load.tpot_s)}"
              + (f" (p99 inter-token gap {u.seconds(load.itl_p99_s)})" if load.itl_p99_s is not None else "")
              + (f" = {load.output_tokens_per_s_per_user:,.1f} tok/s per user" if load.output_tokens_per_s_per_user else ""),
              f"  end to end: {u.seconds(load.e2e_s)}",
              f"  throughput: {u.rate(load.output_tokens_per_s, 'tok/s')} output, "
              f"{u.rate(load.output_tokens_per_s_per_chip, 'tok/s')} per chip"]
    if load.goodput_rps is not None:
        lines.append(f"  goodput: {load.goodput_rps:,.3g} req/s ({load.slo_attainment:.0%} within TTFT "
                     f"{u.seconds(load.ttft_target_s)} and TPOT {u.seconds(load.tpot_target_s)})" + ("; the queue grows: the rate is above what this replica serves"
                                         if load.queue_grows else ""))
    return "\n".join(lines)
