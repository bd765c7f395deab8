"""The operating point a provider would run: the largest batch whose decode still gives each user a stated speed.

Batch 1 is the worst case of cost per token (every weight read for one token); a provider batches as far as the
speed it promises allows. DEFAULT_SPEED is what `price` assumes and what DeepSeek's published serving ran at (20-22
tokens/s per user, deepseek-ai/open-infra-index, Open-Source Week day 6)."""
from __future__ import annotations

import numpy as np

from tokenmath.engine.static_batch import serve_batch

DEFAULT_SPEED = 20.0     # tokens/s per user
# MLPerf Inference Llama-2-70B server scenario latency constraints (TTFT 2 s, TPOT 200 ms; mlcommons/inference
# README of language/llama2-70b): the default targets of the simulator's goodput, and the TTFT past which a static
# batch is a throughput bound (grid.static_ttft_note). Here, not in the simulator: infer's start needs the first
# without importing the simulator (~10 ms).
TTFT_TARGET_S = 2.0
TPOT_TARGET_S = 0.2


ROUND = 512        # candidate batches per search round: each round narrows the bracket 512-fold in one engine call


def largest_batch_at_speed(su, input_len, output_len, bmax, target):
    """Per input length, the largest batch (<= bmax) whose decode step gives >= target tokens/s per user; 0 where
    even batch 1 is slower. The step never shrinks as the batch grows, so the answer is the last candidate that
    meets the target: each round prices ROUND evenly spaced batches of the bracket in one vectorized engine call and
    keeps the gap after the last that does (exact: the last round's candidates are every integer left).
    su: an analyses.setup.Setup; input_len and bmax: scalars or arrays of one shape."""
    ctx = np.atleast_1d(np.asarray(input_len, float))
    top = np.broadcast_to(np.asarray(bmax, float), ctx.shape).copy()
    lo = np.zeros_like(ctx)                        # the largest batch known to meet the target (0: none yet)
    hi = np.maximum(top, 0.0)                      # the answer lies in [lo, hi]
    while np.any(hi > lo):
        n = np.minimum(hi - lo, ROUND)             # candidates lo + 1 ... hi, evenly spaced, hi always among them
        k = np.arange(1, ROUND + 1, dtype=float)[None, :]
        cand = np.where(k <= n[:, None], lo[:, None] + np.ceil(k * (hi - lo)[:, None] / np.maximum(n, 1)[:, None]),
                        lo[:, None] + 1)
        cand = np.minimum(np.maximum(cand, 1.0), np.maximum(hi, 1.0)[:, None])
        sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, cand, ctx[:, None],
                         output_len, su.reserve, **su.transport.kw())
        ok = (1.0 / np.asarray(sv.decode_step_s, float) >= target) & (k <= n[:, None])
        best = np.max(np.where(ok, cand, lo[:, None]), axis=1)
        # the first candidate past `best` that fails bounds the answer from above
        fail = np.where(~ok & (k <= n[:, None]) & (cand > best[:, None]), cand, np.inf)
        nxt = np.min(fail, axis=1)
        lo = np.where(hi > lo, best, lo)
        hi = np.where(np.isfinite(nxt), np.minimum(hi, nxt - 1), np.where(hi > lo, best, hi))
        hi = np.maximum(hi, lo)
    return lo if np.ndim(input_len) else lo[0]


def operating_point_dict(r, target: float) -> dict:
    """An InferResult at the operating point's batch, as the answers carry it (costs from the result's own
    properties: decode only and whole request)."""
    d = r.to_dict()
    keys = ("batch", "ttft_s", "decode_step_s", "output_tokens_per_s_per_user", "output_tokens_per_s",
            "cost_per_mtok_input_usd", "cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd")
    return {"min_tokens_per_s_per_user": target, **{k: d[k] for k in keys}}


def static_ttft_note(ttft_s, batch: int, instead: str = "") -> str | None:
    """What a static-batch answer's TTFT means when it is long: a static batch prefills every prompt before any
    first token, so its TTFT (ttft_s, the whole batch's prefill) is each of its requests' TTFT. Past TTFT_TARGET_S
    (2 s: MLPerf Inference's server-scenario TTFT limit for Llama 2 70B, mlcommons/inference language/llama2-70b
    README; the simulator's goodput default) the answer is a throughput bound, not one a server meets. instead: what
    to read in its place. None within the limit."""
    from tokenmath.base import units as u
    if ttft_s is None or not ttft_s > TTFT_TARGET_S:
        return None
    return (f"TTFT {u.seconds(float(ttft_s))}: the static batch prefills all {int(batch):,} prompts before any first "
            f"token, past the {TTFT_TARGET_S:g} s MLPerf Inference allows a server (Llama 2 70B server scenario, "
            "mlcommons/inference language/llama2-70b): a throughput bound, not a servable answer"
            + (f"; {instead}" if instead else ""))
