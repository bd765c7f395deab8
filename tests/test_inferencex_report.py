"""The InferenceX report (analyses/calibration/inferencex_report.py): grouping, medians on a small hand-made set,
the worst list naming a term, skipped runs listed with the reason; the full run (slow) and the CLI flag."""
from __future__ import annotations

import json

import pytest

from tokenmath.analyses.calibration.inferencex import load_runs, read_rows, to_run
from tokenmath.analyses.calibration.inferencex_predict import RunPrediction, layout_of, predict_runs
from tokenmath.analyses.calibration.inferencex_report import (GROUPINGS, HELD_OUT, InferenceXReport, grouped, stats,
                                                              worst)


def _run(i, **kw):
    base = dict(read_rows()[0])
    base.update(kw)
    return to_run(i, base)


def _pred(run, ratio, term="memory", skipped=None):
    m = run.row["tput_per_gpu"]
    return RunPrediction(run, None if skipped else m * ratio, None if skipped else run.row["median_intvty"], 0.1,
                         None if skipped else term, None if skipped else "decode", "tp=8", skipped)


@pytest.fixture(scope="module")
def hand():
    runs = [_run(0, hardware="b200", framework="sglang", spec_method="none", disagg=False, precision="fp8"),
            _run(1, hardware="b200", framework="sglang", spec_method="mtp", disagg=False, precision="fp8"),
            _run(2, hardware="mi355x", framework="atom", spec_method="none", disagg=False, precision="fp4"),
            _run(3, hardware="mi355x", framework="dynamo-sglang", spec_method="mtp", disagg=True, precision="fp4"),
            _run(4, hardware="h200", framework="sglang", spec_method="none", disagg=False, precision="fp8")]
    preds = [_pred(runs[0], 1.2), _pred(runs[1], 2.0, "compute"), _pred(runs[2], 0.5),
             _pred(runs[3], 0.9, "communication"), _pred(runs[4], None, skipped="chip 'x' has no catalog entry")]
    return preds


def test_medians_by_group_on_a_hand_made_set(hand):
    s = stats(hand)
    assert (s["rows"], s["predicted"]) == (5, 4)
    # |error| 0.2, 1.0, 0.5, 0.1 -> median 0.35; ratios 1.2, 2, 0.5, 0.9 -> median 1.05
    assert s["median_ape"] == pytest.approx(0.35)
    assert s["median_ratio"] == pytest.approx(1.05)
    chip = grouped(hand, GROUPINGS["chip"])
    assert chip["b200"]["median_ape"] == pytest.approx(0.6)           # 0.2 and 1.0
    assert chip["mi355x"]["median_ratio"] == pytest.approx(0.7)       # 0.5 and 0.9
    assert chip["h200"] == {**chip["h200"], "rows": 1, "predicted": 0, "median_ape": None}
    tech = grouped(hand, GROUPINGS["technique"])
    assert tech["mtp"]["predicted"] == 2 and tech["fp4"]["predicted"] == 2 and tech["disaggregated"]["rows"] == 1
    assert tech["mtp"]["median_ape"] == pytest.approx(0.55)           # 1.0 and 0.1: a run sits in every technique
    vend = grouped(hand, HELD_OUT["vendor"])
    assert vend["amd"]["median_ape"] == pytest.approx(0.3) and vend["nvidia"]["median_ape"] == pytest.approx(0.6)
    eng = grouped(hand, GROUPINGS["engine"])
    assert set(eng) == {"sglang", "atom", "dynamo-sglang"}


def test_worst_first_either_way_and_each_names_a_term(hand):
    w = worst(hand, 3)
    assert [p.ratio for p in w] == pytest.approx([2.0, 0.5, 1.2])     # 2x optimistic and 2x pessimistic first
    d = InferenceXReport(tuple(hand)).to_dict()
    assert all(x["term"] in ("compute", "memory", "communication", "overhead") for x in d["worst"])
    assert d["skipped"] == {"chip 'x' has no catalog entry": [hand[4].run.label]}
    assert d["summary"]["skipped"] == {"chip 'x' has no catalog entry": 1}
    prof = d["summary"]["engine_profiles"]
    assert prof["atom"]["profile"] == "vllm" and prof["sglang"]["profile"] == "sglang"
    assert all(e["version"] and e["published"] for e in prof.values())


def test_layout_reading():
    assert layout_of(8, 8, True, 8) == ((1, 1, 8, 1, 0), None)
    assert layout_of(8, 1, True, 8) == ((8, 1, 1, 1, 2), None)
    lay, note = layout_of(4, 4, False, 4)
    assert lay == (4, 1, 1, 1, 0) and "experts whole on its ranks" in note


def test_a_few_runs_predicted_with_their_configuration():
    runs = [r for r in load_runs() if r.row["hardware"] == "h200" and not r.disagg and not r.mtp][:3]
    preds = predict_runs(runs)
    assert len(preds) == 3
    for p in preds:
        assert p.skipped is None and p.tput_per_gpu > 0 and p.per_user > 0
        assert p.term in ("compute", "memory", "communication", "overhead")


@pytest.mark.slow
def test_every_run_predicted_or_listed(tmp_path):
    from click.testing import CliRunner
    from tokenmath.faces.cli import cli as main
    res = CliRunner().invoke(main, ["validate", "--inferencex", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    s = d["summary"]
    assert s["all"]["rows"] == len(load_runs())
    assert s["all"]["predicted"] + sum(s["skipped"].values()) == s["all"]["rows"]
    # docs/reference/validation.md: 2,158 of 2,180 predicted (each as its recipe ran it), median |error| 22%,
    # median ratio 1.09; gpt-oss-120b's 322 runs 8%
    assert s["all"]["predicted"] == 2158
    assert 0.15 < s["all"]["median_ape"] < 0.3 and 1.0 < s["all"]["median_ratio"] < 1.25
    assert "running users capped by" in s["groups"]
    assert len(d["worst"]) == 20 and all(w["term"] for w in d["worst"])
    for grouping in ("source", "vendor", "engine version", "model"):
        assert s["held_out"][grouping]
    png = tmp_path / "ix.png"       # --plot is honoured with --inferencex (it was dropped before)
    text = CliRunner().invoke(main, ["validate", "--inferencex", "--quiet", "--plot", str(png)])
    assert text.exit_code == 0 and "furthest off" in text.output and "Not predicted" in text.output
    assert png.stat().st_size > 10_000 and f"chart written to {png}" in text.output


def test_the_chart_draws_each_run_in_every_grouping_it_belongs_to(tmp_path):
    # a few runs of each model: the chart's points are the report's predictions, one panel per grouping
    from tokenmath.analyses.calibration.inferencex_report import CHART, inferencex_report
    from tokenmath.faces.plots_inferencex import inferencex_plot
    runs = load_runs()
    some = [r for r in runs if r.row["model"] == "dsr1" and not r.disagg][:12] + \
        [r for r in runs if r.row["model"] == "gptoss"][:12]
    rep = inferencex_report(runs=some)
    pts = rep.chart_points()
    assert tuple(pts) == CHART
    predicted = [p for p in rep.preds if p.tput_per_gpu is not None]
    for g in ("chip", "engine", "engine version", "model family"):       # one group per run
        assert sum(len(v) for v in pts[g].values()) == len(predicted)
    assert {"deepseek-v3 (MoE, MLA)", "gpt-oss (MoE, GQA, sliding window)"} <= set(pts["model family"])
    # a run is in every technique it used: at least one point per run
    assert sum(len(v) for v in pts["technique"].values()) >= len(predicted)
    got = {(m, p) for v in pts["chip"].values() for m, p in v}
    assert got == {(p.measured, p.tput_per_gpu) for p in predicted}
    out = inferencex_plot(rep, tmp_path / "ix.png")
    assert (tmp_path / "ix.png").stat().st_size > 10_000 and str(out).endswith("ix.png")
