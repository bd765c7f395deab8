"""One vectorized evaluation of many (layout, batch) serving points: the table the serving questions read.

Axis 0 is the layout, axis 1 the batch. Infeasible points (does not fit) are kept and flagged, never dropped
silently, so each question can say what would be feasible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.serving import serve
from .common import Setup
from .layouts import as_layout


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
