"""The cost of a reinforcement-learning phase, per rollout token, priced by the engine (issue 19).

A GRPO-style phase (Shao et al. 2024, DeepSeekMath; DeepSeek-R1, Nature 2025) of R generated rollout tokens, for a
policy of N parameters. Per rollout (response) token, with prompts of Lp tokens, responses of Lr tokens and G
responses per prompt (USD; every term vectorized over N):
  generation  decode of the response on the serving engine (inference_cost.serve_cost at input Lp, output Lr:
              the batch the engine can hold at that context and the per-sequence speed target), $/output token
  prompts     prefill of the prompt, shared by the group (vLLM's parallel sampling keeps one prompt's KV for
              its n samples): Lp / (G Lr) input tokens per rollout token at the engine's $/input token
  reference   one forward pass of the reference policy over prompt + response for the KL term:
              2 N (Lp + Lr) / Lr FLOPs at the training $/FLOP
  reward      a reward model of N_rm parameters, the same forward: 2 N_rm (Lp + Lr) / Lr (0: rule-based rewards)
  update      the policy update as training tokens, forward + backward over prompt + response for each epoch:
              6 N (Lp + Lr) / Lr x epochs FLOPs at the training $/FLOP
Defaults (RLRecipe.r1()): DeepSeek-R1 (Nature 2025, Methods): "For each question, we sample 16 outputs with a
maximum length of 32,768 tokens", "the KL coefficient to 0.001" (a reference pass), rule-based rewards (no reward
model), "each rollout generates 8,192 outputs, which are randomly split into 16 minibatches and trained for only a
single inner epoch". Prompt length: 2,048, the max_prompt_length of verl's DAPO recipe (recipe/dapo,
"max_prompt_length=$((1024 * 2))"). Responses are priced at the maximum length (an upper bound: the KV the
engine must hold and the context decoded at).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError

R1_SOURCE = ("DeepSeek-R1 (Guo et al., Nature 645, 2025, Methods): 16 outputs per question, maximum length 32,768, "
             "KL coefficient 0.001, rule-based rewards, a single inner epoch; prompt length 2,048 from verl's DAPO "
             "recipe (max_prompt_length)")


@dataclass(frozen=True)
class RLRecipe:
    """An RL phase's shape: tokens, group size, which extra passes it runs (tokens, parameters, epochs)."""
    group_size: int = 16
    prompt_len: int = 2048
    response_len: int = 32768
    reference: bool = True
    reward_params: float = 0.0
    epochs: float = 1.0
    source: str = R1_SOURCE

    def __post_init__(self):
        for name, lo, hi in (("group_size", 1, 1_000_000), ("prompt_len", 1, 10_000_000),
                             ("response_len", 1, 10_000_000)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InputError(f"rl.{name}", f"{v!r} is not a whole number in range", f"an integer {lo}..{hi:,}")
        for name in ("reward_params", "epochs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"rl.{name}", f"{v!r} is not a number >= 0", "a finite number >= 0")

    @property
    def seq_per_response(self) -> float:
        """(Lp + Lr) / Lr: tokens a training-style pass runs per rollout token."""
        return (self.prompt_len + self.response_len) / self.response_len

    def to_dict(self) -> dict:
        return {"group_size": self.group_size, "prompt_len": self.prompt_len, "response_len": self.response_len,
                "reference": self.reference, "reward_params": self.reward_params, "epochs": self.epochs,
                "source": self.source}


TERMS = ("generation", "prompts", "reference", "reward", "update")


def rl_usd_per_token(N, usd_per_output_token, usd_per_input_token, usd_per_flop: float, r: RLRecipe) -> dict:
    """USD per rollout token by term (arrays over N; see the module docstring), plus 'total'."""
    N = np.asarray(N, float)
    seq = r.seq_per_response
    out = {"generation": np.asarray(usd_per_output_token, float) + 0.0 * N,
           "prompts": np.asarray(usd_per_input_token, float) * r.prompt_len / (r.group_size * r.response_len),
           "reference": (2.0 * N * seq * usd_per_flop) if r.reference else 0.0 * N,
           "reward": 2.0 * r.reward_params * seq * usd_per_flop + 0.0 * N,
           "update": 6.0 * N * seq * r.epochs * usd_per_flop}
    out["total"] = sum(out[k] for k in TERMS)
    return out
