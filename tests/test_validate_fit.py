"""The declared-parameter fit and the held-out schemes of `tokenmath validate` (issue 16, items 3 and 6), on synthetic
rows whose truth is known, so every expected figure is worked out by hand below."""
from dataclasses import replace

import numpy as np
import pytest

from tokenmath.analyses.calibration.fit import fit
from tokenmath.analyses.calibration.heldout import all_held_out, faster_than_pure_roofline, held_out, medians
from tokenmath.analyses.calibration.labels import Labels
from tokenmath.analyses.calibration.parameters import (FLAT, FLAT_MODEL, MIN_ROWS, CalibrationModel, FittedParameter,
                                                       check_declared)
from tokenmath.analyses.calibration.predict import RowPrediction, predict_inference
from tokenmath.base.errors import InputError
from tokenmath.specs.efficiency import Efficiency


def _row(i, a, b, L, truth, *, regime="batch-1-decode", family="nvidia-datacenter", source="s1", engine="vllm",
         moe=False, vendor="nvidia", scored=True):
    """A decode-step row whose time is a / flops + b / memory_bw + L * layer_overhead_s (s), measured at `truth`."""
    def evaluate(v):
        return (a / np.asarray(v.get("flops", 1.0)) + b / np.asarray(v.get("memory_bw", 1.0))
                + L * np.asarray(v.get("layer_overhead_s", 0.0)) + np.asarray(v.get("step_s", 0.0)))
    labels = Labels(regime, moe, vendor, engine, family, "h100-sxm", scored)
    measured = float(evaluate(truth))
    return RowPrediction({"id": f"r{i}-{source}-{regime}", "metric": "decode_step_s"}, "inference", labels, source,
                         measured, predicted_default=measured, predicted_peak=a + b, evaluate=evaluate)


TRUTH = {"flops": 0.6, "memory_bw": 0.7, "layer_overhead_s": 20e-6}
SHAPES = [(1e-3, 4e-3, 32), (5e-3, 1e-3, 80), (2e-3, 2e-3, 40), (8e-3, 5e-4, 126), (1e-4, 9e-3, 64), (3e-3, 3e-3, 16),
          (6e-3, 2e-3, 100)]


def test_fit_recovers_the_generating_values_exactly():
    rows = [_row(i, a, b, L, TRUTH, source=f"s{i % 2}") for i, (a, b, L) in enumerate(SHAPES)]
    f = fit(rows, FLAT_MODEL)
    for name, want in TRUTH.items():
        assert f.values[(name, "nvidia-datacenter")].value == pytest.approx(want)
        assert f.values[(name, "_all")].value == pytest.approx(want)
    # at the truth every row is predicted exactly: median |log| error 0
    assert f.values[("flops", "nvidia-datacenter")].median_abs_log_error == pytest.approx(0.0, abs=1e-12)
    assert all(f.predict(r) == pytest.approx(r.measured, rel=1e-12) for r in rows)
    assert not f.at_edges()


def test_small_or_single_source_family_takes_the_all_rows_value():
    big = [_row(i, a, b, L, TRUTH, source=f"s{i % 2}") for i, (a, b, L) in enumerate(SHAPES)]
    # 3 AMD rows (< MIN_ROWS) measured at memory_bw 0.5, and 6 TPU rows from ONE source at 0.5: neither gets its own
    amd = [_row(10 + i, a, b, L, {**TRUTH, "memory_bw": 0.5}, family="amd", vendor="amd", source=f"a{i}")
           for i, (a, b, L) in enumerate(SHAPES[:3])]
    tpu = [_row(20 + i, a, b, L, {**TRUTH, "memory_bw": 0.5}, family="tpu", vendor="google", source="t")
           for i, (a, b, L) in enumerate(SHAPES[:MIN_ROWS])]
    f = fit(big + amd + tpu, FLAT_MODEL)
    assert ("memory_bw", "amd") not in f.values and ("memory_bw", "tpu") not in f.values
    bw = FLAT[1]
    assert f.value_for(bw, amd[0]) == f.value_for(bw, tpu[0]) == f.values[("memory_bw", "_all")].value
    assert f.value_for(bw, big[0]) == pytest.approx(0.7)
    # searched on vs decided: the all-rows value is searched on all 7 + 3 + 6 = 16 rows but decides only the 9 AMD and
    # TPU rows (their family has no value of its own), from sources a0, a1, a2 and t; the NVIDIA family's decides its
    # 7 rows from s0 and s1
    al, nv = f.values[("memory_bw", "_all")], f.values[("memory_bw", "nvidia-datacenter")]
    assert (al.rows, al.decides_rows, al.decides_sources) == (16, 9, 4)
    assert (nv.rows, nv.decides_rows, nv.decides_sources) == (7, 7, 2)
    assert al.to_dict()["decides_rows"] == 9


def test_a_value_at_its_bound_is_reported_as_physics_missing():
    # compute-only rows (t = a / flops) generated at flops 0.2, below the 0.3 the declaration allows: the fit stops
    # at the bound and says so (every row then predicted 0.2 / 0.3 of its time: |log(2/3)| = 0.405)
    rows = [_row(i, a, 0.0, 0, {"flops": 0.2}, source=f"s{i % 2}") for i, (a, b, L) in enumerate(SHAPES)]
    f = fit(rows, FLAT_MODEL)
    fv = f.values[("flops", "nvidia-datacenter")]
    assert fv.value == 0.3 and fv.edge == "lower"
    assert fv.median_abs_log_error == pytest.approx(np.log(3 / 2))
    d = fv.to_dict()
    assert d["at_edge"] == "lower" and "physics_missing" in d
    # the rows say nothing about bandwidth or overhead: those keep their start values (0.8, 0 s), not a bound
    assert f.values[("memory_bw", "nvidia-datacenter")].value == 0.8
    assert {x.param.name for x in f.at_edges()} == {"flops", "layer_overhead_s"}   # 0 s is the start and a bound


def test_leave_one_regime_out_predicts_a_regime_from_the_others_only():
    # pure-bandwidth rows (t = b / memory_bw): max-load measured at bw 0.5, batch-1 decode at 0.9, family "other"
    # (no family: the all-rows value). Held out, max-load is predicted at 0.9: error |0.5 / 0.9 - 1| = 4/9, and
    # batch-1 decode at 0.5: |0.9 / 0.5 - 1| = 0.8. Leave-one-source-out keeps both regimes: exact.
    ml = [_row(i, 0.0, b, 0, {"memory_bw": 0.5}, regime="max-load", family="other", source=f"m{i % 2}")
          for i, b in enumerate((1e-3, 2e-3, 3e-3))]
    b1 = [_row(10 + i, 0.0, b, 0, {"memory_bw": 0.9}, regime="batch-1-decode", family="other", source=f"m{i % 2}")
          for i, b in enumerate((1e-3, 2e-3, 3e-3))]
    # one more source carrying both regimes, so LOSO on m0/m1 still sees each regime
    extra = [_row(20, 0.0, 5e-3, 0, {"memory_bw": 0.5}, regime="max-load", family="other", source="x"),
             _row(21, 0.0, 5e-3, 0, {"memory_bw": 0.9}, regime="batch-1-decode", family="other", source="x")]
    rows = ml + b1 + extra
    loro = held_out(rows, FLAT_MODEL, "loro", {})
    for r in ml:
        assert abs(loro[r.id] - r.measured) / r.measured == pytest.approx(4 / 9)
    for r in b1:
        assert abs(loro[r.id] - r.measured) / r.measured == pytest.approx(0.8)
    m = medians(rows, lambda p: loro.get(p.id))
    assert m["regime"]["max-load"] == {"rows": 4, "median_ape": pytest.approx(4 / 9)}
    # leave one vendor / MoE out with one vendor and no MoE: nothing remains to fit, so the start value (bw 0.8)
    _, held = all_held_out(rows, FLAT_MODEL)
    r = ml[0]
    assert held["lovo"][r.id] == pytest.approx(r.measured * 0.5 / 0.8)


def test_a_second_declared_block_is_fitted_in_turn():
    # "adding a parameter is a few lines": a per-engine fixed step cost next to the flat set. vLLM rows carry 2 ms,
    # SGLang rows 1 ms; both blocks recover their generating values.
    step = FittedParameter("step_cost", "inference", (0.0, 0.004), (0.0, 0.001, 0.002, 0.004), ("engine", "all"), 0.0,
                           "s per step", "test", "step_s")
    model = CalibrationModel("flat+step", (*FLAT, step), FLAT_MODEL.base, "test")
    rows = [_row(i, a, b, L, {**TRUTH, "step_s": s}, source=f"s{i % 2}", engine=eng)
            for eng, s in (("vllm", 0.002), ("sglang", 0.001)) for i, (a, b, L) in enumerate(SHAPES)]
    rows = [replace(r, row={**r.row, "id": f"{r.row['id']}-{r.labels.engine}"}) for r in rows]
    f = fit(rows, model)
    assert f.values[("step_cost", "vllm")].value == 0.002 and f.values[("step_cost", "sglang")].value == 0.001
    assert f.values[("memory_bw", "nvidia-datacenter")].value == pytest.approx(0.7)


def test_declarations_are_checked():
    with pytest.raises(InputError):     # the grid must span the bounds: an edge must be a bound
        FittedParameter("x", "inference", (0.0, 1.0), (0.1, 1.0), ("all",), 0.5, "", "", "flops")
    with pytest.raises(InputError):
        FittedParameter("x", "inference", (0.0, 1.0), (0.0, 1.0), ("nowhere",), 0.5, "", "", "flops")
    with pytest.raises(InputError):     # re-running the engine needs a setter
        FittedParameter("x", "inference", (0.0, 1.0), (0.0, 1.0), ("all",), 0.5, "", "", "efficiency")
    with pytest.raises(InputError):
        check_declared((*FLAT, FLAT[0]))
    assert FLAT[1].edge(1.0) == "upper" and FLAT[1].edge(0.4) == "lower" and FLAT[1].edge(0.8) is None


def test_a_parameter_entering_through_the_efficiency_reruns_the_engine():
    # memory_bw declared as an efficiency setter instead of a re-timed term: the prediction at a value must be the
    # engine's own at Efficiency(1.0, value, 0.8) (one sequence of Llama 2 7B on an A100: bandwidth-bound)
    from tokenmath.analyses.serving.infer import infer
    from tokenmath.specs.catalog import shipped
    bw = FittedParameter("bw", "inference", (0.4, 1.0), (0.4, 0.7, 1.0), ("all",), 1.0, "", "", "efficiency",
                         set=lambda eff, v: replace(eff, memory_bw=v))
    model = CalibrationModel("slow", (bw,), FLAT_MODEL.base, "test")
    row = next(r for r in shipped("measurements.toml")["inference"] if r["id"] == "gptfast-llama2-7b-a100-bs1-bf16")
    p = predict_inference(row, model)
    direct = infer("llama-2-7b", "a100-80gb", batch=1, input_len=5, output_len=200, chips=1, tp=1, pp=1, ep=1, dp=1,
                   weight_dtype="bf16", kv_dtype="bf16", efficiency=Efficiency(1.0, 0.7, 0.8))
    assert float(p.evaluate({"bw": 0.7})) == pytest.approx(1 / direct.decode_step_s, rel=1e-12)
    # memory-bound (every decode op waits on memory at 5-205 tokens of context): 0.7 of the bandwidth, 0.7 the speed
    assert float(p.evaluate({"bw": 0.7})) / float(p.evaluate({"bw": 1.0})) == pytest.approx(0.7, rel=1e-9)


def test_faster_than_the_pure_roofline_is_caught_both_ways():
    thr = _row(1, 1e-3, 1e-3, 0, TRUTH)
    thr = replace(thr, row={"id": "thr", "metric": "output_tokens_per_s"}, predicted_peak=100.0, predicted_default=90.0)
    tim = replace(_row(2, 1e-3, 1e-3, 0, TRUTH), row={"id": "tim", "metric": "ttft_s"}, predicted_peak=2.0,
                  predicted_default=2.5)
    assert faster_than_pure_roofline([thr, tim], {"loso": {"thr": 99.9, "tim": 2.1}}) == []
    bad = faster_than_pure_roofline([thr, tim], {"loso": {"thr": 100.5, "tim": 1.9}})
    assert [(b["id"], b["prediction"]) for b in bad] == [("thr", "loso"), ("tim", "loso")]
