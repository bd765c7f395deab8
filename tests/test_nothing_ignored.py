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


@pytest.mark.parametrize("opt", [["--rl-group-size", "8"], ["--rl-prompt-len", "100"], ["--rl-response-len", "100"],
                                 ["--rl-reward-params", "1e9"], ["--rl-no-reference"]])
def test_an_rl_recipe_option_without_an_rl_phase_is_refused(opt):
    """overtrain priced no RL phase without --rl, and answered as if the recipe option had not been given."""
    code, out, err = run_main(["overtrain", "--flop-only", *opt])
    assert code == 2 and opt[0] in err and "--rl with --rl-rollout-tokens" in err, (code, err[-300:])


def test_training_options_a_layout_does_not_use_are_named():
    """Llama 3.1 8B on 8 chips (tp 1, pp 1, dp 8): the pipeline, TP-overlap and EP options changed nothing, silently."""
    code, out, err = run_main(["train", "--json", "--schedule", "zb-h1", "--balanced-stages", "--dualpipe",
                               "--pp-comm-overlap", "--tp-comm-overlap", "--ep-comm", "fp8", "--overlap-ep",
                               "--ep-imbalance", "1.5"])
    assert code == 0, err[-300:]
    notes = " ".join(json.loads(out)["notes"])
    for o in ("--schedule zb-h1", "--balanced-stages", "--dualpipe", "--pp-comm-overlap", "--tp-comm-overlap",
              "--ep-comm", "--overlap-ep", "--ep-imbalance"):
        assert f"{o} changes nothing here" in notes, o
    code, out, err = run_main(["train", "--json", "--pp", "2", "--schedule", "interleaved", "--pp-comm-overlap"])
    assert code == 0 and "changes nothing" not in " ".join(json.loads(out)["notes"]), err[-300:]


@pytest.mark.parametrize("cmd", [["fleet", "--demand", "1000"], ["price"], ["hyperbola"]])
def test_fleet_price_and_hyperbola_text_shows_the_notes_naming_an_unused_option(cmd):
    code, out, err = run_main([*cmd, "--cp", "2"])
    assert code == 0, err[-300:]
    assert "--cp 2 does not apply to" in " ".join(out.split()), out[-500:]


@pytest.mark.parametrize("args,field", [
    (["--input-price", "0.6", "--output-price", "2.4", "--evidence", "price"], "evidence"),     # api-model only
    (["--input-price", "0.6", "--output-price", "2.4", "--width-budget"], "width_budget"),
    (["--input-price", "0.6", "--output-price", "2.4", "--provider", "together"], "provider"),
    (["--api-model", "gpt-4o", "--input-price", "1"], "input_price"),     # the api model's own evidence is read
    (["--validate", "--margin", "0.1,0.2"], "margin"),                    # validation draws its own priors
    (["--validate", "--samples", "200000"], "samples"),                   # was capped to 20,000 silently
    (["--calibrate", "--seed", "3"], "seed"),
    (["--dataset", "--api-model", "gpt-4o"], "dataset"),
])
def test_deduce_refuses_an_option_its_way_of_asking_does_not_read(args, field):
    code, out, err = run_main(["deduce", *args, "--json"])
    assert code == 2, (code, err[-300:])
    assert json.loads(out)["error"]["field"] == field


def test_agents_names_the_ep_options_when_every_layout_traced_has_ep_1():
    notes = _notes(["agents", "--systems", "hgx-h100", "--layouts", "1", "--ep-comm", "fp8"])
    assert "--ep-comm changes nothing here" in notes and "every layout traced has ep = 1" in notes
