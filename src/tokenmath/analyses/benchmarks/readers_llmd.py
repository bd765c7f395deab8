"""llm-d benchmark reports, schema v0.1 (`benchmark_report,_*.yaml`, one run each): read by the keys of the schema
their writer validates against, llmdbenchmark/analysis/benchmark_report/schema_v0_1.py (BenchmarkReportV01) with
base.py (Units) at llm-d/llm-d-benchmark @ 8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36:
  version "0.1"; scenario {model {name}, load {name, args, metadata}, host {type [replica | prefill | decode],
  accelerator [{model, count, parallelism {tp, pp, ep, dp}}]}, platform {engine [{name}]}};
  metrics {time {duration, start}, requests {total, failures, incomplete, input_length, output_length},
  latency {time_to_first_token, time_per_output_token, inter_token_latency, request_latency},
  throughput {output_tokens_per_sec, requests_per_sec, total_tokens_per_sec}}
Each statistic is {units, mean, p50, ...}: times in ms or s, per-token times in ms/token or s/token, lengths in count;
any other unit is refused. The load is not part of the schema: scenario.load.args is the harness's own input, copied
by the writer (native_to_br0_1.py). Two harnesses are read there: vllm-benchmark (args request_rate, max_concurrency,
num_prompts, import_vllm_benchmark) and inference-perf (its config.yaml, load.type and load.stages[stage] {rate,
concurrency_level}, with the stage in scenario.load.metadata.stage, import_inference_perf); for any other harness the
run's load is unknown and said so. The accelerator and layout, where scenario.host states them, are kept in the run's
`deployment` for calibrate to use. Other schema versions (0.2, 0.2.1) are refused naming the version.
"""
from __future__ import annotations

from tokenmath.analyses.benchmarks.run import (LLMD, BenchmarkRun, day_of, mapping, number, optional, text)
from tokenmath.base.errors import InputError

VERSION = "0.1"
TIME = {"ms": 1e-3, "s": 1.0}
PER_TOKEN = {"ms/token": 1e-3, "s/token": 1.0}
COUNT = {"count": 1.0}
UNNAMED = ("", "unknown", "auto", "none")
MAX_HOSTS = 100_000


def _stat(parent: dict, key: str, where: str, units: dict, required: bool = True) -> float | None:
    """The mean of one schema Statistics object, in SI units."""
    s = mapping(parent, key, where, required)
    if s is None:
        return None
    w = f"{where}.{key}"
    unit = s.get("units")
    if not isinstance(unit, str) or unit not in units:
        raise InputError(f"{w}.units", f"{str(unit)[:30]!r} is not a unit this statistic takes", ", ".join(units))
    return number(s, "mean", w, low=0.0) * units[unit]


def _load(load: dict, where: str) -> tuple[bool, float | None, int | None, int | None]:
    """(stated, request rate, concurrency cap, requests sent) from the harness's own arguments."""
    harness = load.get("name")
    args = load.get("args") if isinstance(load.get("args"), dict) else {}
    w = f"{where}.args"
    if harness == "vllm-benchmark":
        rate = args.get("request_rate")
        rate = None if rate in (None, "inf") or rate == float("inf") else number(args, "request_rate", w, low=1e-12)
        mc = optional(args, "max_concurrency", w, integer=True, low=1)
        n = optional(args, "num_prompts", w, integer=True, low=1)
        return True, rate, None if mc is None else int(mc), None if n is None else int(n)
    if harness == "inference-perf":
        cfg = mapping(args, "load", w, required=False) or {}
        stages = cfg.get("stages")
        meta = load.get("metadata") if isinstance(load.get("metadata"), dict) else {}
        k = int(optional(meta, "stage", f"{where}.metadata", integer=True) or 0)
        if not isinstance(stages, list) or not 0 <= k < len(stages) or not isinstance(stages[k], dict):
            return False, None, None, None
        sw = f"{w}.load.stages[{k}]"
        if cfg.get("type") == "concurrent":
            return True, None, int(number(stages[k], "concurrency_level", sw, integer=True, low=1)), None
        if cfg.get("type") in ("constant", "poisson"):
            return True, number(stages[k], "rate", sw, low=1e-12), None, None
    return False, None, None, None


def _host(scenario: dict, where: str) -> dict:
    """What scenario.host states: accelerator names, total chips, roles and each replica's parallelism."""
    host = mapping(scenario, "host", where, required=False)
    if host is None:
        return {}
    w = f"{where}.host"
    accs = host.get("accelerator")
    if not isinstance(accs, list) or not accs or len(accs) > MAX_HOSTS:
        raise InputError(f"{w}.accelerator", "is not a list of accelerators", "one {model, count, parallelism} "
                         "object per server")
    replicas = []
    for i, a in enumerate(accs):
        aw = f"{w}.accelerator[{i}]"
        if not isinstance(a, dict):
            raise InputError(aw, f"{str(a)[:40]!r} is not an object", "{model, count, parallelism}")
        name = text(a, "model", aw)
        if not name:
            raise InputError(f"{aw}.model", "is missing", "the accelerator's name (e.g. NVIDIA-H100-80GB-HBM3)")
        par = mapping(a, "parallelism", aw, required=False) or {}
        rep = {"accelerator": name, "count": int(number(a, "count", aw, integer=True, low=1))}
        for d in ("tp", "pp", "ep", "dp"):
            v = optional(par, d, f"{aw}.parallelism", integer=True, low=1)
            rep[d] = 1 if v is None else int(v)
        replicas.append(rep)
    types = host.get("type")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise InputError(f"{w}.type", f"{str(types)[:40]!r} is not a list of server types", "replica, prefill or "
                         "decode, one per accelerator entry")
    names = sorted({r["accelerator"] for r in replicas})
    return {"accelerator": names[0] if len(names) == 1 else None, "accelerators": names,
            "chips": sum(r["count"] for r in replicas), "roles": sorted(set(types)), "replicas": replicas}


def parse_llmd(obj: dict, file: str, line: int, where: str) -> BenchmarkRun:
    """The one run of an llm-d benchmark report v0.1."""
    version = obj.get("version")
    if str(version) != VERSION:
        raise InputError(f"{where}.version", f"{str(version)[:20]!r}: a benchmark report schema tokenmath does not "
                         "read", "version '0.1' (llm-d-benchmark's benchmark_report,_*.yaml)")
    scenario = mapping(obj, "scenario", where)
    metrics = mapping(obj, "metrics", where)
    mw, sw = f"{where}.metrics", f"{where}.scenario"
    time = mapping(metrics, "time", mw)
    dur = number(time, "duration", f"{mw}.time", low=1e-9)
    req = mapping(metrics, "requests", mw)
    rw = f"{mw}.requests"
    total = int(number(req, "total", rw, integer=True, low=1))
    lost = sum(int(optional(req, k, rw, integer=True) or 0) for k in ("failures", "incomplete"))
    if total - lost < 1:
        raise InputError(f"{rw}.total", f"{total} requests, {lost} failed or incomplete", "a run that completed "
                         "requests")
    completed = total - lost
    out_len = _stat(req, "output_length", rw, COUNT)
    if not out_len:
        raise InputError(f"{rw}.output_length.mean", "is 0", "a run that generated tokens")
    lat = mapping(metrics, "latency", mw)
    lw = f"{mw}.latency"
    thr = mapping(metrics, "throughput", mw)
    tw = f"{mw}.throughput"
    number(thr, "total_tokens_per_sec", tw, low=0.0)           # the schema's one required figure: checked, not used
    rps = optional(thr, "requests_per_sec", tw, low=1e-12) or completed / dur
    otps = optional(thr, "output_tokens_per_sec", tw, low=1e-12) or out_len * rps
    load = mapping(scenario, "load", sw)
    stated, rate, mc, sent = _load(load, f"{sw}.load")
    cfg = (load.get("args") or {}).get("load") if isinstance(load.get("args"), dict) else None
    arrivals = cfg.get("type") if isinstance(cfg, dict) and load.get("name") == "inference-perf" else None
    model = text(mapping(scenario, "model", sw), "name", f"{sw}.model")
    server = (load.get("args") or {}).get("server") if isinstance(load.get("args"), dict) else None
    if (model or "").lower() in UNNAMED and load.get("name") == "inference-perf" and isinstance(server, dict):
        model = text(server, "model_name", f"{sw}.load.args.server")           # inference-perf's own config
    platform = mapping(scenario, "platform", sw, required=False) or {}
    engines = platform.get("engine") if isinstance(platform.get("engine"), list) else []
    backend = engines[0].get("name") if engines and isinstance(engines[0], dict) else None
    return BenchmarkRun(
        tool=LLMD, file=file, line=line, model_id=None if (model or "").lower() in UNNAMED else model,
        backend=backend if isinstance(backend, str) and len(backend) <= 500 else None, date=day_of(time.get("start")),
        request_rate=rate, max_concurrency=mc, num_prompts=sent or total, completed=completed, duration_s=dur,
        input_len=_stat(req, "input_length", rw, COUNT), output_len=out_len, request_throughput=rps,
        output_tokens_per_s=otps, mean_ttft_s=_stat(lat, "time_to_first_token", lw, TIME) or None,
        mean_tpot_s=_stat(lat, "time_per_output_token", lw, PER_TOKEN, required=False) or None,
        mean_itl_s=_stat(lat, "inter_token_latency", lw, PER_TOKEN, required=False) or None,
        mean_e2e_s=_stat(lat, "request_latency", lw, TIME, required=False) or None,
        load_stated=stated, deployment=_host(scenario, sw),
        extra={"harness": load.get("name"), "arrivals": arrivals})
