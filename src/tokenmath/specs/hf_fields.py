"""Reading typed fields out of a Hugging Face config.json: every bad or missing field is reported by its key."""
from __future__ import annotations

import math

from tokenmath.base.errors import InputError, show

MAX = {"num_hidden_layers": 10_000, "hidden_size": 1_000_000, "num_attention_heads": 100_000,
       "vocab_size": 100_000_000}


class ConfigFields:
    """A config dict and the prefix its keys are reported under ("text_config." for a wrapped text tower)."""

    def __init__(self, data: dict, prefix: str):
        self.d, self.prefix = data, prefix

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def int(self, key: str, default=None, lo: int = 0, hi: int = 100_000_000, *alts: str) -> int:
        for k in (key, *alts):
            if self.d.get(k) is not None:
                key = k
                break
        v = self.d.get(key)
        if v is None:
            if default is None:
                raise InputError(f"{self.prefix}{key}", "missing", "a positive integer")
            return default
        if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 1e18:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"{self.prefix}{key}", f"must be an integer, got {type(v).__name__} {show(v)}", "a whole number")
        hi = MAX.get(key, hi)
        if not lo <= v <= hi:
            raise InputError(f"{self.prefix}{key}", f"{show(v)} is out of range", f"between {lo} and {hi:,}")
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise InputError(f"{self.prefix}{key}", f"must be true or false, got {show(v)}", "true or false")
        return v
