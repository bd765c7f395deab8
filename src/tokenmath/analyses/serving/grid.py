"""One vectorized evaluation of many (layout, batch) serving points: the table the serving questions read.

Axis 0 is the layout, axis 1 the batch. Infeasible points (does not fit) are kept and flagged, never dropped
silently, so each question can say what would be feasible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.static_batch import serve
from tokenmath.analyses.setup import Setup
from tokenmath.mapping.candidates import as_layout


@dataclass
class Grid:
    layouts: list[tuple[int, int, int, int]]
    batch: np.ndarray          # (L, B)
    chips: np.ndarray          # (L, 1)
    fits: np.ndarray           # (L, B) bool
    ttft_s: np.ndarray
    step_s: np.ndarray
    max_batch: np.ndarray      # (L, B) (same along batch)
    bottleneck: np.ndarray
    comm_share: np.ndarray     # communication share of the decode step
    input_len: int
    output_len: int

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

    def usd_per_mtok_output(self, usd_per_chip_s):
        """Cost of the chip time spent per output token (prefill time included), $ per million."""
        if usd_per_chip_s is None:
            return None
        return self.chips * usd_per_chip_s / self.output_tokens_per_s * 1e6

    def chip_s_per_mtok_output(self):
        return self.chips / self.output_tokens_per_s * 1e6


def evaluate(su: Setup, layouts, batches, input_len: int, output_len: int) -> Grid:
    lay = as_layout(layouts)
    B = np.asarray(batches, float).reshape(1, -1)
    sv = serve(su.model, su.hardware, lay, su.precision, su.efficiency, B, input_len, output_len, su.reserve)
    step = np.asarray(sv.decode_step_s, float)
    comm = np.asarray(sv.decode.comm_s, float) + np.asarray(sv.pp_p2p_s, float)
    shape = step.shape
    return Grid(list(layouts), np.broadcast_to(B, shape), np.asarray(lay.chips, float).reshape(-1, 1),
                np.broadcast_to(np.asarray(sv.fits), shape), np.asarray(sv.ttft_s, float), step,
                np.broadcast_to(np.asarray(sv.max_batch), shape), np.broadcast_to(np.asarray(sv.decode.bottleneck), shape),
                comm / step, input_len, output_len)


def batch_axis(max_batch: int, points: int = 96) -> np.ndarray:
    if max_batch < 1:
        return np.array([1.0])
    g = np.unique(np.round(np.geomspace(1, max_batch, points)))
    return np.unique(np.concatenate([g, [float(max_batch)]]))


CHIP_COUNTS = (1, 2, 4, 8, 16, 32, 64, 72, 128, 256, 512)


def up_to(su: Setup, top: int, input_len: int, output_len: int, points: int = 128) -> Grid:
    """Every admissible layout on 1, 2, 4, ... up to `top` chips, each over batches up to the largest that fits."""
    from tokenmath.base.errors import InputError
    from tokenmath.mapping.candidates import layouts_for
    counts = [c for c in CHIP_COUNTS if c <= top] or [top]
    lays = [t for c in counts for t in layouts_for(su.model, c, max_tp=su.hardware.scaleup_domain)]
    probe = evaluate(su, lays, [1], input_len, output_len) if lays else None
    bmax = int(np.max(probe.max_batch)) if probe is not None else 0
    if bmax < 1:
        raise InputError("max_chips", f"{su.model.id} fits on no layout of up to {top} x {su.hardware.id}",
                         "allow more chips (--max-chips) or a smaller dtype")
    return evaluate(su, lays, batch_axis(bmax, points), input_len, output_len)


def meeting_speed(g: Grid, target: float, top: int, hw_id: str) -> np.ndarray:
    """Mask of the points that fit and reach `target` tokens/s per user; a clear error when none does."""
    from tokenmath.base.errors import InputError
    ok = np.asarray(g.fits) & (g.tokens_per_s_per_user >= target)
    if not ok.any():
        best = float(np.nanmax(np.where(np.asarray(g.fits), g.tokens_per_s_per_user, np.nan)))
        raise InputError("min_tokens_per_s_per_user", f"no layout of up to {top} x {hw_id} reaches {target:g} "
                         "tokens/s per user", f"the fastest reaches {best:,.1f}; lower the target or allow more chips")
    return ok
