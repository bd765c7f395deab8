"""The collectives that batch- and data-parallel attention add inside a TP group (mapping/layout.py, Layout.attn).

Per chip and per layer, S in bytes per chip (arrays broadcast; T = the TP group's tokens in the pass, tp its size):
- batch (Pope et al. 2022, arXiv 2211.05102, Sec. 3.3 and Fig. 4(c), multiquery attention with the KV cache
  sharded over the batch): the q/k/v/o projections stay split by heads, so before the attention core an all-to-all
  turns q from head-sharded (T tokens x h/tp heads on each rank) into batch-sharded (T/tp tokens x all heads), and
  after it a second all-to-all turns the attention output back. Each chip's payload is its T x (h/tp) x head width
  x 2 bytes (bf16): q width qk_dim per head (MLA: qk_nope + rope, before the absorption), output v_dim per head.
  With several KV heads (GQA, tp > n_kv_heads) the new token's k and v (2 x n_kv_heads x head_dim) ride along with
  q; with one KV head (MQA) or MLA's latent every rank computes them for its own sequences (the k/v projection is
  replicated across the ranks that share a head), so nothing more moves. TP's two all-reduces per layer stay.
- dp (data-parallel attention: SGLang --enable-dp-attention, docs "DP, DPA and SGLang DP Router",
  https://docs.sglang.io/advanced_features/dp_dpa_smg_guide.html: MLA has one KV head, so TP duplicates the KV
  cache on every GPU; vLLM "Data Parallel Deployment", https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/:
  data parallel attention layers with tensor- or expert-parallel expert layers): attention runs whole on each rank
  for its own sequences, so no collective follows it; the MLP (or MoE) stays tensor-parallel over the group: an
  all-gather of the hidden states (T x d x 2 bytes gathered) before it and a reduce-scatter of its output after it
  (vLLM's default EP+DP backend is named for them, "allgather_reducescatter": docs "Expert Parallel Deployment"),
  in place of TP's two all-reduces (one all-gather + one reduce-scatter move what one all-reduce moves:
  (tp-1)/tp x S each).
"""
from __future__ import annotations

import numpy as np

from tokenmath.engine import collectives as coll
from tokenmath.specs.model import Model


def reshard_widths(m: Model) -> tuple[float, float]:
    """(values per token in the all-to-all before the core, values per token in the one after it) under batch."""
    if m.is_mla:
        return float(m.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)), float(m.n_heads * m.v_head_dim)
    kv = 2 * m.kv_heads * m.hd if m.kv_heads > 1 else 0
    return float(m.n_heads * m.hd + kv), float(m.n_heads * m.hd)


def batch_alltoall_bytes(m: Model, tokens, tp, act_bytes: float):
    """(payload per chip of the q all-to-all, of the output all-to-all), bytes: T x width x act_bytes / tp."""
    q, o = reshard_widths(m)
    T, tp = np.asarray(tokens, float), np.asarray(tp, float)
    return T * q * act_bytes / tp, T * o * act_bytes / tp


def sharding_comm(m: Model, hw, lay, tokens, act_bytes: float, link_eff: float, *, a2a_bw=None, ag_bw=None,
                  span=None) -> dict:
    """{op name: (count per pass, seconds per occurrence, note)} of the collectives batch / dp attention add, and
    "tp_allreduce_kept": 0/1 where TP's all-reduces stay (heads, batch) or go (dp). a2a_bw / ag_bw: the per-chip
    scale-up bandwidth of the group for an all-to-all / all-gather (systems.System.group_bw); span: the TP group's
    placement (mapping/placement.py)."""
    code = np.asarray(lay.attn)
    tp = np.asarray(lay.tp, float)
    T = np.asarray(tokens, float)
    sq, so = batch_alltoall_bytes(m, T, tp, act_bytes)
    a2a = (coll.all_to_all(sq, tp, hw, link_eff, up_bw=a2a_bw, span=span)
           + coll.all_to_all(so, tp, hw, link_eff, up_bw=a2a_bw, span=span))
    h = T * m.d_model * act_bytes
    gather = (coll.all_gather(h, tp, hw, link_eff, up_bw=ag_bw, span=span)
              + coll.reduce_scatter(h, tp, hw, link_eff, up_bw=ag_bw, span=span))
    out = {}
    if np.any(code == 1):
        out["attn_alltoall"] = (float(m.n_attention_layers), np.where(code == 1, a2a, 0.0),
                                "batch-sharded attention: all-to-all of q before the core and of its output after it, "
                                "per attention layer (Pope et al. 2022)")
    if np.any(code == 2):
        out["dp_attn_gather"] = (float(m.n_layers), np.where(code == 2, gather, 0.0),
                                 "data-parallel attention: all-gather of the hidden states before the MLP and "
                                 "reduce-scatter after it, per layer (in place of TP's all-reduces)")
    out["tp_allreduce_kept"] = np.where(code == 2, 0.0, 1.0)
    return out
