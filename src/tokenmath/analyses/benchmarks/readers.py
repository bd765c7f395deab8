"""Reading the result files of the serving benchmarks people run: the boundary where outside files come in, so every
value is checked here (run.py's checks) and a bad one is refused naming the file, the line (or the run's place in a
report) and the key.

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
- GuideLLM reports (one report, many runs) and llm-d benchmark reports (v0.1): readers_guidellm.py and
  readers_llmd.py, each with its writer quoted.
Keys a run adds with --metadata (vLLM) are free text, not the schema: they are kept in `extra` and never read.
A file is JSON (one object, a list of objects, or one object per line) or YAML (GuideLLM and llm-d write both).
"""
from __future__ import annotations

import json
import math
import os
import stat

from tokenmath.analyses.benchmarks.readers_guidellm import parse_report, report_runs
from tokenmath.analyses.benchmarks.readers_llmd import parse_llmd
from tokenmath.analyses.benchmarks.run import (AIPERF, GUIDELLM, LLMD, SGLANG, TIME_UNITS, VLLM, BenchmarkRun,
                                               millis, number, text)
from tokenmath.base.errors import InputError

__all__ = ["AIPERF", "GUIDELLM", "LLMD", "SGLANG", "VLLM", "BenchmarkRun", "detect", "parse_run", "read_file",
           "read_files"]
MAX_RESULT_BYTES = 16_000_000       # a result file without --save-detailed is a few kB per run
MAX_RUNS = 10_000
WRITERS = ("a file saved by `vllm bench serve --save-result`, `sglang.bench_serving --output-file`, AIPerf "
           "(profile_export_aiperf.json), `guidellm benchmark --output-path` or llm-d-benchmark (benchmark report v0.1)")


def read_file(path: str) -> list[BenchmarkRun]:
    """Every run in one result file: a JSON object, a JSON list of objects, JSON Lines, or a YAML document."""
    raw = _read_text(path)
    name = os.path.basename(path)
    objs = _documents(raw, name)
    if not objs:
        raise InputError(name, "holds no benchmark run", WRITERS)
    runs: list[BenchmarkRun] = []
    for k, o in objs:
        runs += parse_document(o, name, k)
        if len(runs) > MAX_RUNS:
            raise InputError(name, f"holds over {MAX_RUNS:,} runs", f"at most {MAX_RUNS:,} per file")
    return runs


def _json_int(s: str):
    """json.loads' parse_int: an integer literal of thousands of digits (Python refuses to parse one over 4,300) is
    read as a float (inf), which the key's own check then refuses as out of range."""
    return int(s) if len(s) <= 4000 else float(s)


def _json(text: str, name: str, line: int):
    """json.loads of a file (line 0) or of one line; JSONDecodeError for text that is not JSON, InputError for JSON
    nested too deep to parse (RecursionError: exit 1 before, found by benchmarks/fuzz_files.py)."""
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise InputError(f"{name}:{line or 1}", "is nested too deeply to read",
                         "a vllm bench serve result (.json) or SGLang bench_serving output (.jsonl)") from None


def read_files(paths) -> list[BenchmarkRun]:
    runs = []
    for p in paths:
        runs += read_file(p)
    return runs


def _documents(raw: str, name: str) -> list[tuple[int, object]]:
    """(line, object) pairs: the whole text as one JSON value, else one JSON value per line, else one YAML document."""
    if not raw.strip():
        return []
    try:
        whole = _json(raw, name, 0)
        return list(enumerate(whole, 1)) if isinstance(whole, list) else [(1, whole)]
    except json.JSONDecodeError as first:
        if not raw.lstrip().startswith(("{", "[")):
            return [(1, _yaml(raw, name, first))]
    objs = []
    for k, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            objs.append((k, _json(line, name, k)))
        except json.JSONDecodeError as e:
            raise InputError(f"{name}:{k}", f"is not JSON ({e.msg} at column {e.colno})",
                             "a vllm bench serve result (.json) or SGLang bench_serving output (.jsonl)") from None
    return objs


def _yaml(raw: str, name: str, json_error: json.JSONDecodeError):
    """A YAML document (GuideLLM's report.yaml, llm-d's benchmark_report,_*.yaml): safe_load, plain data only."""
    import yaml
    try:
        doc = yaml.safe_load(raw)
    except RecursionError:
        raise InputError(f"{name}:1", "is nested too deeply to read", "a JSON, JSON Lines or YAML result file") \
            from None
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark is not None else 1
        raise InputError(f"{name}:{line}", f"is neither JSON ({json_error.msg}) nor YAML ({e.problem})",
                         "a JSON, JSON Lines or YAML result file") from None
    except yaml.YAMLError as e:
        raise InputError(name, f"is neither JSON nor YAML ({str(e)[:80]})", "a JSON, JSON Lines or YAML result file") \
            from None
    if not isinstance(doc, (dict, list)):
        raise InputError(f"{name}:1", f"is not JSON ({json_error.msg} at line {json_error.lineno}) and its YAML is a "
                         f"{type(doc).__name__}, not an object", "a JSON, JSON Lines or YAML result file")
    return doc


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
        raise InputError(name, "is not UTF-8 text", "a JSON, JSON Lines or YAML result file") from None


def detect(obj: dict) -> str | None:
    """Which tool wrote this object (None: none of them), from the keys only its writer puts together."""
    if "model_id" in obj and "output_throughput" in obj and ("backend" in obj or "endpoint_type" in obj):
        return VLLM
    if "dataset_name" in obj and "output_throughput" in obj and "random_input_len" in obj:
        return SGLANG
    if all(isinstance(obj.get(k), dict) and "unit" in obj[k] for k in ("request_throughput", "output_token_throughput")):
        return AIPERF
    if isinstance(obj.get("benchmarks"), list):
        return GUIDELLM
    if "version" in obj and isinstance(obj.get("scenario"), dict) and isinstance(obj.get("metrics"), dict):
        return LLMD
    return None


def parse_document(obj, file: str, line: int) -> list[BenchmarkRun]:
    """The runs of one JSON object or YAML document: a GuideLLM report holds one per benchmark, the others one."""
    if isinstance(obj, dict) and detect(obj) == GUIDELLM:
        return report_runs(obj, file, line)
    return [parse_run(obj, file, line)]


def parse_run(obj, file: str, line: int) -> BenchmarkRun:
    """The one run an object describes (a GuideLLM report's single benchmark included)."""
    where = f"{file}:{line}"
    if not isinstance(obj, dict):
        raise InputError(where, f"is a JSON {type(obj).__name__}, not an object", "one run per JSON object")
    tool = detect(obj)
    if tool is None:
        raise InputError(where, "is not a result any supported tool writes (no model_id + output_throughput, no "
                         "dataset_name + random_input_len + output_throughput, no request_throughput / "
                         "output_token_throughput metric objects, no benchmarks list, no version + scenario + "
                         "metrics)", WRITERS)
    if tool == AIPERF:
        return _parse_aiperf(obj, file, line, where)
    if tool == LLMD:
        return parse_llmd(obj, file, line, where)
    if tool == GUIDELLM:
        return parse_report(obj, file, line)
    completed = number(obj, "completed", where, integer=True, low=1)
    dur = number(obj, "duration", where, low=1e-9)
    tin = number(obj, "total_input_tokens", where, low=0)
    tout = number(obj, "total_output_tokens", where, low=1)
    rate = obj.get("request_rate")
    if rate in ("inf", None) or (isinstance(rate, float) and math.isinf(rate)):
        rate = None
    else:
        rate = number(obj, "request_rate", where, low=1e-12)
    mc = obj.get("max_concurrency")
    mc = None if mc is None else number(obj, "max_concurrency", where, integer=True, low=1)
    n = obj.get("num_prompts")
    n = None if n is None else number(obj, "num_prompts", where, integer=True, low=1)
    known = set(_KNOWN[tool])
    return BenchmarkRun(
        tool=tool, file=file, line=line,
        model_id=text(obj, "model_id", where) if tool == VLLM else None,
        backend=text(obj, "backend", where) or text(obj, "endpoint_type", where),
        date=_date(obj.get("date")), request_rate=rate, max_concurrency=mc, num_prompts=n,
        completed=int(completed), duration_s=dur, input_len=tin / completed, output_len=tout / completed,
        request_throughput=number(obj, "request_throughput", where, low=1e-12),
        output_tokens_per_s=number(obj, "output_throughput", where, low=1e-12),
        mean_ttft_s=millis(obj, "mean_ttft_ms", where), mean_tpot_s=millis(obj, "mean_tpot_ms", where),
        mean_itl_s=millis(obj, "mean_itl_ms", where),
        mean_e2e_s=millis(obj, "mean_e2e_latency_ms", where) or millis(obj, "mean_e2el_ms", where),
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
    v = number(m, "avg", f"{where}.{key}", low=0.0)
    return v, str(m.get("unit", ""))


def _seconds(obj: dict, key: str, where: str) -> float | None:
    got = _metric(obj, key, where, required=False)
    if got is None:
        return None
    v, unit = got
    if unit not in TIME_UNITS:
        raise InputError(f"{where}.{key}.unit", f"{unit!r} is not a time unit", ", ".join(TIME_UNITS))
    return v * TIME_UNITS[unit] if v > 0 else None


def _parse_aiperf(obj: dict, file: str, line: int, where: str) -> BenchmarkRun:
    cfg = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    load = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else cfg
    endpoint = cfg.get("endpoint") if isinstance(cfg.get("endpoint"), dict) else cfg
    names = endpoint.get("model_names", endpoint.get("model"))
    model = names[0] if isinstance(names, list) and names else names if isinstance(names, str) else None
    conc = load.get("concurrency")
    conc = conc[0] if isinstance(conc, list) and len(conc) == 1 else conc
    mc = None if conc is None else number({"concurrency": conc}, "concurrency", f"{where}.input_config", True, 1)
    rate = load.get("request_rate")
    rate = None if rate is None else number({"request_rate": rate}, "request_rate", f"{where}.input_config", low=1e-12)
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
