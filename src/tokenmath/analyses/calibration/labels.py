"""What a published measurement is: its one primary regime, and the labels beside it (MoE, chip vendor, serving
engine, calibration family). `tokenmath validate` groups errors by these and holds them out one at a time.

Regimes (exactly one per row, first rule that matches):
  training        a [[training]] row
  prefill         the metric times or rates the prompt alone (ttft_s, prefill_tokens_per_s)
  max-load        load = "max" or batch = "max": all requests queued, the engine at its largest batch
  concurrency     load = "concurrency" with more than one request in flight (or an unpublished number, batch
                  "unstated": production traffic)
  batch-1-decode  one sequence (batch 1, static or at concurrency 1: the same physics)
  static-batch    a fixed batch > 1 run from prefill to its last token
A row without `load` reads as static (or max when batch = "max"), the file's convention before the field existed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tokenmath.base.errors import InputError
from tokenmath.specs.families import OTHER

REGIMES = ("batch-1-decode", "static-batch", "prefill", "max-load", "concurrency", "training")
LOADS = ("static", "max", "concurrency")
PREFILL_METRICS = ("ttft_s", "prefill_tokens_per_s")
VENDORS = ("nvidia", "amd", "google", "intel", "aws", "apple")

# serving-engine label from the row's free-text `engine` (first match wins; ids of specs/serving_engines.py where
# the engine has a profile: NIM runs TensorRT-LLM inside)
_ENGINE_WORDS = (("tensorrt-llm", ("tensorrt-llm", "trt-llm", "trtllm", "nim ")), ("sglang", ("sglang",)),
                 ("llama.cpp", ("llama.cpp",)), ("mlx", ("mlx",)), ("neuron", ("nxd", "neuron")),
                 ("vllm", ("vllm",)), ("gpt-fast", ("gpt-fast",)), ("jetstream", ("jetstream",)),
                 ("jax", ("jax", "chowdhery")), ("gaudi", ("gaudi",)), ("megatron", ("megatron", "narayanan")),
                 ("nemo", ("nemo",)), ("deepseek", ("deepseek in-house", "deepseek-v3 technical report")),
                 ("meta", ("llama team",)))


@dataclass(frozen=True)
class Labels:
    regime: str       # one of REGIMES
    moe: bool
    vendor: str       # one of VENDORS, or "other"
    engine: str       # an engine id (see _ENGINE_WORDS) or "other"
    family: str       # calibration family of the chip (specs/families.py)
    hardware: str
    scored: bool      # False: predicted and listed, but neither fitted nor counted (lengths are caps)

    def to_dict(self) -> dict:
        return {"regime": self.regime, "moe": self.moe, "vendor": self.vendor, "engine": self.engine,
                "family": self.family, "scored": self.scored}

    def key(self, scope: str) -> str | None:
        """The group this row belongs to under a parameter scope (see parameters.SCOPES); None: in no group there."""
        if scope == "all":
            return "_all"
        if scope == "family":       # "other" is no family: such chips take the all-rows value
            return None if self.family == OTHER else self.family
        if scope == "engine_family":
            return None if OTHER in (self.engine, self.family) else f"{self.engine}@{self.family}"
        if scope == "engine":
            return None if self.engine == OTHER else self.engine
        if scope == "hardware":
            return self.hardware
        raise InputError("scope", f"unknown parameter scope {scope!r}", "all, family, engine, engine_family, hardware")


def load_of(row: dict) -> str:
    ld = row.get("load")
    if ld is None:
        return "max" if row.get("batch") == "max" else "static"
    if ld not in LOADS:
        raise InputError(f"measurement {row.get('id')}.load", f"{ld!r} is not a load", ", ".join(LOADS))
    return ld


def regime_of(row: dict, kind: str) -> str:
    """The one primary regime of a measurement row (kind: inference | training)."""
    if kind == "training":
        return "training"
    ld, batch = load_of(row), row.get("batch")
    if row.get("metric") in PREFILL_METRICS:
        return "prefill"
    if ld == "max" or batch == "max":
        return "max-load"
    if ld == "concurrency":
        n = row.get("concurrency", batch)
        if n == "unstated" or n is None or (isinstance(n, int) and n > 1):
            return "concurrency"
        return "batch-1-decode"
    if batch == "unstated":
        return "concurrency"
    return "batch-1-decode" if batch == 1 else "static-batch"


def vendor_of(hardware_id: str) -> str:
    from tokenmath.specs.hardware import get_hardware
    try:
        v = get_hardware(hardware_id).vendor.lower()
    except InputError:
        return OTHER
    return v if v in VENDORS else OTHER


# vLLM's V1 engine (a rewrite of the scheduler and input preparation to cut CPU time per step) became the default in
# v0.8.0 (github.com/vllm-project/vllm releases, v0.8.0, 2025-03-18: "V1 engine enabled by default"); the vllm
# profile describes V1. Rows measured on an older vLLM are their own engine group, "vllm-v0", so their CPU time per
# step (V0: scheduling and input preparation 29% of a step, vLLM blog 2024-09-05) is not fitted into V1's.
V1_FROM = "2025-03-18"
_V0_VERSION = re.compile(r"vllm[ -]?v?0\.[0-7](\.|\b)")
# an engine group measured with another engine's profile: group -> profile (specs/serving_engines.py)
PROFILE_OF = {"vllm-v0": "vllm"}


def engine_of(row: dict) -> str:
    """Training rows name no engine: their source (Megatron-LM, NeMo, a lab's report) says it."""
    text = " " + str(row.get("engine") or row.get("source", "")).lower() + " "
    for eid, words in _ENGINE_WORDS:
        if any(w in text for w in words):
            if eid == "vllm" and (_V0_VERSION.search(text) or str(row.get("date", "9999")) < V1_FROM):
                return "vllm-v0"
            return eid
    return OTHER


def is_moe(model_id: str) -> bool:
    from tokenmath.specs.model_catalog import get_model
    try:
        return bool(get_model(model_id).is_moe)
    except InputError:
        return False


def labels_of(row: dict, kind: str) -> Labels:
    from tokenmath.specs.families import family
    hw = str(row.get("hardware", ""))
    return Labels(regime=regime_of(row, kind), moe=is_moe(str(row.get("model", ""))), vendor=vendor_of(hw),
                  engine=engine_of(row), family=family(hw), hardware=hw,
                  scored=not bool(row.get("lengths_are_caps", False)))
