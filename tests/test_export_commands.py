"""`tokenmath export` of infer's answer: the engine's launch command (vLLM, SGLang, TensorRT-LLM, as the answer assumed)
and the vllm bench serve command, every flag one of those read off the tools' own argument parsers at a pinned commit
(data/engine_flags.toml), and the figures the benchmark should print."""
import json
import re

import pytest
from click.testing import CliRunner

from tokenmath.analyses.ask import infer, split
from tokenmath.analyses.benchmarks.bench_command import flags_of
from tokenmath.analyses.benchmarks.export import export
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

LLAMA = dict(model="llama-3.1-70b", hardware="h100-sxm", chips=8, concurrency=64, input_len=1000, output_len=500)
DSV3 = dict(model="deepseek-v3", hardware="h200", chips=16, tp=1, ep=16, kv_dtype="fp8", concurrency=512,
            input_len=2000, output_len=1000)


def _flags(argv):
    return [a for a in argv if a.startswith("--")]


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("kw", [LLAMA, DSV3, {**LLAMA, "draft": "llama-3.2-1b", "acceptance": 0.7}],
                         ids=["llama-70b-8xh100", "deepseek-v3-ep16-2xh200-nodes", "llama-70b-draft"])
def test_every_flag_written_is_in_the_pinned_parsers(kw):
    e = export(*split(**kw)[:2])
    serve_flags = {f for t in e["sources"] if t.startswith("vllm serve") for f in flags_of(t).get("flags", [])}
    assert set(_flags(e["serve"])) <= serve_flags
    assert set(_flags(e["bench"])) <= set(flags_of("vllm bench serve")["flags"])
    assert e["serve"][:2] == ["vllm", "serve"] and e["bench"][:3] == ["vllm", "bench", "serve"]


def test_pinned_parser_sources_name_repo_path_and_full_commit():
    for tool in ("vllm serve", "vllm bench serve"):
        f = flags_of(tool)
        assert f["repo"] == "vllm-project/vllm" and re.fullmatch(r"[0-9a-f]{40}", f["commit"]) and f["path"]


def test_llama_70b_on_8_h100_is_tp8_with_the_engine_limits_tokenmath_assumed():
    e = export(*split(**LLAMA)[:2])
    s = e["serve"]
    assert s[2] == "meta-llama/Meta-Llama-3.1-70B"
    assert _value(s, "--tensor-parallel-size") == "8" and "--data-parallel-size" not in s
    assert _value(s, "--max-num-seqs") == "1024" and _value(s, "--max-num-batched-tokens") == "8192"
    assert _value(s, "--kv-cache-dtype") == "auto" and _value(s, "--max-model-len") == "2048"
    b = e["bench"]
    assert _value(b, "--max-concurrency") == "64" and _value(b, "--input-len") == "1000"
    r = infer(*split(**LLAMA)[:2])            # the expected figures are infer's own, under the same load
    assert e["expected"]["mean_tpot_s"] == pytest.approx(r.load.tpot_s)
    assert e["expected"]["output_tokens_per_s"] == pytest.approx(r.load.output_tokens_per_s)


def test_deepseek_v3_on_two_h200_nodes_uses_expert_parallel_and_says_it_spans_nodes():
    e = export(*split(**DSV3)[:2])
    s = e["serve"]
    assert s[2] == "deepseek-ai/DeepSeek-V3"
    assert _value(s, "--data-parallel-size") == "16" and "--enable-expert-parallel" in s
    assert _value(s, "--tensor-parallel-size") == "1" and _value(s, "--kv-cache-dtype") == "fp8"
    assert e["pools"][0]["nodes_per_server"] == 2
    # the head node runs 8 of the 16 data-parallel ranks; the other node's command is in the notes
    assert _value(s, "--data-parallel-size-local") == "8" and any("--headless" in n for n in e["notes"])


def test_a_draft_model_becomes_the_speculative_config_json():
    e = export(*split(**{**LLAMA, "draft": "llama-3.2-1b", "acceptance": 0.7, "spec_k": 3})[:2])
    spec = json.loads(_value(e["serve"], "--speculative-config"))
    assert spec == {"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 3}


def test_an_arrival_rate_is_benchmarked_at_that_rate_and_a_static_batch_as_a_closed_loop():
    e = export(*split(**{**LLAMA, "concurrency": None, "arrival_rate": 2})[:2])
    assert _value(e["bench"], "--request-rate") == "2" and "--max-concurrency" not in e["bench"]
    s = export(*split(model="llama-3.1-8b", hardware="h100-sxm", batch=8)[:2])
    assert _value(s["bench"], "--max-concurrency") == "8" and any("closed loop of 8" in n for n in s["notes"])


def test_the_engine_the_answer_assumed_is_the_one_written():
    e = export(*split(**{**LLAMA, "engine": "sglang"})[:2])
    assert e["serve"][:3] == ["python", "-m", "sglang.launch_server"] and _value(e["serve"], "--tp-size") == "8"
    t = export(*split(**{**LLAMA, "engine": "tensorrt-llm"})[:2])
    assert t["serve"][0] == "trtllm-serve" and _value(t["serve"], "--tp_size") == "8"
    with pytest.raises(InputError, match="assumed vllm, not sglang"):
        export(*split(**LLAMA)[:2], engine="sglang")
    with pytest.raises(InputError, match="llama.cpp"):
        export(*split(**{**LLAMA, "engine": "llama.cpp"})[:2])


def test_cli_prints_serve_bench_expected_and_the_calibrate_step():
    res = CliRunner().invoke(cli, ["export", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--chips", "8",
                                   "--concurrency", "64", "--input-len", "1000", "--output-len", "500"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert any(line.startswith("vllm serve meta-llama/Meta-Llama-3.1-70B --tensor-parallel-size 8") for line in lines)
    assert any(line.startswith("vllm bench serve ") for line in lines)
    assert "Mean TPOT (ms)" in res.output and "tokenmath calibrate tokenmath-check.json --hardware h100-sxm" in res.output
    bad = CliRunner().invoke(cli, ["export", "--engine", "sglangg"])
    assert bad.exit_code == 2 and "sglang" in bad.output
