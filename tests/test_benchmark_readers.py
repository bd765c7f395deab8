"""Benchmark result files parsed by their writers' schemas (analyses/benchmarks/readers.py), checked against the
fixture files' own numbers (tests/fixtures/benchmarks/SOURCES.md says where each file comes from)."""
import json
import os

import pytest

from tokenmath.analyses.benchmarks.readers import SGLANG, VLLM, read_file, read_files
from tokenmath.base.errors import InputError

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "benchmarks")
VLLM_FILE = os.path.join(HERE, "vllm_llmd_l40s_llama32_3b.jsonl")
SGLANG_FILE = os.path.join(HERE, "sglang_bench_serving_writer_keys.jsonl")


def _objects(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def test_real_vllm_appended_results_give_one_run_per_line_with_the_files_own_numbers():
    runs = read_file(VLLM_FILE)
    objs = _objects(VLLM_FILE)
    assert len(runs) == len(objs) == 9
    for run, obj in zip(runs, objs):
        assert run.tool == VLLM
        assert run.model_id == "meta-llama/Llama-3.2-3B-Instruct"
        assert run.completed == obj["completed"]
        assert run.input_len == pytest.approx(obj["total_input_tokens"] / obj["completed"])
        assert run.output_len == pytest.approx(obj["total_output_tokens"] / obj["completed"])
        assert run.output_tokens_per_s == obj["output_throughput"]
        assert run.mean_tpot_s == pytest.approx(obj["mean_tpot_ms"] / 1e3)
        assert run.mean_ttft_s == pytest.approx(obj["mean_ttft_ms"] / 1e3)
        assert run.date == "2025-05-30"
    first = runs[0]
    assert first.request_rate == 10.0 and first.max_concurrency is None and first.num_prompts == 300
    assert first.input_len == 999.0                       # 299700 / 300
    assert first.mean_tpot_s == pytest.approx(0.013710971568239172)
    assert runs[2].request_rate is None                   # "inf": every request sent at once
    assert runs[0].extra["gpu"] == "4xNVIDIA_L40S"        # --metadata keys kept aside, never read


def test_a_single_vllm_result_object_reads_as_one_run(tmp_path):
    obj = _objects(VLLM_FILE)[4]
    p = tmp_path / "one.json"
    p.write_text(json.dumps(obj, indent=2))
    (run,) = read_file(str(p))
    assert run.line == 1 and run.request_rate == 30.0 and run.output_tokens_per_s == obj["output_throughput"]


def test_sglang_bench_serving_line_parses_by_its_writer_keys():
    (run,) = read_file(SGLANG_FILE)
    obj = _objects(SGLANG_FILE)[0]
    assert run.tool == SGLANG and run.backend == "sglang" and run.model_id is None
    assert run.completed == 996 and run.request_rate == 2.0
    assert run.output_len == pytest.approx(218257 / 996)
    assert run.mean_e2e_s == pytest.approx(obj["mean_e2e_latency_ms"] / 1e3)
    assert run.mean_itl_s is None                          # 0.0 ms in the table: not measured


def test_a_bad_value_is_refused_naming_file_line_and_key(tmp_path):
    objs = _objects(VLLM_FILE)[:2]
    objs[1]["completed"] = "many"
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(json.dumps(o) for o in objs))
    with pytest.raises(InputError) as e:
        read_file(str(p))
    assert e.value.field == "bad.jsonl:2.completed"


def test_a_missing_key_and_a_foreign_file_are_refused(tmp_path):
    obj = _objects(VLLM_FILE)[0]
    del obj["duration"]
    p = tmp_path / "nodur.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="duration"):
        read_file(str(p))
    q = tmp_path / "other.json"
    q.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError, match="is not a result any supported tool writes"):
        read_file(str(q))
    r = tmp_path / "broken.jsonl"
    r.write_text('{"a": 1}\n{not json\n')
    with pytest.raises(InputError) as e:
        read_file(str(r))
    assert e.value.field == "broken.jsonl:2"


def test_files_too_large_or_missing_are_refused_before_parsing(tmp_path, monkeypatch):
    from tokenmath.analyses.benchmarks import readers
    monkeypatch.setattr(readers, "MAX_RESULT_BYTES", 1000)
    with pytest.raises(InputError, match="bytes"):
        read_file(VLLM_FILE)
    with pytest.raises(InputError, match="does not exist"):
        read_files([str(tmp_path / "absent.json")])


def test_aiperf_export_parses_metric_objects_and_the_user_config():
    from tokenmath.analyses.benchmarks.readers import AIPERF
    path = os.path.join(HERE, "aiperf_writer_keys.json")
    (run,) = read_file(path)
    obj = json.load(open(path))
    assert run.tool == AIPERF and run.model_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert run.max_concurrency == 64 and run.request_rate is None and run.completed == 640
    assert run.input_len == 1000.0 and run.output_len == 500.0
    assert run.output_tokens_per_s == obj["output_token_throughput"]["avg"]
    assert run.mean_ttft_s == pytest.approx(0.180) and run.mean_tpot_s == pytest.approx(0.0206)
    assert run.duration_s == pytest.approx(104.9) and run.mean_e2e_s == pytest.approx(10.48)


def test_aiperf_metric_in_an_unknown_time_unit_is_refused(tmp_path):
    obj = json.load(open(os.path.join(HERE, "aiperf_writer_keys.json")))
    obj["time_to_first_token"]["unit"] = "fortnights"
    p = tmp_path / "a.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(InputError) as e:
        read_file(str(p))
    assert e.value.field == "a.json:1.time_to_first_token.unit"
