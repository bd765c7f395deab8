"""Issue 40: no option is accepted and silently ignored. An option that changes nothing in an answer is refused or named
in the answer's notes, and the text shows those notes. Each case was found by benchmarks/fuzz_cli.py's "ignored" pass
(the same output as the question without the option, and no word of it)."""
from __future__ import annotations

import json

import pytest

from tests.test_cli_fuzz import run_main


def _notes(args):
    code, out, err = run_main(args + ["--json"])
    assert code == 0, err[-300:]
    return " ".join(json.loads(out)["notes"])


@pytest.mark.parametrize("opt", [["--ep-comm", "fp8"], ["--overlap-ep"], ["--ep-imbalance", "1.5"]])
def test_expert_parallel_transport_on_a_layout_without_ep_is_named(opt):
    """Llama 3.1 8B on one H100 has no expert all-to-all: --ep-comm, --overlap-ep and --ep-imbalance changed nothing
    and said nothing."""
    notes = _notes(["infer", *opt])
    assert f"{opt[0]} changes nothing here" in notes and "ep = 1" in notes
    notes = _notes(["pareto", "--chips", "2", "--concurrency", "none", *opt])       # a search: a dense model
    assert f"{opt[0]} changes nothing here" in notes and "Llama 3.1 8B is a dense model" in notes


def test_expert_parallel_transport_on_an_ep_layout_is_used_and_not_noted():
    base = run_main(["infer", "--model", "qwen3-30b-a3b", "--chips", "2", "--ep", "2", "--json"])[1]
    code, out, err = run_main(["infer", "--model", "qwen3-30b-a3b", "--chips", "2", "--ep", "2", "--ep-comm", "fp8",
                               "--json"])
    assert code == 0 and out != base
    assert "changes nothing" not in " ".join(json.loads(out)["notes"])


@pytest.mark.parametrize("cmd", [["pareto", "--chips", "2", "--concurrency", "none"], ["slowmode"], ["context"]])
def test_the_text_shows_the_notes_that_name_an_unused_option(cmd):
    """pareto's text printed none of its notes: `pareto --cp 2` answered as `pareto` did, without a word."""
    code, out, err = run_main([*cmd, "--cp", "2"])
    assert code == 0, err[-300:]
    assert "--cp 2 does not apply to" in " ".join(out.split()), out[-500:]
