"""`--engine NAME@RELEASE` (issue 35: "the serving-engine profile carries a version or date, and every answer says
which one it assumed"). tokenmath holds one profile per engine; a release the profile covers gives the profile's
figures and names the release, an earlier one is refused with the first covered line (specs/engine_releases.py)."""
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


@pytest.mark.parametrize("spec, first", [("sglang@0.3.6", "0.4"), ("vllm@0.7.3", "0.8"), ("tensorrt-llm@0.21", "1.0")])
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
