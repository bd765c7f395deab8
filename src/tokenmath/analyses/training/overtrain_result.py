"""The results of analyses/training/overtrain.py: one (N, D) point with its costs and the whole optimisation
(USD, parameters, tokens, FLOPs). Kept apart from the optimiser so that each module holds one job."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenmath.analyses.training.inference_cost import ServingCost
from tokenmath.analyses.training.rl_cost import RLRecipe
from tokenmath.analyses.training.scaling_laws import Fit
from tokenmath.analyses.training.training_cost import TrainingCost
from tokenmath.base.validators import finite
from tokenmath.specs.hardware import Hardware

DEFAULT_MFU = 0.40
MFU_SOURCE = ("0.40: PaLM 540B 46.2% MFU (Chowdhery et al. 2022, App. B); Llama 3 405B 38-43% MFU on H100 "
              "(Llama 3 paper, Table 4)")


@dataclass(frozen=True)
class Point:
    """One (N, D) on the loss constraint with its costs (parameters, tokens, USD, FLOPs)."""
    params: float
    tokens: float
    training_usd: float
    inference_usd: float
    training_flops: float
    inference_flops: float
    serving: ServingCost | None = None    # the engine's serving of N (None when FLOP-only)
    rl_usd: float = 0.0                   # the RL phase (with an RLRecipe), all its terms
    rl_terms: dict | None = None          # USD by term (rl_cost.TERMS)
    rl_serving: ServingCost | None = None  # the engine's serving of N at the rollouts' lengths
    training: TrainingCost | None = None   # the training engine's run of N (None: 6ND at a fixed MFU)

    @property
    def total_usd(self) -> float:
        return self.training_usd + self.inference_usd + self.rl_usd

    def to_dict(self) -> dict:
        fin = finite
        d = {"params": self.params, "tokens": self.tokens, "tokens_per_param": self.tokens / self.params,
             "training_usd": fin(self.training_usd), "inference_usd": fin(self.inference_usd),
             "total_usd": fin(self.total_usd), "training_flops": self.training_flops,
             "inference_flops": self.inference_flops}
        if self.rl_terms is not None:
            d.update(rl_usd=fin(self.rl_usd), rl_share=fin(self.rl_usd / self.total_usd),
                     rl_usd_by_term={k: fin(v) for k, v in self.rl_terms.items()},
                     rl_serving=None if self.rl_serving is None else self.rl_serving.to_dict())
        if self.serving is not None:
            d["serving"] = self.serving.to_dict()
        if self.training is not None:
            d["training"] = self.training.to_dict()
        return d


@dataclass(frozen=True)
class OvertrainResult:
    """The optimum and the Chinchilla point at the target loss, the cost curve over N and the demand sweep (USD)."""
    fit: Fit
    target_loss: float
    target_from_compute: float | None
    inference_tokens: float
    rl_rollout_tokens: float
    input_output_ratio: float
    flop_only: bool
    hardware: Hardware
    mfu: float
    min_tokens_per_s_per_user: float
    input_len: int
    output_len: int
    usd_per_flop: float
    optimum: Point
    chinchilla: Point
    params_min: float
    curve: dict[str, np.ndarray]     # N grid and cost arrays (for plots)
    nodes: list[ServingCost]         # engine evaluations, ascending N
    demand_sweep: list[dict[str, float | None]]
    notes: list[str] = field(default_factory=list)
    rl: RLRecipe | None = None
    train_days: float = 90.0
    training_nodes: list[TrainingCost] = field(default_factory=list)   # training-engine runs, ascending N

    @property
    def training_model(self) -> str:
        """'engine' (each size's fastest layout on the training engine) or 'fixed-mfu' (6ND at self.mfu)."""
        return "engine" if self.training_nodes else "fixed-mfu"

    @property
    def saving_usd(self) -> float:
        return self.chinchilla.total_usd - self.optimum.total_usd

    @property
    def saving_fraction(self) -> float:
        return self.saving_usd / self.chinchilla.total_usd

    def to_dict(self) -> dict:
        fin = finite
        hw = self.hardware
        opt = self.optimum.to_dict()
        return {
            "fit": self.fit.name, "fit_constants": self.fit.constants(), "target_loss": self.target_loss,
            "target_from_compute": self.target_from_compute,
            "inference_tokens": self.inference_tokens, "rl_rollout_tokens": self.rl_rollout_tokens,
            "rl_model": "as output tokens" if self.rl is None else "rl phase",
            "rl_recipe": None if self.rl is None else self.rl.to_dict(),
            "input_output_ratio": self.input_output_ratio,
            "inference_model": "flop-only" if self.flop_only else "engine",
            "hardware": hw.id, "price_usd_per_chip_hour": hw.price_usd_per_hour,
            "peak_bf16_flops": hw.peak_flops("bf16"), "mfu": fin(self.mfu),
            "mfu_source": MFU_SOURCE if self.training_model == "fixed-mfu" else "training engine at the optimum",
            "training_model": self.training_model, "train_days": self.train_days,
            "training_nodes": [t.to_dict() for t in self.training_nodes],
            "usd_per_training_flop": self.usd_per_flop,
            "min_tokens_per_s_per_user": self.min_tokens_per_s_per_user,
            "input_len": self.input_len, "output_len": self.output_len,
            "params_min": self.params_min,
            # the optimum, flat (the headline keys) and in full
            "params": opt["params"], "tokens": opt["tokens"], "tokens_per_param": opt["tokens_per_param"],
            "training_usd": opt["training_usd"], "inference_usd": opt["inference_usd"], "total_usd": opt["total_usd"],
            "optimum": opt, "chinchilla": self.chinchilla.to_dict(),
            "saving_usd": fin(self.saving_usd), "saving_fraction": fin(self.saving_fraction),
            "demand_sweep": self.demand_sweep,
            "engine_nodes": [s.to_dict() for s in self.nodes],
            "notes": self.notes,
        }
