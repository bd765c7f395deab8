"""Over-training: choose N and D minimising training cost + lifetime inference cost at a target loss.

Sardana, Portes, Doubov, Frankle 2023, "Beyond Chinchilla-Optimal" (arXiv:2401.00448, ICML 2024) minimise
6 N D_tr + 2 N D_inf FLOPs subject to L(N, D_tr) = l. On the loss constraint D_tr is a function of N,
    D_tr(N) = (B / (l - E - A/N^alpha))^(1/beta),   N > N_min = (A/(l - E))^(1/alpha),
so the problem is one-dimensional in N; it is solved here on a dense log grid of N (numpy, vectorized).

Costs in USD (SI units inside: FLOPs, tokens, USD, seconds):
- training, engine-based (default): the training engine's fastest layout for the size's model on a cluster sized
  to end the run within `train_days` (training_cost.py): $ per trained token = chips x $/chip-second x step /
  tokens per step, interpolated log-log between engine runs like inference. Its MFU is the engine's, per size.
- training at a fixed MFU (`mfu` given, or `flop_only`): 6 N D FLOPs at the hardware's dense bf16 peak x MFU:
      $/FLOP = price / 3600 / (peak_bf16 x MFU).
  MFU 0.40 in FLOP-only mode: PaLM 540B trained at 46.2% MFU (Chowdhery et al. 2022, Table 3 / App. B) and Llama 3
  405B at 38-43% (Llama 3 paper, Table 4); 6ND over reported H100-hours gives ~35% for Llama 3 405B
  (reference/scaling_laws.md Sec. 7), so 0.40 is the middle of the published range for large dense runs.
- inference, engine-based (default): the cost of a token from the serving engine, not 2N FLOPs
  (inference_cost.serve_cost: a dense Llama-3-style model per N, served at the per-user speed target). Lifetime
  inference tokens split input:output by `input_output_ratio`; RL rollout tokens are generated tokens, priced as
  output (decode) tokens (their prompts are not counted) -- or, with `rl` (an RLRecipe, `--rl`), as a whole RL
  phase: rollouts generated at the recipe's prompt and response lengths on the serving engine, the group's shared
  prompts, reference / reward passes and the policy update as training tokens (rl_cost.py).
  The engine runs at a set of model sizes (nodes) and log(cost/token) is interpolated linearly in log N between
  them; the Chinchilla point and every reported optimum are nodes, so every reported figure is an engine run.
- inference, FLOP-only (`flop_only=True`): 2N FLOPs per token (input or output) at the same $/FLOP as training,
  which is Sardana et al.'s compute version; minimising $ then minimises FLOPs, so it reproduces their numbers.

The target: a loss, or a training budget C whose compute-optimal loss becomes the target (what C buys at
Chinchilla-optimal). The Chinchilla point is the cheapest-to-train model at the target loss (closed form).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tokenmath.analyses.training.inference_cost import VOCAB, ServingCost, serve_cost
from tokenmath.analyses.training.overtrain_result import MFU_SOURCE  # noqa: F401  (faces import it from here)
from tokenmath.analyses.training.overtrain_result import DEFAULT_MFU, OvertrainResult, Point
from tokenmath.analyses.training.rl_cost import TERMS, RLRecipe, rl_usd_per_token
from tokenmath.analyses.training.training_cost import DEFAULT_RUN_DAYS, TrainingCosts
from tokenmath.analyses.training.scaling_laws import (
    CHINCHILLA_COMPUTE,
    FLOPS_PER_PARAM_TOKEN,
    check_loss,
    compute_optimal,
    get_fit,
    loss,
    min_params_for_loss,
    optimal_for_loss,
    positive_number,
    tokens_for_loss,
)
from tokenmath.base.errors import InputError
from tokenmath.engine.economics import usd_per_s
from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
from tokenmath.specs.hardware import Hardware, get_hardware

DEFAULT_MIN_TPS = 20.0          # tokens/s per user: a reading-speed floor for chat
DEFAULT_OUTPUT_LEN = 512        # generated tokens per request in the serving workload
DEFAULT_DEMAND_FACTORS = (0.1, 1.0, 10.0, 100.0)
ZERO_DEMAND_SWEEP = (1e10, 1e11, 1e12, 1e13)  # absolute demands when the base demand is 0
EXTREME_TOKENS_PER_PARAM = 1000.0
MIN_ENGINE_PARAMS = 3e8     # below this a 128256-token vocabulary is most of the model
MAX_ENGINE_PARAMS = 1e16    # the rule's largest shapes (1024 layers) reach the model spec's d_model limit, 1,000,000


def _nonneg(v, field: str) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a number", "a number of tokens >= 0, e.g. 1e12")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", "a number of tokens >= 0, e.g. 1e12") from None
    if not math.isfinite(x) or x < 0:
        raise InputError(field, f"{v!r} must be a finite number >= 0", "a number of tokens >= 0, e.g. 1e12")
    return x


class _Costs:
    """Cost of a (N, D) pair: training and inference (engine nodes interpolated, or FLOP-only)."""

    def __init__(self, hw: Hardware, *, usd_per_flop: float, flop_only: bool, min_tps: float, input_len: int,
                 output_len: int, weight_dtype: str | None, kv_dtype: str | None,
                 training: TrainingCosts | None = None):
        self.hw, self.usd_per_flop, self.flop_only = hw, usd_per_flop, flop_only
        self.training = training         # the training engine's $ per token (None: 6ND at the fixed MFU)
        self.min_tps, self.input_len, self.output_len = min_tps, input_len, output_len
        self.weight_dtype, self.kv_dtype = weight_dtype, kv_dtype
        self.nodes: dict[float, ServingCost] = {}

    def add_node(self, N: float) -> ServingCost:
        """An engine run at N: its serving, and its training where the training engine prices training."""
        if N not in self.nodes:
            self.nodes[N] = serve_cost(N, self.hw, self.min_tps, self.input_len, self.output_len,
                                       self.weight_dtype, self.kv_dtype)
        if self.training is not None:
            self.training.add_node(N)
        return self.nodes[N]

    def per_token(self, N):
        """(usd per output token, usd per input token) at N (arrays), inf where no node can serve it."""
        N = np.asarray(N, dtype=float)
        if self.flop_only:
            c = 2.0 * N * self.usd_per_flop
            return c, c
        ks = sorted(self.nodes)
        lx = np.log(ks)
        res = []
        for attr in ("usd_per_output_token", "usd_per_input_token"):
            y = np.array([getattr(self.nodes[k], attr) for k in ks])
            okm = np.isfinite(y)
            out = np.full(N.shape, np.inf)
            if okm.any():
                xs, ys = lx[okm], np.log(y[okm])
                ln = np.log(N)
                inside = (ln >= xs[0] - 1e-12) & (ln <= xs[-1] + 1e-12)
                out = np.where(inside, np.exp(np.interp(ln, xs, ys)), np.inf)
            res.append(out)
        return res[0], res[1]

    def training_usd(self, N, D):
        """USD to train N parameters on D tokens (arrays): the engine's $ per token, or 6ND at the fixed MFU."""
        if self.training is not None:
            return np.asarray(D, float) * self.training.per_token(N)
        return FLOPS_PER_PARAM_TOKEN * np.asarray(N, float) * np.asarray(D, float) * self.usd_per_flop

    def flop_usd(self, N):
        """USD per training FLOP at N (what RL's reference, reward and update passes pay)."""
        if self.training is not None:
            return self.training.per_token(N) / (FLOPS_PER_PARAM_TOKEN * np.asarray(N, float))
        return self.usd_per_flop + 0.0 * np.asarray(N, float)

    def point(self, N: float, D: float, out_tokens: float, in_tokens: float) -> Point:
        c_out, c_in = (float(x) for x in self.per_token(N))
        tr = FLOPS_PER_PARAM_TOKEN * N * D
        inf_usd = float(_inference_usd(out_tokens, c_out, in_tokens, c_in, N))
        return Point(params=N, tokens=D, training_usd=float(self.training_usd(N, D)), inference_usd=inf_usd,
                     training_flops=tr, inference_flops=2.0 * N * (out_tokens + in_tokens),
                     serving=None if self.flop_only else self.nodes.get(N),
                     training=None if self.training is None else self.training.nodes.get(N))


def _inference_usd(out_tok, c_out, in_tok, c_in, like):
    """out x $/out + in x $/in, where no tokens cost nothing (even where a size cannot serve: 0 x inf is 0)."""
    total = np.zeros(np.shape(like))
    if out_tok:
        total = total + out_tok * c_out
    if in_tok:
        total = total + in_tok * c_in
    return total


def _unique_arch(nodes: list[ServingCost]) -> list[ServingCost]:
    seen, out = set(), []
    for s in nodes:
        if (s.n_layers, s.d_model) not in seen:
            seen.add((s.n_layers, s.d_model))
            out.append(s)
    return sorted(out, key=lambda s: s.params)


def split_demand(inference_tokens: float, rl_tokens: float, ratio: float) -> tuple[float, float]:
    """(output tokens, input tokens): lifetime tokens split input:output = ratio:1; RL rollouts are all output."""
    out = inference_tokens / (1.0 + ratio) + rl_tokens
    return out, inference_tokens - inference_tokens / (1.0 + ratio)


def overtrain(target_loss=None, compute=None, inference_tokens=0.0, rl_rollout_tokens=0.0, fit="epoch",
              hardware="h100-sxm", mfu=None, flop_only=False, train_days=DEFAULT_RUN_DAYS,
              min_tokens_per_s_per_user=DEFAULT_MIN_TPS, input_output_ratio=1.0, output_len=DEFAULT_OUTPUT_LEN,
              weight_dtype=None, kv_dtype=None, demand_factors=DEFAULT_DEMAND_FACTORS, grid_points=4000,
              engine_points=24, rl: RLRecipe | bool | None = None) -> OvertrainResult:
    """Minimise training + lifetime inference cost (USD) at a target loss.

    target_loss: nats/token under `fit`; or compute: a training budget (FLOPs) whose compute-optimal loss is the
    target. inference_tokens: lifetime tokens served (input + output, split by input_output_ratio = input per
    output token); rl_rollout_tokens: generated RL tokens (priced as output, or with rl -- an RLRecipe, or True
    for DeepSeek-R1's -- as an RL phase, rl_cost.py). mfu: None trains each size on the training engine (a cluster
    that ends the run within train_days); a fraction prices training at 6ND FLOPs at that MFU (FLOP-only mode
    uses 0.40 unless given). See the module doc for the costs.
    """
    f = get_fit(fit)
    if target_loss is not None and compute is not None:
        raise InputError("target_loss", "give exactly one of a target loss or a training compute budget",
                         "--target-loss L (nats/token) or --compute C (FLOPs)")
    defaulted = target_loss is None and compute is None
    if defaulted:          # as `chinchilla` does: Chinchilla's own compute sets the loss to reach
        compute = CHINCHILLA_COMPUTE
    C_target = None
    if compute is not None:
        C_target = positive_number(compute, "compute", "FLOPs")
        if C_target < 1e6:
            raise InputError("compute", f"{C_target:g} FLOPs is not a training budget", "e.g. 1e24")
        n0, d0 = compute_optimal(C_target, f)
        ell = float(loss(n0, d0, f))
    else:
        ell = check_loss(target_loss, f, "target_loss")
    D_inf = _nonneg(inference_tokens, "inference_tokens")
    D_rl = _nonneg(rl_rollout_tokens, "rl_rollout_tokens")
    engine_training = mfu is None and not flop_only
    mfu = DEFAULT_MFU if mfu is None else positive_number(mfu, "mfu")
    if not 0.01 <= mfu <= 1:        # below 1% the cluster a run needs overflows any count (and means nothing)
        raise InputError("mfu", f"{mfu:g} is out of range" if mfu < 1 else f"{mfu:g} exceeds 1 (100% of peak)",
                         "a fraction from 0.01 to 1, e.g. 0.4")
    train_days = positive_number(train_days, "train_days", "days")
    if not 1e-3 <= train_days <= 3650:       # under ~90 s the cluster that ends the run in time is past any count
        raise InputError("train_days", f"{train_days:g} days is not a training run", "a number of days from 0.001 to 3650")
    min_tps = positive_number(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", "tokens/s")
    ratio = _nonneg(input_output_ratio, "input_output_ratio")
    if ratio > 1e4:
        raise InputError("input_output_ratio", f"{ratio:g} input tokens per output token", "a number in [0, 10000]")
    if (isinstance(output_len, bool) or not isinstance(output_len, (int, float)) or not math.isfinite(output_len)
            or output_len != int(output_len) or not 1 <= output_len <= 1_000_000):
        raise InputError("output_len", f"{output_len!r} is not a token count", "an integer from 1 to 1,000,000")
    output_len = int(output_len)
    input_len = max(1, round(ratio * output_len))
    hw = get_hardware(hardware)
    if hw.price_usd_per_hour is None or hw.price_usd_per_hour <= 0:
        raise InputError("hardware", f"{hw.id} has no price", "a catalog chip with a price, or a file with "
                         "price_usd_per_hour")
    # check the dtypes once, up front, in both modes: a bad option is an error even where it goes unused
    if weight_dtype is not None:
        get_dtype(weight_dtype, "weight_dtype", WEIGHT_DTYPES)
    if kv_dtype is not None:
        get_dtype(kv_dtype, "kv_dtype", KV_DTYPES)
    usd_per_flop = usd_per_s(1, hw.price_usd_per_hour) / (hw.peak_flops("bf16") * mfu)

    n_chin, d_chin = (float(x) for x in optimal_for_loss(ell, f))
    n_min = float(min_params_for_loss(ell, f))
    if n_chin < 1e6:
        raise InputError("compute" if C_target else "target_loss", f"loss {ell:.4g} is reached by a "
                         f"{n_chin:,.0f}-parameter model; too small to price as an LLM",
                         "a larger budget" if C_target else "a lower loss, closer to E")
    hi = 3.0 * n_chin
    lo = n_min * (1 + 1e-4)
    grid = np.unique(np.concatenate([np.geomspace(lo, hi, grid_points), [n_chin]]))
    D_grid = tokens_for_loss(grid, ell, f)

    training = TrainingCosts(hw, lambda N: float(tokens_for_loss(N, ell, f)), train_days) if engine_training else None
    costs = _Costs(hw, usd_per_flop=usd_per_flop, flop_only=flop_only, min_tps=min_tps, input_len=input_len,
                   output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, training=training)
    rl = RLRecipe() if rl is True else (rl or None)
    rl_costs = None if rl is None else _Costs(
        hw, usd_per_flop=usd_per_flop, flop_only=flop_only, min_tps=min_tps, input_len=rl.prompt_len,
        output_len=rl.response_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    all_costs = [c for c in (costs, rl_costs) if c is not None]
    notes: list[str] = []
    if defaulted:
        notes.append("no target given: the loss Chinchilla's own training compute reaches, 5.76e23 FLOPs (Hoffmann et "
                     "al. App. F); --target-loss L or --compute C for another")
    if not flop_only:
        e_lo = max(lo, MIN_ENGINE_PARAMS)
        if e_lo >= n_chin:
            raise InputError("target_loss", f"the Chinchilla model for loss {ell:.4g} has {n_chin:,.0f} parameters, "
                             f"below the smallest model the engine prices ({MIN_ENGINE_PARAMS:,.0f}; with a "
                             f"{VOCAB:,}-token vocabulary the embeddings dominate)", "a lower loss, or --flop-only")
        if hi > MAX_ENGINE_PARAMS:
            field = "compute" if C_target else "target_loss"
            raise InputError(field, f"the search reaches {hi:.3g}-parameter models (3 x the Chinchilla model of "
                             f"{n_chin:.3g}), beyond the largest the engine can build ({MAX_ENGINE_PARAMS:.0e}: "
                             f"d_model up to 1,000,000)", ("a smaller budget" if C_target else
                                                             "a higher loss") + ", or --flop-only")
        for c in all_costs:
            for N in np.geomspace(e_lo, hi, engine_points):
                c.add_node(float(N))
            c.add_node(n_chin)
        if e_lo > lo:
            notes.append(f"the engine prices models from {e_lo:,.3g} parameters up (smaller ones are mostly "
                         f"{VOCAB:,}-token embeddings); the search starts there")

    def rl_terms(N, dr):
        """USD of dr rollout tokens by term at N (arrays), or None without an RL recipe."""
        if rl_costs is None:
            return None
        t = rl_usd_per_token(N, *rl_costs.per_token(N), costs.flop_usd(N), rl)
        return {k: dr * v for k, v in t.items()} if dr else {k: 0.0 * v for k, v in t.items()}

    def argmin(out_tok, in_tok, dr=0.0) -> int:
        c_out, c_in = costs.per_token(grid)
        inf_ = _inference_usd(out_tok, c_out, in_tok, c_in, grid)
        total = costs.training_usd(grid, D_grid) + inf_ + (rl_terms(grid, dr)["total"] if rl_costs is not None else 0.0)
        i = int(np.argmin(total))
        if not math.isfinite(total[i]):
            raise InputError("min_tokens_per_s_per_user", f"no model reaching loss {ell:.4g} can be served at "
                             f"{min_tps:g} tokens/s per user on {hw.id}", "a lower speed target or faster hardware")
        return i

    as_out = 0.0 if rl is not None else 1.0       # without a recipe RL rollouts are output tokens
    out_tok, in_tok = split_demand(D_inf, as_out * D_rl, ratio)
    if D_inf + D_rl > 0:
        sweep_demands = [(k * D_inf, k * D_rl, k) for k in demand_factors]
    else:
        sweep_demands = [(x, 0.0, None) for x in ZERO_DEMAND_SWEEP]
    rl_of = (lambda dr: 0.0) if rl is None else (lambda dr: dr)
    splits = [(out_tok, in_tok, rl_of(D_rl))] + [(*split_demand(di, as_out * dr, ratio), rl_of(dr))
                                                  for di, dr, _ in sweep_demands]
    if not flop_only:
        # every reported optimum must be an engine run, not an interpolation: add a node where the interpolated
        # curve puts an optimum and solve again, until all optima (main and sweep) sit on nodes. All demands then
        # share one cost curve, so the comparisons between them are exact.
        for _ in range(12):
            new_nodes = [float(grid[argmin(*sp)]) for sp in splits]
            new_nodes = [n for n in new_nodes if any(n not in c.nodes for c in all_costs)]
            if not new_nodes:
                break
            for n in new_nodes:
                for c in all_costs:
                    c.add_node(n)

    def with_rl(p: Point, dr) -> Point:
        t = rl_terms(p.params, dr)
        if t is None:
            return p
        return replace(p, rl_usd=float(t["total"]), rl_terms={k: float(t[k]) for k in TERMS},
                       rl_serving=None if flop_only else rl_costs.nodes.get(p.params))

    def best(o, i_, dr=0.0):
        k = argmin(o, i_, dr)
        p = with_rl(costs.point(float(grid[k]), float(D_grid[k]), o, i_), dr)
        c = with_rl(costs.point(n_chin, d_chin, o, i_), dr)
        return (c if p.total_usd > c.total_usd else p), c   # the grid never loses to the closed-form point

    opt, chin = best(*splits[0])
    sweep = []
    for (di, dr, k), sp in zip(sweep_demands, splits[1:]):
        pk, ck = best(*sp)
        sweep.append({"factor": k, "inference_tokens": di, "rl_rollout_tokens": dr, "params": pk.params,
                      "tokens": pk.tokens, "tokens_per_param": pk.tokens / pk.params,
                      "training_usd": pk.training_usd, "inference_usd": pk.inference_usd, "rl_usd": pk.rl_usd,
                      "total_usd": pk.total_usd,
                      "chinchilla_total_usd": ck.total_usd if math.isfinite(ck.total_usd) else None,
                      "saving_fraction": (1 - pk.total_usd / ck.total_usd) if math.isfinite(ck.total_usd) else None})

    # the curve for plots, on the final set of nodes
    c_out, c_in = costs.per_token(grid)
    inf_ = _inference_usd(out_tok, c_out, in_tok, c_in, grid)
    train = costs.training_usd(grid, D_grid)
    fl_inf = 2.0 * grid * (out_tok + in_tok) * costs.flop_usd(grid)
    rl_curve = rl_terms(grid, rl_of(D_rl))["total"] if rl is not None else 0.0 * grid
    curve = {"params": grid, "tokens": D_grid, "training_usd": train, "inference_usd": inf_, "rl_usd": rl_curve,
             "total_usd": train + inf_ + rl_curve, "total_usd_flop_only": train + fl_inf}

    if opt.tokens / opt.params > EXTREME_TOKENS_PER_PARAM:
        notes.append(f"the optimum trains {opt.tokens / opt.params:,.0f} tokens/param: beyond ~1000 Sardana et al. "
                     "found the Chinchilla D-term over-optimistic; treat it as indicative")
    if not math.isfinite(chin.total_usd):
        notes.append(f"the Chinchilla-optimal model ({n_chin:,.3g} params) cannot be served at {min_tps:g} "
                     f"tokens/s per user on {hw.id}: no saving can be stated")
    if not flop_only:
        notes.append("inference $/token from the serving engine (static batches, bf16 weights unless "
                     "weight_dtype is set), interpolated log-log between engine runs; output tokens priced by decode, "
                     "input tokens by prefill; " + ("RL rollouts as output tokens" if rl is None else
                                                    "RL phase priced by rl_cost (rollouts at the recipe's lengths)"))
    else:
        notes.append("FLOP-only: 2N FLOPs per inference token at the training MFU (Sardana et al. 2023)")
    if training is not None:
        mfu = opt.training.mfu if opt.training is not None else float("nan")
        usd_per_flop = float(costs.flop_usd(opt.params))
        notes.append(f"training from the training engine (each size's fastest layout on a cluster that ends its run "
                     f"within {train_days:g} days, batches of max(1024, chips / 8) sequences of 4,096 tokens); "
                     "--mfu F prices 6ND at a fixed MFU instead")
    return OvertrainResult(fit=f, target_loss=ell, target_from_compute=C_target, inference_tokens=D_inf,
                           rl_rollout_tokens=D_rl, input_output_ratio=ratio, flop_only=flop_only, hardware=hw,
                           mfu=mfu, min_tokens_per_s_per_user=min_tps, input_len=input_len, output_len=output_len,
                           usd_per_flop=usd_per_flop, train_days=train_days,
                           training_nodes=[] if training is None else [training.nodes[k] for k in sorted(training.nodes)],
                           optimum=opt, chinchilla=chin, params_min=n_min, curve=curve,
                           nodes=_unique_arch(list(costs.nodes.values())), demand_sweep=sweep, notes=notes, rl=rl)
