"""GuideLLM reports read by their writer's keys (analyses/benchmarks/readers_guidellm.py). The fixtures are built from
the writers' keys with illustrative numbers, not real runs (tests/fixtures/benchmarks/SOURCES.md; each says so in its
`_fixture_source` key or header comment): every expected figure below is read from the fixture at the key named
beside it, with the arithmetic the fixture's numbers were chosen by. The real GuideLLM reports the readers were
checked against are kept outside the repository (/work/shared/fixtures/benchmarks/, or $TOKENMATH_REAL_BENCHMARKS;
not committed); the last test reads them when they are there and is skipped when they are not."""
import json
import math
import os

import pytest

from tokenmath.analyses.benchmarks.readers import GUIDELLM, read_file
from tokenmath.base.errors import InputError

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "benchmarks")
V03 = os.path.join(HERE, "guidellm_v03_writer_keys.json")       # guidellm 0.2-0.3 layout, writer @ v0.3.1
V03_YAML = os.path.join(HERE, "guidellm_v03_writer_keys.yaml")  # the same report, yaml.dump as the writer saves it
V2 = os.path.join(HERE, "guidellm_v2_writer_keys.json")          # guidellm 0.7+ (metadata.version 2), writer @ ee7a7745
# the real reports, outside the repository: $TOKENMATH_REAL_BENCHMARKS, else the steering checkout's shared folder
REAL = os.environ.get("TOKENMATH_REAL_BENCHMARKS", os.path.join("/work", "shared", "fixtures", "benchmarks"))


def _write(tmp_path, obj, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def test_v03_report_gives_its_one_synchronous_benchmark_with_the_files_own_numbers():
    (run,) = read_file(V03)
    assert run.tool == GUIDELLM and run.where == "guidellm_v03_writer_keys.json:benchmarks[0]"
    assert run.model_id == "meta-llama/Llama-3.1-8B-Instruct"   # benchmarks[0].worker.backend_model
    assert run.backend == "openai_http"                        # benchmarks[0].worker.backend_type
    assert run.request_rate is None and run.max_concurrency == 1   # args.strategy.type_ "synchronous"
    assert run.completed == 75 and run.num_prompts == 76       # request_totals.successful / .total (1 incomplete)
    assert run.duration_s == 30.0                              # duration
    assert run.input_len == 256.0                              # metrics.prompt_token_count.successful.mean
    assert run.output_len == 128.0                             # metrics.output_token_count.successful.mean
    assert run.request_throughput == pytest.approx(2.5)        # metrics.requests_per_second...: 75 / 30 s
    assert run.output_tokens_per_s == pytest.approx(320.0)     # metrics.output_tokens_per_second...: 75 x 128 / 30 s
    assert run.mean_ttft_s == pytest.approx(19.0e-3)           # metrics.time_to_first_token_ms... 19.0
    assert run.mean_tpot_s == pytest.approx(2.9765625e-3)      # metrics.time_per_output_token_ms...: 127 x 3 / 128
    assert run.mean_itl_s == pytest.approx(3.0e-3)             # metrics.inter_token_latency_ms... 3.0
    assert run.mean_e2e_s == pytest.approx(0.4)                # metrics.request_latency (seconds): 19 + 127 x 3 ms
    assert run.date == "2025-06-15"                            # run_stats.start_time 1750000000 (UTC)
    assert run.extra["measured_concurrency"] == pytest.approx(1.0)   # metrics.request_concurrency: 2.5 x 0.4


def test_the_yaml_report_reads_as_the_json_one():
    (a,), (b,) = read_file(V03), read_file(V03_YAML)
    assert a.to_dict() | {"file": 0, "where": 0} == b.to_dict() | {"file": 0, "where": 0}


def test_v2_report_gives_one_run_per_benchmark_in_order():
    runs = read_file(V2)
    assert [r.where for r in runs] == ["guidellm_v2_writer_keys.json:benchmarks[0]",
                                       "guidellm_v2_writer_keys.json:benchmarks[1]"]
    first, second = runs
    assert first.model_id == "meta-llama/Llama-3.1-8B-Instruct"   # config.backend.model
    assert first.backend == "openai_http"                      # config.backend.kind
    assert first.request_rate == 2.0 and second.request_rate == 4.0   # config.strategy {type_ constant, rate}
    assert first.max_concurrency is None                       # constant: strategy.max_concurrency 512 is no client cap
    assert first.completed == 120 and first.num_prompts == 120   # metrics.request_totals
    assert first.duration_s == 60.0 and second.duration_s == 30.0   # duration: 120 requests at 2 / 4 req/s
    assert first.input_len == 512.0 and second.input_len == 508.0   # metrics.prompt_token_count.successful.mean
    assert first.output_len == 256.0                          # metrics.output_token_count.successful.mean
    assert first.request_throughput == pytest.approx(2.0)      # metrics.requests_per_second...: 120 / 60 s
    assert first.output_tokens_per_s == pytest.approx(512.0)   # metrics.output_tokens_per_second...: 120 x 256 / 60
    assert first.mean_ttft_s == pytest.approx(60.0e-3)         # metrics.time_to_first_token_ms... 60.0
    assert first.mean_e2e_s == pytest.approx(2.1)              # metrics.request_latency: 60 + 255 x 8 ms
    assert second.mean_tpot_s == pytest.approx(8.96484375e-3)  # metrics.time_per_output_token_ms: 255 x 9 / 256
    assert first.date == "2025-10-09"                          # scheduler_metrics.start_time 1760000000 (UTC)
    assert first.extra["guidellm_version"] == "0.7.3"          # metadata.guidellm_version


def test_each_strategy_sets_the_load(tmp_path):
    obj = json.load(open(V2))
    b = obj["benchmarks"][0]
    cases = {"synchronous": ({}, (None, 1)), "concurrent": ({"streams": 16}, (None, 16)),
             "throughput": ({"max_concurrency": 512}, (None, 512)), "poisson": ({"rate": 3.5}, (3.5, None))}
    for kind, (extra, want) in cases.items():
        b["config"]["strategy"] = {"type_": kind, **extra}
        (run,) = read_file(_write(tmp_path, {**obj, "benchmarks": [b]}))
        assert (run.request_rate, run.max_concurrency) == want, kind
    b["config"]["strategy"] = {"type_": "trace"}
    with pytest.raises(InputError) as e:
        read_file(_write(tmp_path, {**obj, "benchmarks": [b]}))
    assert e.value.field == "r.json:benchmarks[0].config.strategy.type_"


@pytest.mark.parametrize("path, change, field, problem", [
    (V2, lambda b: b["metrics"].pop("time_per_output_token_ms"),
     "benchmarks[1].metrics.time_per_output_token_ms", "is missing"),
    (V2, lambda b: b["metrics"]["requests_per_second"]["successful"].update(mean=math.nan),
     "benchmarks[1].metrics.requests_per_second.successful.mean", "not a finite number"),
    (V2, lambda b: b["metrics"]["output_token_count"]["successful"].update(mean=-8.0),
     "benchmarks[1].metrics.output_token_count.successful.mean", "below"),
    (V2, lambda b: b["metrics"]["request_totals"].update(successful="two"),
     "benchmarks[1].metrics.request_totals.successful", "not a finite number"),
    (V03, lambda b: b["request_totals"].update(total=3),
     "benchmarks[1].request_totals.total", "below 75"),
    (V03, lambda b: b.pop("duration"), "benchmarks[1].duration", "is missing"),
])
def test_a_bad_value_in_a_benchmark_is_refused_naming_its_place_and_key(tmp_path, path, change, field, problem):
    obj = json.load(open(path))
    bad = json.loads(json.dumps(obj["benchmarks"][0]))
    change(bad)
    obj["benchmarks"] = [obj["benchmarks"][0], bad]
    with pytest.raises(InputError) as e:
        read_file(_write(tmp_path, obj))
    assert e.value.field == f"r.json:{field}" and problem in e.value.problem


def test_report_layouts_without_a_real_sample_are_refused_naming_what_was_found(tmp_path):
    obj = json.load(open(V2))
    obj["metadata"]["version"] = 1
    obj["metadata"]["guidellm_version"] = "0.5.0"
    with pytest.raises(InputError) as e:
        read_file(_write(tmp_path, obj))
    assert e.value.field == "r.json:1.metadata.version" and "guidellm 0.5.0" in e.value.problem
    del obj["metadata"]
    obj["args"] = obj.pop("config")                            # guidellm 0.4: top-level args, no metadata
    with pytest.raises(InputError, match="guidellm 0.4 report layout"):
        read_file(_write(tmp_path, obj))
    with pytest.raises(InputError, match="is empty"):
        read_file(_write(tmp_path, {"benchmarks": []}))


def test_the_fixtures_say_they_are_not_real_runs():
    for path in (V03, V2):
        assert json.load(open(path))["_fixture_source"].startswith("NOT a real run file"), path
    assert open(V03_YAML).readline().startswith("# NOT a real run file"), V03_YAML


# The real GuideLLM reports the readers were checked against (SOURCES.md): not in the repository, so a clean clone
# (CI) skips this test. Expected figures are those files' own, at the keys named.
REAL_FILES = {"guidellm_v03_stripped.json": 1, "guidellm_v03_stripped.yaml": 1, "guidellm_v2_report.json": 2}


@pytest.mark.skipif(not all(os.path.isfile(os.path.join(REAL, n)) for n in REAL_FILES),
                    reason=f"the real GuideLLM reports are kept outside the repository and are not in {REAL} "
                           "(set TOKENMATH_REAL_BENCHMARKS; see tests/fixtures/benchmarks/SOURCES.md)")
def test_the_real_reports_read_when_they_are_at_hand():
    for name, n in REAL_FILES.items():
        runs = read_file(os.path.join(REAL, name))
        assert len(runs) == n and {r.tool for r in runs} == {GUIDELLM}, name
    (a,), (b,) = read_file(os.path.join(REAL, "guidellm_v03_stripped.json")), \
        read_file(os.path.join(REAL, "guidellm_v03_stripped.yaml"))
    assert a.to_dict() | {"file": 0, "where": 0} == b.to_dict() | {"file": 0, "where": 0}
    assert a.model_id == "example_model" and a.max_concurrency == 1     # worker.backend_model; synchronous
    assert a.completed == 46 and a.num_prompts == 47                    # request_totals.successful / .total
    assert a.output_tokens_per_s == pytest.approx(198.13346751788123)   # metrics.output_tokens_per_second...
    first, second = read_file(os.path.join(REAL, "guidellm_v2_report.json"))
    assert (first.request_rate, second.request_rate) == (2.0, 4.0)      # config.strategy.rate
    assert first.model_id == "e2e-mock-model" and first.extra["guidellm_version"] == "0.8.0.dev18"
    assert first.input_len == 71.5 and second.input_len == 65.5         # metrics.prompt_token_count.successful.mean
