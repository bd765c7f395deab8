"""Held-out validation on MLPerf Inference Offline results (analyses/calibration/mlperf.py, data/mlperf.toml)."""
import math

import pytest
from click.testing import CliRunner

from tokenmath.analyses.calibration import mlperf as mp
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli


@pytest.fixture(scope="module")
def shipped():
    return mp.validate_mlperf()


def _row(**kw):
    r = {"id": "x", "benchmark": "llama2-70b-99", "round": "v4.1", "submitter": "S", "system": "sys", "url": "u",
         "quote": "Samples per second: 80 | Tokens per second: 24000", "model": "llama-2-70b", "hardware": "h100-sxm",
         "chips": 8, "engine": "tensorrt-llm", "software": "s", "weight_dtype": "fp8", "precision_source": "p",
         "tokens_per_s": 24000.0, "samples_per_s": 80.0, "input_cap": 1024}
    r.update(kw)
    return r


def test_every_row_quotes_its_figures_and_names_its_commit():
    for r in mp.load_results():
        # the two figures are the summary file's lines, verbatim; the url pins a commit
        assert f"Tokens per second: {r['tokens_per_s']:g}" in r["quote"], r["id"]
        assert f"Samples per second: {r['samples_per_s']:g}" in r["quote"], r["id"]
        assert "/blob/" in r["url"] and "mlperf_log_summary.txt" in r["url"], r["id"]
        assert len(r["url"].split("/blob/")[1].split("/")[0]) == 40, r["id"]


@pytest.mark.parametrize("bad, field", [({"url": ""}, "result x"), ({"colour": 1}, "result x.colour"),
                                        ({"tokens_per_s": -1.0}, "result x: tokens_per_s")])
def test_bad_rows_are_refused(bad, field):
    with pytest.raises(InputError) as e:
        mp.load_results({"result": [_row(**bad)]})
    assert e.value.field == field
    with pytest.raises(InputError):
        mp.load_results({"result": [_row(), _row()]})      # duplicate id


def test_band_bounds_and_pure_roofline(shipped):
    capped = [c for c in shipped.checks if "input_cap" in c.row]
    for c in capped:
        # longer prompts never raise throughput; nothing beats the pure roofline
        assert c.predicted_low <= c.predicted_high <= c.pure_roofline, c.row["id"]
        # output tokens per sample: the run's own, tokens/s over samples/s (Llama 2 70B ~290, Mixtral ~145)
        assert c.output_len == round(c.row["tokens_per_s"] / c.row["samples_per_s"])
        assert 1 <= c.implied_prompt <= c.row["input_cap"]
    assert shipped.faster_than_pure_roofline == []
    # every published result with a prompt cap lies inside its band: no prompt length would make tokenmath
    # pessimistic beyond it; the others lie below their 1-token bound (DeepSeek-R1 on 8 x B200: 33,379 tokens/s
    # measured against a bound near 98,000)
    assert len(capped) == 19 and all(c.where == "in the band" for c in capped)
    rest = [c for c in shipped.checks if "input_cap" not in c.row]
    assert len(rest) == 3 and all(c.where == "below the bound" and c.implied_prompt is None and c.heldout_ratio is None
                                  for c in rest)


def test_implied_prompt_reproduces_the_measurement(shipped):
    c = shipped.checks[0]
    t, _ = mp._node_throughput(c.row, max(1, int(round(c.implied_prompt))), c.output_len)
    assert t == pytest.approx(c.measured, rel=0.03)


def test_held_out_uses_only_the_other_systems(shipped):
    import numpy as np
    for c in shipped.checks:
        others = [o.implied_prompt for o in shipped.checks
                  if o is not c and o.row["benchmark"] == c.row["benchmark"] and o.implied_prompt is not None]
        if not others:
            assert c.heldout_prompt is None
            continue
        assert c.heldout_prompt == pytest.approx(float(np.median(others)))
        t, _ = mp._node_throughput(c.row, max(1, int(round(c.heldout_prompt))), c.output_len)
        assert c.heldout_predicted == pytest.approx(t)


def test_held_out_accuracy_as_documented(shipped):
    # docs/reference/validation.md ("Held out: MLPerf Inference Offline") reports it: median |error| 11% over 19
    # results of 2 vendors, 6 chips, dense and MoE
    s = shipped.groups()
    assert s["all"]["rows"] == 22 and len(s["bound_only"]) == 3 and set(s["vendor"]) == {"amd", "nvidia"} and set(s["moe"]) == {"dense", "moe"}
    assert s["all"]["median_heldout_abs_error"] < 0.25
    assert all(math.isfinite(c.heldout_ratio) for c in shipped.checks if "input_cap" in c.row)


def test_validate_json_has_the_section():
    import json
    r = CliRunner(env={"TOKENMATH_PROGRESS": "1"}).invoke(cli, ["validate", "--json", "--quiet"])
    assert r.exit_code == 0
    d = json.loads(r.stdout)["mlperf"]        # --quiet: no progress lines on stderr even where they are asked for
    assert len(d["rows"]) == 22 and d["faster_than_pure_roofline"] == []
    assert {"heldout_ratio", "implied_prompt_tokens", "predicted_tokens_per_s_prompt_1"} <= set(d["rows"][0])
    srv = d["server"]
    assert len(srv["rows"]) == 19 and {"ratio", "measured_server_over_offline", "ttft_limit_s"} <= set(srv["rows"][0])
