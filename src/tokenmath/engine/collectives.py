"""Alpha-beta cost of collectives over the link they actually use (SI units; arrays broadcast).

A group of p chips is laid out contiguously: it stays inside one scale-up domain of d chips when p <= d.
When it spans n = p/d domains, the collective runs hierarchically: the part inside a domain uses the scale-up
link, the part that crosses pays the scale-out link (per chip, one direction).

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


def latency(p, hw):
    p = np.asarray(p, float)
    a = hw.scaleup_latency + HOP_LATENCY_S * (np.sqrt(p) - 1)
    return np.where(p > hw.scaleup_domain, a + hw.scaleout_latency, a)


def _collective(S, p, hw, eff_link, factor, up_bw=None):
    """factor(p) x S over the slowest link the group uses, hierarchically when it spans domains.
    up_bw: per-chip scale-up bandwidth this group gets (B/s, scalar or array broadcasting with p), for topologies
    where it depends on the group (systems.System.group_bw); None: hw.scaleup_bw."""
    S, p = np.asarray(S, float), np.asarray(p, float)
    d = float(hw.scaleup_domain)
    up = (hw.scaleup_bw if up_bw is None else up_bw) * eff_link
    inside = factor(p) * S / up
    if np.all(p <= d):
        t = inside
    else:
        out = scaleout_bandwidth(hw, eff_link)
        n = np.maximum(p / d, 1.0)
        # the in-domain phase moves factor(d) of the buffer; the cross-domain phase moves factor(n) of S/d
        span = factor(np.float64(d)) * S / up + factor(n) * (S / d) / out
        t = np.where(p <= d, inside, span)
    return np.where(p > 1, t + latency(p, hw), 0.0)


def all_reduce(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None):
    return _collective(nbytes, p, hw, eff_link, lambda q: 2 * (q - 1) / q, up_bw)


def all_gather(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None):
    """Also the cost of a reduce-scatter of the same buffer."""
    return _collective(nbytes, p, hw, eff_link, lambda q: (q - 1) / q, up_bw)


reduce_scatter = all_gather


def all_to_all(nbytes, p, hw, eff_link: float = 1.0, *, up_bw=None):
    """S = bytes each chip sends in total (its whole payload, of which (p-1)/p leaves the chip)."""
    S, p = np.asarray(nbytes, float), np.asarray(p, float)
    d = float(hw.scaleup_domain)
    up = (hw.scaleup_bw if up_bw is None else up_bw) * eff_link
    inside = (p - 1) / p * S / up
    if np.all(p <= d):
        t = inside
    else:
        out = scaleout_bandwidth(hw, eff_link)
        # the (p-d)/p share bound for other domains crosses the scale-out link while the rest moves on scale-up
        span = np.maximum((d - 1) / p * S / up, (p - d) / p * S / out)
        span = np.maximum(span, inside)   # crossing domains is never faster than staying inside one
        t = np.where(p <= d, inside, span)
    return np.where(p > 1, t + latency(p, hw), 0.0)


def p2p(nbytes, crosses_domain, hw, eff_link: float = 1.0, *, up_bw=None):
    S = np.asarray(nbytes, float)
    up = S / ((hw.scaleup_bw if up_bw is None else up_bw) * eff_link) + hw.scaleup_latency
    if not np.any(crosses_domain):
        return up
    out = S / scaleout_bandwidth(hw, eff_link) + hw.scaleup_latency + hw.scaleout_latency
    return np.where(crosses_domain, out, up)
