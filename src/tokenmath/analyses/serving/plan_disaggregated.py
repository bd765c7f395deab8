"""Disaggregated serving for a plan: a prefill pool and a decode pool (Splitwise, DistServe, Mooncake).

The decode pool runs the decode-only point with the most output tokens/s per chip meeting the per-user target; it
completes requests at r = batch / step / output_len per second, whose prompts arrive at r x input_len tokens/s. The
prefill pool runs the prefill point with the most prompt tokens/s per chip meeting the TTFT target, and is sized to
that traffic: prefill chips = r x input_len / (prefill tokens/s per chip). The ratio prefill : decode chips
follows, with the KV each request carries from one pool to the other over the scale-out network.
"""
from __future__ import annotations

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite
from tokenmath.engine.economics import chip_s_per_mtok, request_cost_per_mtok, usd_per_s
from tokenmath.specs.kv_cache import kv_bytes_per_sequence
from tokenmath.analyses.setup import Setup, fmt_layout
from tokenmath.analyses.serving.grid import Grid, batch_axis, evaluate, fewest_whole, over_batches, point


def output_per_chip(decode_per_chip, prefill_per_chip, input_len: int, output_len: int):
    """Output tokens/s per chip of a disaggregated deployment (arrays broadcast): decode chips at `decode_per_chip`
    output tokens/s each, plus the prefill chips their prompts need, input_len / output_len prompt tokens per output
    token at `prefill_per_chip` prompt tokens/s each: 1 / (1 / d + (I / O) / p) (KV transfer time left out)."""
    d, p = np.asarray(decode_per_chip, float), np.asarray(prefill_per_chip, float)
    return 1.0 / (1.0 / d + (input_len / output_len) / p)


def disaggregate(su: Setup, n: int, lays, g: Grid, B, input_len: int, output_len: int, ttft_s: float | None,
                 tps_user: float | None, opts: dict, colocated: dict, prefix_hit: float = 0.0,
                 demand: float | None = None) -> dict:
    """Size the two pools for the traffic of `n` decode chips. g: the colocated grid over layouts `lays` and
    batches B; opts: the evaluation options (ep_imbalance, ep_overlap, links); colocated: the plan's best point.
    prefix_hit: the cached share of every prompt (engine/prefix_cache.py): the prefill pool computes only the rest,
    attending to the cached part (its prompt tokens/s count every prompt token, cached ones included).
    demand: a fleet's output tokens/s: each pool then takes the instance that serves its share on the fewest whole
    instances' chips (grid.fewest_whole) instead of the most per chip. Times in s, bytes, $ per million output
    tokens."""
    m, hw, prec = su.model, su.hardware, su.precision
    price = hw.price_usd_per_hour
    # decode pool: decode-only throughput (prefill happens elsewhere)
    dec_tps_chip = g.batch / g.step_s / g.chips
    dok = np.array(g.fits, bool)
    if tps_user is not None:
        dok &= g.tokens_per_s_per_user >= tps_user
    if not dok.any():
        raise InputError("min_tokens_per_s_per_user", "no decode layout meets the per-user target", None)
    if demand is None:
        di, dj = np.unravel_index(np.argmax(np.where(dok, dec_tps_chip, -1.0)), dok.shape)
    else:
        di, dj = fewest_whole(g.batch / g.step_s, g.chips, dok, demand, dec_tps_chip)
    dpt = point(g, di, dj, price)
    dec_tps = float(g.batch[di, dj] / g.step_s[di, dj])          # output tokens/s of one decode instance
    # prefill pool: prompts only (KV of the prompt held), TTFT = prefill of its batch
    pg = evaluate(su, lays, B, input_len, 1, **opts, prefix_hit=prefix_hit)
    pre_tps_chip = pg.batch * input_len / pg.ttft_s / pg.chips
    pok = np.array(pg.fits, bool)
    if ttft_s is not None:
        pok &= pg.ttft_s <= ttft_s
    if not pok.any():
        raise InputError("ttft_ms", "no prefill layout meets the TTFT target", None)
    if demand is None:
        pi, pj = np.unravel_index(np.argmax(np.where(pok, pre_tps_chip, -1.0)), pok.shape)
    else:
        pi, pj = fewest_whole(pre_tps_chip * pg.chips, pg.chips, pok, demand * input_len / output_len, pre_tps_chip)
    t = pg.layouts[pi]
    req_s = dec_tps / output_len
    prompt_tps = req_s * input_len
    p_chip = float(pre_tps_chip[pi, pj])
    prefill_chips = prompt_tps / p_chip
    kv_req = float(kv_bytes_per_sequence(m, input_len, prec.kv.bytes))
    out_bw = hw.scaleout_bw * su.efficiency.link_bw if hw.scaleout_bw else None
    transfer_s = kv_req / (n * out_bw) if out_bw else None
    total = n + prefill_chips
    cost = None if price is None else request_cost_per_mtok(usd_per_s(total, price), dec_tps)
    return {
        "decode": {**dpt, "decode_output_tokens_per_s": dec_tps,
                   "decode_output_tokens_per_s_per_chip": float(dec_tps_chip[di, dj])},
        "prefill": {"layout": fmt_layout(*t), "tp": int(t[0]), "pp": int(t[1]), "ep": int(t[2]), "dp": int(t[3]),
                    "batch": int(pg.batch[pi, pj]), "ttft_s": finite(pg.ttft_s[pi, pj]),
                    "prompt_tokens_per_s_per_chip": p_chip,
                    "bottleneck": str(np.broadcast_to(np.asarray(pg.cost.prefill.bottleneck), pg.batch.shape)[pi, pj])},
        "requests_per_s_per_decode_instance": req_s, "prompt_tokens_per_s": prompt_tps,
        "decode_chips": n, "prefill_chips": prefill_chips, "prefill_to_decode_chip_ratio": prefill_chips / n,
        "kv_bytes_per_request": kv_req, "kv_transfer_bytes_per_s": req_s * kv_req,
        "kv_transfer_share_of_scaleout": (req_s * kv_req / (n * out_bw)) if out_bw else None,
        "kv_transfer_s": transfer_s,
        "ttft_s": finite(pg.ttft_s[pi, pj] + (transfer_s or 0.0)),
        "cost_per_mtok_output_request_usd": finite(cost) if cost is not None else None,
        "chip_s_per_mtok_output": chip_s_per_mtok(total, dec_tps),
        "colocated_chip_s_per_mtok_output": colocated["chip_s_per_mtok_output"],
        "colocated_cost_per_mtok_output_request_usd": colocated["cost_per_mtok_output_request_usd"],
    }


def instance_pools(su: Setup, decode_chips: int, prefill_chips: int, input_len: int, output_len: int,
                   tps_user: float | None, ttft_s: float | None, colocated: dict, prefix_hit: float = 0.0) -> dict:
    """disaggregate() with instances of the sizes a deployment states (DeepSeek's: prefill 32 GPUs, decode 144): the
    decode pool's layouts are every admissible layout of exactly `decode_chips` chips (mapping/candidates.layouts_for:
    wide EP across nodes, attention data-parallel), over batches up to the largest that fits; the prefill pool's of
    `prefill_chips`, over prompt batches up to 1,024. Sizes as disaggregate's."""
    from tokenmath.mapping.candidates import layouts_for
    m, hw = su.model, su.hardware
    dec = layouts_for(m, int(decode_chips), max_tp=hw.scaleup_domain)
    pre = layouts_for(m, int(prefill_chips), max_tp=hw.scaleup_domain)
    for name, lays, n in (("decode_chips", dec, decode_chips), ("prefill_chips", pre, prefill_chips)):
        if not lays:
            raise InputError(name, f"no layout of {n} chips suits {m.id}",
                             f"a chip count with a divisor that divides the {m.n_heads} heads")
    g = over_batches(su, dec, input_len, output_len)
    if g is None:
        raise InputError("decode_chips", f"{m.id} does not fit on {decode_chips} x {hw.id} at "
                         f"{input_len + output_len:,} tokens per sequence", "more chips per decode instance")
    return disaggregate(su, int(decode_chips), pre, g, batch_axis(1024), input_len, output_len, ttft_s, tps_user,
                        {}, colocated, prefix_hit=prefix_hit)
