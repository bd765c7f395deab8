"""One benchmark run as its result file states it, and the checks every reader applies to an outside value: a bad one
is refused naming the file, the place in it and the key (readers.py, readers_guidellm.py, readers_llmd.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from tokenmath.base.errors import InputError, show

VLLM = "vllm bench serve"
SGLANG = "sglang bench_serving"
AIPERF = "aiperf"
GUIDELLM = "guidellm"
LLMD = "llm-d benchmark report"
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark run as its file states it (SI units: seconds, tokens, tokens/s)."""
    tool: str                       # VLLM, SGLANG, AIPERF, GUIDELLM or LLMD
    file: str
    line: int                       # 1-based line of the object (1 for a single-object file)
    model_id: str | None            # as the client named it (a Hugging Face id or a path); SGLang files omit it
    backend: str | None             # the client's backend (which API it spoke to), not necessarily the server
    date: str | None                # YYYY-MM-DD when the file says
    request_rate: float | None      # requests/s; None: "inf" (all requests sent at once)
    max_concurrency: int | None     # the client's cap on requests in flight (None: no cap)
    num_prompts: int | None
    completed: int
    duration_s: float
    input_len: float                # mean prompt tokens per completed request (total_input_tokens / completed)
    output_len: float               # mean generated tokens per completed request
    request_throughput: float       # completed requests/s
    output_tokens_per_s: float
    mean_ttft_s: float | None
    mean_tpot_s: float | None
    mean_itl_s: float | None
    mean_e2e_s: float | None
    extra: dict = field(default_factory=dict, compare=False)
    part: str | None = None         # the run's place in a file that holds several in one document ("benchmarks[2]")
    load_stated: bool = True        # False: the file does not say the client's rate or concurrency
    # what the file states of the serving deployment (llm-d reports: scenario.host): accelerator, chips, tp, pp, ep,
    # dp, replicas, roles; empty when it states nothing
    deployment: dict = field(default_factory=dict, compare=False)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.part}" if self.part else f"{self.file}:{self.line}"

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("tool", "file", "line", "model_id", "backend", "date", "request_rate",
                                           "max_concurrency", "num_prompts", "completed", "duration_s", "input_len",
                                           "output_len", "request_throughput", "output_tokens_per_s", "mean_ttft_s",
                                           "mean_tpot_s", "mean_itl_s", "mean_e2e_s")}
        d["request_rate"] = "inf" if self.request_rate is None else self.request_rate
        d["where"] = self.where
        return d


def number(obj: dict, key: str, where: str, integer: bool = False, low: float = 0.0) -> float:
    """obj[key] as a finite number >= low (a whole one if integer), else an InputError naming where.key."""
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(f"{where}.{key}", "is missing", "the key the benchmark tool writes")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and v.bit_length() > 1000) \
            or not math.isfinite(v):
        raise InputError(f"{where}.{key}", f"{show(v)} is not a finite number", "a number")
    if integer and int(v) != v:
        raise InputError(f"{where}.{key}", f"{show(v)} is not a whole number", "a count")
    if v < low:
        raise InputError(f"{where}.{key}", f"{show(v)} is below {low:g}", f"a number >= {low:g}")
    return float(v)


def optional(obj: dict, key: str, where: str, integer: bool = False, low: float = 0.0) -> float | None:
    """number(), or None when the key is absent or null."""
    return None if not isinstance(obj, dict) or obj.get(key) is None else number(obj, key, where, integer, low)


def mapping(obj: dict, key: str, where: str, required: bool = True) -> dict | None:
    """obj[key] as a JSON object (None when absent and not required)."""
    v = obj.get(key) if isinstance(obj, dict) else None
    if v is None and not required:
        return None
    if not isinstance(v, dict):
        raise InputError(f"{where}.{key}", "is missing" if v is None else f"{str(v)[:60]!r} is not an object",
                         "the object the benchmark tool writes")
    return v


def millis(obj: dict, key: str, where: str) -> float | None:
    """A latency in ms as seconds; None when absent or null (a tool that did not measure it)."""
    if obj.get(key) is None:
        return None
    v = number(obj, key, where, low=0.0)
    return v / 1e3 if v > 0 else None


def text(obj: dict, key: str, where: str) -> str | None:
    v = obj.get(key) if isinstance(obj, dict) else None
    if v is None:
        return None
    if not isinstance(v, str) or len(v) > 500:
        raise InputError(f"{where}.{key}", f"{str(v)[:60]!r} is not a name", "text under 500 characters")
    return v


def day_of(unix_s) -> str | None:
    """YYYY-MM-DD of a Unix time in seconds (UTC); None for anything that is not a plausible one (2000-2100)."""
    if isinstance(unix_s, bool) or not isinstance(unix_s, (int, float)) or not 946_684_800 <= unix_s < 4_102_444_800:
        return None
    return datetime.fromtimestamp(unix_s, tz=timezone.utc).strftime("%Y-%m-%d")
