"""Every shipped InferenceX run (analyses/calibration/inferencex.py) predicted by tokenmath's serving model at the
run's own configuration: chips, layout, engine profile, concurrency, lengths, MTP. Nothing is fitted to these rows.

- One engine instance (not disaggregated): the closed-loop steady state (steady_state.closed_loop, the same replica
  and step tables by_concurrency.layout_replica builds for `tokenmath validate`'s interactivity curves) of the run's
  layout at its concurrency; the replica and its tables are built once per (chip, dtype, engine, layout, MTP) and
  shared by every concurrency and length of the group.
- Disaggregated (prefill and decode pools): decode workers each run conc / workers users (at most what their memory
  holds; the rest queue); their decode step is the engine's static-batch step at that batch (grid.evaluate; with
  MTP the time per token, engine/speculative.py); a prompt's TTFT is its prefill alone on one prefill worker; the
  pools' request rate is the lesser of the users' (running / (TTFT + O x TPOT)) and the prefill pool's (workers x
  the best prompts/s over prompt batches 1-64). KV transfer between the pools is left out (an optimistic omission,
  said on every such row).
- Layout: InferenceX's TP is the GPUs of one instance; EP with DP attention is tokenmath's (tp = TP / EP, ep = EP)
  "DP attention + EP" layout; EP without DP attention (EP inside a TP attention group) has no tokenmath layout and
  is read as TP over every GPU (the same weight bytes per GPU; the MoE's communication differs: said on the row);
  DP attention without EP is TP with attention sharding "dp".
- MTP: the model's own MTP head drafting the tokens its recipe sets (inferencex_recipe.mtp_tokens; else
  inferencex.MTP_TOKENS), tokenmath's default acceptance by position.
- As run: each engine instance at the KV-cache dtype and the expert-parallel transport its recipe sets
  (inferencex_recipe.py: FP8 KV on every engine but SGLang on Hopper; DeepEP on SGLang's NVL72 wide EP;
  TensorRT-LLM's low-precision all-to-all), said on every row; `recipes=False` runs every row at BF16 KV and the
  default transport, as the predictor did before.
- Memory: `limit` says what capped the users a replica (or a decode worker) runs at once: "users" (all of them
  run), "max_running" (the engine's cap) or "kv" (the KV cache holds fewer: the rest queue).
- The dominant term of each prediction: of the decode step at the predicted batch (compute, memory, communication,
  overhead: the engine's bottleneck), or of the prompt's prefill where prompts fill every step (the closed loop's
  "budget" regime) or where the prefill pool caps a disaggregated run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.engine.pass_cost import BOTTLENECKS
from tokenmath.mapping.layout import attention_code
from tokenmath.specs.efficiency import DEFAULT
from tokenmath.analyses.setup import fmt_layout, setup
from tokenmath.analyses.calibration.inferencex import (MTP_TOKENS, Run, lengths, mean_length, weight_dtype,
                                                     skip_reason)
from tokenmath.analyses.calibration.inferencex_recipe import plain, recipe
from tokenmath.analyses.serving.by_concurrency import layout_replica
from tokenmath.analyses.serving.grid import evaluate
from tokenmath.analyses.serving.simulation.workload import parse_lengths
from tokenmath.analyses.serving.steady_state import closed_loop

BASES = ("calibrated", "kernel")       # data/calibration.toml (fitted on data/measurements.toml), or nothing fitted
PROMPT_BATCHES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class RunPrediction:
    run: Run
    tput_per_gpu: float | None        # input + output tokens/s per GPU, InferenceX's tput_per_gpu
    per_user: float | None            # output tokens/s per user (1 / TPOT)
    ttft_s: float | None
    term: str | None                  # what dominates the predicted step: compute, memory, communication, overhead
    phase: str | None                 # "decode" or "prefill": the step the term is of
    layout: str
    skipped: str | None               # why the run could not be predicted (counted and listed, never dropped)
    notes: tuple[str, ...] = ()
    limit: str | None = None          # what capped the running users: users, max_running, kv (module docstring)

    @property
    def measured(self) -> float:
        return self.run.row["tput_per_gpu"]

    @property
    def ratio(self) -> float | None:
        """Predicted / measured throughput per GPU (> 1: optimistic)."""
        return None if self.tput_per_gpu is None else self.tput_per_gpu / self.measured

    @property
    def user_ratio(self) -> float | None:
        m = self.run.row["median_intvty"]
        return None if self.per_user is None or not m else self.per_user / m

    def to_dict(self) -> dict:
        r = self.run.row
        return {"run": self.run.label, "hardware": r["hardware"], "framework": r["framework"],
                "engine_version": self.run.engine_version, "engine_profile": self.run.profile,
                "precision": r["precision"], "mtp": self.run.mtp, "disaggregated": self.run.disagg,
                "isl": r["isl"], "osl": r["osl"], "conc": r["conc"], "gpus": r["gpus"], "date": r["date"],
                "run_url": r["run_url"], "measured_tput_per_gpu": self.measured,
                "predicted_tput_per_gpu": self.tput_per_gpu, "ratio": self.ratio,
                "measured_per_user": r["median_intvty"], "predicted_per_user": self.per_user,
                "measured_ttft_s": r["median_ttft"], "predicted_ttft_s": self.ttft_s, "term": self.term,
                "phase": self.phase, "layout": self.layout, "limit": self.limit, "skipped": self.skipped,
                "notes": list(self.notes)}


def layout_of(tp: int, ep: int, dp_attention: bool, chips: int) -> tuple[tuple[int, ...], str | None]:
    """(tokenmath layout (tp, pp, ep, dp, attention code), note) of an instance of `chips` GPUs run as TP `tp`,
    EP `ep`, DP attention or not."""
    if experts_whole(ep, dp_attention, chips):
        return (chips, 1, 1, 1, 0), (f"EP {ep} inside a TP {tp} attention group: TP {chips} with the experts whole "
                                     "on its ranks (moe_sharding ep: each rank reads whole experts, the step waits "
                                     "on the rank the batch touched most; the MoE sums by TP's all-reduce)")
    if ep > 1:
        return (chips // ep, 1, ep, 1, 0), None
    return (chips, 1, 1, 1, attention_code("dp") if dp_attention else 0), None


def experts_whole(ep: int, dp_attention: bool, chips: int) -> bool:
    """Whether an instance runs its expert parallelism inside the attention's TP group (layout_of's second case):
    the routed experts whole on the TP ranks (tokenmath's moe_sharding "ep")."""
    return ep > 1 and not (dp_attention and chips % ep == 0)


@lru_cache(maxsize=256)
def _setup(model: str, chip: str, wdtype: str, profile: str, basis: str, kv: str | None = None,
           comm: str = "bf16", mem_fraction: float | None = None, adp_balance: bool = False, whole: bool = False,
           max_running: int | None = None):
    """The run's setup; kv, comm, mem_fraction, adp_balance: its recipe's KV dtype, EP transport, the engine's static
    memory fraction (None: the profile's) and whether its scheduler balances the attention-DP groups; whole: the
    experts whole on the TP ranks (experts_whole); max_running: the engine's cap on running requests per scheduler
    where the recipe leaves SGLang's speculative default (None: the profile's)."""
    if basis not in BASES:
        raise InputError("basis", f"{basis!r}", ", ".join(BASES))
    kw = {"efficiency": DEFAULT} if basis == "kernel" else {}
    su = setup(model, chip, weight_dtype=wdtype, engine=profile, kv_dtype=kv, ep_comm=comm, adp_balance=adp_balance,
               moe_sharding="ep" if whole else None, max_running=max_running, **kw)
    if mem_fraction is not None and su.engine is not None:
        su = replace(su, efficiency=replace(su.efficiency, engine=replace(su.engine, kv_memory_fraction=mem_fraction)))
    return su


def _draft(su, mtp: bool, k: int | None = None):
    """The run's MTP draft: its recipe's k tokens a step (None: MTP_TOKENS); None without MTP."""
    if not mtp:
        return None
    from tokenmath.analyses.serving.speculative import resolve_draft, speculation
    return resolve_draft(speculation(mtp=k or MTP_TOKENS), su.model, su.precision)


def _setup_key(run: Run) -> tuple:
    return (run.model_id, run.chip_id, weight_dtype(run.row), run.profile)


def _skip(run: Run, why: str, lay: str = "") -> RunPrediction:
    return RunPrediction(run, None, None, None, None, None, lay, why)


def _terms(su, lay, batches, isl: int, osl: int, draft) -> tuple[np.ndarray, ...]:
    """(decode step s per token, decode bottleneck name, fits, prefill bottleneck, running batch) at each batch of
    `batches`, a batch above what the memory holds clipped to it (the users beyond it queue)."""
    b = np.maximum(np.asarray(batches, float), 1.0)
    g = evaluate(su, [lay], b, isl, osl, draft=draft)
    cap = np.asarray(g.max_batch[0], float)
    if np.any(b > cap) and np.all(cap >= 1):         # more users than the memory holds: the rest queue
        b = np.minimum(b, np.floor(cap))
        g = evaluate(su, [lay], b, isl, osl, draft=draft)
    pre = g.cost.prefill
    pb = BOTTLENECKS[np.asarray(pre.bottleneck_code)].reshape(-1) if pre is not None else np.array(["compute"])
    return (np.asarray(g.step_s[0], float), np.asarray(g.bottleneck[0]), np.asarray(g.fits[0], bool),
            np.broadcast_to(pb, b.shape), b)


def _aggregated(runs: list[Run], basis: str, how) -> list[RunPrediction]:
    out: list[RunPrediction] = []
    groups: dict = {}
    for r in runs:
        x = r.row
        lay, note = layout_of(x["decode_tp"], x["decode_ep"], x["decode_dp_attention"], x["gpus"])
        rc = how(r, "aggregated")
        whole = experts_whole(x["decode_ep"], x["decode_dp_attention"], x["gpus"])
        groups.setdefault(_setup_key(r) + (rc.kv_dtype, rc.ep_comm, rc.mem_fraction, rc.adp_balance, whole, lay, r.mtp,
                                           rc.mtp_tokens, rc.max_running, (note, rc.note if rc.sources else None)),
                          []).append(r)
    for (mid, chip, wd, prof, kv, comm, frac, bal, whole, lay, mtp, k, cap, notes), rs in groups.items():
        name = fmt_layout(*lay)
        notes = tuple(n for n in notes if n)
        try:
            su = _setup(mid, chip, wd, prof, basis, kv, comm, frac, bal, whole, cap)
            draft = _draft(su, mtp, k)
            inp = parse_lengths(max(r.row["isl"] for r in rs), "input_len")
            outl = parse_lengths(max(r.row["osl"] for r in rs), "output_len")
            _, rep, cost, problem = layout_replica(su, lay, inp, outl, max(r.row["conc"] for r in rs), draft)
        except InputError as e:
            out += [_skip(r, f"layout {name}: {e.problem}", name) for r in rs]
            continue
        if rep is None:
            why = problem or "the layout does not hold the model and one whole request on these chips"
            out += [_skip(r, f"layout {name}: {why}", name) for r in rs]
            continue
        by_len: dict = {}
        for r in rs:
            by_len.setdefault((r.row["isl"], r.row["osl"]), []).append(r)
        for (isl, osl), grp in by_len.items():
            pts = [closed_loop(rep, cost, r.row["conc"], parse_lengths(lengths(isl), "input_len"),
                               parse_lengths(lengths(osl), "output_len")) for r in grp]
            groups_per_replica = max(1, lay[2] * lay[3])
            step, dterm, _, pterm, _ = _terms(su, lay, [p.running for p in pts], round(mean_length(isl)),
                                              round(mean_length(osl)), draft)
            for r, p, st, dt, pt in zip(grp, pts, step, dterm, pterm):
                tput = p.total_tokens_per_s / p.chips
                if not (math.isfinite(tput) and tput > 0):
                    out.append(_skip(r, "the steady state has no finite throughput", name))
                    continue
                prefill = p.regime == "budget"
                out.append(RunPrediction(r, tput, p.output_tokens_per_s_per_user, p.ttft_s,
                                         str(pt if prefill else dt), "prefill" if prefill else "decode", name, None,
                                         notes + ((f"{groups_per_replica} attention groups",)
                                                  if groups_per_replica > 1 else ()), p.limit))
    return out


@lru_cache(maxsize=512)
def _prefill_pool(mid, chip, wd, prof, basis, lay, isl: int, kv=None, comm="bf16",
                  frac=None, whole=False) -> tuple[float, float, str]:
    """(TTFT s of one prompt alone, best prompts/s of one worker over PROMPT_BATCHES, the prefill's bottleneck)."""
    su = _setup(mid, chip, wd, prof, basis, kv, comm, frac, whole=whole)
    g = evaluate(su, [lay], np.array(PROMPT_BATCHES, float), isl, 1)
    ttft = np.asarray(g.ttft_s[0], float)
    ok = np.asarray(g.fits[0], bool)
    if not ok.any():
        raise InputError("prefill layout", f"{fmt_layout(*lay)} holds no {isl:,}-token prompt", "more chips")
    rate = np.where(ok, np.asarray(PROMPT_BATCHES, float) / ttft, 0.0)
    pre = g.cost.prefill
    code = int(np.asarray(pre.bottleneck_code).reshape(-1)[int(np.argmax(rate))]) if pre is not None else 0
    return float(ttft[0]), float(rate.max()), str(BOTTLENECKS[code])


def _disaggregated(runs: list[Run], basis: str, how) -> list[RunPrediction]:
    out: list[RunPrediction] = []
    groups: dict = {}
    for r in runs:
        x = r.row
        dchips = x["num_decode_gpu"] // x["decode_num_workers"]
        pchips = x["num_prefill_gpu"] // x["prefill_num_workers"]
        dlay, dnote = layout_of(x["decode_tp"], x["decode_ep"], x["decode_dp_attention"], dchips)
        play, pnote = layout_of(x["prefill_tp"], x["prefill_ep"], x["prefill_dp_attention"], pchips)
        dr, pr = how(r, "decode"), how(r, "prefill")
        notes = tuple(f"{w}: {n}" for w, n in (("decode", dnote), ("prefill", pnote)) if n)
        notes += tuple(f"{w} {n.note}" for w, n in (("decode", dr), ("prefill", pr)) if n.sources)
        key = (dr.kv_dtype, dr.ep_comm, dr.mem_fraction, pr.kv_dtype, pr.ep_comm, pr.mem_fraction, dr.mtp_tokens,
               experts_whole(x["decode_ep"], x["decode_dp_attention"], dchips),
               experts_whole(x["prefill_ep"], x["prefill_dp_attention"], pchips))
        groups.setdefault(_setup_key(r) + key + (dlay, play, r.mtp, x["isl"], x["osl"], notes), []).append(r)
    for (mid, chip, wd, prof, dkv, dcomm, dfrac, pkv, pcomm, pfrac, k, dwhole, pwhole, dlay, play, mtp, isl, osl,
         notes), rs in groups.items():
        name = f"prefill {fmt_layout(*play)} / decode {fmt_layout(*dlay)}"
        mi, mo = mean_length(isl), mean_length(osl)          # the client's mean lengths (inferencex.lengths)
        try:
            su = _setup(mid, chip, wd, prof, basis, dkv, dcomm, dfrac, whole=dwhole)
            draft = _draft(su, mtp, k)
            ttft1, prompts_per_s, pterm = _prefill_pool(mid, chip, wd, prof, basis, play, round(mi), pkv, pcomm, pfrac,
                                                        pwhole)
            b = [r.row["conc"] / r.row["decode_num_workers"] for r in rs]
            step, dterm, fits, _, run_b = _terms(su, dlay, b, round(mi), round(mo), draft)
        except InputError as e:
            out += [_skip(r, f"{name}: {e.problem}", name) for r in rs]
            continue
        for r, st, dt, ok, rb, want in zip(rs, step, dterm, fits, run_b, b):
            x = r.row
            if not ok or not (math.isfinite(st) and st > 0):
                out.append(_skip(r, f"{name}: a decode worker does not hold {x['conc'] / x['decode_num_workers']:g} "
                                    f"users of {isl + osl:,} tokens", name))
                continue
            running = min(x["conc"], x["decode_num_workers"] * rb)      # users in the decode pool at once
            users = running / (ttft1 + mo * st)                           # requests/s they make
            pool = x["prefill_num_workers"] * prompts_per_s          # requests/s the prefill pool serves
            rate = min(users, pool)
            out.append(RunPrediction(r, rate * (mi + mo) / x["gpus"], 1.0 / st, ttft1,
                                     pterm if pool < users else str(dt), "prefill" if pool < users else "decode",
                                     name, None, notes + ("KV transfer between the pools left out",),
                                     "kv" if rb < want else "users"))
    return out


def predict_runs(runs, basis: str = "calibrated", recipes: bool = True) -> list[RunPrediction]:
    """Every run predicted at efficiency `basis` (BASES), in the order given; the ones tokenmath cannot model are
    kept with the reason (skipped). recipes: each engine instance as its recipe ran it (inferencex_recipe.py), else
    BF16 KV and the default transport everywhere."""
    how = recipe if recipes else plain
    preds: dict[int, RunPrediction] = {}
    agg, dis = [], []
    for r in runs:
        why = skip_reason(r)
        if why:
            preds[r.index] = _skip(r, why)
        else:
            (dis if r.disagg else agg).append(r)
    for p in _aggregated(agg, basis, how) + _disaggregated(dis, basis, how):
        preds[p.run.index] = p
    return [preds[r.index] for r in runs]
