"""Malformed files for every option that reads one (issue 40): a seeded run of benchmarks/fuzz_files.py at a small size
(the benchmark runs 1,000 files per kind), and the defects it found, each as a regression test: a file loads or is
refused naming its field, and the command reading it exits 0 or 2, never 1 with an internal error."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tokenmath.base.errors import InputError
from tests.test_cli_fuzz import run_main

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"
VLLM = (FIX / "benchmarks" / "vllm_llmd_l40s_llama32_3b.jsonl").read_text().splitlines()[0]


def _bench():
    spec = importlib.util.spec_from_file_location("tokenmath_fuzz_files", ROOT / "benchmarks" / "fuzz_files.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# ---- result files for `tokenmath calibrate` ------------------------------------------------------------------------
@pytest.mark.parametrize("name,text", [
    ("deep.json", "[" * 100_000 + "]" * 100_000),                      # RecursionError: exit 1 before
    ("deep.jsonl", VLLM + "\n" + '{"a":' * 50_000 + "1" + "}" * 50_000 + "\n"),
    ("huge.jsonl", VLLM.replace('"completed": 300', '"completed": 1' + "0" * 5000) + "\n"),   # ValueError before
])
def test_a_result_file_too_deep_or_with_a_huge_number_is_a_named_refusal(tmp_path, name, text):
    from tokenmath.analyses.benchmarks.readers import read_file
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read_file(str(p))
    assert e.value.field.startswith(name)
    code, out, err = run_main(["calibrate", str(p), "--hardware", "l40s", "--chips", "4", "--dp", "4"])
    assert code == 2 and "internal error" not in out + err, (code, err[-300:])


# ---- calibration profiles (`infer --profile NAME`) --------------------------------------------------------------------
HEAD = "# tokenmath calibration profile written by `tokenmath calibrate`\n"


@pytest.mark.parametrize("text", [
    HEAD + "x = " + "[" * 5000 + "]" * 5000 + "\n",                     # RecursionError: exit 1 before
    HEAD + "runs = 1" + "0" * 5000 + "\n",                               # an integer over 4,300 digits
])
def test_a_profile_too_deep_or_with_a_huge_number_is_a_named_refusal(tmp_path, monkeypatch, text):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.toml").write_text(text)
    code, out, err = run_main(["infer", "--profile", "bad", "--hardware", "l40s"])
    assert code == 2 and "profile" in err and "internal error" not in out + err, (code, err[-300:])


def test_a_profile_that_is_a_folder_is_a_named_refusal(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    (tmp_path / "profiles" / "odd.toml").mkdir(parents=True)
    code, out, err = run_main(["infer", "--profile", "odd", "--hardware", "l40s"])
    assert code == 2 and "cannot read" in err, (code, err[-300:])


# ---- the seeded run ---------------------------------------------------------------------------------------------------
def test_seeded_malformed_files_of_every_kind_load_or_are_refused(tmp_path, monkeypatch):
    """A few files of every kind through their loader and their command (the benchmark: 1,000 per kind)."""
    bench = _bench()
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path / "cache"))
    import tests.test_cli_fuzz as cli_tests
    import tests.test_fuzz_loaders as lt
    seeds = bench.Seeds(lt.bench, lt)
    for kind in bench.KINDS:
        work = tmp_path / "cache" if kind == "profile" else tmp_path / "files"
        got = bench.fuzz_kind(kind, 10, 40, work, seeds, lt.bench, cli_tests, timeout=10.0, cli_rejected=1,
                              cli_loaded=2)
        assert got["files"] == 10 and not got["crashes"] and not got["cli_internal"], (kind, got)
        assert got["cli_runs"] >= 1, (kind, got)
    json.dumps(got)


# ---- systems files and profiles (the second run of the benchmark) ---------------------------------------------------
@pytest.mark.parametrize("text,field", [
    ('chip = "tpu-v5p"\nlink_gbs = 100\nlinks = [1, 2]\nscaleout_gbs = 25\n', "links"),    # switch: links unread
    ('chip = "tpu-v5p"\ntopology = "torus"\nlink_gbs = 100\nlinks = 6\ntorus_max = [16, 16]\nslice_wrap = [4]\n'
     'scaleout_gbs = 25\n', "slice_wrap"),
])
def test_a_systems_file_figure_of_the_wrong_type_is_a_named_refusal(tmp_path, text, field):
    """Before: int() of a list at the end of systems.from_record (a TypeError, exit 1)."""
    from tokenmath.specs.systems import get_system
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        get_system(str(p))
    assert e.value.field.endswith(field)
    code, out, err = run_main(["train", "--system", str(p)])
    assert code == 2 and "internal error" not in out + err


def test_a_profile_without_its_name_is_a_named_refusal(tmp_path, monkeypatch):
    """Before: infer --profile read prof['name'] for its note (a KeyError, exit 1)."""
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "nameless.toml").write_text(
        HEAD + 'hardware = "l40s"\nengine = "vllm"\n[values]\ncompute_scale = 1.0\nbw_scale = 0.9\n'
        "step_cpu_s = 0.001\nlayer_overhead_s = 1e-5\nstep_cpu_per_seq_s = 1e-6\n")
    code, out, err = run_main(["infer", "--profile", "nameless", "--hardware", "l40s"])
    assert code == 2 and "name" in err and "internal error" not in out + err, (code, err[-300:])
