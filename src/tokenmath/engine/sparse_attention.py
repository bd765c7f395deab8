"""DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer scores every cached token for each query, and the
MLA attention then reads only the index_topk best (DeepSeek-V3.2-Exp report, Sec. 2.1: I_{t,s} = sum_j w_{t,j}
ReLU(q_{t,j} . k_s) over index_n_heads heads; attention over the top-k key-value entries).

Per layer, per chip, for S sequences:
  indexer    FLOPs = 2 x H_I x (d_I + 1) x pairs x S / tp      (a d_I dot product and a weight per head and pair)
             bytes = index key bytes x (cached + new tokens) x S / kv_shard   (every index key is read: FP8 d_I
             values + a float32 scale per 128, specs/kv_cache.index_key_bytes)
  attention  the MLA op of engine/forward.py over min(context, k) tokens per decode query (k = index_topk):
             pairs = sum over the queries of min(position, k); KV read at decode min(context, k) latents.
Prefill reads every latent (the queries of a chunk select different tokens), so only its FLOPs shrink.
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine.attended import prefill_pairs
from tokenmath.specs.kv_cache import index_key_bytes
from tokenmath.specs.model import Model


def selected(m: Model, phase: str, kv_read, new_tokens, pairs):
    """(cached tokens read per sequence, attended pairs per sequence) of the main attention under top-k selection,
    from the full-attention figures forward_pass is given."""
    k = float(m.index_topk)
    a, n, p = np.asarray(kv_read, float), np.asarray(new_tokens, float), np.asarray(pairs, float)
    if phase == "decode":
        return np.minimum(a + n, k) - n, np.minimum(p, k * n)
    # causal pairs of the new tokens at positions a+1 .. a+n, capped at k per query, as a share of the full pairs
    full = prefill_pairs(a + n)[0] - prefill_pairs(a)[0]
    capped = prefill_pairs(a + n, int(k))[1] - prefill_pairs(a, int(k))[1]
    return a, p * np.divide(capped, full, out=np.ones_like(full * 1.0), where=full > 0)


def indexer_op(m: Model, seqs, tokens, kv_read, new_tokens, pairs, shard, tp, act_bytes: float) -> dict:
    """The indexer's scoring over every cached token: keyword arguments for forward_pass's `add`."""
    S = np.asarray(seqs, float)
    keys = index_key_bytes(m) * (np.asarray(kv_read, float) + np.asarray(new_tokens, float)) * S / shard
    q = np.asarray(tokens, float) * m.index_heads * m.index_head_dim * act_bytes / tp
    return {"flops": 2.0 * m.index_heads * (m.index_head_dim + 1) * np.asarray(pairs, float) * S / tp,
            "nbytes": keys + q, "kv": keys,
            "note": f"lightning indexer: {m.index_heads} heads x {m.index_head_dim} score every cached token; "
                    f"attention then reads the top {m.index_topk}"}
