"""calibrate's deployment where a file states it (llm-d reports' scenario.host) and where the user's flags do: the
file's accelerator and layout are used and printed as assumed, a flag that disagrees wins with a note, and what the
file cannot say for sure is left to the flags (analyses/benchmarks/calibrate.py, stated.py). Also the loads GuideLLM
runs state (synchronous, constant rate) as calibrate takes them."""
import os

import pytest
import yaml

from tokenmath.analyses.benchmarks import calibrate as C
from tokenmath.analyses.benchmarks.readers import read_file
from tokenmath.base.errors import InputError

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "benchmarks")
REPORT = os.path.join(HERE, "llmd_report_v01_tpu7x.yaml")
MODEL = {"model": "qwen3-32b"}          # the report's Qwen3.5-397B is not in the catalog; these tests price nothing


def _run(tmp_path, host):
    """The real report with a scenario.host in the schema's shape (schema_v0_1.py Host / HostAccelerator)."""
    obj = yaml.safe_load(open(REPORT))
    obj["scenario"]["host"] = host
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(obj))
    (run,) = read_file(str(p))
    return run


def _replicas(model="NVIDIA-H100-80GB-HBM3", n=4, tp=2, roles=None):
    acc = {"model": model, "count": tp, "parallelism": {"tp": tp, "pp": 1, "ep": 1, "dp": 1}}
    return {"type": roles or ["replica"] * n, "accelerator": [acc] * n}


def test_the_files_accelerator_and_layout_are_used_and_said(tmp_path):
    s = C.setup_of(_run(tmp_path, _replicas()), MODEL)
    assert s.hardware == "h100-sxm"
    assert s.layout == {"chips": 8, "tp": 2, "pp": 1, "ep": None, "dp": 4}
    said = " | ".join(s.assumed)
    assert "hardware h100-sxm (the file's accelerator NVIDIA-H100-80GB-HBM3)" in said
    assert "chips 8, tp 2, pp 1, dp 4: 4 replica(s) of 2 accelerator(s)" in said


def test_flags_win_over_the_file_and_a_note_says_so(tmp_path):
    run = _run(tmp_path, _replicas())
    s = C.setup_of(run, {**MODEL, "hardware": "h200", "chips": 8, "tp": 8})
    assert s.hardware == "h200" and s.layout["tp"] == 8 and s.layout["dp"] is None
    said = " | ".join(s.assumed)
    assert "the file says NVIDIA-H100-80GB-HBM3, which is h100-sxm: the flag wins" in said
    assert "the layout flags win over the file's (chips 8, tp 2, pp 1, dp 4)" in said
    agree = C.setup_of(run, {**MODEL, "hardware": "h100"})      # the short name of the same chip: no note
    assert agree.hardware == "h100" and not any("flag wins" in a for a in agree.assumed)


def test_what_the_file_cannot_say_for_sure_is_left_to_the_flags(tmp_path):
    pd = _run(tmp_path, _replicas(n=2, roles=["prefill", "decode"]))
    s = C.setup_of(pd, MODEL)
    assert s.hardware == "h100-sxm" and all(v is None for v in s.layout.values())
    assert any("not taken from the file" in a and "disaggregation" in a for a in s.assumed)
    with pytest.raises(InputError) as e:
        C.setup_of(_run(tmp_path, _replicas(model="Acme-Accel-9000")), MODEL)
    assert e.value.field == "hardware" and "Acme-Accel-9000" in e.value.problem
    with pytest.raises(InputError, match="do not name the chips"):
        C.setup_of(read_file(REPORT)[0], MODEL)                  # no scenario.host at all


def test_guidellm_loads_become_a_closed_loop_or_littles_law():
    given = {"model": "llama-3.1-8b", "hardware": "h100-sxm"}
    (sync,) = read_file(os.path.join(HERE, "guidellm_v03_writer_keys.json"))
    s = C.setup_of(sync, given)
    assert s.concurrency == 1 and s.saturating                  # synchronous: one request at a time
    first = read_file(os.path.join(HERE, "guidellm_v2_writer_keys.json"))[0]
    s = C.setup_of(first, given)
    assert not s.saturating and s.concurrency == 4              # constant 2 req/s: 2.0 req/s x 2.1 s = 4.2, rounded
    assert any("evenly spaced arrivals at 2 req/s" in a for a in s.assumed)    # GuideLLM constant


def test_an_unstated_load_gives_latencies_only(tmp_path):
    obj = yaml.safe_load(open(REPORT))
    obj["scenario"]["load"] = {"name": "guidellm", "args": {}}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(obj))
    (run,) = read_file(str(p))
    s = C.setup_of(run, {**MODEL, "hardware": "tpu-v7"})
    assert not s.saturating and "output_tokens_per_s" not in {r["metric"] for r in C.rows_of(s)}
    assert any("does not say the client's load" in a for a in s.assumed)
