"""One serving replica as the simulator and the closed form see it: the engine profile's limits over the layout,
the KV cache it holds in tokens, its scheduler policy and its step costs.

Limits are per attention group (one scheduler per data-parallel rank: vLLM DP engine cores, SGLang DP attention),
so the replica's are the profile's x dp x ep. KV capacity: the engine's usable memory (engine/memory.usable_bytes:
its fraction of the total, or of what the weights and one step's activations leave) minus weights and activations,
over the KV bytes of one token (all layers, this chip's shard), x the groups.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tokenmath.base.errors import InputError
from tokenmath.engine.memory import activations_per_chip, chunk_tokens, usable_bytes, weights_per_chip
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.analyses.serving.simulation.scheduler import policy_for
from tokenmath.analyses.serving.simulation.step_cost import StepCost

UNLIMITED = 1 << 40


@dataclass(frozen=True)
class Replica:
    su: object                 # analyses.setup.Setup, its engine on su.efficiency.engine
    budget: int                # tokens per step (all groups)
    max_running: int           # sequences at once (all groups)
    kv_tokens: int             # KV cache capacity in tokens (all groups)
    block_tokens: int
    chunked: bool

    @property
    def engine(self):
        return self.su.efficiency.engine

    def policy(self):
        return policy_for(self.engine, self.budget, self.max_running)

    def cost(self, max_need: int, requests: int) -> StepCost:
        """Step tables for requests of at most max_need tokens (prompt + output: a recompute prefills both)."""
        running = min(self.max_running, requests)
        most = min(self.budget, requests * max_need)
        if not self.chunked:
            most = max(most, max_need)
        return StepCost(self.su, min(most + running, self.kv_tokens + running) + 1)


def kv_capacity_tokens(su) -> int:
    m, hw, lay, prec, eng = su.model, su.hardware, su.layout, su.precision, su.efficiency.engine
    chunk = chunk_tokens(hw.memory_bytes, eng)
    fixed = float(weights_per_chip(m, lay, prec.weight.bytes, prec.expert.bytes)
                  + activations_per_chip(m, lay, chunk, chunk))
    usable = float(usable_bytes(hw.memory_bytes, su.reserve, fixed, eng))
    # per token of context (a hybrid's fixed recurrent state per sequence is not in it)
    per_token = float(kv_bytes_per_token(m, prec.kv.bytes)) / (int(lay.pp) * float(lay.kv_shard(m)))
    return int(math.floor(max(usable - fixed, 0.0) / per_token)) * int(lay.dp * lay.ep)


def make_replica(su) -> Replica:
    eng = su.efficiency.engine
    if eng is None:
        raise InputError("engine", "the simulator needs a serving engine's scheduler",
                         "vllm, sglang, tensorrt-llm, llama.cpp, mlx or an engine file")
    groups = int(su.layout.dp * su.layout.ep)
    run, tok = eng.limits_for(su.hardware.memory_bytes)
    kv = kv_capacity_tokens(su)
    if kv < 1:
        raise InputError("hardware", f"the weights leave no room for a KV cache on {su.hardware.id} "
                         f"({int(su.layout.chips)} chips)", "more chips, a smaller weight dtype, or another layout")
    return Replica(su, tok * groups if tok else UNLIMITED, run * groups if run else UNLIMITED, kv,
                   eng.kv_block_tokens, eng.chunked_prefill)
