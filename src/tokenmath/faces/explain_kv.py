"""The KV-per-token line of the napkin derivations where full and local attention layers differ in shape (Gemma 4:
global_head_dim, num_global_key_value_heads): each kind's K and V values, layers and bytes, so the arithmetic
printed is the arithmetic done (specs/kv_cache.kv_bytes_per_token)."""
from __future__ import annotations

from tokenmath.specs.kv_cache import kv_full_values, kv_main_values
from tokenmath.specs.model import Model


def kv_kinds_terms(m: Model, kv_bytes: float) -> tuple[str, str]:
    """(how, per): the per-layer values of each kind and the sum over the layers, e.g. '2 x 8 KV heads x 256
    (sliding) / 2 x 2 x 512 (full)' and '(4096 x 25 + 2048 x 5) values x 2 B'."""
    how = (f"2 x {m.kv_heads} KV heads x {m.hd} (sliding) / 2 x {m.kv_heads_full} x {m.hd_full} (full"
           + (", V from the K projection, both cached" if m.full_k_eq_v else "") + ")")
    per = (f"({kv_main_values(m)} x {m.n_sliding_layers} + {kv_full_values(m)} x {m.n_full_layers}) values "
           f"x {kv_bytes:g} B")
    return how, per
