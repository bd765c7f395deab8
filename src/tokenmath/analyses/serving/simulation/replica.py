"""One serving replica as the simulator and the closed form see it: the engine profile's limits over the layout,
the KV cache it holds in tokens, its scheduler policy and its step costs.

Limits are per attention group (one scheduler per data-parallel rank: vLLM DP engine cores, SGLang DP attention),
so the replica's are the profile's x dp x ep. KV capacity: the engine's usable memory (engine/memory.usable_bytes, the one home:
its fraction of the total, or of what the weights and one step's activations leave) minus weights and activations,
over the KV bytes of one token (all layers, this chip's shard), x the groups. With speculative decoding the draft's
weights join the fixed bytes and its cache (one more sequence's worth per token: engine/speculative.draft_memory's
terms) each token's bytes.
Attention sharded over the batch (Layout.attn batch / dp, engine/memory.py): each of a TP group's tp ranks holds
its own sequences' whole KV (kv_shard 1, no copies): a rank holds n tokens of its own, and the group tp x n
(memory.max_batch's per-rank floor x attn_ranks). A separate draft's cache stays split by heads over the group (its
own layout), so each of a rank's own tokens also carries tp tokens' worth of the draft's per-chip cache; an MTP
head's cache follows the target's (whole, on the rank of its sequence).
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.base.errors import InputError
from tokenmath.engine.memory import fixed_bytes, kv_bytes_left, kv_capacity, kv_per_chip
from tokenmath.engine.speculative import draft_layout, draft_weights_per_chip
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
    draft: object = None       # analyses.serving.speculative.Draft (k >= 1) or None

    @property
    def engine(self):
        return self.su.efficiency.engine

    @property
    def verify_tokens(self) -> int:
        """Tokens each decoding sequence runs per step: k + 1 with speculation, else 1."""
        return 1 if self.draft is None else int(self.draft.spec.k) + 1

    def policy(self):
        return policy_for(self.engine, self.budget, self.max_running)

    def cost(self, max_need: int, requests: int) -> StepCost:
        """Step tables for requests of at most max_need tokens (prompt + output: a recompute prefills both)."""
        running = min(self.max_running, requests)
        most = min(self.budget, requests * max_need)
        if not self.chunked:
            most = max(most, max_need)
        top = min(most + running, self.kv_tokens + running) + 1
        if self.draft is not None:      # every running decode verifies k + 1 tokens, beside the prompt chunks
            top = min(most, self.kv_tokens) + running * self.verify_tokens + 1
        return StepCost(self.su, top, self.draft, max_context=max_need)


def kv_capacity_tokens(su, draft=None) -> int:
    """KV cache capacity in tokens (all groups), through engine/memory's one home: fixed_bytes, kv_bytes_left and
    kv_capacity with one token's bytes per chip in place of one sequence's."""
    m, hw, lay, prec, eng = su.model, su.hardware, su.layout, su.precision, su.efficiency.engine
    # per token of context (a hybrid's fixed recurrent state per sequence is not in it)
    per_token = float(kv_bytes_per_token(m, prec.kv.bytes)) / (int(lay.pp) * float(lay.kv_shard(m)))
    ranks = int(lay.attn_ranks())       # 1 under heads; tp under batch / dp: each rank holds its own sequences
    dw = 0.0
    if draft is not None:
        # the draft's weights, and its cache: one token of a sequence per chip of the draft's layout (the MTP head
        # laid like the target; a separate draft on each attention group's tp chips)
        d, dp_ = draft.model, draft.precision
        dw = float(draft_weights_per_chip(d, m, lay, dp_, draft.spec.mtp))
        dkv = float(kv_per_chip(d, draft_layout(lay, draft.spec.mtp), dp_.kv.bytes, int(lay.dp * lay.ep), 1))
        per_token += dkv if draft.spec.mtp or ranks == 1 else ranks * dkv
    fixed = float(fixed_bytes(m, lay, prec.weight.bytes, prec.expert.bytes, hw.memory_bytes, eng, extra=dw))
    return int(kv_capacity(kv_bytes_left(hw.memory_bytes, su.reserve, fixed, eng), per_token, ranks,
                           int(lay.dp * lay.ep)))


def make_replica(su, draft=None) -> Replica:
    eng = su.efficiency.engine
    if eng is None:
        raise InputError("engine", "the simulator needs a serving engine's scheduler",
                         "vllm, sglang, tensorrt-llm, llama.cpp, mlx or an engine file")
    groups = int(su.layout.dp * su.layout.ep)
    run, tok = eng.limits_for(su.hardware.memory_bytes)
    if draft is not None and int(draft.spec.k) < 1:
        draft = None                    # k = 0: plain decoding
    kv = kv_capacity_tokens(su, draft)
    if kv < 1:
        raise InputError("hardware", f"the weights leave no room for a KV cache on {int(su.layout.chips)} x "
                         f"{su.hardware.name}", "more chips, a smaller weight dtype, or another layout")
    return Replica(su, tok * groups if tok else UNLIMITED, run * groups if run else UNLIMITED, kv,
                   eng.kv_block_tokens, eng.chunked_prefill, draft)
