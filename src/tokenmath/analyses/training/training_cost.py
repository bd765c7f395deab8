"""The cost of a training token for a candidate model of N parameters, from the training engine: the fastest layout
that fits (analyses/training/train_search.search, the same engine `tokenmath train` runs), not a fixed MFU.

For each N the dense Llama-3-style model of inference_cost's architecture rule is built, so a size is trained and
served as the same model. The run it belongs to is D(N) tokens (the loss constraint of the over-training problem).

- Cluster: the smallest power-of-two chip count, from one 8-chip node up, on which the run would end within
  `run_days` at a 40% MFU (this only sizes the cluster; the cost comes from the engine's step), doubled until some
  layout fits the model. The horizon is an assumption, stated in every answer (`--train-days`); the cost per token
  moves only through the layout the cluster size admits (more chips: more data-parallel traffic, deeper pipelines).
- Batch: max(1024, chips / 8) sequences of 4,096 tokens. Llama 3 405B trained at 4M tokens (1,024 sequences of
  4,096) and, on 16,384 H100s, at 16M tokens (2,048 sequences of 8,192): one sequence per 8 GPUs at full scale
  (Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.4.1 and Table 4).
- Cost per trained token = chips x $/chip-second x step time / tokens per step.

The engine's step includes what the layout costs (pipeline bubbles, tensor- and data-parallel traffic, recompute,
the size-dependent matmul efficiency): small models lose to small GEMMs and the vocabulary, large ones to
parallelism. Between engine runs (nodes) the cost per token is interpolated linearly in log N, log cost.
Seconds, USD.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tokenmath.analyses.training.inference_cost import dense_model
from tokenmath.analyses.training.train_search import search
from tokenmath.base.errors import InputError
from tokenmath.engine.economics import cost_per_token, per_mtok, usd_per_s
from tokenmath.specs.hardware import Hardware

DEFAULT_RUN_DAYS = 90.0
SIZING_MFU = 0.40             # sizes the cluster only (the cost comes from the engine's step)
SEQ_LEN = 4096
MIN_SEQUENCES = 1024          # Llama 3: 4M-token batches of 4,096-token sequences
CHIPS_PER_SEQUENCE = 8        # Llama 3 405B on 16,384 GPUs: 2,048 sequences per step
MIN_CHIPS = 8                 # one HGX-class node
MAX_CHIPS = 1 << 19          # within the layout search's range (1,000,000 chips): beyond it runs get longer, not wider
_DOUBLINGS = 8                # from the sized cluster, how far to grow until a layout fits


@dataclass(frozen=True)
class TrainingCost:
    """The engine's training of N parameters on `tokens` tokens: cluster, fastest layout, step, $ per token."""
    params: float
    tokens: float
    n_layers: int
    d_model: int
    chips: int
    layout: str                 # tp x pp x dp, micro-batch, recompute, ZeRO, schedule
    global_batch_tokens: int
    step_time_s: float
    mfu: float                  # the engine's model FLOPs (6N per token) over the dense bf16 peak
    usd_per_token: float        # USD per trained token
    run_days: float             # the run's wall time on this cluster

    def to_dict(self) -> dict:
        return {"params": self.params, "tokens": self.tokens, "n_layers": self.n_layers, "d_model": self.d_model,
                "chips": self.chips, "layout": self.layout, "global_batch_tokens": self.global_batch_tokens,
                "step_time_s": self.step_time_s, "mfu": self.mfu, "usd_per_token": self.usd_per_token,
                "usd_per_mtok": per_mtok(self.usd_per_token), "run_days": self.run_days}


def sized_chips(params: float, tokens: float, hw: Hardware, run_days: float) -> int:
    """The smallest power of two >= MIN_CHIPS whose run of 6 N D FLOPs at SIZING_MFU ends within run_days."""
    need = 6.0 * params * tokens / (hw.peak_flops("bf16") * SIZING_MFU * run_days * 86400.0)
    return int(min(MAX_CHIPS, max(MIN_CHIPS, 1 << max(0, math.ceil(math.log2(max(need, 1.0)))))))


def batch_tokens(chips: int) -> int:
    return SEQ_LEN * max(MIN_SEQUENCES, chips // CHIPS_PER_SEQUENCE)


def training_cost(params: float, tokens: float, hw: Hardware, run_days: float = DEFAULT_RUN_DAYS) -> TrainingCost:
    """The engine's cheapest training of the rule's model of `params` parameters on `tokens` tokens."""
    m = dense_model(params)
    chips = min(sized_chips(params, tokens, hw, run_days), MAX_CHIPS)
    best, last = None, None
    for _ in range(_DOUBLINGS):
        if chips > MAX_CHIPS:
            break
        try:
            best = search(m, hw, chips=chips, seq_len=SEQ_LEN, global_batch_tokens=batch_tokens(chips), top=1).top[0]
            break
        except InputError as e:      # no layout of this many chips fits the model: grow the cluster
            last = e
            chips *= 2
    if best is None:
        raise InputError("hardware", f"no layout of up to {min(chips // 2, MAX_CHIPS):,} x {hw.id} trains a "
                         f"{params:.3g}-parameter model", "a chip with more memory" +
                         (f" ({last.problem})" if last is not None else ""))
    step = float(best.step_time_s)
    gbt = int(best.global_batch_tokens)
    usd_tok = cost_per_token(usd_per_s(chips, hw.price_usd_per_hour), step, gbt)
    lay = best.layout
    desc = (f"tp{int(lay.tp)} pp{int(lay.pp)} dp{int(lay.dp)}, micro-batch {best.micro_batch}, {best.recompute} "
            f"recompute, ZeRO-{best.zero}, {best.schedule}")
    return TrainingCost(params=float(params), tokens=float(tokens), n_layers=m.n_layers, d_model=m.d_model,
                        chips=chips, layout=desc, global_batch_tokens=gbt, step_time_s=step,
                        mfu=float(best.mfu), usd_per_token=usd_tok, run_days=tokens / gbt * step / 86400.0)


class TrainingCosts:
    """Engine runs at a set of sizes N (nodes), each on its run of tokens_of(N) tokens; $ per trained token
    between them interpolated log-log."""

    def __init__(self, hw: Hardware, tokens_of: Callable[[float], float], run_days: float = DEFAULT_RUN_DAYS):
        self.hw, self.tokens_of, self.run_days = hw, tokens_of, run_days
        self.nodes: dict[float, TrainingCost] = {}

    def add_node(self, N: float) -> TrainingCost:
        if N not in self.nodes:
            self.nodes[N] = training_cost(N, float(self.tokens_of(N)), self.hw, self.run_days)
        return self.nodes[N]

    def per_token(self, N):
        """USD per trained token at N (arrays); inf outside the nodes."""
        N = np.asarray(N, dtype=float)
        ks = sorted(self.nodes)
        if not ks:
            return np.full(N.shape, np.inf)
        xs = np.log(ks)
        ys = np.log([self.nodes[k].usd_per_token for k in ks])
        ln = np.log(N)
        inside = (ln >= xs[0] - 1e-12) & (ln <= xs[-1] + 1e-12)
        return np.where(inside, np.exp(np.interp(ln, xs, ys)), np.inf)
