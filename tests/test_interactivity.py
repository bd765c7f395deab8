"""Held-out validation on published throughput-vs-interactivity points (analyses/calibration/interactivity.py,
data/interactivity_points.toml)."""
import math

import pytest

from tokenmath.base.errors import InputError
from tokenmath.analyses.calibration import interactivity as ix


def _row(**kw):
    r = {"id": "t1", "url": "https://example.org/page", "quote": "B200 produces 100 tok/s/GPU at 10 tok/s/user",
         "date": "undated", "model": "llama-3.1-70b", "hardware": "b200", "precision": "fp8", "weight_dtype": "fp8",
         "input_len": 1024, "output_len": 1024, "interactivity": 10.0, "throughput_per_gpu": 100.0,
         "throughput_definition": "total"}
    r.update(kw)
    return r


@pytest.mark.parametrize("field", ["url", "quote"])
def test_loader_refuses_a_row_without_its_source(field):
    r = _row()
    del r[field]
    with pytest.raises(InputError) as e:
        ix.load_points({"point": [r]})
    assert field in e.value.field
    with pytest.raises(InputError):                   # present but empty is no source either
        ix.load_points({"point": [_row(**{field: "  "})]})


def test_loader_refuses_unknown_keys_definitions_and_duplicates():
    with pytest.raises(InputError):
        ix.load_points({"point": [_row(interactivty=10.0)]})          # typo
    with pytest.raises(InputError):
        ix.load_points({"point": [_row(throughput_definition="generated")]})
    with pytest.raises(InputError):
        ix.load_points({"point": [_row(), _row()]})
    assert ix.load_points({"point": [_row()]})[0]["interactivity"] == 10.0


def test_shipped_points_load_and_name_catalog_entries():
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    rows = ix.load_points()
    assert len(rows) >= 30
    for r in rows:
        get_model(r["model"]), get_hardware(r["hardware"])
        assert r["url"].startswith("https://") and r["quote"]
        assert r["throughput_definition"] == "total"      # InferenceX's tput_per_gpu (issue #293), see the file


def test_log_log_interpolation_by_hand():
    # two points: concurrency 1 at 100 tok/s/user, 100 tok/s/chip; concurrency 2 at 50 tok/s/user, 400 tok/s/chip.
    # x = sqrt(100 x 50) = 70.71 is halfway in log x, so y is halfway in log y: sqrt(100 x 400) = 200.
    assert ix.interpolate([100, 50], [100, 400], math.sqrt(100 * 50)) == pytest.approx(200.0)
    # x = 50 x 2^(1/2)... a quarter of the way from 100 down to 50 in log x: log2 x = log2 100 - 0.25
    # -> y = 100 x 4^0.25 = 141.42
    assert ix.interpolate([100, 50], [100, 400], 100 * 2 ** -0.25) == pytest.approx(100 * 4 ** 0.25)
    assert ix.interpolate([100, 50], [100, 400], 100) == pytest.approx(100.0)     # the endpoints themselves
    assert ix.interpolate([100, 50], [100, 400], 120) is None                     # faster than concurrency 1
    assert ix.interpolate([100, 50], [100, 400], 30) == pytest.approx(400.0)      # below the curve: its last point
    # a curve that crosses x twice (interactivity rises again past a scheduler limit): the better crossing
    assert ix.interpolate([100, 50, 80, 40], [100, 400, 500, 600], 60) > 400


def test_definition_conversion_by_hand():
    # 1k/1k, every request whole in both phases: 1024 prompt + 1024 generated tokens per request, so output is half
    # the total: 25,319.6 tok/s/GPU total -> 12,659.8 output tok/s/GPU
    assert ix.output_share("total", 1024, 1024) == 0.5
    assert 25319.6 * ix.output_share("total", 1024, 1024) == pytest.approx(12659.8)
    # 8k/1k: 1024 / (8192 + 1024) = 1/9: 5,856.9 total -> 650.77 output
    assert 5856.9 * ix.output_share("total", 8192, 1024) == pytest.approx(650.766, rel=1e-5)
    assert ix.output_share("output", 8192, 1024) == 1.0


def test_published_throughput_is_input_plus_output():
    """C users at x tok/s/user generate at most C x x output tokens/s in all, so per GPU (>= 1 GPU) at most that:
    read as total (input + output) every row with a concurrency obeys it; read as output, the gpt-oss B200 row at
    72 tok/s/user (25,320 tok/s/GPU at ~256 users: 256 x 72 = 18,432) cannot be."""
    for r in ix.load_points():
        if "concurrency" in r:
            out = r["throughput_per_gpu"] * ix.output_share(r["throughput_definition"], r["input_len"], r["output_len"])
            assert out <= r["concurrency"] * r["interactivity"], r["id"]
    r = next(r for r in ix.load_points() if r["id"] == "ix-gptoss-b200-fp4-1k1k-72")
    assert r["throughput_per_gpu"] > r["concurrency"] * r["interactivity"]


def test_envelope_is_never_below_any_layout_and_says_unreachable():
    cs, _ = ix.curves("llama-3.1-70b", "b200", "fp8", None, 1024, 1024, "vllm", "calibrated", 20.0)
    assert len(cs) >= 3                                       # tp = 1, 2, 4, 8 that hold the model
    fastest = max(max(c.per_user) for c in cs)
    for x in (20.0, 40.0, 60.0, 0.9 * fastest):
        best, lay = ix.envelope(cs, x)
        assert best is not None and lay is not None
        for c in cs:
            v = ix.interpolate(c.per_user, c.per_chip, x)
            assert v is None or best >= v
    assert ix.envelope(cs, fastest * 1.01) == (None, None)


def test_no_prediction_beats_the_pure_roofline():
    rows = [_row(id="a", interactivity=40.0), _row(id="b", interactivity=80.0),
            _row(id="c", model="deepseek-v3", hardware="gb200-nvl72", input_len=8192, interactivity=30.0)]
    v = ix.validate_interactivity({"point": rows})
    for p in v.points:
        assert p.pure_roofline is not None
        assert p.predicted is None or p.predicted <= p.pure_roofline * (1 + 1e-9), p.row["id"]
    s = v.summary()
    assert s["faster_than_pure_roofline"] == []
    d = v.to_dict()
    assert d["title"] == "interactivity curves, not fitted" and len(d["rows"]) == 3
    assert d["rows"][0]["ratio"] == pytest.approx(d["rows"][0]["predicted"] / 100.0)


def test_points_are_held_out_of_the_fit():
    """No InferenceX point is among the measurements the calibration is fitted on."""
    from tokenmath.specs.catalog import shipped
    meas = shipped("measurements.toml")
    text = repr(meas).lower()
    assert "inferencex" not in text and "inferencemax" not in text
    assert not {r["id"] for r in ix.load_points()} & {r.get("id") for r in meas.get("inference", [])}
