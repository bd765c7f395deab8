"""SGLang resets --max-running-requests to 48 when speculative decoding is on and none is set
(python/sglang/srt/arg_groups/speculative_hook.py @d9ccf6a7, _handle_eagle_family). tokenmath's answers assume the cap
the batch needs, so a speculating SGLang deployment without --max-running names the engine's own default."""
from __future__ import annotations

import pytest

from tokenmath.analyses.ask import speculation_notes
from tokenmath.base.errors import InputError
from tokenmath.specs.question.deployment import Deployment
from tokenmath.specs.serving_engines import from_record, get_engine


def test_the_sglang_profile_carries_its_speculative_cap_with_its_source():
    e = get_engine("sglang")
    assert e.max_running_speculative == 48 and "speculative_hook.py" in e.sources["max_running_speculative"]
    assert get_engine("vllm").max_running_speculative is None      # vLLM keeps max_num_seqs when speculating


@pytest.mark.parametrize("kw, named", [
    (dict(engine="sglang", mtp=1), True),                          # speculating, no cap set: named
    (dict(engine="sglang", mtp=1, max_running=256), False),        # the user set the cap
    (dict(engine="sglang"), False),                                # not speculating
    (dict(engine="vllm", mtp=1), False),                           # an engine without such a reset
])
def test_a_speculating_sglang_deployment_names_the_engines_own_cap(kw, named):
    notes = speculation_notes(Deployment.of(model="deepseek-v3", hardware="h200", chips=8, **kw))
    assert bool(notes) == named
    if named:
        assert "at most 48 requests" in notes[0] and "--max-running 48" in notes[0]


def test_infer_prints_the_note_and_a_bad_cap_in_an_engine_file_is_refused():
    from tokenmath.analyses.ask import infer, split
    dep, wl, _ = split("deepseek-v3", "h200", chips=8, engine="sglang", mtp=1, concurrency=32)
    r = infer(dep, wl)
    assert any("at most 48 requests" in n for n in r.notes)
    with pytest.raises(InputError) as e:
        from_record("mine", {**_record("sglang"), "max_running_speculative": 0}, "engine")
    assert e.value.field == "engine.max_running_speculative"


def _record(eid: str) -> dict:
    from tokenmath.specs.serving_engines import catalog
    return dict(catalog()[eid])
