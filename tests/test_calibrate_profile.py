"""`tokenmath calibrate`: the user's runs fitted on half, the held-out half predicted before and after, a fit on a
bound refused, a profile saved and applied by infer --profile (analyses/benchmarks/calibrate.py, profiles.py)."""
import json
import os

import pytest
from click.testing import CliRunner

from tokenmath.analyses.benchmarks import calibrate as C
from tokenmath.analyses.benchmarks.readers import parse_run, read_file
from tokenmath.analyses.calibration.predict import predict_inference
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "benchmarks")
REAL = os.path.join(HERE, "vllm_llmd_l40s_llama32_3b.jsonl")
GIVEN = {"hardware": "l40s", "chips": 4, "dp": 4}
# interior grid points of compute_scale, bw_scale and step_cpu_s (parameters.py): a fit that finds them is not at a bound
TRUTH = {"kernel_flops": 0.7, "kernel_bw": 0.8, "step_cpu_s": 1e-3, "layer_overhead_s": 0.0,
         "step_cpu_per_seq_s": 0.0}
KEY = {"decode_step_s": "mean_tpot_ms", "ttft_s": "mean_ttft_ms", "output_tokens_per_s": "output_throughput"}


@pytest.fixture
def synthetic(tmp_path):
    """Runs shaped like the real file's (same model, chips, lengths), at client concurrency caps 1-512, whose TPOT,
    TTFT and throughput are tokenmath's own prediction at TRUTH: a fit must find TRUTH again."""
    base = json.loads(open(REAL).readline())
    model, out = C.profile_model(), []
    for i, n in enumerate((1, 4, 16, 32, 64, 128, 256, 512)):
        obj = dict(base, max_concurrency=n, request_rate="inf", num_prompts=max(4 * n, 64))
        for row in C.rows_of(C.setup_of(parse_run(obj, "s", i + 1), GIVEN)):
            v = float(predict_inference(row, model).evaluate(TRUTH))
            obj[KEY[row["metric"]]] = v * 1e3 if KEY[row["metric"]].endswith("_ms") else v
        out.append(json.dumps(obj))
    p = tmp_path / "synthetic.jsonl"
    p.write_text("\n".join(out) + "\n")
    return str(p)


def test_real_llmd_runs_improve_on_held_out_half_but_are_refused_at_a_bound():
    r = C.calibrate(read_file(REAL), GIVEN)
    ho = r["heldout"]
    assert [x["split"] for x in r["runs"]] == ["fit", "held-out"] * 4 + ["fit"]
    assert ho["calibrated_median_ape"] < ho["default_median_ape"]
    assert ho["default_median_ape"] == pytest.approx(0.078, abs=0.01)     # as measured: 7.8% -> 3.6%
    assert ho["calibrated_median_ape"] == pytest.approx(0.036, abs=0.01)
    assert r["values"]["bw_scale"] == 1.0 and r["values"]["step_cpu_s"] == 0.0
    assert "bw_scale sits at its upper bound" in r["refused"]
    assert r["runs"][0]["concurrency"] == 31                # Little's law: 8.37 req/s x 3.74 s
    assert any("Little's law" in a for a in r["runs"][0]["assumed"])


def test_wrong_chip_pushes_the_fit_out_of_bounds_and_is_refused():
    r = C.calibrate(read_file(REAL), {**GIVEN, "hardware": "h100-sxm"})
    assert r["refused"] and "lower bound 0.4" in r["refused"]


def test_round_trip_finds_the_values_the_runs_were_made_with(synthetic):
    r = C.calibrate(read_file(synthetic), GIVEN)
    assert r["refused"] is None
    assert r["values"]["compute_scale"] == 0.7 and r["values"]["bw_scale"] == 0.8
    assert r["values"]["step_cpu_s"] == pytest.approx(1e-3)
    assert r["heldout"]["default_median_ape"] > 0.1
    assert r["heldout"]["calibrated_median_ape"] < 1e-6


def test_hardware_is_required_and_runs_of_different_deployments_are_refused(tmp_path):
    runs = read_file(REAL)
    with pytest.raises(InputError, match="do not name the chips"):
        C.calibrate(runs, {})
    with pytest.raises(InputError, match="at least 2 runs"):
        C.calibrate(runs[:1], GIVEN)


def test_cli_saves_a_profile_that_infer_applies_beside_the_default(synthetic, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    res = runner.invoke(cli, ["calibrate", synthetic, "--hardware", "l40s", "--chips", "4", "--dp", "4",
                              "--profile", "mine"])
    assert res.exit_code == 0, res.output
    assert "profile 'mine' saved" in res.output
    path = tmp_path / "cache" / "profiles" / "mine.toml"
    assert "compute_scale = 0.7" in path.read_text()
    args = ["infer", "-m", "llama-3.2-3b", "-H", "l40s", "--chips", "4", "--dp", "4", "--batch", "64",
            "--input-len", "999", "--output-len", "270"]
    out = runner.invoke(cli, args + ["--profile", "mine", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["profile"] == "mine" and "profile 'mine'" in d["efficiency"]["source"]
    assert d["decode_step_s"] > d["uncalibrated"]["decode_step_s"]      # 0.8 of the bandwidth: slower
    text = runner.invoke(cli, args + ["--profile", "mine"])
    assert "uncalibrated vs profile 'mine'" in text.output
    wrong = runner.invoke(cli, ["infer", "-H", "h100-sxm", "--profile", "mine"])
    assert wrong.exit_code == 2 and "fitted on l40s" in wrong.output


def test_every_serving_question_takes_the_profile_the_same_way_on_the_cli_and_in_python(synthetic, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    assert runner.invoke(cli, ["calibrate", synthetic, "--hardware", "l40s", "--chips", "4", "--dp", "4",
                               "--profile", "mine"]).exit_code == 0
    args = ["fleet", "-m", "llama-3.2-3b", "-H", "l40s", "--demand", "2000", "--max-chips", "4", "--json"]
    plain = json.loads(runner.invoke(cli, args).output)
    res = runner.invoke(cli, args + ["--profile", "mine"])
    assert res.exit_code == 0, res.output
    mine = json.loads(res.output)
    # the profile's 0.7 of the compute and 0.8 of the bandwidth ceilings (the synthetic runs' truth) in place of the
    # shipped calibration: the fleet's answer moves
    assert mine["cost_per_mtok_output_request_usd"] != pytest.approx(plain["cost_per_mtok_output_request_usd"])
    import tokenmath
    py = tokenmath.fleet("llama-3.2-3b", "l40s", demand=2000, max_chips=4, profile="mine").to_dict()
    assert py["cost_per_mtok_output_request_usd"] == pytest.approx(mine["cost_per_mtok_output_request_usd"])
    wrong = runner.invoke(cli, ["plan", "-m", "llama-3.2-3b", "--system", "hgx-h100", "--profile", "mine"])
    assert wrong.exit_code == 2 and "fitted on l40s" in wrong.output


def test_cli_refuses_and_saves_nothing_when_the_fit_is_at_a_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path / "cache"))
    res = CliRunner().invoke(cli, ["calibrate", REAL, "--hardware", "l40s", "--chips", "4", "--dp", "4",
                                   "--profile", "real"])
    assert res.exit_code == 1
    assert "refused:" in res.output and "held-out runs" in res.output
    assert not (tmp_path / "cache" / "profiles" / "real.toml").exists()
    bad = CliRunner().invoke(cli, ["calibrate", REAL, "--hardware", "l40s", "--profile", "../x"])
    assert bad.exit_code == 2 and "not a profile name" in bad.output
