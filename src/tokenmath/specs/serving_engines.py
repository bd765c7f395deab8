"""Serving-engine profiles: the defaults of vLLM, SGLang, TensorRT-LLM, llama.cpp and MLX that shape a step's time
and the batch an engine really runs (data/engines.toml, every value with the code or document it was read from).
A user may pass an engine file of the same schema (TOML or JSON) wherever an engine name is accepted."""
from __future__ import annotations

from dataclasses import dataclass, field

from tokenmath.base.errors import InputError, show, unknown_name
from tokenmath.specs.catalog import looks_like_path, read_user_file, shipped

DEFAULT_ENGINE = "vllm"
GRAPH_MODES = ("all", "batch1", "none")
KV_FRACTION_OF = ("total", "free")
# bounds of the one fitted value, step_cpu_s: a step's CPU work outside kernel launches (scheduling, sampling,
# detokenization) is between nothing and a few ms (vLLM V0.5: 29% of a ~13 ms step, vLLM blog 2024-09-05)
STEP_CPU_BOUNDS_S = (0.0, 0.005)


@dataclass(frozen=True)
class EngineProfile:
    id: str
    name: str
    graphs: str                      # "all" | "batch1" | "none"
    graph_max_batch: int             # largest decode batch replayed from a captured graph
    max_running: int                 # most sequences run at once (0: no cap beyond memory)
    max_batched_tokens: int          # tokens per step, prefill chunks + decodes (0: no cap)
    chunked_prefill: bool
    mixed_batches: bool              # prefill chunks and decodes share one forward pass
    kv_memory_fraction: float        # of total memory (kv_fraction_of "total") or of memory free after weights
    kv_fraction_of: str
    kv_block_tokens: int
    overlap_scheduling: bool         # CPU work of step n+1 hidden behind the device's step n
    step_cpu_s: float | None         # None until fitted (data/calibration.toml), then seconds per step
    step_cpu_bounds_s: tuple[float, float] = STEP_CPU_BOUNDS_S
    max_running_small_gpu: int | None = None          # vLLM: a different default below 70 GiB
    max_batched_tokens_small_gpu: int | None = None
    quant: tuple[str, ...] = ()
    version: str = ""
    sources: dict = field(default_factory=dict)

    def graphs_at(self, batch):
        """Whether a decode step of `batch` sequences replays a captured graph (arrays broadcast)."""
        import numpy as np
        b = np.asarray(batch)
        if self.graphs == "none":
            return np.zeros(b.shape, bool)
        limit = 1 if self.graphs == "batch1" else self.graph_max_batch
        return b <= limit

    def limits_for(self, memory_bytes: float) -> tuple[int, int]:
        """(max_running, max_batched_tokens) on a device with this much memory (vLLM's defaults differ below 70 GiB)."""
        small = memory_bytes < 70 * 2**30
        run = self.max_running_small_gpu if small and self.max_running_small_gpu else self.max_running
        tok = self.max_batched_tokens_small_gpu if small and self.max_batched_tokens_small_gpu else self.max_batched_tokens
        return run, tok

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "version": self.version, "graphs": self.graphs,
                "graph_max_batch": self.graph_max_batch, "max_running": self.max_running,
                "max_batched_tokens": self.max_batched_tokens, "chunked_prefill": self.chunked_prefill,
                "mixed_batches": self.mixed_batches, "kv_memory_fraction": self.kv_memory_fraction,
                "kv_fraction_of": self.kv_fraction_of, "kv_block_tokens": self.kv_block_tokens,
                "overlap_scheduling": self.overlap_scheduling, "step_cpu_s": self.step_cpu_s,
                "quant": list(self.quant)}


def _int(rec: dict, key: str, field_: str, lo: int = 0, hi: int = 10_000_000, required: bool = True) -> int | None:
    v = rec.get(key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InputError(f"{field_}.{key}", f"{show(v)} is not a whole number in range", f"an integer from {lo} to {hi:,}")
    return v


def _bool(rec: dict, key: str, field_: str) -> bool:
    v = rec.get(key)
    if not isinstance(v, bool):
        raise InputError(f"{field_}.{key}", f"{show(v)} is not true or false", "true or false")
    return v


def _choice(rec: dict, key: str, field_: str, options) -> str:
    v = rec.get(key)
    if v not in options:
        raise InputError(f"{field_}.{key}", f"{show(v)} is not one of the choices", ", ".join(options))
    return v


def from_record(eid: str, rec: dict, field_: str = "engine") -> EngineProfile:
    if not isinstance(rec, dict):
        raise InputError(field_, f"{show(rec)} is not a table of engine settings", "a TOML/JSON table (see data/engines.toml)")
    frac = rec.get("kv_memory_fraction")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
        raise InputError(f"{field_}.kv_memory_fraction", f"{show(frac)} is not a fraction", "a number in (0, 1]")
    lo, hi = STEP_CPU_BOUNDS_S
    step = rec.get("step_cpu_s", "fitted")
    if step != "fitted" and (isinstance(step, bool) or not isinstance(step, (int, float)) or not lo <= step <= hi):
        raise InputError(f"{field_}.step_cpu_s", f"{show(step)} is out of range", f'"fitted" or seconds in [{lo}, {hi}]')
    quant = rec.get("quant", [])
    if not isinstance(quant, list) or not all(isinstance(q, str) for q in quant):
        raise InputError(f"{field_}.quant", f"{show(quant)} is not a list of formats", 'e.g. ["fp8", "int4"]')
    return EngineProfile(
        id=eid, name=str(rec.get("name", eid)), version=str(rec.get("version", "")),
        graphs=_choice(rec, "graphs", field_, GRAPH_MODES),
        graph_max_batch=_int(rec, "graph_max_batch", field_),
        max_running=_int(rec, "max_running", field_),
        max_batched_tokens=_int(rec, "max_batched_tokens", field_),
        max_running_small_gpu=_int(rec, "max_running_small_gpu", field_, required=False),
        max_batched_tokens_small_gpu=_int(rec, "max_batched_tokens_small_gpu", field_, required=False),
        chunked_prefill=_bool(rec, "chunked_prefill", field_), mixed_batches=_bool(rec, "mixed_batches", field_),
        kv_memory_fraction=float(frac), kv_fraction_of=_choice(rec, "kv_fraction_of", field_, KV_FRACTION_OF),
        kv_block_tokens=_int(rec, "kv_block_tokens", field_, lo=1, hi=1_000_000),
        overlap_scheduling=_bool(rec, "overlap_scheduling", field_),
        step_cpu_s=None if step == "fitted" else float(step), quant=tuple(quant),
        sources=dict(rec.get("sources", {})) if isinstance(rec.get("sources", {}), dict) else {})


def catalog() -> dict:
    return shipped("engines.toml")


def engine_ids() -> list[str]:
    return sorted(catalog())


def get_engine(spec: "str | EngineProfile | None" = None) -> EngineProfile:
    """An engine id (vllm, sglang, tensorrt-llm, llama.cpp, mlx), an engine file path, or None for the default."""
    if isinstance(spec, EngineProfile):
        return spec
    if spec is None:
        spec = DEFAULT_ENGINE
    if not isinstance(spec, str) or not spec:
        raise InputError("engine", f"{show(spec)} is not a name", ", ".join(engine_ids()))
    cat = catalog()
    key = spec.lower()
    if key in cat:
        return from_record(key, cat[key], field_=f"engine[{key}]")
    if looks_like_path(spec):
        rec = read_user_file(spec, "engine")
        return from_record(str(rec.get("id", spec)), rec)
    raise unknown_name("engine", spec, cat)
