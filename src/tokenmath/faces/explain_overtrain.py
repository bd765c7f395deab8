"""The overtrain command's texts: the --explain derivation (target, training cost per model size from the
training engine or a fixed MFU, the engine's serving cost per size, the optimum, the demand sweep), the default
text and the RL phase's lines. Rendering only: every figure comes from analyses/training/overtrain.py."""
from __future__ import annotations

import math

from tokenmath.analyses.training.inference_cost import ASPECT, FFN_RATIO, HEAD_DIM, KV_HEADS, VOCAB
from tokenmath.analyses.training.overtrain import MFU_SOURCE, OvertrainResult, split_demand
from tokenmath.base import units as u
from tokenmath.engine.economics import per_mtok
from tokenmath.faces.names import chip_label, name_ids

def explain_overtrain(r: OvertrainResult) -> str:
    """overtrain's --explain: the target, $/FLOP, the engine's $/Mtok per model size, the optimum, the demand
    sweep."""
    f, hw = r.fit, r.hardware
    o, c = r.optimum, r.chinchilla
    pk = hw.peak_flops("bf16")
    L = [f"Over-training: minimise training + lifetime inference cost at loss {r.target_loss:.4f} "
         f"(fit {f.name!r}: E={f.E:.4g}, A={f.A:.6g}, B={f.B:.6g}, alpha={f.alpha:.5g}, beta={f.beta:.5g})", ""]
    L.append("1. Target")
    if r.target_from_compute:
        L.append(f"  budget C = {r.target_from_compute:.4g} FLOPs at Chinchilla-optimal gives l = {r.target_loss:.4f}")
    x = (r.target_loss - f.E) * f.beta / (f.alpha + f.beta)
    L.append(f"  Chinchilla point (alpha A/N^alpha = beta B/D^beta): A/N^alpha = (l-E) beta/(alpha+beta) = {x:.4f}"
             f" -> N = {u.count(c.params)}, D = {u.count(c.tokens)} ({c.tokens / c.params:.1f} tokens/param)")
    L.append(f"  on the constraint D(N) = (B / (l - E - A/N^alpha))^(1/beta); N must exceed "
             f"(A/(l-E))^(1/alpha) = {u.count(r.params_min)}")
    L.append("")
    L.append("2. Training cost")
    if r.training_model == "engine":
        L.append(f"  the training engine (tokenmath train --search) per N: the same dense model on the smallest "
                 f"power-of-two cluster of {chip_label(hw)} that ends the run of D(N) tokens within "
                 f"{r.train_days:g} days at 40% MFU, batches of max(1024, chips / 8) x 4,096 tokens (Llama 3), "
                 "its fastest layout that fits:")
        L.append(f"  $/token = chips x ${hw.price_usd_per_hour:g}/h / 3600 x step / tokens per step; MFU as "
                 "`tokenmath train` counts it (6 x the parameters that multiply an activation: no embedding lookup)")
        L.append(f"  {'N':>9} {'D':>9} {'chips':>7} {'layout':<62} {'step':>8} {'MFU':>6} {'$/Mtok':>8} {'days':>7}")
        shown = [t for t in r.training_nodes if t.run_days <= 10 * r.train_days]
        seen = set()
        for t in shown:
            key = (t.n_layers, t.d_model, t.chips)
            if key in seen:
                continue
            seen.add(key)
            L.append(f"  {u.count(t.params):>9} {u.count(t.tokens):>9} {t.chips:>7,} {t.layout:<62} "
                     f"{u.seconds(t.step_time_s):>8} {t.mfu:>6.1%} {per_mtok(t.usd_per_token):>8.4g} {t.run_days:>7,.0f}")
        hidden = len(r.training_nodes) - len(shown)
        if hidden:
            L.append(f"  (+ {hidden} engine run(s) near N_min, where D(N) explodes and the run would last over 10 x "
                     f"{r.train_days:g} days: they only bound the interpolation)")
        L.append(f"  at the optimum: MFU {r.mfu:.1%}; ${r.usd_per_flop * 1e18:.4g} per EFLOP of 6N (all N parameters) "
                 "FLOPs per token")
    else:
        L.append(f"  $/FLOP = ${hw.price_usd_per_hour:g}/h / 3600 / ({u.rate(pk, 'FLOP/s')} bf16 x MFU {r.mfu:g})"
                 f" = ${r.usd_per_flop * 1e18:.4g} per EFLOP")
        L.append(f"  MFU {MFU_SOURCE}")
    L.append("")
    rl_as_out = r.rl_rollout_tokens if r.rl is None else 0.0
    out_tok, in_tok = split_demand(r.inference_tokens, rl_as_out, r.input_output_ratio)
    L.append("3. Inference demand")
    L.append(f"  {r.inference_tokens:.4g} lifetime tokens at {r.input_output_ratio:g} input per output token"
             + (f" + {r.rl_rollout_tokens:.4g} RL rollout tokens (decode)" if r.rl is None else "")
             + f" = {out_tok:.4g} output + {in_tok:.4g} input tokens")
    if r.rl is not None:
        rec = r.rl
        L.append(f"  RL phase of {r.rl_rollout_tokens:.4g} rollout tokens, per rollout token at N: generation on the "
                 f"engine at {rec.prompt_len:,} in / {rec.response_len:,} out; prompts {rec.prompt_len:,} / "
                 f"({rec.group_size} x {rec.response_len:,}) input tokens; reference 2N x {rec.seq_per_response:.4g} "
                 f"FLOPs" + (f"; reward 2 x {u.count(rec.reward_params)} x {rec.seq_per_response:.4g} FLOPs"
                             if rec.reward_params else "")
                 + f"; update 6N x {rec.seq_per_response:.4g} x {rec.epochs:g} FLOPs (rl_cost.py)")
    if r.flop_only:
        L.append(f"  FLOP-only: cost/token = 2N x $/FLOP = 2N x {r.usd_per_flop:.4g} (same for input and output)")
    else:
        L.append(f"  engine: dense Llama-3-style model per N (d_model ~ {ASPECT:g} x layers, heads of {HEAD_DIM}, "
                 f"{KV_HEADS} KV heads, SwiGLU {FFN_RATIO:g} d_model, vocab {VOCAB:,}), bf16 unless set, "
                 f"{r.input_len} in / {r.output_len} out per request, >= {r.min_tokens_per_s_per_user:g} tokens/s per user")
        L.append(f"  {'N':>9} {'arch':>12} {'chips':>5} {'tp x pp':>7} {'batch':>6} {'tok/s/user':>10} "
                 f"{'$/Mtok out':>10} {'$/Mtok in':>10} {'2N-FLOP $/Mtok':>14}")
        for s in r.nodes:
            fl = per_mtok(2 * s.params * r.usd_per_flop)     # Sardana et al.'s 2N FLOPs per token
            if s.feasible:
                L.append(f"  {u.count(s.params):>9} {f'{s.n_layers}x{s.d_model}':>12} {s.chips:>5} "
                         f"{f'{s.tp}x{s.pp}':>7} {s.batch:>6} {1 / s.decode_step_s:>10.1f} "
                         f"{s.usd_per_mtok_output:>10.4g} {s.usd_per_mtok_input:>10.4g} {fl:>14.4g}")
            else:
                L.append(f"  {u.count(s.params):>9} {f'{s.n_layers}x{s.d_model}':>12}  cannot serve: {name_ids(s.reason, hw)}")
    L.append("")
    L.append("4. Minimise total(N) = " + ("D(N) x training $/token(N)" if r.training_model == "engine" else
                                           "6 N D(N) x $/FLOP") + " + inference $" + (" + RL $" if r.rl is not None else "")
             + " over a log grid of N")

    def row(name, p):
        return (f"  {name:<12} N = {u.count(p.params):>7}  D = {u.count(p.tokens):>7}  "
                f"({p.tokens / p.params:,.0f} tok/param)  train ${p.training_usd:,.4g} + inference "
                f"${p.inference_usd:,.4g}" + (f" + RL ${p.rl_usd:,.4g}" if r.rl is not None else "")
                + f" = ${p.total_usd:,.4g}")
    L.append(row("optimum", o))
    L.append(row("Chinchilla", c))
    if r.rl is not None:
        L.extend(rl_lines(r))
    if math.isfinite(r.saving_usd):
        L.append(f"  saving = ${r.saving_usd:,.4g} ({100 * r.saving_fraction:.1f}% of the Chinchilla total)")
    L.extend(_trained_on(o, chip_label(hw)))
    if o.serving is not None and o.serving.feasible:
        s = o.serving
        L.append(f"  optimum served as {s.n_layers} layers x d_model {s.d_model} ({u.count(s.params)} params) on "
                 f"{s.chips} x {chip_label(hw)} (tp {s.tp}, pp {s.pp}) at batch {s.batch}: "
                 f"{1 / s.decode_step_s:.1f} tokens/s per user, decode {s.bottleneck_decode}-bound")
    L.append("")
    L.append("5. As demand grows")
    for row_ in r.demand_sweep:
        sv = row_["saving_fraction"]
        L.append(f"  demand {row_['inference_tokens']:.3g} (+RL {row_['rl_rollout_tokens']:.3g}): N = "
                 f"{u.count(row_['params'])}, {row_['tokens_per_param']:,.0f} tok/param, total ${row_['total_usd']:,.4g}"
                 + (f", saving {100 * sv:.1f}%" if sv is not None else ""))
    if r.notes:
        L += ["", *("note: " + n for n in r.notes)]
    return "\n".join(L)


def overtrain_text(r) -> str:
    """The default (non --explain) text of an over-training result: the optimum beside Chinchilla, the serving
    of the optimum and how the answer moves with demand."""
    L = []
    o, c = r.optimum, r.chinchilla

    def usd(x):
        return u.usd(x) if math.isfinite(x) else "n/a (cannot serve)"
    L.append(f"Over-training at loss {r.target_loss:.4f} (fit {r.fit.name!r}), {r.inference_tokens:.3g} inference"
               f" + {r.rl_rollout_tokens:.3g} RL tokens, {chip_label(r.hardware)}, "
               + (f"training from the engine (MFU {r.mfu:.1%} at the optimum)" if r.training_model == "engine"
                  else f"training at MFU {r.mfu:g}") + ", inference "
               + ("2N FLOPs/token" if r.flop_only else f"from the engine at >= {r.min_tokens_per_s_per_user:g} tok/s/user"))
    L.append(f"  {'':<11} {'params':>8} {'tokens':>8} {'tok/param':>9} {'training':>12} {'inference':>12} {'total':>12}")
    for name, p in (("optimum", o), ("Chinchilla", c)):
        L.append(f"  {name:<11} {u.count(p.params):>8} {u.count(p.tokens):>8} {p.tokens / p.params:>9,.0f} "
                   f"{usd(p.training_usd):>12} {usd(p.inference_usd):>12} {usd(p.total_usd):>12}")
    if math.isfinite(r.saving_fraction):
        L.append(f"  saving {usd(r.saving_usd)} ({100 * r.saving_fraction:.1f}%)")
    if r.rl is not None:
        L.extend(rl_lines(r))
    L.extend(_trained_on(o, chip_label(r.hardware)))
    if o.serving is not None and o.serving.feasible:
        s = o.serving
        L.append(f"  optimum served as {s.n_layers} layers x d_model {s.d_model} on {s.chips} x {chip_label(r.hardware)}"
                   f" at batch {s.batch}: {1 / s.decode_step_s:.1f} tok/s/user, "
                   f"${s.usd_per_mtok_output:.3g}/Mtok out, ${s.usd_per_mtok_input:.3g}/Mtok in")
    L.append("  as demand grows:")
    for row in r.demand_sweep:
        sv = row["saving_fraction"]
        L.append(f"    {row['inference_tokens'] + row['rl_rollout_tokens']:>8.3g} tokens -> N {u.count(row['params']):>7},"
                   f" {row['tokens_per_param']:>7,.0f} tok/param, total {usd(row['total_usd'])}"
                   + (f", saving {100 * sv:.1f}%" if sv is not None else ""))
    for n in r.notes:
        L.append(f"  note: {name_ids(n, r.hardware)}")
    return "\n".join(L)


def rl_lines(r) -> list[str]:
    """The RL phase of an over-training result: its share of the optimum's cost, by term, and its recipe."""
    o, rec = r.optimum, r.rl
    t = o.rl_terms or {}
    share = o.rl_usd / o.total_usd if o.total_usd else float("nan")
    return [f"  RL phase at the optimum: {u.usd(o.rl_usd)} ({share:.1%} of the total): "
            + ", ".join(f"{k} {u.usd(v)}" for k, v in t.items()),
            f"  RL recipe: {rec.group_size} responses per prompt, prompts {rec.prompt_len:,} + responses "
            f"{rec.response_len:,} tokens, reference pass {'yes' if rec.reference else 'no'}, reward model "
            + (u.count(rec.reward_params) if rec.reward_params else "none (rule-based)")
            + f", {rec.epochs:g} update epoch(s) [{rec.source}]"] + _rollout_serving(o, chip_label(r.hardware))


def _rollout_serving(o, chip: str) -> list[str]:
    s = o.rl_serving
    if s is None or not s.feasible:
        return []
    return [f"  rollouts generated on {s.chips} x {chip} (tp {s.tp}, pp {s.pp}) at batch {s.batch} of at most "
            f"{s.max_batch} that fit: {1 / s.decode_step_s:.1f} tok/s per sequence, ${s.usd_per_mtok_output:.3g}/Mtok"]


def _trained_on(o, chip: str) -> list[str]:
    t = o.training
    if t is None:
        return []
    return [f"  optimum trained on {t.chips:,} x {chip} ({t.layout}): step {u.seconds(t.step_time_s)}, MFU {t.mfu:.1%}, "
            f"{t.run_days:,.0f} days"]
