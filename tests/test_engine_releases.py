"""`--engine NAME@RELEASE` (issue 35: "the serving-engine profile carries a version or date, and every answer says
which one it assumed"). tokenmath holds one profile per engine; a release the profile covers gives the profile's
figures and names the release; a release of an earlier line with measurements of its own (vLLM 0.6-0.7, V0) takes
that line's fitted residuals; an earlier one still is refused with the first covered line (specs/engine_releases.py)."""
from __future__ import annotations

import json

import pytest

from tokenmath.analyses.ask import infer, split
from tokenmath.base.errors import InputError
from tokenmath.specs.serving_engines import get_engine


def _ask(engine):
    dep, wl, _ = split("llama-3.1-8b", "h100-sxm", engine=engine, concurrency=16)
    return infer(dep, wl)


def test_a_covered_release_gives_the_profiles_figures_and_names_the_release():
    plain, asked = _ask("sglang"), _ask("sglang@0.5.9")
    assert asked.to_dict()["engine"]["version"] == "0.5.9"
    assert asked.decode_step_s == plain.decode_step_s and asked.ttft_s == plain.ttft_s
    # without a release the answer names the profile's own reading of the defaults
    assert plain.to_dict()["engine"]["version"] == get_engine("sglang").version != ""


@pytest.mark.parametrize("spec, first", [("sglang@0.3.6", "0.4"), ("vllm@0.5.4", "0.6"), ("tensorrt-llm@0.21", "1.0")])
def test_a_release_before_the_profiles_first_line_is_refused_with_that_line(spec, first):
    with pytest.raises(InputError) as e:
        get_engine(spec)
    assert e.value.field == "engine" and f"from {first} on" in e.value.problem and f"@{first}" in e.value.valid


@pytest.mark.parametrize("spec", ["sglang@0.4", "sglang@v0.5.12.post1", "vllm@0.11.2", "tensorrt-llm@1.3.0rc14",
                                  "tensorrt-llm@1.0"])
def test_releases_from_the_first_line_on_are_taken(spec):
    assert get_engine(spec).release == spec.split("@")[1].lstrip("v")


def test_bad_releases_and_names_are_named():
    for bad in ("sglang@latest", "sglang@" + "9" * 23, "sglang@0.5.9.9.9.9", "sglang@@0.5"):
        with pytest.raises(InputError) as e:
            get_engine(bad)
        assert "not a version" in e.value.problem, bad
    with pytest.raises(InputError) as e:
        get_engine("sglng@0.5")
    assert "sglang" in str(e.value)                     # the closest name
    with pytest.raises(InputError) as e:
        get_engine("llama.cpp@4000")
    assert "records no release lines" in e.value.problem


def test_every_catalog_profile_with_releases_names_their_source():
    for eid in ("vllm", "sglang", "tensorrt-llm"):
        e = get_engine(eid)
        assert e.releases_from and e.sources.get("releases"), eid


def test_the_web_page_takes_a_release_and_answers_with_it():
    from tokenmath.faces.web.api import Api
    d = json.loads(Api().call("infer", {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "sglang@0.5"}))
    assert d["engine"]["version"] == "0.5"


# ---- an earlier release line with measurements of its own: vLLM 0.6-0.7, the V0 engine ----------------------------

def _physics_record(name, group):
    from tokenmath.specs.catalog import shipped
    return next(r["value"] for r in shipped("calibration.toml")["physics"] if r["name"] == name and r["group"] == group)


@pytest.mark.parametrize("spec", ["vllm@0.6", "vllm@0.6.3", "vllm@0.7.3", "vllm@v0.7.4.dev181"])
def test_a_v0_release_takes_the_residuals_fitted_on_v0_rows(spec):
    from tokenmath.specs.efficiency import physics_values
    e = get_engine(spec)
    assert e.line is not None and e.calibration_key == "vllm-v0"
    v = physics_values("mi300x", e)
    # the values data/calibration.toml holds for the V0 rows' groups, not the V1 profile's
    assert v["step_cpu_s"] == (_physics_record("step_cpu_s", "vllm-v0"), "vllm-v0")
    assert v["layer_overhead_s"] == (_physics_record("layer_overhead_s", "vllm-v0"), "vllm-v0")
    assert v["bw_scale"] == (_physics_record("bw_scale", "vllm-v0@amd"), "vllm-v0@amd")
    # V1 releases keep the profile's own groups
    for v1 in ("vllm", "vllm@0.8", "vllm@0.11.2"):
        e1 = get_engine(v1)
        assert e1.line is None and e1.calibration_key == "vllm"
        assert physics_values("mi300x", e1)["step_cpu_s"][1] != "vllm-v0"


def test_a_v0_answer_pays_the_v0_cpu_time_and_says_which_line_it_took():
    v1, v0 = _ask("vllm@0.8"), _ask("vllm@0.7")
    d = v0.to_dict()["engine"]
    assert d["version"] == "0.7" and d["line"] == {"from": "0.6", "describes": "vLLM 0.6-0.7, the V0 engine",
                                                     "calibration_group": "vllm-v0"}
    assert "line" not in v1.to_dict()["engine"]
    # 16 users of Llama 3.1 8B on one H100: the V0 step carries the V0 rows' fitted CPU time, 5 ms plus 30 us per
    # running sequence (16 x 30 us = 0.48 ms), on top of the same kernels (both use the NVIDIA family's scales)
    cpu = _physics_record("step_cpu_s", "vllm-v0") + 16 * _physics_record("step_cpu_per_seq_s", "vllm-v0")
    assert v0.decode_step_s > v1.decode_step_s + 0.9 * cpu
    from tokenmath.specs.serving_engines import engine_label
    assert "the V0 engine" in engine_label(get_engine("vllm@0.7")) and "vllm-v0" in engine_label(get_engine("vllm@0.7"))


def test_earlier_lines_in_an_engine_file_are_checked():
    from tokenmath.specs.serving_engines import catalog, from_record
    rec = dict(catalog()["vllm"])
    for bad in ("0.6", [{"start": "0.6"}], [{"start": "x", "calibration": "g", "describes": "d"}],
                [{"start": "0.6", "calibration": "", "describes": "d"}]):
        with pytest.raises(InputError) as e:
            from_record("mine", {**rec, "earlier_lines": bad})
        assert "earlier_lines" in e.value.field
