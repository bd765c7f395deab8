"""What fits instead, when a training layout does not: the binding memory term, then the nearest change of recipe
on the same chips and layout that fits, and the fastest such recipe.

The recipe knobs tried keep tp, pp, dp, ep, cp and the batch: recomputation (none, selective, full), the ZeRO stage
(0-3), Llama 3's stage balancing (the embedding and the head take a layer slot each) and the interleaved schedule
with every number of chunks that splits a rank's layer slots. Each candidate is one engine call (train_step),
vectorized over recomputation x ZeRO. "Nearest" is the fewest knobs changed, then the shortest step; Meta's
Llama 3 405B recipe (TP8 PP16 DP64, balanced interleaved stages, no recomputation; Llama 3 paper, arXiv 2407.21783,
Sec. 3.3.2 and Table 4) is one of the candidates."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.base import units as u
from tokenmath.base.errors import InputError
from tokenmath.engine.train_memory import RECOMPUTE, train_memory
from tokenmath.engine.train_step import train_step
from tokenmath.mapping.layout import train_layout

MAX_CHUNKS = 16          # interleaved chunks per rank tried (Megatron runs use 2-8)


@dataclass(frozen=True)
class Fit:
    changes: tuple[str, ...]     # the flags that differ from the question's, e.g. ("--balanced-stages",)
    memory_bytes: float          # per chip
    step_s: float

    def text(self) -> str:
        return f"{' '.join(self.changes)} fits ({u.bytes_(self.memory_bytes)} per chip, step {u.seconds(self.step_s)})"


def binding_term(mem, pp: int) -> str:
    """The memory need and its largest term, e.g. 'needs 82.6 GB per chip of 77 GB usable; the largest term is
    activations, 68.2 GB (...)'."""
    pick = lambda a: float(np.ravel(a)[0])      # noqa: E731
    parts = {"weights": mem.weights, "gradients": mem.gradients, "optimizer": mem.optimizer,
             "activations": mem.activations, "buffers": mem.buffers}
    name, big = max(((k, pick(v)) for k, v in parts.items()), key=lambda kv: kv[1])
    why = ("" if name != "activations" else " (the micro-batches in flight on the first pipeline stage)" if pp > 1
           else " (one micro-batch's layers)")
    return (f"needs {u.bytes_(pick(mem.total))} per chip of {u.bytes_(pick(mem.usable))} usable; the largest term is "
            f"{name}, {u.bytes_(big)}{why}")


def _recipes(m, lay, kw):
    """(flags changed, kw) for the pipeline recipes to try: as asked, stage balancing, the interleaved schedule."""
    pp = int(lay.pp)
    out = [((), kw)]
    if pp < 2:
        return out
    for bal in sorted({kw["balanced"], True}):
        per_rank = -(-(m.n_layers + (2 if bal else 0)) // pp)
        bflag = ("--balanced-stages",) if bal and not kw["balanced"] else ()
        if bflag:
            out.append((bflag, {**kw, "balanced": True}))
        for v in range(2, min(per_rank, MAX_CHUNKS) + 1):
            if per_rank % v or (kw["schedule"] == "interleaved" and kw["virtual_stages"] == v and bal == kw["balanced"]):
                continue
            out.append((bflag + (f"--schedule interleaved --virtual-stages {v}",),
                        {**kw, "balanced": bal, "schedule": "interleaved", "virtual_stages": v}))
    return out


def fitting_recipes(m, hw, lay, zero, recompute, kw) -> list[Fit]:
    """Every recipe (above) x recomputation x ZeRO stage that fits on this layout, nearest first."""
    rcs = np.repeat(np.arange(3), 4)
    zs = np.tile(np.arange(4), 3)
    fits = []
    for flags, k in _recipes(m, lay, kw):
        try:
            alt = train_step(m, hw, lay, recompute=rcs, zero=zs, **k)
        except InputError:          # a recipe this layout cannot run (e.g. chunks the stages do not allow)
            continue
        ok = np.asarray(alt.memory.total <= alt.memory.usable)
        for i in np.nonzero(ok)[0]:
            extra = ((f"--recompute {RECOMPUTE[rcs[i]]}",) if RECOMPUTE[rcs[i]] != recompute else ()) + \
                    ((f"--zero {int(zs[i])}",) if int(zs[i]) != zero else ())
            fits.append(Fit(flags + extra, float(np.ravel(alt.memory.total)[i]), float(np.ravel(alt.step_time_s)[i])))
    return sorted(fits, key=lambda f: (len(f.changes), f.step_s))


def fit_advice(m, hw, lay, zero, recompute, kw) -> list[str]:
    """Advice for a layout that does not fit: the binding term, the nearest recipe that fits and the fastest one;
    raises InputError (field chips) where no recipe fits on these chips, naming how many would."""
    mem = train_step(m, hw, lay, recompute=recompute, zero=zero, **kw).memory
    fits = fitting_recipes(m, hw, lay, zero, recompute, kw)
    if not fits:
        raise InputError("chips", f"{m.name} does not fit on {int(lay.chips)} x {hw.id} with any recomputation, "
                         f"ZeRO stage or pipeline schedule: {binding_term(mem, int(lay.pp))}", chips_needed(m, hw, lay, kw))
    out = [binding_term(mem, int(lay.pp)), f"nearest change that fits: {fits[0].text()}"]
    fastest = min(fits, key=lambda f: f.step_s)
    if fastest is not fits[0]:
        out.append(f"fastest recipe on this layout: {fastest.text()}")
    return out


def chips_needed(m, hw, lay, kw) -> str:
    """Smallest data-parallel width (tp, pp, ep, cp kept) at which ZeRO-3 + full recomputation fits."""
    dps = np.unique(np.round(np.geomspace(1, 1_000_000, 400)).astype(int))
    L, b, G = kw["seq_len"], kw["micro_batch"], kw["global_batch_tokens"]
    tl = train_layout(int(lay.tp), int(lay.pp), dps, int(lay.ep), int(lay.cp))
    mb = G / (L * b * dps * int(lay.ep))
    mem = train_memory(m, hw.memory_bytes, tl, seq_len=L, micro_batch=b, micro_batches=mb, recompute="full", zero=3,
                       reserve=kw["reserve"], schedule=kw["schedule"], virtual_stages=kw["virtual_stages"],
                       balanced=kw["balanced"], flash=kw["flash"], dropout=kw["dropout"], recipe=kw["recipe"],
                       grad_bytes=kw["grad_bytes"])
    ok = np.nonzero(mem.total <= mem.usable)[0]
    base = int(lay.tp) * int(lay.pp) * int(lay.ep) * int(lay.cp)
    if len(ok):
        d = int(dps[ok[0]])
        return (f"about {d * base:,} chips (dp={d}) with --zero 3 --recompute full, or more --tp/--pp "
                f"(`tokenmath train --search --chips N` ranks the layouts that fit)")
    act = float(np.min(mem.activations))
    return (f"activations alone need {u.bytes_(act)} per chip with full recomputation: raise --tp, --pp or --cp, "
            "or lower --micro-batch / --seq-len")

