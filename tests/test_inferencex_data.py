"""The shipped InferenceX runs (data/inferencex_runs.csv.gz): every row sourced and dated, units sane, known rows
equal to the values in the source file they were read from, and the file shipped with the package."""
from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from tokenmath.analyses.calibration.inferencex import (DATA, engine_and_orchestrator, engine_version, load_runs,
                                                       read_rows, skip_reason, techniques)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rows():
    return read_rows()


def test_thousands_of_rows_every_one_sourced_and_dated(rows):
    assert len(rows) >= 2000
    for r in rows:
        assert r["run_url"].startswith("https://github.com/SemiAnalysisAI/InferenceX/actions/runs/")
        assert r["source_repo"] and len(r["source_commit"]) == 40
        if r["source_repo"] == "gminneci/mantile":      # the CI run's own artifact (benchmarks/add_inferencex_raw.py)
            run = r["run_url"].rsplit("/", 1)[1]
            assert r["source_file"] == f"reconcile/sources/inferencemax/raw/run_{run}/agg_bmk.json"
        else:
            assert r["source_file"].startswith("packages/app/cypress/fixtures/api/benchmarks")
        assert "2025-01-01" <= r["date"] <= "2026-12-31"


def test_gpt_oss_runs_come_from_their_ci_artifacts_and_read_as_mxfp4(rows):
    from tokenmath.analyses.calibration.inferencex import weight_dtype
    g = [r for r in rows if r["model"] == "gptoss"]
    # 322 runs of gpt-oss-120b (vLLM 0.13 on B200 / H100 / H200, TensorRT-LLM 1.2.0rc2 on B200, Dynamo over it on
    # GB200, ATOM on MI355X), dated 2025-12-17 .. 2026-01-14 by the runs their artifacts came from
    assert len(g) == 322 and {r["source_repo"] for r in g} == {"gminneci/mantile"}
    assert {r["hardware"] for r in g} == {"b200", "gb200", "h100", "h200", "mi355x"}
    assert min(r["date"] for r in g) == "2025-12-17" and max(r["date"] for r in g) == "2026-01-14"
    assert all(weight_dtype(r) == "mxfp4" for r in g)
    assert weight_dtype({"model": "dsr1", "precision": "fp4"}) == "fp4"
    # one record checked against its artifact (run 20308883467, TensorRT-LLM on 2 x B200, 8K / 1K, 4 users)
    r = _find(g, framework="trt", decode_tp=2, decode_ep=1, isl=8192, osl=1024, conc=4, date="2025-12-17",
              decode_dp_attention=False)
    assert r["tput_per_gpu"] == pytest.approx(6056.9541297702435) and r["gpus"] == 2
    assert r["image"] == "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2"


def test_units_sane(rows):
    for r in rows:
        assert r["isl"] in (1024, 8192) and r["osl"] in (1024, 8192), r
        assert 1 <= r["conc"] <= 65536
        assert 0 < r["tput_per_gpu"] < 1e6            # tokens/s per GPU
        assert 0 < r["median_intvty"] < 2000          # tokens/s per user
        assert 0 < r["median_ttft"] < r["median_e2el"] < 3600      # seconds
        assert 0 < r["median_tpot"] < 1.0
        # interactivity is the inverse of the time per output token, within the spread of two medians
        assert 0.5 < r["median_intvty"] * r["median_tpot"] < 2.0
        assert r["gpus"] == (r["num_prefill_gpu"] + r["num_decode_gpu"] if r["disagg"] else r["decode_tp"])
        if not r["disagg"]:
            assert (r["prefill_tp"], r["prefill_ep"]) == (r["decode_tp"], r["decode_ep"])


def test_no_row_twice(rows):
    keys = [tuple(r[k] for k in ("hardware", "framework", "model", "precision", "spec_method", "disagg",
                                 "prefill_tp", "prefill_ep", "decode_tp", "decode_ep", "num_prefill_gpu",
                                 "num_decode_gpu", "decode_num_workers", "prefill_dp_attention",
                                 "decode_dp_attention", "isl", "osl", "conc", "date", "run_url")) for r in rows]
    assert len(keys) == len(set(keys))


def _find(rows, **kw):
    got = [r for r in rows if all(r[k] == v for k, v in kw.items())]
    assert len(got) == 1, (kw, len(got))
    return got[0]


def test_known_rows_match_their_source(rows):
    # packages/app/cypress/fixtures/api/benchmarks.json, first record (fixture commit 528c4146 of the app)
    r = _find(rows, hardware="mi355x", framework="sglang", precision="fp4", spec_method="none", decode_tp=4,
              isl=1024, osl=1024, conc=4, date="2026-06-11")
    assert r["tput_per_gpu"] == 198.9447984579421
    assert r["median_intvty"] == 103.64816793368249
    assert r["median_ttft"] == 0.10217383736744523
    assert r["image"] == "lmsysorg/sglang:v0.5.12-rocm700-mi35x"
    assert r["run_url"] == "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/27213443242/attempts/1"
    # benchmarks-history.json, first record: no image in the history file
    r = _find(rows, hardware="mi355x", framework="sglang", precision="fp4", spec_method="none", decode_tp=4,
              isl=1024, osl=1024, conc=4, date="2025-12-14")
    assert r["tput_per_gpu"] == 126.93455963275083
    assert r["median_tpot"] == 0.015415842808565214
    assert r["run_url"] == "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/20200037154/attempts/2"


def test_reading_of_the_published_configuration():
    assert engine_and_orchestrator("dynamo-sglang") == ("sglang", "dynamo")
    assert engine_and_orchestrator("mori-sglang") == ("sglang", "mori")
    assert engine_and_orchestrator("trt") == ("trt", "")
    assert engine_version("lmsysorg/sglang:v0.5.8.post1-cu130", "sglang", "") == "0.5.8.post1"
    assert engine_version("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14", "trt", "") == "1.3.0rc14"
    assert engine_version("rocm/sgl-dev:sglang-0.5.7-rocm700-mi35x-mori-fp4-0122", "sglang", "mori") == "0.5.7"
    assert engine_version("rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3", "atom",
                          "") == "0.1.3"
    assert engine_version("", "sglang", "") == "unknown"
    runs = load_runs()
    assert {r.model_id for r in runs} == {"deepseek-v3", "gpt-oss-120b"}
    assert all(r.chip_id for r in runs)
    dyn = [r for r in runs if "ai-dynamo" in r.row["image"]]
    assert dyn and all(r.generation.startswith("dynamo@") for r in dyn)
    for r in runs:
        assert techniques(r)
        reason = skip_reason(r)
        assert reason is None or isinstance(reason, str)


def test_shipped_with_the_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["tokenmath"]
    assert "data/*.csv.gz" in globs
    assert (ROOT / "src" / "tokenmath" / "data" / DATA).is_file()
    assert all(math.isfinite(r["tput_per_gpu"]) for r in read_rows())


def test_runs_are_predicted_at_the_lengths_the_client_drew():
    """InferenceX's client draws input and output lengths uniformly from [0.8 L, L] (RANDOM_RANGE_RATIO 0.8 in its
    benchmark workflows; benchmark_serving.py sample_random_requests: randint(int(0.8 L), L + 1))."""
    from tokenmath.analyses.calibration.inferencex import RANGE_RATIO, lengths, mean_length
    assert RANGE_RATIO == 0.8
    assert lengths(1024) == "uniform:819-1024" and mean_length(1024) == (819 + 1024) / 2
    assert lengths(8192) == "uniform:6553-8192"
