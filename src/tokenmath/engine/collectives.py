"""Alpha-beta cost of collectives over the link they actually use (SI units; arrays broadcast).

Where the group's chips sit: `span=` takes mapping/placement.py's Span of the group (the serving engine passes
the real placement of each group of its layout). Priced for the slowest member:
- a ring (all-reduce, all-gather, reduce-scatter) runs hierarchically over the group whose ring crosses most: the
  part inside a domain moves factor(c_max) of the buffer over the scale-up link (c_max: that group's largest piece
  in one domain), the cross-domain phase moves factor(n) of a 1/c_min shard over the scale-out link (n domains,
  c_min its smallest piece: the chips there carry the most); or, when that is slower (a piece of one chip), as one
  flat ring over the group at its slowest hop, factor(p) x S / min(scale-up, scale-out);
- an all-to-all: a rank whose domain holds c of the p ranks sends (c - 1)/p of its payload on scale-up and
  (p - c)/p across, at once; the slowest rank sets the time, max((c_max - 1)/p S / up, (p - c_min)/p S / out)
  (72 HGX H200, ep = 9: the rank alone on its node sends 8/9 of its payload across, not 1/9);
- the scale-out latency is added when a group spans more than one domain.
Without span=, a group of p chips is taken as one contiguous block from a domain boundary: inside one domain of d
chips when p <= d, else n = p/d domains of d chips each (aligned groups get the same figures either way).

Bandwidth terms (S = buffer per chip in bytes; for all-gather the gathered result):
  ring all-reduce  2 (p-1)/p x S / bw       (Patarasuk & Yuan 2009; NCCL's "bus bandwidth" convention)
  all-gather / reduce-scatter  (p-1)/p x S / bw
  all-to-all       (p-1)/p x S / bw         (each chip sends S/p to every other chip at once)
  point-to-point   S / bw
Latency term: alpha(p) = scaleup_latency + 2 us x (sqrt(p) - 1), Epoch AI's NCCL fit (Erdil 2025,
arXiv:2506.04645), plus scaleout_latency when the group crosses domains.
"""
from __future__ import annotations

import numpy as np

from tokenmath.base.errors import InputError

HOP_LATENCY_S = 2e-6


def scaleout_bandwidth(hw, eff_link: float):
    if hw.scaleout_bw is None:
        raise InputError("hardware.scaleout_gbs", f"{hw.id} has no scale-out bandwidth, and this layout spans "
                         f"more than one scale-up domain of {hw.scaleup_domain} chips",
                         "keep the parallel group within one domain or give scaleout_gbs in a hardware file")
    return hw.scaleout_bw * eff_link


def latency(p, hw, span=None):
    p = np.asarray(p, float)
    a = hw.scaleup_latency + HOP_LATENCY_S * (np.sqrt(p) - 1)
    crosses = p > hw.scaleup_domain if span is None else span.domains > 1
    return np.where(crosses, a + hw.scaleout_latency, a)


def _collective(S, p, hw, eff_link, factor, up_bw=None, span=None):
    """factor(p) x S over the slowest link the group uses, hierarchically when it spans domains.
    up_bw: per-chip scale-up bandwidth this group gets (B/s, scalar or array broadcasting with p), for topologies
    where it depends on the group (systems.System.group_bw); None: hw.scaleup_bw. span: where the group sits
    (mapping/placement.Span); None: one contiguous block from a domain boundary."""
    S, p = np.asarray(S, float), np.asarray(p, float)
    d = float(hw.scaleup_domain)
    up = (hw.scaleup_bw if up_bw is None else up_bw) * eff_link
    inside = factor(p) * S / up
    if span is not None:
        if not np.any(span.ring_domains > 1):
            t = inside
        else:
            out = scaleout_bandwidth(hw, eff_link)
            n, lo, hi = (np.maximum(np.asarray(x, float), 1.0) for x in
                         (span.ring_domains, span.ring_piece_min, span.ring_piece_max))
            hier = factor(hi) * S / up + factor(n) * (S / lo) / out
            flat = factor(p) * S / np.minimum(up, out)     # one ring at its slowest hop, when uneven pieces
            t = np.where(span.ring_domains > 1, np.minimum(hier, flat), inside)   # make the hierarchy worse
    elif np.all(p <= d):
        t = inside
    else:
        out = scaleout_bandwidth(hw, eff_link)
        n = np.maximum(p / d, 1.0)
        # the in-domain phase moves factor(d) of the buffer; the cross-domain phase moves factor(n) of S/d
        hier = factor(np.float64(d)) * S / up + factor(n) * (S / d) / out
        t = np.where(p <= d, inside, hier)
    return np.where(p > 1, t + latency(p, hw, span), 0.0)


def all_reduce(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None, span=None):
    return _collective(nbytes, p, hw, eff_link, lambda q: 2 * (q - 1) / q, up_bw, span)


def all_gather(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None, span=None):
    """Also the cost of a reduce-scatter of the same buffer."""
    return _collective(nbytes, p, hw, eff_link, lambda q: (q - 1) / q, up_bw, span)


reduce_scatter = all_gather


def all_to_all(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None, span=None, out_scale=1.0):
    """S = bytes each chip sends in total (its whole payload, of which (p-1)/p leaves the chip). span: where the
    group sits (mapping/placement.Span); the slowest rank sets the time (module docstring). out_scale multiplies
    only the bytes that cross domains (one copy per domain instead of per peer: engine/expert_parallel.py)."""
    S, p = np.asarray(nbytes, float), np.asarray(p, float)
    So = S * np.asarray(out_scale, float)
    d = float(hw.scaleup_domain)
    up = (hw.scaleup_bw if up_bw is None else up_bw) * eff_link
    inside = (p - 1) / p * S / up
    if span is not None:
        if not np.any(span.domains > 1):
            t = inside
        else:
            out = scaleout_bandwidth(hw, eff_link)
            lo, hi = np.asarray(span.piece_min, float), np.asarray(span.piece_max, float)
            cross = np.maximum(np.maximum(hi - 1, 0) / p * S / up, (p - lo) / p * So / out)
            t = np.where(span.domains > 1, np.maximum(cross, inside), inside)
    elif np.all(p <= d):
        t = inside
    else:
        out = scaleout_bandwidth(hw, eff_link)
        # the (p-d)/p share bound for other domains crosses the scale-out link while the rest moves on scale-up
        cross = np.maximum((d - 1) / p * S / up, (p - d) / p * So / out)
        cross = np.maximum(cross, inside)   # crossing domains is never faster than staying inside one
        t = np.where(p <= d, inside, cross)
    return np.where(p > 1, t + latency(p, hw, span), 0.0)


def p2p(nbytes, crosses_domain, hw, eff_link: float = 1.0, *, up_bw=None):
    S = np.asarray(nbytes, float)
    up = S / ((hw.scaleup_bw if up_bw is None else up_bw) * eff_link) + hw.scaleup_latency
    if not np.any(crosses_domain):
        return up
    out = S / scaleout_bandwidth(hw, eff_link) + hw.scaleup_latency + hw.scaleout_latency
    return np.where(crosses_domain, out, up)
