"""Reading the result files of the serving benchmarks people run: the boundary where outside files come in, so every
value is checked here and a bad one is refused naming the file, the line and the key.

Formats, each parsed by the keys its own writer puts in the file:
- `vllm bench serve --save-result` (and benchmarks/benchmark_serving.py before it): one JSON object, or one per
  line with --append-result. Writer: vllm/benchmarks/serve.py, `result_json` = date, endpoint_type/backend,
  model_id, num_prompts, request_rate ("inf" or a number), burstiness, max_concurrency, then the metrics
  (duration, completed, total_input_tokens, total_output_tokens, request_throughput, output_throughput,
  mean/median/std/p99 _ttft_ms, _tpot_ms, _itl_ms ...) (vllm-project/vllm @ def9ce85ba1079af970a58ed3d42dd861ae35d58).
- SGLang `python -m sglang.bench_serving --output-file X.jsonl`: one JSON object appended per run. Writer:
  python/sglang/bench_serving.py, `result` = backend, dataset_name, request_rate, max_concurrency,
  random_input_len, random_output_len, ..., duration, completed, total_input_tokens, total_output_tokens,
  request_throughput, output_throughput, mean_e2e_latency_ms, mean_ttft_ms, mean_tpot_ms, mean_itl_ms,
  concurrency (sgl-project/sglang @ 0033168f0f58b2bc05aa0273bd475d9c01bafb1c).
- NVIDIA AIPerf `profile_export_aiperf.json`: one JSON object per run. Writer: aiperf/exporters/json_exporter.py with
  aiperf/common/models/export_models.py JsonExportData (ai-dynamo/aiperf @ db4f6397d11ee2d4cfbb41f70b2327315163dcf0):
  each metric an object {unit, avg, p50, ...} (request_throughput, output_token_throughput, time_to_first_token,
  inter_token_latency, request_latency, input_sequence_length, output_sequence_length, request_count,
  benchmark_duration), and input_config = the user config's set fields (endpoint.model_names, loadgen.concurrency,
  loadgen.request_rate). GenAI-Perf's export has the same metric objects (JsonExportData says it mimics them); its
  input_config is read where it has the same keys.
Keys a run adds with --metadata (vLLM) are free text, not the schema: they are kept in `extra` and never read.
"""
from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field

from tokenmath.base.errors import InputError

MAX_RESULT_BYTES = 16_000_000       # a result file without --save-detailed is a few kB per run
MAX_RUNS = 10_000
VLLM = "vllm bench serve"
SGLANG = "sglang bench_serving"
AIPERF = "aiperf"
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark run as its file states it (SI units: seconds, tokens, tokens/s)."""
    tool: str                       # VLLM or SGLANG
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

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("tool", "file", "line", "model_id", "backend", "date", "request_rate",
                                           "max_concurrency", "num_prompts", "completed", "duration_s", "input_len",
                                           "output_len", "request_throughput", "output_tokens_per_s", "mean_ttft_s",
                                           "mean_tpot_s", "mean_itl_s", "mean_e2e_s")}
        d["request_rate"] = "inf" if self.request_rate is None else self.request_rate
        return d


def read_file(path: str) -> list[BenchmarkRun]:
    """Every run in one result file (a JSON object, a JSON list of objects, or JSON Lines)."""
    text = _read_text(path)
    name = os.path.basename(path)
    objs: list[tuple[int, object]]
    try:
        whole = json.loads(text)
        objs = list(enumerate(whole, 1)) if isinstance(whole, list) else [(1, whole)]
    except json.JSONDecodeError:
        objs = []
        for k, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                objs.append((k, json.loads(line)))
            except json.JSONDecodeError as e:
                raise InputError(f"{name}:{k}", f"is not JSON ({e.msg} at column {e.colno})",
                                 "a vllm bench serve result (.json) or SGLang bench_serving output (.jsonl)") from None
    if not objs:
        raise InputError(name, "holds no benchmark run", "a result file written by vllm bench serve or bench_serving")
    if len(objs) > MAX_RUNS:
        raise InputError(name, f"holds {len(objs):,} runs", f"at most {MAX_RUNS:,} per file")
    return [parse_run(o, name, k) for k, o in objs]


def read_files(paths) -> list[BenchmarkRun]:
    runs = []
    for p in paths:
        runs += read_file(p)
    return runs


def _read_text(path: str) -> str:
    name = os.path.basename(str(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(name, f"{path} does not exist", "a benchmark result file") from None
    except OSError as e:
        raise InputError(name, f"cannot read {path}: {e.strerror}", "a readable file") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(name, "is not a regular file", "a benchmark result file")
    if st.st_size > MAX_RESULT_BYTES:
        raise InputError(name, f"is {st.st_size:,} bytes", f"a result file under {MAX_RESULT_BYTES:,} bytes "
                         "(save it without --save-detailed)")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_RESULT_BYTES + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(name, "is not UTF-8 text", "a JSON or JSON Lines result file") from None


def detect(obj: dict) -> str | None:
    """Which tool wrote this object (None: neither), from the keys only its writer puts together."""
    if "model_id" in obj and "output_throughput" in obj and ("backend" in obj or "endpoint_type" in obj):
        return VLLM
    if "dataset_name" in obj and "output_throughput" in obj and "random_input_len" in obj:
        return SGLANG
    if all(isinstance(obj.get(k), dict) and "unit" in obj[k] for k in ("request_throughput", "output_token_throughput")):
        return AIPERF
    return None


def parse_run(obj, file: str, line: int) -> BenchmarkRun:
    where = f"{file}:{line}"
    if not isinstance(obj, dict):
        raise InputError(where, f"is a JSON {type(obj).__name__}, not an object", "one run per JSON object")
    tool = detect(obj)
    if tool is None:
        raise InputError(where, "is neither a vllm bench serve result, an SGLang bench_serving line nor an AIPerf "
                         "export (no model_id + output_throughput, no dataset_name + random_input_len + "
                         "output_throughput, no request_throughput / output_token_throughput metric objects)",
                         "a file saved by `vllm bench serve --save-result`, `sglang.bench_serving --output-file` "
                         "or AIPerf (profile_export_aiperf.json)")
    if tool == AIPERF:
        return _parse_aiperf(obj, file, line, where)
    completed = _num(obj, "completed", where, integer=True, low=1)
    dur = _num(obj, "duration", where, low=1e-9)
    tin = _num(obj, "total_input_tokens", where, low=0)
    tout = _num(obj, "total_output_tokens", where, low=1)
    rate = obj.get("request_rate")
    if rate in ("inf", None) or (isinstance(rate, float) and math.isinf(rate)):
        rate = None
    else:
        rate = _num(obj, "request_rate", where, low=1e-12)
    mc = obj.get("max_concurrency")
    mc = None if mc is None else _num(obj, "max_concurrency", where, integer=True, low=1)
    n = obj.get("num_prompts")
    n = None if n is None else _num(obj, "num_prompts", where, integer=True, low=1)
    known = set(_KNOWN[tool])
    return BenchmarkRun(
        tool=tool, file=file, line=line,
        model_id=_text(obj, "model_id", where) if tool == VLLM else None,
        backend=_text(obj, "backend", where) or _text(obj, "endpoint_type", where),
        date=_date(obj.get("date")), request_rate=rate, max_concurrency=mc, num_prompts=n,
        completed=int(completed), duration_s=dur, input_len=tin / completed, output_len=tout / completed,
        request_throughput=_num(obj, "request_throughput", where, low=1e-12),
        output_tokens_per_s=_num(obj, "output_throughput", where, low=1e-12),
        mean_ttft_s=_ms(obj, "mean_ttft_ms", where), mean_tpot_s=_ms(obj, "mean_tpot_ms", where),
        mean_itl_s=_ms(obj, "mean_itl_ms", where),
        mean_e2e_s=_ms(obj, "mean_e2e_latency_ms", where) or _ms(obj, "mean_e2el_ms", where),
        extra={k: v for k, v in obj.items() if k not in known})


_KNOWN = {
    VLLM: ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
           "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens",
           "total_output_tokens", "request_throughput", "request_goodput", "request_goodput:", "output_throughput",
           "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
           *[f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "tpot", "itl", "e2el")]),
    SGLANG: ("tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
             "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
             "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens",
             "total_output_tokens_retokenized", "request_throughput", "input_throughput", "output_throughput",
             "total_throughput", "concurrency", "accept_length",
             *[f"{s}_{m}_ms" for s in ("mean", "median", "std", "p95", "p99") for m in
               ("ttft", "tpot", "itl", "e2e_latency")]),
}


def _num(obj: dict, key: str, where: str, integer: bool = False, low: float = 0.0) -> float:
    if key not in obj:
        raise InputError(f"{where}.{key}", "is missing", "the key the benchmark tool writes")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{where}.{key}", f"{v!r} is not a finite number", "a number")
    if integer and int(v) != v:
        raise InputError(f"{where}.{key}", f"{v!r} is not a whole number", "a count")
    if v < low:
        raise InputError(f"{where}.{key}", f"{v!r} is below {low:g}", f"a number >= {low:g}")
    return float(v)


def _ms(obj: dict, key: str, where: str) -> float | None:
    """A latency in ms as seconds; None when absent or null (a tool that did not measure it)."""
    if obj.get(key) is None:
        return None
    v = _num(obj, key, where, low=0.0)
    return v / 1e3 if v > 0 else None


def _text(obj: dict, key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or len(v) > 500:
        raise InputError(f"{where}.{key}", f"{str(v)[:60]!r} is not a name", "text under 500 characters")
    return v


def _date(v) -> str | None:
    """vLLM writes YYYYMMDD-HHMMSS; anything else is left out (the date only picks vLLM's V0 / V1 engine)."""
    if isinstance(v, str) and len(v) >= 8 and v[:8].isdigit():
        return f"{v[:4]}-{v[4:6]}-{v[6:8]}"
    return None


def _metric(obj: dict, key: str, where: str, required: bool = True) -> tuple[float, str] | None:
    """(avg, unit) of an AIPerf / GenAI-Perf metric object."""
    m = obj.get(key)
    if m is None and not required:
        return None
    if not isinstance(m, dict):
        raise InputError(f"{where}.{key}", "is missing" if m is None else f"{str(m)[:40]!r} is not a metric object",
                         "the {unit, avg, ...} object AIPerf writes")
    v = _num(m, "avg", f"{where}.{key}", low=0.0)
    return v, str(m.get("unit", ""))


def _seconds(obj: dict, key: str, where: str) -> float | None:
    got = _metric(obj, key, where, required=False)
    if got is None:
        return None
    v, unit = got
    if unit not in _TIME_UNITS:
        raise InputError(f"{where}.{key}.unit", f"{unit!r} is not a time unit", ", ".join(_TIME_UNITS))
    return v * _TIME_UNITS[unit] if v > 0 else None


def _parse_aiperf(obj: dict, file: str, line: int, where: str) -> BenchmarkRun:
    cfg = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    load = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else cfg
    endpoint = cfg.get("endpoint") if isinstance(cfg.get("endpoint"), dict) else cfg
    names = endpoint.get("model_names", endpoint.get("model"))
    model = names[0] if isinstance(names, list) and names else names if isinstance(names, str) else None
    conc = load.get("concurrency")
    conc = conc[0] if isinstance(conc, list) and len(conc) == 1 else conc
    mc = None if conc is None else _num({"concurrency": conc}, "concurrency", f"{where}.input_config", True, 1)
    rate = load.get("request_rate")
    rate = None if rate is None else _num({"request_rate": rate}, "request_rate", f"{where}.input_config", low=1e-12)
    count = _metric(obj, "request_count", where)[0]
    dur = _seconds(obj, "benchmark_duration", where)
    isl = _metric(obj, "input_sequence_length", where)[0]
    osl = _metric(obj, "output_sequence_length", where)[0]
    rps = _metric(obj, "request_throughput", where)[0]
    if count < 1 or osl <= 0 or rps <= 0:
        raise InputError(where, "holds no completed request with output tokens", "a run that completed requests")
    return BenchmarkRun(
        tool=AIPERF, file=file, line=line, model_id=model, backend=None, date=None, request_rate=rate,
        max_concurrency=None if mc is None else int(mc), num_prompts=int(count), completed=int(count),
        duration_s=dur if dur else count / rps, input_len=isl, output_len=osl, request_throughput=rps,
        output_tokens_per_s=_metric(obj, "output_token_throughput", where)[0],
        mean_ttft_s=_seconds(obj, "time_to_first_token", where), mean_tpot_s=_seconds(obj, "inter_token_latency", where),
        mean_itl_s=_seconds(obj, "inter_token_latency", where), mean_e2e_s=_seconds(obj, "request_latency", where),
        extra={k: v for k, v in obj.items() if k == "input_config"})
