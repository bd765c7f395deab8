"""Issue 40 items 5 and 6: inputs that printed a meaningless answer with exit 0 (0 us TTFT, 0 chips, 0% swings, an
answer for 10^11 chips), were silently ignored, or ended in an internal error, are each refused with exit 2 and a
message naming the field, what was wrong and the valid range."""
from __future__ import annotations

import json

import pytest

from tests.test_cli_fuzz import run_main

BIG = "1" + "0" * 400

# (command line, the field the refusal names, text its valid range holds)
REFUSED = {
    "simulate arrival 1e-300 (was 0 us TTFT)": (["simulate", "--arrival-rate", "1e-300"], "arrival_rate", "1e-06"),
    "simulate arrival 1e-308 (was internal error)": (["simulate", "--arrival-rate", "1e-308"], "arrival_rate", "1e-06"),
    "infer arrival 1e-20 (was ZeroDivisionError)": (["infer", "--arrival-rate", "1e-20"], "arrival_rate", "1e-06"),
    "fleet demand 5e-324 (was 0 chips)": (["fleet", "--demand", "5e-324"], "demand", "1e-06"),
    "fleet demand 1e-308 (was internal error)": (["fleet", "--demand", "1e-308"], "demand", "1e-06"),
    "sensitivity delta 1e-308 (was 0% swings)": (["sensitivity", "--delta", "1e-308"], "delta", "0.01 to 0.9"),
    "infer cp 1e11 (answered for 1e11 chips)": (["infer", "--cp", "100000000000"], "cp", "100,000"),
    "simulate dp 1e11 (was internal error)": (["simulate", "--dp", "100000000000"], "dp", "100,000"),
    "deduce ttft prompt nan (was accepted)": (["deduce", "--input-price", "1", "--output-price", "4",
                                               "--ttft-prompt-tokens", "nan"], "ttft-prompt-tokens", "finite"),
    "pareto concurrency 400 digits": (["pareto", "--concurrency", BIG], "concurrency", "1,000,000"),
    "plan concurrency 400 digits": (["plan", "--concurrency", f"8,{BIG}"], "concurrency", "1,000,000"),
    "context 400 digits": (["context", "--context", BIG], "context", "100,000,000"),
    "overtrain output len 400 digits": (["overtrain", "--output-len", BIG], "output-len", "1,000,000"),
    "overtrain train days 1e-308": (["overtrain", "--train-days", "1e-308"], "train-days", "0.001 to 3650"),
    "overtrain mfu 1e-308 (was a numpy warning and the wrong field)": (["overtrain", "--mfu", "1e-308"], "mfu",
                                                                       "0.01 to 1"),
    "price at 0 $/h (was ZeroDivisionError)": (["price", "--price-usd-per-hour", "0"], "price_usd_per_hour", "1e-06"),
    "Arabic-Indic digits are not a number": (["train", "--tp", "\u0661\u0662"], "tp", "65,536"),
    "fullwidth digits in a declared field": (["infer", "--chips", "\uff18"], "chips", "100,000"),
    "a list of non-ASCII digits": (["slowmode", "--budget-ms", "\u0661\u0662"], "budget-ms", "comma-separated"),
    "a seed below 0": (["simulate", "--seed", "-1"], "seed", "4,294,967,295"),
    "train chips 400 digits": (["train", "--chips", BIG], "chips", "65,536"),
    "slowmode budget 1e-308 (was a KeyError)": (["slowmode", "--budget-ms", "1e-308"], "budget-ms", "0.001"),
    "simulate ttft target 5e-324 (printed a 0 us target)": (["simulate", "--ttft-ms", "5e-324"], "ttft_ms", "0.001"),
    "scenarios cluster without a port (was a ValueError)": (["scenarios", "--cluster", "nan"], "cluster", "8786"),
    "a trace path too long for the file system (was an OSError)": (["simulate", "--trace", BIG], "trace", "CSV"),
    "a scenarios file path too long (was an OSError)": (["scenarios", "--file", BIG], "file", "readable"),
    # silently ignored before (found by benchmarks/fuzz_cli.py's "ignored" pass): the same answer as without them
    "simulate burstiness in a closed loop (was ignored)": (["simulate", "--requests", "20", "--burstiness", "0.1"],
                                                            "burstiness", "arrival_rate"),
    "scenarios burstiness with no open loop (was ignored)": (["scenarios", "--requests", "20", "--burstiness", "0.5"],
                                                             "burstiness", "--arrival-rate"),
    "scenarios steady with a count of requests (was dropped)": (["scenarios", "--method", "steady", "--requests",
                                                                 "20"], "requests", 'method = "simulate"'),
    "scenarios steady with a goodput target (was dropped)": (["scenarios", "--method", "steady", "--ttft-ms", "100"],
                                                             "ttft_ms", 'method = "simulate"'),
}


def assert_refused(args, field, valid):
    code, out, err = run_main(args + ["--json"])
    assert code == 2, (code, out[-300:], err[-300:])
    assert "internal error" not in out + err and "Traceback" not in out + err
    e = json.loads(out)["error"]
    said = f"{e['field']} {e['problem']} {e['valid']}"
    assert field.replace("-", "_") in said.replace("-", "_"), said
    assert valid in said, said
    return said


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_naming_the_field_and_the_range(case):
    assert_refused(*REFUSED[case])


def test_the_smallest_accepted_rate_still_answers_in_milliseconds():
    """The bound is where answers stop meaning anything, not an arbitrary floor: 1e-6 requests/s still gives a TTFT
    of tens of ms (one request at a time on an idle replica)."""
    code, out, err = run_main(["simulate", "--arrival-rate", "1e-6", "--requests", "20", "--json"])
    assert code == 0, err
    assert 1e-3 < json.loads(out)["ttft_s"]["p50"] < 1.0


# ---- a trace carries what these options set --------------------------------------------------------------------
@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    return str(p)


@pytest.mark.parametrize("opt,value", [("--requests", "7"), ("--input-len", "99"), ("--output-len", "9"),
                                       ("--burstiness", "0.1")])
def test_options_a_trace_sets_are_refused_with_it(trace, opt, value):
    """Before: `simulate --trace t.csv --requests 7 --input-len 99 --burstiness 0.1` ignored all three silently."""
    said = assert_refused(["simulate", "--trace", trace, opt, value], opt[2:], "--trace")
    assert "given with --trace" in said


def test_burstiness_shapes_only_the_open_loops_of_a_scenario_sweep():
    """--burstiness beside --concurrency and --arrival-rate goes to the open-loop workloads only (a closed loop has no
    arrival gaps: there it was ignored, and is now refused by the simulator)."""
    code, out, err = run_main(["scenarios", "--concurrency", "4", "--arrival-rate", "2", "--burstiness", "0.5",
                               "--requests", "20", "--workers", "1", "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["error"] for r in rows] == [None, None]
    assert [r["workload"].get("burstiness") for r in rows] == [None, 0.5]


def test_a_trace_alone_still_simulates(trace):
    code, out, err = run_main(["simulate", "--trace", trace, "--json"])
    assert code == 0, err
    assert json.loads(out)["workload"]["requests"] == 2


# ---- malformed files ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,text,problem", [
    ("long.csv", "arrival_s,input_tokens,output_tokens\n0,100," + "1" * 140_000 + "\n", "131,072"),
    ("big.jsonl", '{"arrival_s": 0, "input_tokens": 1' + "0" * 400 + ', "output_tokens": 5}\n', "out of range"),
    ("late.jsonl", '{"arrival_s": 1' + "0" * 400 + ', "input_tokens": 10, "output_tokens": 5}\n', "out of range"),
])
def test_malformed_traces_are_named_refusals(tmp_path, name, text, problem):
    """Before: a field over 131,072 characters (csv.Error) and a 400-digit JSON number (OverflowError) exited 1."""
    p = tmp_path / name
    p.write_text(text)
    said = assert_refused(["simulate", "--trace", str(p)], "trace", "")
    assert problem in said


@pytest.mark.parametrize("value", ["nan", BIG, "0", "2.5", '"8"'])
def test_a_systems_file_default_chips_is_checked(tmp_path, value):
    """Before: `default_chips = NaN` in a --system file ended in ValueError (exit 1)."""
    p = tmp_path / "sys.toml"
    p.write_text('chip = "h100-sxm"\ntopology = "switch"\nscaleup_gbs = 450\nscaleout_gbs = 50\n'
                 f"default_chips = {value}\n")
    assert_refused(["moe", "--system", str(p)], "system.default_chips", "1,000,000")


# ---- the library refuses too ---------------------------------------------------------------------------------------
def test_library_refusals():
    from tokenmath.analyses.serving.simulation.workload import make_workload
    from tokenmath.analyses.training.overtrain import overtrain
    from tokenmath.base.errors import InputError
    from tokenmath.base.validators import int_arg, pos_float
    for call, field in [(lambda: make_workload(arrival_rate=1e-300), "arrival_rate"),
                        (lambda: int_arg(10 ** 400, "n"), "n"), (lambda: pos_float(10 ** 400, "x"), "x"),
                        (lambda: overtrain(train_days=1e-308), "train_days"), (lambda: overtrain(mfu=1e-308), "mfu")]:
        with pytest.raises(InputError) as e:
            call()
        assert e.value.field == field


def test_the_command_line_bounds_match_their_homes():
    from tokenmath.analyses.serving.simulation import workload
    from tokenmath.base import validators
    from tokenmath.faces.commands import common
    from tokenmath.faces.web import endpoints
    from tokenmath.mapping import candidates
    from tokenmath.specs import systems
    assert common.MAX_TOKENS == validators.MAX_TOKENS
    assert common.MAX_CHIPS == systems.MAX_CHIPS
    assert common.MAX_SEARCH_CHIPS == candidates.MAX_SEARCH_CHIPS
    assert common.MAX_REQUESTS == workload.MAX_REQUESTS
    assert common.MAX_TRAIN_CHIPS == endpoints.MAX_TRAIN_LAYOUT
