"""Time into money and energy: the one place where seconds of chips become $ per million tokens, joules per token,
chip-hours and $ per year. Every question that prints a cost calls these (SI inside: s, $, J, W).

Named variants, one meaning each (Vidur and the InferenceMAX charts use the same three):
- decode cost per output token: the chips' time for one decode step shared by the batch's sequences,
  usd_per_s x step_s / batch. It leaves out the prompt's prefill, as an API's output price does when input is
  billed separately.
- prefill cost per input token: the chips' time to prefill the batch's prompts, usd_per_s x ttft_s / (batch x input).
- request cost per output token: a whole request's chip time (prefill + all decode steps) per output token,
  usd_per_s x (ttft_s + output_len x step_s) / (batch x output_len) = usd_per_s / output tokens per second.
- cached input cost per token: the cheaper of holding its KV until reuse (holding_cost_per_mtok) and recomputing it.
JSON keys, one meaning each: cost_per_mtok_output_usd (decode_cost_per_mtok), cost_per_mtok_output_request_usd
(request_cost_per_mtok), cost_per_mtok_input_usd (prefill_cost_per_mtok).
"""
from __future__ import annotations

import numpy as np

SECONDS_PER_HOUR = 3600.0
HOURS_PER_YEAR = 8760
PER_MILLION = 1e6
GIB = 2.0 ** 30


def usd_per_s(chips, usd_per_chip_hour: float | None):
    """$ per second of `chips` chips at a price per chip-hour; None when the chip has no price."""
    if usd_per_chip_hour is None:
        return None
    return chips * usd_per_chip_hour / SECONDS_PER_HOUR


def per_mtok(usd_per_token):
    """$ per token -> $ per million tokens."""
    return usd_per_token * PER_MILLION


def per_token(usd_per_mtok):
    """$ per million tokens -> $ per token."""
    return usd_per_mtok / PER_MILLION


def usd_of_chip_s(chip_s, usd_per_chip_s):
    """$ for `chip_s` chip-seconds at `usd_per_chip_s` $ per chip-second (usd_per_s(1, $/chip-hour))."""
    return chip_s * usd_per_chip_s


def chip_s_of_usd(usd, usd_per_chip_s):
    """Chip-seconds that `usd` $ buys at `usd_per_chip_s` $ per chip-second (the inverse of usd_of_chip_s)."""
    return usd / usd_per_chip_s


def cost_per_token(usd_s, seconds, tokens):
    """$ per token when `tokens` tokens take `seconds` s of chips costing `usd_s` $/s: usd_s x seconds / tokens."""
    return usd_s * seconds / tokens


def cost_per_mtok(chip_s_per_token, usd_per_chip_s):
    """$ per million tokens from chip-seconds per token at `usd_per_chip_s` $ per chip-second:
    chip_s_per_token x usd_per_chip_s x 1e6."""
    return per_mtok(usd_of_chip_s(chip_s_per_token, usd_per_chip_s))


def decode_cost_per_mtok(usd_s, step_s, batch):
    """$ per million output tokens from the decode step alone: usd_s x step_s / batch x 1e6."""
    return per_mtok(cost_per_token(usd_s, step_s, batch))


def prefill_cost_per_mtok(usd_s, ttft_s, batch, input_len):
    """$ per million input tokens: the prefill of batch x input_len tokens, usd_s x ttft_s / (batch x input) x 1e6."""
    return per_mtok(cost_per_token(usd_s, ttft_s, batch * input_len))


def request_cost_per_mtok(usd_s, output_tokens_per_s):
    """$ per million output tokens for whole requests (prefill included): usd_s / output tokens per second x 1e6."""
    return usd_s / output_tokens_per_s * PER_MILLION


def chip_s_per_mtok(chips, output_tokens_per_s):
    """Chip-seconds per million output tokens (the price-free form of request_cost_per_mtok)."""
    return chips / output_tokens_per_s * PER_MILLION


def energy_j_per_token(chips, watts_per_chip, step_s, tokens):
    """Joules per token: chips x W x seconds / tokens (board power at TDP, an upper bound)."""
    return chips * watts_per_chip * step_s / tokens


def usd_per_year(chips, usd_per_chip_hour):
    """A fleet's $ per year at its chip-hour price, running all year."""
    return chips * usd_per_chip_hour * HOURS_PER_YEAR


def megawatts(units, watts_each, pue):
    """Facility power in MW: units x W each x PUE / 1e6, the units whole nodes at their system power rating
    (nodes x node kW x PUE) or, where no node figure is sourced, chips at their TDP (chips x TDP x PUE)."""
    return units * watts_each * pue / 1e6


def holding_cost_per_token(bytes_per_token, seconds, usd_per_byte_s):
    """$ per token for keeping `bytes_per_token` bytes for `seconds` s at `usd_per_byte_s` $ per byte-second."""
    return bytes_per_token * seconds * usd_per_byte_s


def holding_cost_per_mtok(bytes_per_token, seconds, usd_per_byte_s):
    """$ per million tokens for keeping `bytes_per_token` bytes per token for `seconds` in a store whose byte-second
    costs `usd_per_byte_s` (HBM: the chip's $/s / its HBM bytes; host DRAM, SSD: their rental price per byte-second)."""
    return per_mtok(holding_cost_per_token(bytes_per_token, seconds, usd_per_byte_s))


def transfer_cost_per_mtok(bytes_per_token, link_bytes_per_s, usd_per_byte_s, capacity_bytes):
    """$ per million tokens for moving `bytes_per_token` bytes per token over a store's link of `link_bytes_per_s`
    B/s (a reload into HBM, or the write that put it there). The link comes with the store: while it moves a token's
    bytes the store is busy, so the time is priced at the whole store's $/s (`capacity_bytes` x `usd_per_byte_s`).
    Added to the holding cost this is an upper bound: a store busy moving bytes still holds others'."""
    return per_mtok(np.asarray(bytes_per_token, float) / link_bytes_per_s * capacity_bytes * usd_per_byte_s)


def usd_per_byte_s_of(usd_s, capacity_bytes):
    """$ per byte-second of a store whose whole `capacity_bytes` cost `usd_s` $/s (HBM: the chip's $/s shared by its
    HBM bytes)."""
    return usd_s / capacity_bytes


def usd_per_byte_s_from_gib_hour(usd_per_gib_hour):
    """A rental price in $ per GiB-hour (2^30 bytes held one hour, as clouds list DRAM and SSD) -> $ per byte-second."""
    return usd_per_gib_hour / GIB / SECONDS_PER_HOUR


def usd_per_gib_hour(usd_per_byte_s):
    """$ per byte-second -> $ per GiB-hour (2^30 bytes held one hour), the unit clouds list."""
    return usd_per_byte_s * GIB * SECONDS_PER_HOUR


def cached_input_cost_per_mtok(holding, recompute):
    """A cached input token costs the cheaper of holding its KV until reuse and recomputing it (the uncached input
    price): a provider that finds holding dearer simply drops the KV and prefills again."""
    return np.minimum(holding, recompute)


def chip_hours(chips, seconds):
    """Chip-hours of `chips` chips running `seconds` s."""
    return np.asarray(chips) * seconds / SECONDS_PER_HOUR


def usd_of_chip_hours(chip_hours_, usd_per_chip_hour):
    """$ for `chip_hours_` chip-hours at `usd_per_chip_hour` $ per chip-hour."""
    return chip_hours_ * usd_per_chip_hour
