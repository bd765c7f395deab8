"""The batch/cost hyperbola: decode cost per output token and step latency against batch size.

Decode reads every weight once per step whatever the batch, so per-token cost = weight-fetch time / B + per-token
time (KV reads and FLOPs): a hyperbola in B that flattens onto a floor once the step turns compute-bound (the
critical batch). For MoE the weight term itself grows with B at first: a small batch reads only the experts its
tokens choose, E (1 - (1 - k/E)^B) of them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg
from tokenmath.engine.economics import decode_cost_per_mtok, usd_per_s
from tokenmath.engine.memory import max_batch
from tokenmath.engine.expert_parallel import experts_touched
from tokenmath.engine.static_batch import serve_batch
from tokenmath.mapping.layout import with_attention
from tokenmath.specs.overrides import what_if_dict
from tokenmath.analyses.setup import Setup, setup

HUGE_BATCH = 2.0 ** 24   # per-token cost at this batch (memory ignored) is the floor the curve flattens onto


def batch_grid(bmax: int, dense_upto: int = 1024, points: int = 256) -> np.ndarray:
    """Every batch up to `dense_upto`, then a geometric grid to bmax (always included)."""
    if bmax <= dense_upto:
        return np.arange(1, bmax + 1, dtype=float)
    geo = np.unique(np.round(np.geomspace(dense_upto, bmax, points)))
    return np.unique(np.concatenate([np.arange(1, dense_upto + 1, dtype=float), geo, [float(bmax)]]))


@dataclass(frozen=True)
class Hyperbola:
    setup: Setup
    context: int
    batch: np.ndarray
    step_s: np.ndarray
    per_token_s: np.ndarray
    bottleneck: np.ndarray
    weight_share: np.ndarray
    kv_share: np.ndarray
    experts_touched: np.ndarray | None
    max_batch: int
    critical_batch: int | None
    critical_batch_fits: bool
    floor_step_s: float          # the decode step at floor_batch, memory ignored
    floor_batch: float           # a batch large enough that step / batch has flattened onto its floor
    floor_bottleneck: str
    weight_fetch_s_b1: float
    notes: tuple[str, ...] = ()      # beyond the engine's line (ask.py: fields this question does not use)
    speculative: object = None       # speculative decoding beside the plain curve (ask.hyperbola)

    @property
    def floor_per_token_s(self) -> float:
        return self.floor_step_s / self.floor_batch

    def _usd_per_s(self) -> float | None:
        return usd_per_s(self.setup.chips, self.setup.hardware.price_usd_per_hour)

    @property
    def cost_per_mtok_output_usd(self) -> np.ndarray | None:
        """Decode cost per million output tokens at each batch of the curve; None when the chip has no price."""
        r = self._usd_per_s()
        return None if r is None else decode_cost_per_mtok(r, self.step_s, self.batch)

    @property
    def floor_cost_per_mtok_output_usd(self) -> float | None:
        r = self._usd_per_s()
        return None if r is None else float(decode_cost_per_mtok(r, self.floor_step_s, self.floor_batch))

    def to_dict(self) -> dict:
        cost = self.cost_per_mtok_output_usd
        pts = []
        for i, b in enumerate(self.batch):
            p = {"batch": int(b), "step_s": finite(self.step_s[i]),
                 "cost_per_mtok_output_usd": None if cost is None else finite(cost[i]),
                 "tokens_per_s_per_user": finite(1 / self.step_s[i]),
                 "tokens_per_s": finite(b / self.step_s[i]),
                 "bottleneck": str(self.bottleneck[i]),
                 "weight_share": finite(self.weight_share[i]), "kv_share": finite(self.kv_share[i])}
            if self.experts_touched is not None:
                p["experts_touched_per_layer"] = finite(self.experts_touched[i])
            pts.append(p)
        su = self.setup
        return {"model": su.model.id, "hardware": su.hardware.id, "chips": su.chips,
                "context": self.context, "max_batch": self.max_batch,
                "critical_batch": self.critical_batch, "critical_batch_fits": self.critical_batch_fits,
                "floor_per_token_s": finite(self.floor_per_token_s),
                "floor_cost_per_mtok_output_usd": finite(self.floor_cost_per_mtok_output_usd),
                "floor_bottleneck": self.floor_bottleneck,
                "price_usd_per_chip_hour": su.hardware.price_usd_per_hour,
                "engine": su.engine_dict, "notes": [su.engine_note, *self.notes], "points": pts,
                **({} if self.speculative is None else {"speculative": self.speculative.to_dict()}),
                **what_if_dict(su.hardware)}


def hyperbola(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, context=2048, weight_dtype=None,
              kv_dtype=None, efficiency=None, max_points: int = 256, engine=None, attention_sharding=None,
              **knobs) -> Hyperbola:
    """engine: a serving engine's id or file, "none" or None (the engine-free step); see analyses.setup.
    attention_sharding: heads (None), batch or dp inside the TP group (mapping/layout.py)."""
    su = setup(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, weight_dtype=weight_dtype,
               kv_dtype=kv_dtype, efficiency=efficiency, engine=engine, **knobs)
    su = replace(su, layout=with_attention(su.model, su.layout, attention_sharding))
    context = int_arg(context, "context")
    m, lay = su.model, su.layout
    # decode at `context` cached tokens: input_len = context, one output step
    probe = serve_batch(m, su.hardware, lay, su.precision, su.efficiency, 1, context, 1, su.reserve, **su.transport.kw())
    bmax = int(np.asarray(probe.max_batch))
    if bmax < 1:
        ctxs = np.geomspace(1, max(context, 2), 64)
        ok = ctxs[max_batch(m, su.hardware.memory_bytes, lay, su.precision.weight.bytes, su.precision.expert.bytes,
                            su.precision.kv.bytes, ctxs, su.reserve, engine=su.engine) >= 1]
        hint = (f"at most {int(ok.max()):,} tokens fit at batch 1" if ok.size else "not even the weights fit")
        raise InputError("context", f"no sequence of {context:,} tokens fits on {su.chips} x {su.hardware.id}",
                         f"{hint}; add chips or use a smaller --weight-dtype/--kv-dtype")
    B = batch_grid(bmax, points=max_points)
    sv = serve_batch(m, su.hardware, lay, su.precision, su.efficiency, B, context, 1, su.reserve, **su.transport.kw())
    dec = sv.decode
    step = np.asarray(sv.decode_step_s, float)
    bw = su.hardware.memory_bw * su.efficiency.memory_bw
    w_share = np.broadcast_to(np.asarray(dec.weight_bytes, float), step.shape) / bw / step
    kv_share = np.broadcast_to(np.asarray(dec.kv_bytes, float), step.shape) / bw / step
    touched = None
    if m.is_moe:
        touched = experts_touched(m, sv.stage_seqs)     # the tokens of the sequences held (decode: one each)
    # critical batch and floor from an extended grid that ignores memory
    ext = np.unique(np.concatenate([np.round(np.geomspace(1, HUGE_BATCH, 400)), B]))
    sx = serve_batch(m, su.hardware, lay, su.precision, su.efficiency, ext, context, 1, su.reserve, **su.transport.kw())
    # critical batch: the weight matmuls' FLOPs overtake their bytes (arithmetic intensity reaches the ridge);
    # for a dense bf16 model that is about peak/bandwidth x bytes-per-weight / 2 tokens (scaling book, ch. 7)
    comp = sum(op.count * op.compute_s for op in sx.decode.ops.values() if np.any(op.weight_bytes) and op.name != "embed")
    mem_ = sum(op.count * op.memory_s for op in sx.decode.ops.values() if np.any(op.weight_bytes) and op.name != "embed")
    crossed = np.nonzero(np.asarray(comp) >= np.asarray(mem_))[0]
    crit = int(ext[crossed[0]]) if crossed.size else None
    return Hyperbola(setup=su, context=context, batch=B, step_s=step, per_token_s=step / B,
                     bottleneck=np.asarray(sv.decode_bottleneck), weight_share=w_share, kv_share=kv_share,
                     experts_touched=touched, max_batch=bmax, critical_batch=crit,
                     critical_batch_fits=bool(crit is not None and crit <= bmax),
                     floor_step_s=float(np.asarray(sx.decode_step_s)[-1]), floor_batch=float(ext[-1]),
                     floor_bottleneck=str(np.asarray(sx.decode_bottleneck)[-1]), weight_fetch_s_b1=float(w_share[0] * step[0]))
