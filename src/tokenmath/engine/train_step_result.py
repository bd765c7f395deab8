"""The result of one training step (engine/train_step.py): its terms in seconds, FLOPs and bytes, and the
utilisations derived from them; plus the two small formulas other modules share (N for 6N, the 1F1B bubble)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.engine.forward import PassCost
from tokenmath.engine.train_memory import TrainMemory
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params


@dataclass(frozen=True)
class TrainStep:
    """One training step; every field broadcasts over the layouts evaluated (seconds, FLOP, bytes)."""
    micro_batches: np.ndarray          # m per attention group per step
    tokens_per_step: np.ndarray
    # per micro-batch on the slowest stage
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    recompute_s: np.ndarray
    tp_comm_mb_s: np.ndarray
    ep_comm_mb_s: np.ndarray
    cp_comm_mb_s: np.ndarray
    cp_exposed_mb_s: np.ndarray
    pp_p2p_mb_s: np.ndarray
    microbatch_s: np.ndarray
    # per step
    compute_s: np.ndarray
    tp_comm_s: np.ndarray
    ep_comm_s: np.ndarray
    cp_comm_s: np.ndarray
    pp_p2p_s: np.ndarray
    pp_bubble_s: np.ndarray
    bubble_fraction: np.ndarray
    dp_comm_total_s: np.ndarray
    dp_comm_exposed_s: np.ndarray
    dp_contention_s: np.ndarray         # compute slowed by the hidden DP traffic (OVERLAP_CONTENTION x hidden)
    optimizer_s: np.ndarray
    step_time_s: np.ndarray
    floor_s: np.ndarray                 # pure roofline of the slowest stage's work (100% of peaks)
    # FLOPs
    model_flops: np.ndarray             # 6 N G per step (all chips)
    attention_model_flops: np.ndarray   # PaLM's attention term on causal pairs, x G (all chips)
    hardware_flops: np.ndarray          # what the engine executes, recompute included (all chips)
    peak_flops: float
    chips: np.ndarray
    memory: TrainMemory
    forward: PassCost                   # one micro-batch forward, all layers (per chip), for --explain
    head: dict[str, np.ndarray]         # the training lm_head: flops, bytes, time_s, compute_s, memory_s
    terms: dict[str, np.ndarray | float]  # the step's intermediate terms, for --explain

    @property
    def mfu(self):
        """Model FLOPs utilisation on 6N (Chowdhery et al. 2022, PaLM App. B, without the attention term)."""
        return self.model_flops / (self.step_time_s * self.chips * self.peak_flops)

    @property
    def mfu_with_attention(self):
        """PaLM App. B with its attention term (12 n_layers H Q per attended key per token, 3 x 4 H Q per
        query-key pair), counted on the causal pairs the engine executes ((L + 1)/2 keys per query on average)."""
        return (self.model_flops + self.attention_model_flops) / (self.step_time_s * self.chips * self.peak_flops)

    @property
    def hfu(self):
        """Hardware FLOPs utilisation: every FLOP executed (causal attention, recompute, lm_head)."""
        return self.hardware_flops / (self.step_time_s * self.chips * self.peak_flops)

    @property
    def tflops_per_chip(self):
        """Model FLOP/s per chip (6N convention), in FLOP/s."""
        return self.model_flops / (self.step_time_s * self.chips)

    @property
    def tflops_with_attention_per_chip(self):
        """Model FLOP/s per chip with PaLM's causal attention term (the mfu_with_attention numerator), in FLOP/s."""
        return (self.model_flops + self.attention_model_flops) / (self.step_time_s * self.chips)

    @property
    def dp_comm_hidden_s(self):
        """Data-parallel traffic hidden behind the compute (s per step): what dp_contention_s is a share of."""
        return self.dp_comm_total_s - self.dp_comm_exposed_s

    @property
    def hardware_flops_per_chip(self):
        return self.hardware_flops / (self.step_time_s * self.chips)


def matmul_params(m: Model) -> float:
    """N for 6N: the active parameters that multiply an activation. The lm_head counts (tied or not); the input
    embedding lookup and the learned position table do not (they are gathers, not matmuls)."""
    P = count_params(m)
    return P.active - P.embedding + (m.vocab_size * m.d_model if m.tie_embeddings else 0.0)


def bubble_fraction(pp, micro_batches):
    """1F1B / GPipe pipeline bubble as a share of the pipeline's time: (p - 1) / (m + p - 1)
    (Narayanan et al. 2021 Sec. 2.2.1: bubble / ideal = (p - 1) / m)."""
    p, mb = np.asarray(pp, float), np.asarray(micro_batches, float)
    return (p - 1.0) / (mb + p - 1.0)
