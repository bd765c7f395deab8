"""Serving-engine profiles: the defaults of vLLM, SGLang, TensorRT-LLM, llama.cpp and MLX that shape a step's time
and the batch an engine really runs (data/engines.toml, every value with the code or document it was read from).
A user may pass an engine file of the same schema (TOML or JSON) wherever an engine name is accepted; "none"
(resolve_engine) is no engine at all: the engine-free step physics, as before profiles existed.

How a profile enters a prediction (engine/static_batch.py, engine/memory.py):
- decode step: a batch the engine does not replay from a captured graph (graphs_at) is launched kernel by kernel
  from the CPU, so the step lasts at least kernels x the CPU launch time per kernel; the per-step CPU work
  (step_cpu_s) is hidden behind the device with overlap_scheduling, else added to it;
- prefill: chunked into ceil(tokens / max_batched_tokens) steps when chunked_prefill is on;
- max batch: the KV cache gets kv_memory_fraction of the device's memory (kv_fraction_of "total") or of what the
  weights and activations leave ("free"), in whole KV blocks, and at most max_running sequences per instance."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tokenmath.base.errors import InputError, closest, show, unknown_name
from tokenmath.specs.catalog import looks_like_path, read_user_file, shipped
from tokenmath.specs.engine_releases import check_release, numbers, split

NO_ENGINE = "none"          # the engine-free step: no scheduler limits, no launch or per-step CPU costs
GRAPH_MODES = ("all", "batch1", "none")
KV_FRACTION_OF = ("total", "free")
# bounds of the one fitted value, step_cpu_s: a step's CPU work outside kernel launches (scheduling, sampling,
# detokenization) is between nothing and a few ms (vLLM V0.5: 29% of a ~13 ms step, vLLM blog 2024-09-05)
STEP_CPU_BOUNDS_S = (0.0, 0.005)
# bounds of step_cpu_per_seq_s, the part of a step's CPU work that grows with the running sequences (each one's
# scheduling, sampling, stop checks and detokenization in the engine's Python): ASSUMED, no per-sequence figure is
# published; 50 us is a few thousand interpreted bytecodes per sequence per step, a generous ceiling
STEP_CPU_PER_SEQ_BOUNDS_S = (0.0, 50e-6)
# CPU time to launch one kernel when no graph is replayed, used where the chip's kernel model gives none: the low end
# of the 5-20 us that PyTorch traces show per launch (HolisticTraceAnalysis docs, cuda_kernel_launch_stats.rst @0c2146a,
# shared/reference/efficiency.md E15), so that the launch floor is never overstated (a C++ launcher, E16: 80 tiny
# kernels in 260 us eager = 3.3 us each, sits below it)
LAUNCH_CPU_S = 5e-6
# every key an engine record may hold (a user file's other keys are refused, with the closest names)
FIELDS = ("id", "name", "version", "graphs", "graph_max_batch", "graph_max_batch_large_tp", "max_running",
          "max_running_small_gpu", "max_running_speculative", "max_batched_tokens", "max_batched_tokens_small_gpu",
          "chunked_prefill",
          "mixed_batches", "kv_memory_fraction", "kv_fraction_of", "kv_block_tokens", "overlap_scheduling",
          "step_cpu_s", "step_cpu_min_s", "step_cpu_max_s", "step_cpu_per_seq_s", "quant", "sources",
          "releases_from", "earlier_lines")
LARGE_TP = 4                # SGLang captures larger decode graphs from this tensor-parallel degree up


@dataclass(frozen=True)
class EarlierLine:
    """A release line before the profile's own (releases_from) that published measurements describe: answered with
    the profile's defaults and the residuals fitted on that line's rows (specs/engine_releases.py)."""
    start: str              # its first release ("0.6")
    calibration: str        # the calibration group its rows form (data/calibration.toml [[physics]] group)
    describes: str          # what the line was ("the V0 engine")


@dataclass(frozen=True)
class EngineProfile:
    """A serving engine's scheduler and memory settings (tokens, sequences, fractions; step CPU time in s)."""
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
    sources: dict = field(default_factory=dict, hash=False)
    graph_max_batch_large_tp: int | None = None       # SGLang: larger decode graphs from tp >= LARGE_TP
    step_cpu_per_seq_s: float = 0.0                   # CPU per running sequence per step (validate fits it; 0: none)
    max_running_speculative: int | None = None        # SGLang: its cap on running requests when speculating, unset
    releases_from: str = ""          # the first release line the profile's defaults hold for (specs/engine_releases.py)
    release: str = ""                # the release an answer was asked for (`--engine sglang@0.5`), "" when none
    earlier_lines: tuple = ()        # EarlierLine: release lines before releases_from with measured rows of their own
    line: "EarlierLine | None" = None   # the earlier line the release asked for falls on (None: the profile's own)

    @property
    def calibration_key(self) -> str:
        """The engine group its fitted residuals are read under: the earlier line's (vllm-v0), else the id."""
        return self.line.calibration if self.line is not None else self.id

    @property
    def step_cpu(self) -> float:
        """Seconds of CPU work per step outside kernel launches: 0 until fitted."""
        return 0.0 if self.step_cpu_s is None else self.step_cpu_s

    def graphs_at(self, batch, tp=1):
        """Whether a step of `batch` sequences (tokens) replays a captured graph (arrays broadcast)."""
        import numpy as np
        b = np.asarray(batch)
        if self.graphs == "none":
            return np.zeros(b.shape, bool)
        if self.graphs == "batch1":
            return b <= 1
        if self.graph_max_batch_large_tp:
            limit = np.where(np.asarray(tp) >= LARGE_TP, self.graph_max_batch_large_tp, self.graph_max_batch)
            return b <= limit
        return b <= self.graph_max_batch

    def limits_for(self, memory_bytes: float) -> tuple[int, int]:
        """(max_running, max_batched_tokens) on a device with this much memory (vLLM's defaults differ below 70 GiB)."""
        small = memory_bytes < 70 * 2**30
        run = self.max_running_small_gpu if small and self.max_running_small_gpu else self.max_running
        tok = self.max_batched_tokens_small_gpu if small and self.max_batched_tokens_small_gpu else self.max_batched_tokens
        return run, tok

    @property
    def assumed_version(self) -> str:
        """The engine version an answer assumes: the release asked for, else the profile's own description."""
        return self.release or self.version

    def describe(self) -> dict:
        """{id, name, version}: what every answer states about the engine it assumed; with `line` where the release
        falls on an earlier line, answered with that line's fitted residuals."""
        d = {"id": self.id, "name": self.name, "version": self.assumed_version or None}
        if self.line is not None:
            d["line"] = {"from": self.line.start, "describes": self.line.describes,
                         "calibration_group": self.line.calibration}
        return d

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "version": self.version, "releases_from": self.releases_from,
                "release": self.release, "graphs": self.graphs,
                "graph_max_batch": self.graph_max_batch, "max_running": self.max_running,
                "max_batched_tokens": self.max_batched_tokens, "chunked_prefill": self.chunked_prefill,
                "mixed_batches": self.mixed_batches, "kv_memory_fraction": self.kv_memory_fraction,
                "kv_fraction_of": self.kv_fraction_of, "kv_block_tokens": self.kv_block_tokens,
                "overlap_scheduling": self.overlap_scheduling, "step_cpu_s": self.step_cpu_s,
                "quant": list(self.quant)}


def engine_dict(engine: "EngineProfile | None") -> dict:
    """The `engine` entry of an answer: {id, name}; {"id": "none", ...} for the engine-free step."""
    if engine is None:
        return {"id": NO_ENGINE, "name": "no serving engine (engine-free step: no scheduler limits, launch or CPU costs)"}
    return engine.describe()


def engine_label(engine: "EngineProfile | None") -> str:
    """One line for text answers: which engine's defaults the figures assume."""
    if engine is None:
        return "engine: none (engine-free step: no scheduler limits, kernel-launch or per-step CPU costs)"
    e = engine
    graphs = {"none": "no graphs (every kernel launched from the CPU)", "batch1": "graphs at batch 1 only"}.get(
        e.graphs, f"graphs up to batch {e.graph_max_batch}"
        + (f" ({e.graph_max_batch_large_tp} from tp {LARGE_TP})" if e.graph_max_batch_large_tp else ""))
    run = (f"at most {e.max_running:,} running sequences" if e.max_running else "no cap on running sequences beyond memory")
    if e.max_running_small_gpu and e.max_running_small_gpu != e.max_running:
        run += f" ({e.max_running_small_gpu:,} below 70 GiB)"
    chunks = (f"prefill chunks of {e.max_batched_tokens:,} tokens" if e.chunked_prefill and e.max_batched_tokens
              else "unchunked prefill")
    cpu = "per-step CPU time not fitted (0)" if e.step_cpu_s is None else f"per-step CPU {e.step_cpu_s * 1e3:g} ms"
    if e.step_cpu_s is not None and e.step_cpu_per_seq_s:
        cpu += f" + {e.step_cpu_per_seq_s * 1e6:g} us per running sequence"
    ver = f" {e.release}" if e.release else ""         # the profile's own reading is in the answer's JSON
    if e.line is not None:
        ver += (f" ({e.line.describes}: these defaults with the CPU, per-layer and scale residuals fitted on its own "
                f"measurements, group {e.line.calibration})")
    return (f"engine: {e.name}{ver} defaults ({graphs}; KV {e.kv_memory_fraction:g} of {e.kv_fraction_of} memory in "
            f"{e.kv_block_tokens}-token blocks; {run}; {chunks}; {'overlapped' if e.overlap_scheduling else 'serial'} "
            f"scheduling; {cpu})")


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


def _unknown_keys(rec: dict, field_: str) -> None:
    for k in rec:
        if k not in FIELDS:
            near = closest(str(k), FIELDS)
            raise InputError(f"{field_}.{k}", "is not an engine setting",
                             (f"did you mean {', '.join(near)}? " if near else "") + "see data/engines.toml for the schema")


def _step_cpu(rec: dict, field_: str) -> tuple[float | None, tuple[float, float]]:
    """step_cpu_s ("fitted" or seconds) and its bounds, each inside STEP_CPU_BOUNDS_S."""
    lo, hi = STEP_CPU_BOUNDS_S
    b = []
    for key, default in (("step_cpu_min_s", lo), ("step_cpu_max_s", hi)):
        v = rec.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise InputError(f"{field_}.{key}", f"{show(v)} is out of range", f"seconds in [{lo}, {hi}]")
        b.append(float(v))
    if b[0] > b[1]:
        raise InputError(f"{field_}.step_cpu_min_s", f"{b[0]:g} exceeds step_cpu_max_s {b[1]:g}", "min <= max")
    step = rec.get("step_cpu_s", "fitted")
    if step != "fitted" and (isinstance(step, bool) or not isinstance(step, (int, float)) or not b[0] <= step <= b[1]):
        raise InputError(f"{field_}.step_cpu_s", f"{show(step)} is out of range", f'"fitted" or seconds in [{b[0]}, {b[1]}]')
    return (None if step == "fitted" else float(step)), (b[0], b[1])


def _per_seq(rec: dict, field_: str) -> float:
    v = rec.get("step_cpu_per_seq_s", 0.0)
    lo, hi = STEP_CPU_PER_SEQ_BOUNDS_S
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise InputError(f"{field_}.step_cpu_per_seq_s", f"{show(v)} is out of range", f"seconds in [{lo}, {hi}]")
    return float(v)


def from_record(eid: str, rec: dict, field_: str = "engine") -> EngineProfile:
    """A profile from one table of data/engines.toml or a user file (every key checked, errors name it)."""
    if not isinstance(rec, dict):
        raise InputError(field_, f"{show(rec)} is not a table of engine settings", "a TOML/JSON table (see data/engines.toml)")
    _unknown_keys(rec, field_)
    frac = rec.get("kv_memory_fraction")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
        raise InputError(f"{field_}.kv_memory_fraction", f"{show(frac)} is not a fraction", "a number in (0, 1]")
    step, bounds = _step_cpu(rec, field_)
    quant = rec.get("quant", [])
    if not isinstance(quant, list) or not all(isinstance(q, str) for q in quant):
        raise InputError(f"{field_}.quant", f"{show(quant)} is not a list of formats", 'e.g. ["fp8", "int4"]')
    sources = rec.get("sources", {})
    if not isinstance(sources, dict):
        raise InputError(f"{field_}.sources", f"{show(sources)} is not a table", "a table of setting -> where it was read")
    return EngineProfile(
        id=eid, name=str(rec.get("name", eid)), version=str(rec.get("version", "")),
        graphs=_choice(rec, "graphs", field_, GRAPH_MODES),
        graph_max_batch=_int(rec, "graph_max_batch", field_),
        graph_max_batch_large_tp=_int(rec, "graph_max_batch_large_tp", field_, required=False),
        max_running=_int(rec, "max_running", field_),
        max_batched_tokens=_int(rec, "max_batched_tokens", field_),
        max_running_small_gpu=_int(rec, "max_running_small_gpu", field_, required=False),
        max_running_speculative=_int(rec, "max_running_speculative", field_, lo=1, required=False),
        max_batched_tokens_small_gpu=_int(rec, "max_batched_tokens_small_gpu", field_, required=False),
        chunked_prefill=_bool(rec, "chunked_prefill", field_), mixed_batches=_bool(rec, "mixed_batches", field_),
        kv_memory_fraction=float(frac), kv_fraction_of=_choice(rec, "kv_fraction_of", field_, KV_FRACTION_OF),
        kv_block_tokens=_int(rec, "kv_block_tokens", field_, lo=1, hi=1_000_000),
        overlap_scheduling=_bool(rec, "overlap_scheduling", field_),
        step_cpu_s=step, step_cpu_bounds_s=bounds, quant=tuple(quant), step_cpu_per_seq_s=_per_seq(rec, field_),
        sources={str(k): str(v) for k, v in sources.items()}, releases_from=_release_line(rec, field_),
        earlier_lines=_earlier_lines(rec, field_))


def _release_line(rec: dict, field_: str) -> str:
    v = rec.get("releases_from", "")
    if not isinstance(v, str):
        raise InputError(f"{field_}.releases_from", f"{show(v)} is not a release", 'a release line such as "0.5"')
    if v:
        numbers(v, f"{field_}.releases_from")
    return v


def _earlier_lines(rec: dict, field_: str) -> tuple:
    v = rec.get("earlier_lines", [])
    want = 'a list of tables {start = "0.6", calibration = "<group>", describes = "<what it was>"}'
    if not isinstance(v, list):
        raise InputError(f"{field_}.earlier_lines", f"{show(v)} is not a list", want)
    out = []
    for i, x in enumerate(v):
        f = f"{field_}.earlier_lines[{i}]"
        if not isinstance(x, dict) or set(x) != {"start", "calibration", "describes"} or not all(
                isinstance(x[k], str) and x[k] for k in x):
            raise InputError(f, f"{show(x)} is not an earlier release line", want)
        numbers(x["start"], f"{f}.start")
        out.append(EarlierLine(x["start"], x["calibration"], x["describes"]))
    return tuple(out)


def catalog() -> dict:
    return shipped("engines.toml")


def engine_ids() -> list[str]:
    return sorted(catalog())


def get_engine(spec: "str | EngineProfile | None" = None) -> EngineProfile:
    """An engine id (vllm, sglang, tensorrt-llm, llama.cpp, mlx), an engine file path, or None for the default.
    An engine file holds one engine's settings at its top level, or one table of them (as in data/engines.toml)."""
    if isinstance(spec, EngineProfile):
        return spec
    if spec is None:
        from tokenmath.specs.question.deployment import DEFAULT_ENGINE
        spec = DEFAULT_ENGINE
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("engine", f"{show(spec)} is not a name", ", ".join(engine_ids()) + f", {NO_ENGINE} or a file")
    cat = catalog()
    key = spec.strip().lower()
    if key in cat:
        return from_record(key, cat[key], field_=f"engine[{key}]")
    if "@" in key and not looks_like_path(spec):          # sglang@0.5: the profile, for that release
        eid, release = split(key)
        if eid == NO_ENGINE:
            raise InputError("engine", f"{show(spec)}: the engine-free step has no releases", f"{NO_ENGINE}")
        if eid not in cat:
            raise unknown_name("engine", eid, [*cat, NO_ENGINE])
        prof = from_record(eid, cat[eid], field_=f"engine[{eid}]")
        release, line = check_release(prof, release)
        return replace(prof, release=release, line=line)
    if looks_like_path(spec):
        rec = read_user_file(spec, "engine")
        tables = [k for k, v in rec.items() if isinstance(v, dict) and k != "sources"]
        if "graphs" not in rec and len(tables) == 1:     # [my-engine] ... : the one table is the engine
            return from_record(str(rec[tables[0]].get("id", tables[0])), rec[tables[0]], field_=f"engine.{tables[0]}")
        return from_record(str(rec.get("id", spec)), rec)
    raise unknown_name("engine", spec, [*cat, NO_ENGINE])


def resolve_engine(spec: "str | EngineProfile | None") -> "EngineProfile | None":
    """None or "none": no engine (the engine-free step); else get_engine(spec)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == NO_ENGINE):
        return None
    return get_engine(spec)


def __getattr__(name):
    """DEFAULT_ENGINE, the one default engine (Python, CLI, web), lives in specs/question/deployment.py; read from
    there on first use, so that a sweep does not import the question types (~10 ms of its first call)."""
    if name == "DEFAULT_ENGINE":
        from tokenmath.specs.question.deployment import DEFAULT_ENGINE
        return DEFAULT_ENGINE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
