"""GuideLLM reports (`guidellm benchmark --output-path report.json`, or .yaml): one report, one run per benchmark (a
sweep writes one per strategy), each read by the keys GuideLLM's own writer puts in the file.

Two layouts are read, each checked against a real file written by GuideLLM (kept outside the repository; the tests'
fixtures are built from the writers' keys: tests/fixtures/benchmarks/SOURCES.md):
- guidellm 0.2 and 0.3 (the report is only `benchmarks`): writer src/guidellm/benchmark/benchmark.py
  (GenerativeBenchmark: args.strategy, run_stats, worker.backend_model, request_totals, duration, metrics) and
  output.py (GenerativeBenchmarksReport) at vllm-project/guidellm v0.3.1 @ 121dcdc454e57c98ae26f86db2ed984f3c6d14a7.
- guidellm 0.7 and later (`metadata.version` 2): writer src/guidellm/benchmark/schemas/report.py
  (GenerativeBenchmarksReport = metadata {version, guidellm_version}, config, benchmarks), schemas/benchmark.py
  (GenerativeBenchmark: config {strategy, backend {kind, model}}, scheduler_metrics, metrics, duration) and
  schemas/metrics.py (GenerativeMetrics: request_totals, requests_per_second, ...) at vllm-project/guidellm
  @ ee7a77457ba668b4b5ccb40f110518829893b36a.
In both, each metric is a StatusDistributionSummary {successful, errored, incomplete, total}, each {mean, median,
percentiles, ...}: a run's figure is the mean over its successful requests, the figure GuideLLM's console prints
(outputs/console.py). The strategy (scheduler/strategies.py) gives the load: synchronous (one request at a time),
concurrent (`streams` users), throughput (all at once, up to `max_concurrency`), constant / poisson (`rate` req/s).
Refused, naming what was found: the guidellm 0.4 layout (top-level `args`, no `metadata`) and `metadata.version` 1
(guidellm 0.5 and 0.6), of which no real file was found to check a reader against.
"""
from __future__ import annotations

from tokenmath.analyses.benchmarks.run import GUIDELLM, BenchmarkRun, day_of, mapping, number, optional, text
from tokenmath.base.errors import InputError

MAX_BENCHMARKS = 10_000
READ = "a GuideLLM report of guidellm 0.2-0.3 (benchmarks only) or 0.7+ (metadata.version 2)"
LOADS = ("synchronous", "concurrent", "throughput", "constant", "poisson")


def layout(obj: dict, where: str) -> str:
    """'legacy' (guidellm 0.2-0.3) or 'v2' (0.7+); any other layout is refused naming what the file holds."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        version = meta.get("version")
        if version == 2 and not isinstance(version, bool):
            return "v2"
        made_by = meta.get("guidellm_version")
        raise InputError(f"{where}.metadata.version", f"{str(version)[:20]!r} (guidellm {str(made_by)[:20]}) is a "
                         "GuideLLM report schema tokenmath does not read", READ)
    first = obj["benchmarks"][0] if obj["benchmarks"] else None
    if isinstance(first, dict) and "args" in first and "run_stats" in first:
        return "legacy"
    if "args" in obj:
        raise InputError(f"{where}.args", "is the guidellm 0.4 report layout (top-level args, no metadata), which "
                         "tokenmath does not read", READ)
    raise InputError(f"{where}.benchmarks", "holds benchmarks of no GuideLLM layout tokenmath knows (no args + "
                     "run_stats, no metadata.version)", READ)


def report_runs(obj: dict, file: str, line: int) -> list[BenchmarkRun]:
    """Every benchmark of a GuideLLM report, one run each, in the report's order."""
    where = f"{file}:{line}"
    benches = obj["benchmarks"]
    if not benches:
        raise InputError(f"{where}.benchmarks", "is empty", "a report with at least one finished benchmark")
    if len(benches) > MAX_BENCHMARKS:
        raise InputError(f"{where}.benchmarks", f"holds {len(benches):,} benchmarks", f"at most {MAX_BENCHMARKS:,}")
    kind = layout(obj, where)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    version = meta.get("guidellm_version") if isinstance(meta.get("guidellm_version"), str) else None
    return [_benchmark(b, kind, file, line, i, version) for i, b in enumerate(benches)]


def parse_report(obj: dict, file: str, line: int) -> BenchmarkRun:
    """The one run of a report with a single benchmark."""
    runs = report_runs(obj, file, line)
    if len(runs) != 1:
        raise InputError(f"{file}:{line}.benchmarks", f"holds {len(runs)} runs", "read the file with read_file")
    return runs[0]


def _mean(metrics: dict, key: str, where: str, low: float = 0.0) -> float:
    """The mean over successful requests of one GuideLLM metric (a StatusDistributionSummary)."""
    summary = mapping(metrics, key, f"{where}.metrics")
    ok = mapping(summary, "successful", f"{where}.metrics.{key}")
    return number(ok, "mean", f"{where}.metrics.{key}.successful", low=low)


def _load(strategy: dict, where: str) -> tuple[float | None, int | None]:
    """(request rate, client's concurrency cap) of a GuideLLM scheduling strategy."""
    kind = text(strategy, "type_", where)
    if kind == "synchronous":
        return None, 1
    if kind == "concurrent":
        return None, int(number(strategy, "streams", where, integer=True, low=1))
    if kind == "throughput":
        mc = optional(strategy, "max_concurrency", where, integer=True, low=1)
        return None, None if mc is None else int(mc)
    if kind in ("constant", "poisson"):
        return number(strategy, "rate", where, low=1e-12), None
    raise InputError(f"{where}.type_", f"{str(kind)[:40]!r} is a load tokenmath cannot price from a report",
                     ", ".join(LOADS))


def _benchmark(b, kind: str, file: str, line: int, i: int, version: str | None) -> BenchmarkRun:
    part = f"benchmarks[{i}]"
    where = f"{file}:{part}"
    if not isinstance(b, dict):
        raise InputError(where, f"is a {type(b).__name__}, not a benchmark object", "the objects GuideLLM writes")
    metrics = mapping(b, "metrics", where)
    if kind == "legacy":
        args = mapping(b, "args", where)
        strategy = mapping(args, "strategy", f"{where}.args")
        s_where = f"{where}.args.strategy"
        totals = mapping(b, "request_totals", where)
        t_where = f"{where}.request_totals"
        worker = mapping(b, "worker", where, required=False) or {}
        model = text(worker, "backend_model", f"{where}.worker")
        backend = text(worker, "backend_type", f"{where}.worker")
        stats = b.get("run_stats")
        start = stats.get("start_time") if isinstance(stats, dict) else None
    else:
        config = mapping(b, "config", where)
        strategy = mapping(config, "strategy", f"{where}.config")
        s_where = f"{where}.config.strategy"
        totals = mapping(metrics, "request_totals", f"{where}.metrics")
        t_where = f"{where}.metrics.request_totals"
        back = mapping(config, "backend", f"{where}.config", required=False) or {}
        model = text(back, "model", f"{where}.config.backend")
        backend = text(back, "kind", f"{where}.config.backend")
        sm = b.get("scheduler_metrics")
        start = sm.get("start_time") if isinstance(sm, dict) else None
    rate, mc = _load(strategy, s_where)
    completed = int(number(totals, "successful", t_where, integer=True, low=1))
    total = int(number(totals, "total", t_where, integer=True, low=completed))
    ms = {k: _mean(metrics, k, where) for k in ("time_to_first_token_ms", "time_per_output_token_ms",
                                                "inter_token_latency_ms")}
    e2e = _mean(metrics, "request_latency", where)
    conc = metrics.get("request_concurrency")
    conc = conc.get("successful") if isinstance(conc, dict) else None
    return BenchmarkRun(
        tool=GUIDELLM, file=file, line=line, part=part,
        model_id=None if model in (None, "", "None") else model, backend=backend, date=day_of(start),
        request_rate=rate, max_concurrency=mc, num_prompts=total, completed=completed,
        duration_s=number(b, "duration", where, low=1e-9),
        input_len=_mean(metrics, "prompt_token_count", where),
        output_len=_mean(metrics, "output_token_count", where, low=1e-9),
        request_throughput=_mean(metrics, "requests_per_second", where, low=1e-12),
        output_tokens_per_s=_mean(metrics, "output_tokens_per_second", where, low=1e-12),
        mean_ttft_s=ms["time_to_first_token_ms"] / 1e3 or None,
        mean_tpot_s=ms["time_per_output_token_ms"] / 1e3 or None,
        mean_itl_s=ms["inter_token_latency_ms"] / 1e3 or None, mean_e2e_s=e2e or None,
        extra={"strategy": strategy.get("type_"), "arrivals": strategy.get("type_"), "guidellm_version": version,
               "measured_concurrency": conc.get("mean") if isinstance(conc, dict) else None})
