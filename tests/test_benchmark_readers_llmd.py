"""llm-d benchmark reports (v0.1) read by their schema's keys (analyses/benchmarks/readers_llmd.py), checked against a
real report (tests/fixtures/benchmarks/SOURCES.md: the TPU v7x report of llm-d's P/D guide); every expected figure
below is copied from the fixture at the key named beside it. Format detection across all the fixtures is here too."""
import json
import os

import pytest
import yaml

from tokenmath.analyses.benchmarks.readers import AIPERF, GUIDELLM, LLMD, SGLANG, VLLM, detect, read_file
from tokenmath.analyses.benchmarks.stated import hardware_id, layout_of
from tokenmath.base.errors import InputError

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "benchmarks")
REPORT = os.path.join(HERE, "llmd_report_v01_tpu7x.yaml")
# one server entry in the shape schema_v0_1.py's Host / HostAccelerator declares (the real report states no host:
# its run was against an existing stack); the tests that need a host add it to a copy of the real report
H100_REPLICA = {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "parallelism": {"tp": 2, "pp": 1, "ep": 1, "dp": 1}}


def _report():
    return yaml.safe_load(open(REPORT))


def _write(tmp_path, obj, name="r.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(obj))
    return str(p)


def test_real_v01_report_reads_as_one_run_with_the_files_own_numbers():
    (run,) = read_file(REPORT)
    assert run.tool == LLMD and run.where == "llmd_report_v01_tpu7x.yaml:1"
    # scenario.model.name is "unknown"; the inference-perf config the writer copied names it (load.args.server)
    assert run.model_id == "Qwen/Qwen3.5-397B-A17B-FP8"
    assert run.completed == 120 and run.num_prompts == 120    # metrics.requests.total 120, failures 0
    assert run.duration_s == pytest.approx(117.41250333702192)  # metrics.time.duration
    assert run.input_len == pytest.approx(1050.175)            # metrics.requests.input_length.mean (count)
    assert run.output_len == pytest.approx(682.775)            # metrics.requests.output_length.mean
    assert run.request_throughput == pytest.approx(0.7854697273006106)   # metrics.throughput.requests_per_sec
    assert run.output_tokens_per_s == pytest.approx(536.2990930576744)   # metrics.throughput.output_tokens_per_sec
    assert run.mean_ttft_s == pytest.approx(2.7547412356943823)          # latency.time_to_first_token, units s
    assert run.mean_tpot_s == pytest.approx(0.03709993095523411)         # latency.time_per_output_token, s/token
    assert run.mean_e2e_s == pytest.approx(40.75879854830758)            # latency.request_latency, units s
    # the load: inference-perf's load.type constant, stage 0 (scenario.load.metadata.stage) at rate 1.0
    assert run.request_rate == 1.0 and run.max_concurrency is None and run.load_stated
    assert run.deployment == {}                                # no scenario.host in this report


def test_units_are_converted_and_an_unknown_unit_is_refused(tmp_path):
    obj = _report()
    obj["metrics"]["latency"]["time_to_first_token"].update(units="ms", mean=2754.7412356943823)
    obj["metrics"]["latency"]["time_per_output_token"].update(units="ms/token", mean=37.09993095523411)
    (run,) = read_file(_write(tmp_path, obj))
    assert run.mean_ttft_s == pytest.approx(2.7547412356943823)
    assert run.mean_tpot_s == pytest.approx(0.03709993095523411)
    obj["metrics"]["latency"]["time_per_output_token"]["units"] = "ms"      # a time, not a time per token
    with pytest.raises(InputError) as e:
        read_file(_write(tmp_path, obj))
    assert e.value.field == "r.yaml:1.metrics.latency.time_per_output_token.units"


@pytest.mark.parametrize("change, field, problem", [
    (lambda o: o["metrics"]["time"].pop("duration"), "metrics.time.duration", "is missing"),
    (lambda o: o["metrics"]["throughput"].update(requests_per_sec=float("nan")),
     "metrics.throughput.requests_per_sec", "not a finite number"),
    (lambda o: o["metrics"]["requests"].update(total=-5), "metrics.requests.total", "below"),
    (lambda o: o["metrics"]["requests"]["input_length"].update(mean="long"),
     "metrics.requests.input_length.mean", "not a finite number"),
    (lambda o: o["metrics"]["requests"].update(failures=120), "metrics.requests.total", "failed or incomplete"),
    (lambda o: o.update(version="0.2"), "version", "schema tokenmath does not read"),
    (lambda o: o["scenario"].update(host={"type": ["replica"], "accelerator": [{"model": "H100", "count": 0}]}),
     "scenario.host.accelerator[0].count", "below 1"),
])
def test_a_bad_value_is_refused_naming_file_line_and_key(tmp_path, change, field, problem):
    obj = _report()
    change(obj)
    with pytest.raises(InputError) as e:
        read_file(_write(tmp_path, obj))
    assert e.value.field == f"r.yaml:1.{field}" and problem in e.value.problem


def test_a_report_saved_as_json_reads_the_same_and_broken_yaml_names_its_line(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_report()))
    assert read_file(str(p))[0].request_throughput == read_file(REPORT)[0].request_throughput
    q = tmp_path / "broken.yaml"
    q.write_text("version: '0.1'\nmetrics:\n  time: [1, 2\n")
    with pytest.raises(InputError) as e:
        read_file(str(q))
    assert e.value.field.startswith("broken.yaml:") and "YAML" in e.value.problem


def test_a_harness_whose_arguments_are_not_read_leaves_the_load_unstated(tmp_path):
    obj = _report()
    obj["scenario"]["load"] = {"name": "guidellm", "args": {"whatever": 1}}
    (run,) = read_file(_write(tmp_path, obj))
    assert not run.load_stated and run.request_rate is None and run.model_id is None
    obj["scenario"]["load"] = {"name": "vllm-benchmark", "args": {"request_rate": "inf", "max_concurrency": 64,
                                                                  "num_prompts": 640}}
    (run,) = read_file(_write(tmp_path, obj))
    assert run.load_stated and run.request_rate is None and run.max_concurrency == 64 and run.num_prompts == 640


def test_the_host_block_is_kept_as_the_stated_deployment(tmp_path):
    obj = _report()
    obj["scenario"]["host"] = {"type": ["replica"] * 4, "accelerator": [H100_REPLICA] * 4}
    (run,) = read_file(_write(tmp_path, obj))
    dep = run.deployment
    assert dep["accelerator"] == "NVIDIA-H100-80GB-HBM3" and dep["chips"] == 8 and dep["roles"] == ["replica"]
    assert layout_of(dep)[0] == {"chips": 8, "tp": 2, "pp": 1, "ep": None, "dp": 4}
    pd = {**dep, "roles": ["decode", "prefill"]}
    assert layout_of(pd)[0] is None and "disaggregation" in layout_of(pd)[1]


@pytest.mark.parametrize("name, hid", [
    ("NVIDIA-H100-80GB-HBM3", "h100-sxm"), ("H100", "h100-sxm"), ("NVIDIA-H100-PCIe", "h100-pcie"),
    ("NVIDIA-H100-NVL", None), ("NVIDIA-H200", "h200"), ("NVIDIA-A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA-A100-SXM4-40GB", "a100-40gb"), ("NVIDIA-A100-PCIE-40GB", None), ("NVIDIA-L40S", "l40s"),
    ("NVIDIA-B200", "b200"), ("NVIDIA-GB200", "gb200-nvl72"), ("AMD-Instinct-MI300X", "mi300x"),
    ("tpu7x", "tpu-v7"), ("auto", None), ("", None),
])
def test_accelerator_names_map_to_catalog_chips_only_when_sure(name, hid):
    assert hardware_id(name) == hid


def test_each_fixture_is_detected_as_its_own_format_and_no_other():
    want = {"vllm_llmd_l40s_llama32_3b.jsonl": VLLM, "sglang_bench_serving_writer_keys.jsonl": SGLANG,
            "aiperf_writer_keys.json": AIPERF, "guidellm_v03_writer_keys.json": GUIDELLM,
            "guidellm_v03_writer_keys.yaml": GUIDELLM, "guidellm_v2_writer_keys.json": GUIDELLM,
            "llmd_report_v01_tpu7x.yaml": LLMD}
    for name, tool in want.items():
        path = os.path.join(HERE, name)
        text = open(path).read()
        obj = yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text.splitlines()[0]) \
            if name.endswith(".jsonl") else json.loads(text)
        assert detect(obj) == tool, name
        assert {r.tool for r in read_file(path)} == {tool}, name
