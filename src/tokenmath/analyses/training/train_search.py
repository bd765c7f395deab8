"""The fastest training layouts of a number of chips that fit: enumerate them, evaluate them all in ONE vectorized
engine call (engine/train_step.py), keep those that fit and rank them by step time.

Candidates: TP over the divisors of the heads that tokenmath.mapping.layout.tp_ok admits, within a scale-up domain;
PP over the divisors of the chips up to the layers (or layers + 2 slots with balanced stages; the slowest stage holds
ceil(layers / pp)); EP (MoE) over divisors of the experts; DP the rest; micro-batch 1/2/4/8;
recompute none/selective/full; ZeRO 1/2/3; pipeline schedule 1F1B, ZB-H1 and interleaved with every v in 2/4/8 that
splits a rank's layer slots; cp and the stage balancing fixed as given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.analyses.training.train import (
    MAX_BATCH_TOKENS,
    TrainResult,
    choice_arg,
    memory_recipe,
    tokens_arg,
    train,
    train_system,
)
from tokenmath.analyses.setup import check_ep_imbalance
from tokenmath.base import units as u
from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg
from tokenmath.engine.expert_parallel import EP_COMM
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.train_memory import RECOMPUTE, SCHEDULES
from tokenmath.engine.train_step import TRAIN_DTYPES, train_step
from tokenmath.mapping.candidates import divisors
from tokenmath.mapping.layout import tp_ok, train_layout
from tokenmath.specs.efficiency import DEFAULT, Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model

SEARCH_MICRO_BATCHES = (1, 2, 4, 8)
SEARCH_ZERO = (1, 2, 3)


@dataclass(frozen=True)
class SearchResult:
    """The best layouts of `chips` chips, fastest first, out of `evaluated` candidates of which `fitting` fit."""
    model: Model
    hardware: Hardware
    chips: int
    evaluated: int
    fitting: int
    top: list[TrainResult]
    tokens: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"model": self.model.id, "system": self.hardware.id, "chips": self.chips,
                "layouts_evaluated": self.evaluated, "layouts_fitting": self.fitting,
                "ranked_by": "step_time_s", "top": [r.to_dict() for r in self.top], "notes": self.notes}


def search(model, system, *, chips, seq_len=4096, global_batch_tokens=4_194_304, cp=None, dtype="bf16", tokens=None,
           overlap=True, efficiency: Efficiency | None = None, reserve: float | None = None, top: int = 10,
           micro_batches=SEARCH_MICRO_BATCHES, recomputes=RECOMPUTE, zeros=SEARCH_ZERO, balanced=False,
           flash=True, dropout=False, tp_overlap=False, pp_overlap=False, ep_comm="bf16",
           ep_overlap=False, act=None, adam_bytes=None, grad_bytes=None, dualpipe=False,
           ep_imbalance=None) -> SearchResult:
    """The fastest layouts of `chips` chips that fit, best first (ranked by step time: at a fixed global batch
    that is time to train). TP: divisors of the heads (splitting or evenly replicating the KV heads) up to the
    scale-up domain; PP: divisors of the chips up to the layers; EP (MoE): divisors of the experts; DP: the rest;
    cp fixed. act, adam_bytes, grad_bytes, dualpipe: the memory recipe (analyses.training.train.memory_recipe).
    Every candidate is evaluated in one vectorized engine call."""
    m = get_model(model)
    hw = train_system(system, chips)
    eff = efficiency or DEFAULT
    reserve = RESERVE_FRACTION if reserve is None else reserve
    n = int_arg(chips, "chips", 1, 10_000_000)
    seq_len = int_arg(seq_len, "seq_len", 1, 100_000_000)
    gbt = int_arg(global_batch_tokens, "global_batch_tokens", 1, MAX_BATCH_TOKENS)
    c = int_arg(1 if cp is None else cp, "cp", 1, 1_000_000)
    dtype = choice_arg(dtype, "dtype", TRAIN_DTYPES)
    ep_comm = choice_arg(ep_comm, "ep_comm", EP_COMM)
    imb = check_ep_imbalance(ep_imbalance)
    tokens = tokens_arg(tokens)
    recipe, grad_b = memory_recipe(dtype, act, adam_bytes, grad_bytes, dualpipe)
    if seq_len % c:
        raise InputError("cp", f"cp={c} does not split the {seq_len}-token sequence evenly", f"a divisor of {seq_len}")
    if n > hw.scaleup_domain and hw.scaleout_bw is None:
        raise InputError("chips", f"{n} chips span more than one scale-up domain of {hw.scaleup_domain} and "
                         f"{hw.id} has no scale-out bandwidth", f"at most {hw.scaleup_domain} chips")
    tps = [t for t in divisors(m.n_heads) if t <= hw.scaleup_domain and n % t == 0 and tp_ok(m, t)]
    # every pipeline depth that divides the chips, up to one layer per stage: the slowest stage holds
    # ceil(layers / pp) layers (the engine prices the uneven split; NeMo ran Llama 3.1 405B's 126 layers on pp 8)
    pps = [p for p in divisors(n) if p <= m.n_layers + (2 if balanced else 0)]
    eps = [e for e in divisors(m.n_experts) if n % e == 0] if m.is_moe else [1]
    rows = []
    for t in tps:
        for p in pps:
            # interleaved: every number of virtual stages that splits a stage's layers evenly (NeMo ran Nemotron-4
            # 340B at pp 8 with 12 virtual stages, one layer each)
            per_stage = -(-(m.n_layers + (2 if balanced else 0)) // p)
            scheds = [(0, 1)] if p == 1 else [(0, 1), (2, 1)] + [(1, v) for v in divisors(per_stage) if v > 1]
            for e in eps:
                if n % (t * p * e * c):
                    continue
                d = n // (t * p * e * c)
                for b in micro_batches:
                    if gbt % (seq_len * b * d * e):
                        continue
                    for r in recomputes:
                        for z in zeros:
                            for sc, v in scheds:
                                rows.append((t, p, d, e, b, RECOMPUTE.index(r), z, sc, v))
    if not rows:
        raise InputError("global_batch_tokens", f"no layout of {n} chips splits {gbt:,} tokens into whole "
                         f"micro-batches of {seq_len} tokens", f"a multiple of seq_len x micro_batch x dp, e.g. "
                         f"{seq_len * n:,}")
    a = np.array(rows, dtype=np.int64).T
    lay = train_layout(a[0], a[1], a[2], a[3], c)
    st = train_step(m, hw, lay, seq_len=seq_len, micro_batch=a[4], global_batch_tokens=gbt, recompute=a[5],
                    zero=a[6], dtype=dtype, overlap=overlap, eff=eff, reserve=reserve, schedule=a[7],
                    virtual_stages=a[8], balanced=balanced, flash=flash, dropout=dropout, tp_overlap=tp_overlap,
                    pp_overlap=pp_overlap, ep_comm=ep_comm, ep_overlap=ep_overlap, recipe=recipe, grad_bytes=grad_b,
                    ep_imbalance=imb)
    fit = np.asarray(st.memory.total <= st.memory.usable)
    idx = np.nonzero(fit)[0]
    if not len(idx):
        smallest = float(np.min(st.memory.total))
        raise InputError("chips", f"no layout of {n} x {hw.id} fits {m.name} (the leanest needs "
                         f"{u.bytes_(smallest)} per chip, {u.bytes_(st.memory.usable)} usable)",
                         f"more chips: about {math.ceil(n * smallest / st.memory.usable):,}, or a shorter --seq-len")
    order = idx[np.argsort(np.asarray(st.step_time_s)[idx], kind="stable")][:max(1, int(top))]
    best = [train(m, hw, tp=int(a[0][i]), pp=int(a[1][i]), dp=int(a[2][i]), ep=int(a[3][i]), cp=c,
                  seq_len=seq_len, global_batch_tokens=gbt, micro_batch=int(a[4][i]), recompute=RECOMPUTE[a[5][i]],
                  zero=int(a[6][i]), dtype=dtype, tokens=tokens, overlap=overlap, efficiency=eff, reserve=reserve,
                  schedule=SCHEDULES[a[7][i]], virtual_stages=int(a[8][i]) if a[7][i] == 1 else None,
                  balanced=balanced, flash=flash, dropout=dropout, tp_overlap=tp_overlap, pp_overlap=pp_overlap,
                  ep_comm=ep_comm, ep_overlap=ep_overlap, act=recipe.act, adam_bytes=recipe.adam_bytes,
                  grad_bytes=grad_b, dualpipe=recipe.dualpipe, ep_imbalance=imb)
            for i in order]
    notes = [f"{len(rows):,} layouts evaluated in one vectorized call; {len(idx):,} fit"]
    if c > 1:
        notes.append(f"context parallelism fixed at cp={c}")
    return SearchResult(model=m, hardware=hw, chips=n, evaluated=len(rows), fitting=int(len(idx)), top=best,
                        tokens=tokens, notes=notes)
