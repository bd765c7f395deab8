"""Prefix caching: the prefill of prompts whose first tokens' KV is already cached (a shared system prompt, an earlier
turn of the conversation), as vLLM's automatic prefix caching and SGLang's RadixAttention serve it.

Model (stated so it can be checked), for a prompt of L tokens with a hit rate h (the cached share of its tokens):
- the cached c = h L tokens are neither recomputed nor written: the pass runs L - c new tokens per prompt (at least
  one: an engine always computes the last prompt token to sample from it);
- the new tokens attend causally to everything before them: pairs(L) - pairs(c) query-key pairs (attended.py),
  and read the c cached tokens' KV once (within the window on sliding layers);
- weights are read once per pass as before, so the saving is the FLOPs and KV writes of the cached share, not the
  weight reads: at small batch a short prompt's prefill is weight-bound and a hit saves little.
TTFT with hits: the static batch's TTFT (static_batch.serve_batch, pipeline fill and engine terms included) scaled
by the ratio of the cached pass to the full one, each with its fixed per-layer time. Exact without a serving engine;
with one, the chunked-prefill step count of the full prompt is kept (its chunks shrink in proportion).
What the cache holds (HBM, host DRAM or SSD tiers) and what a cached token costs to keep: analyses/serving/
input_vs_output.py (`prices`, kv_tiers.toml).
"""
from __future__ import annotations

import numpy as np

from tokenmath.base.validators import pos_float
from tokenmath.engine.attended import prefill_pairs
from tokenmath.engine.forward import PassCost, Precision, forward_pass
from tokenmath.engine.static_batch import BatchCost
from tokenmath.mapping.layout import Layout
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model


def hit_rate(v, field: str = "prefix_hit") -> float:
    """A hit rate in [0, 1] (None: 0), checked like every other input (base.validators)."""
    try:
        if v is None or float(v) == 0.0:
            return 0.0
    except (TypeError, ValueError):
        pass
    return pos_float(v, field, 0.0, 1.0)


def cached_tokens(input_len, hit):
    """Tokens of each prompt found in the cache: h L, leaving at least one to compute."""
    L = np.asarray(input_len, float)
    return np.minimum(np.asarray(hit, float) * L, L - 1.0)


def cached_prefill(m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, seqs, input_len, hit,
                   **opts) -> PassCost:
    """The prefill pass of `seqs` prompts per attention group of input_len tokens, the first h x input_len cached.
    opts: forward_pass's keywords (ep_imbalance, ep_overlap, ep_comm, links, stage_seqs)."""
    L = np.asarray(input_len, float)
    c = cached_tokens(L, hit)
    pf, ps = prefill_pairs(L, m.sliding_window)
    cf, cs = prefill_pairs(c, m.sliding_window)
    read_sliding = np.minimum(c, m.sliding_window) if m.sliding_window else c
    return forward_pass(m, hw, lay, prec, eff, phase="prefill", seqs=seqs, new_tokens=L - c, pairs_full=pf - cf,
                        pairs_sliding=ps - cs, kv_read_full=c, kv_read_sliding=read_sliding, **opts)


def ttft_with_hits(sv: BatchCost, m: Model, hw: Hardware, lay: Layout, prec: Precision, eff: Efficiency, input_len,
                   hit, **opts):
    """(TTFT s, the cached prefill pass) of the batch `sv` served when a share `hit` of every prompt is cached.
    hit = 0 returns sv.ttft_s unchanged. opts: as given to serve_batch (ep_imbalance, ep_overlap, ep_comm, links)."""
    if not np.any(np.asarray(hit) > 0):
        return np.asarray(sv.ttft_s, float), sv.prefill
    opts = dict(opts)
    if np.any(np.asarray(lay.ep) > 1):
        opts["stage_seqs"] = sv.stage_seqs
    s = sv.seqs_per_microbatch
    full = cached_prefill(m, hw, lay, prec, eff, s, input_len, 0.0, **opts)
    hitp = cached_prefill(m, hw, lay, prec, eff, s, input_len, hit, **opts)
    ratio = (hitp.time_s + hitp.overhead_s) / (full.time_s + full.overhead_s)
    return np.asarray(sv.ttft_s, float) * ratio, hitp
