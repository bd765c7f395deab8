"""One vectorized evaluation of many (layout, batch) serving points: the table the serving questions read.

Axis 0 is the layout, axis 1 the batch. Infeasible points (does not fit) are kept and flagged, never dropped
silently, so each question can say what would be feasible.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite
from tokenmath.engine.economics import (chip_s_per_mtok, decode_cost_per_mtok, prefill_cost_per_mtok,
                                        request_cost_per_mtok, usd_per_s)
from tokenmath.engine.static_batch import BatchCost, pass_options, serve_batch
from tokenmath.mapping.candidates import SEARCH_ATTENTION, as_layout, layouts_for
from tokenmath.mapping.layout import ATTENTION_SHARDING, attention_code
from tokenmath.mapping.placement import place
from tokenmath.analyses.setup import Setup, fmt_layout
from tokenmath.analyses.serving.operating_point import static_ttft_note  # noqa: F401 (its home; plan, fleet, price)

if TYPE_CHECKING:
    from tokenmath.specs.systems import System


@dataclass(frozen=True)
class Grid:
    layouts: list[tuple[int, ...]]     # (tp, pp, ep, dp[, attention code]): mapping/candidates.layouts_for
    batch: np.ndarray            # (L, B)
    chips: np.ndarray            # (L, 1)
    fits: np.ndarray             # (L, B) bool
    ttft_s: np.ndarray
    step_s: np.ndarray
    max_batch: np.ndarray        # (L, B) (same along batch)
    bottleneck: np.ndarray       # of the decode step
    comm_s: np.ndarray           # (L, B) exposed communication per decode step (collectives + PP hand-offs), s
    comm_share: np.ndarray       # communication share of the decode step
    kv_per_chip: np.ndarray      # (L, B) bytes
    memory_per_chip: np.ndarray  # (L, B) bytes
    domains_spanned: np.ndarray  # (L, 1) scale-up domains the worst-placed replica spans (mapping/placement.py)
    cost: BatchCost              # the engine's full answer (passes, prefill bottleneck, memory)
    input_len: int
    output_len: int
    # with speculation (analyses/serving/speculative.Draft): step_s is the time per token, (host + k drafts +
    # verify) / E, the bottleneck the verification pass's, memory and fits include the draft (engine/speculative.py)
    draft: object = None

    @property
    def tokens_per_s_per_user(self):
        return 1.0 / self.step_s

    @property
    def decode_tokens_per_s(self):
        return self.batch / self.step_s

    @property
    def output_tokens_per_s(self):
        """Static batch end to end: batch x output / (TTFT + output x step) (includes the prefill time)."""
        return self.batch * self.output_len / (self.ttft_s + self.output_len * self.step_s)

    @property
    def output_tokens_per_s_per_chip(self):
        return self.output_tokens_per_s / self.chips

    def costs_per_mtok(self, usd_per_chip_hour: float | None) -> dict[str, np.ndarray] | None:
        """$ per million tokens under each cost key (one meaning each, engine.economics): the whole request per
        output token, the decode step alone per output token, the prefill per input token; None unpriced."""
        if usd_per_chip_hour is None:
            return None
        usd_s = usd_per_s(self.chips, usd_per_chip_hour)
        return {"cost_per_mtok_output_request_usd": request_cost_per_mtok(usd_s, self.output_tokens_per_s),
                "cost_per_mtok_output_usd": decode_cost_per_mtok(usd_s, self.step_s, self.batch),
                "cost_per_mtok_input_usd": prefill_cost_per_mtok(usd_s, self.ttft_s, self.batch, self.input_len)}

    def chip_s_per_mtok_output(self):
        return chip_s_per_mtok(self.chips, self.output_tokens_per_s)


def links_for(hw) -> System | None:
    """The system when its topology makes a group's bandwidth depend on the group (mesh, torus), else None."""
    from tokenmath.specs.systems import System      # here: infer's start needs grid (its notes), not the systems
    return hw if isinstance(hw, System) and hw.topology != "switch" else None


def evaluate(su: Setup, layouts, batches, input_len: int, output_len: int, *, ep_imbalance=None,
             ep_overlap: bool | None = None, links: System | None = None, ep_comm: str | None = None, draft=None,
             prefix_hit: float = 0.0) -> Grid:
    """A (layouts x batches) grid in one engine call. `batches` is a vector shared by all layouts, or an (L, B)
    array (a batch axis per layout). ep_imbalance, ep_overlap, ep_comm, links: see engine.forward.forward_pass (links: pass
    links_for(su.hardware) to give mesh and torus groups their own bandwidth). draft: a speculative.Draft (None: plain
    decoding); pipeline-parallel layouts are flagged as not fitting with it (speculation is modelled without PP).
    prefix_hit: the cached share of every prompt (engine/prefix_cache.py): TTFT counts the rest.
    The EP options left None are the deployment's own (su.transport)."""
    asked = {"ep_imbalance": ep_imbalance, "ep_overlap": ep_overlap, "ep_comm": ep_comm}
    transport = {**su.transport.kw(), **{k: v for k, v in asked.items() if v is not None}}
    opts = pass_options(links, **transport)
    lay = as_layout(layouts)
    B = np.asarray(batches, float)
    if B.ndim <= 1:
        B = B.reshape(1, -1)
    sv = serve_batch(su.model, su.hardware, lay, su.precision, su.efficiency, B, input_len, output_len, su.reserve,
                     links=links, **transport)
    step = np.asarray(sv.decode_step_s, float)
    shape = step.shape
    comm = np.broadcast_to(np.asarray(sv.decode.comm_s, float) + np.asarray(sv.pp_p2p_s, float), shape)
    fits, bmax, bott = np.asarray(sv.fits), np.asarray(sv.max_batch), np.asarray(sv.decode_bottleneck)
    kv, total = np.asarray(sv.memory.kv, float), np.asarray(sv.memory.total, float)
    ttft = np.asarray(sv.ttft_s, float)
    if prefix_hit:
        from tokenmath.engine.prefix_cache import ttft_with_hits
        ttft = np.broadcast_to(ttft_with_hits(sv, su.model, su.hardware, lay, su.precision, su.efficiency, input_len,
                                              prefix_hit, **opts)[0],
                               shape)
    if draft is not None:
        step, comm, fits, bmax, bott, kv, total = _speculate(su, lay, sv, draft, input_len, output_len, opts)
    return Grid(layouts=list(layouts), batch=np.broadcast_to(B, shape),
                chips=np.asarray(lay.chips, float).reshape(-1, 1), fits=np.broadcast_to(fits, shape),
                ttft_s=ttft, step_s=step,
                max_batch=np.broadcast_to(bmax, shape),
                bottleneck=np.broadcast_to(bott, shape), comm_s=comm,
                comm_share=comm / step, kv_per_chip=np.broadcast_to(kv, shape),
                memory_per_chip=np.broadcast_to(total, shape), draft=draft,
                domains_spanned=np.asarray(place(lay, su.hardware.scaleup_domain).replica.domains).reshape(-1, 1),
                cost=sv,
                input_len=input_len, output_len=output_len)


def _speculate(su: Setup, lay, sv: BatchCost, draft, input_len, output_len, opts):
    """The grid's decode figures with speculation (engine/speculative.py): per-token step, communication per token,
    fits and max batch with the draft's weights and cache, the verification pass's bottleneck, memory per chip."""
    from tokenmath.engine.speculative import max_batch_with_draft, memory_with_draft, speculative_decode
    sp, m, hw = draft.spec, su.model, su.hardware
    sd = speculative_decode(sv, m, draft.model, hw, lay, su.precision, draft.precision, su.efficiency, input_len,
                            output_len, sp.k, sp.acceptance, mtp=sp.mtp, **opts)
    shape = np.shape(sv.decode_step_s)
    ctx = input_len + output_len
    eng = su.efficiency.engine
    mem = memory_with_draft(sv.memory, draft.model, m, hw.memory_bytes, lay, su.precision, draft.precision,
                            np.maximum(sv.batch, 1.0), ctx, su.reserve, sp.mtp, eng)
    fits = mem.fits & (sv.batch >= 1) & np.asarray(sv.runs_at_once) & (np.asarray(lay.pp) == 1)
    bmax = max_batch_with_draft(m, draft.model, hw.memory_bytes, lay, su.precision, draft.precision, ctx, su.reserve,
                                sp.mtp, eng)
    # communication per token: the verification pass's collectives and the host's hand-offs, over E tokens
    comm = np.broadcast_to((np.asarray(sd.verify.comm_s, float) + np.asarray(sv.pp_p2p_s, float))
                           / sd.tokens_per_step, shape)
    return (np.asarray(sd.per_token_s, float), comm, np.broadcast_to(fits, shape), bmax,
            np.broadcast_to(np.asarray(sd.verify.bottleneck), shape), mem.kv, mem.total)


COST_KEYS = ("cost_per_mtok_output_request_usd", "cost_per_mtok_output_usd", "cost_per_mtok_input_usd")


def point(g: Grid, li: int, bi: int, usd_per_chip_hour: float | None) -> dict:
    """One (layout, batch) point of the grid as the JSON the plan and moe questions print."""
    t = g.layouts[li]
    costs = g.costs_per_mtok(usd_per_chip_hour)
    return {"layout": fmt_layout(*t), "tp": int(t[0]), "pp": int(t[1]), "ep": int(t[2]), "dp": int(t[3]),
            **({"attention_sharding": ATTENTION_SHARDING[int(t[4])]} if len(t) > 4 else {}),
            "batch": int(g.batch[li, bi]),
            **({k: None for k in COST_KEYS} if costs is None else {k: finite(v[li, bi]) for k, v in costs.items()}),
            "chip_s_per_mtok_output": finite(g.chip_s_per_mtok_output()[li, bi]),
            "ttft_s": finite(g.ttft_s[li, bi]), "decode_step_s": finite(g.step_s[li, bi]),
            "output_tokens_per_s_per_user": finite(g.tokens_per_s_per_user[li, bi]),
            "output_tokens_per_s_per_chip": finite(g.output_tokens_per_s_per_chip[li, bi]),
            "output_tokens_per_s": finite(g.output_tokens_per_s[li, bi]),
            "communication_share": finite(g.comm_share[li, bi]), "communication_s": finite(g.comm_s[li, bi]),
            "bottleneck": str(g.bottleneck[li, bi]),
            "kv_per_chip_bytes": finite(g.kv_per_chip[li, bi]), "memory_per_chip_bytes": finite(g.memory_per_chip[li, bi]),
            "domains_spanned": int(g.domains_spanned[li, 0])}


def attention_arg(mode):
    """layouts_for's attention argument for a question's attention_sharding: "any" (searched), else the code of heads,
    batch or dp (mapping/layout.attention_code)."""
    return SEARCH_ATTENTION if mode == SEARCH_ATTENTION else attention_code("heads" if mode is None else mode)


def batch_axis(max_batch: int, points: int = 96) -> np.ndarray:
    if max_batch < 1:
        return np.array([1.0])
    g = np.unique(np.round(np.geomspace(1, max_batch, points)))
    return np.unique(np.concatenate([g, [float(max_batch)]]))


CHIP_COUNTS = (1, 2, 4, 8, 16, 32, 64, 72, 128, 256, 512)


def up_to(su: Setup, top: int, input_len: int, output_len: int, points: int = 128, draft=None,
          attention=0) -> Grid:
    """Every admissible layout on 1, 2, 4, ... up to `top` chips, each over batches up to the largest that fits
    (draft: decoding with speculation, see evaluate; attention: layouts_for's attention sharding)."""
    counts = [c for c in CHIP_COUNTS if c <= top] or [top]
    lays = [t for c in counts for t in layouts_for(su.model, c, max_tp=su.hardware.scaleup_domain,
                                                  attention=attention)]
    g = over_batches(su, lays, input_len, output_len, points, draft)
    if g is None:
        raise InputError("max_chips", f"{su.model.id} fits on no layout of up to {top} x {su.hardware.id}",
                         "allow more chips (--max-chips) or a smaller dtype")
    return g


def over_batches(su: Setup, lays, input_len: int, output_len: int, points: int | None = None,
                 draft=None) -> Grid | None:
    """The layouts `lays`, each over its own batch_axis (points: its default unless given) up to the largest batch it
    holds (a probe at batch 1 finds them); None when none holds one request.

    Why an axis per layout and not one shared up to the largest batch of any: with a shared axis, adding a layout
    that holds more sequences spreads the points of every other layout, so a wider option space (--max-chips 16
    instead of 8) sampled the 8-chip layout more coarsely and answered worse (fleet: 888 -> 896 chips). Each
    layout's own axis depends on that layout alone, so a search over more layouts is never worse."""
    if not lays:
        return None
    mb = np.asarray(evaluate(su, lays, [1], input_len, output_len, draft=draft).max_batch, float).reshape(-1)
    if int(np.max(mb)) < 1:
        return None
    rows = [batch_axis(int(m)) if points is None else batch_axis(int(m), points) for m in mb]
    width = max(len(r) for r in rows)
    # short rows repeat their largest batch: the duplicates are the same point, never a new one
    axes = np.array([np.concatenate([r, np.full(width - len(r), r[-1])]) for r in rows])
    return evaluate(su, lays, axes, input_len, output_len, draft=draft)


def fewest_whole(rate, chips, ok, need: float, per_chip) -> tuple[int, int]:
    """The (layout, batch) point whose whole instances serve `need` (in `rate`'s unit, e.g. output tokens/s) on the
    fewest chips, ceil(need / rate) x chips per instance, ties to the highest `per_chip`; only where `ok`. Why not
    simply the most per chip: instances come whole, so a larger instance with a little more per chip can need more
    chips in all (DeepSeek-V3 on H200 at 1e6 tok/s: 14 x 64 = 896 against 111 x 8 = 888), and a wider search
    (--max-chips 64) would then answer worse."""
    rate, per_chip = np.asarray(rate, float), np.asarray(per_chip, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.where(ok, np.ceil(need / rate) * np.asarray(chips, float), np.inf)
    total = np.broadcast_to(total, rate.shape)
    order = np.lexsort((-np.where(ok, per_chip, -np.inf).ravel(), total.ravel()))
    return np.unravel_index(int(order[0]), rate.shape)


def meeting_speed(g: Grid, target: float, top: int, hw_id: str) -> np.ndarray:
    """Mask of the points that fit and reach `target` tokens/s per user; a clear error when none does."""
    ok = np.asarray(g.fits) & (g.tokens_per_s_per_user >= target)
    if not ok.any():
        best = float(np.nanmax(np.where(np.asarray(g.fits), g.tokens_per_s_per_user, np.nan)))
        raise InputError("min_tokens_per_s_per_user", f"no layout of up to {top} x {hw_id} reaches {target:g} "
                         "tokens/s per user", f"the fastest reaches {best:,.1f}; lower the target or allow more chips")
    return ok

