"""What-if hardware: `--set FIELD=VALUE` and `--vary FIELD=v1,...` (specs/overrides.py, faces/commands/whatif.py)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.infer import infer
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import PEAK
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.overrides import apply, parse_pairs, vary_values
from tokenmath.specs.systems import get_system


def run(*args):
    return CliRunner().invoke(cli, list(args))


def _decode(hw, batch=1, **kw):
    return infer("llama-3.1-8b", hw, chips=1, batch=batch, input_len=1024, output_len=256, efficiency=PEAK,
                 engine="none", **kw)


def test_override_changes_only_the_named_figure():
    hw = get_hardware("h100-sxm")
    new, done = apply(hw, {"memory_bw_tbs": "6.7", "tflops.fp8": "2x", "price": "1.5"})
    assert new.memory_bw == 6.7e12 and new.flops["fp8"] == 2 * hw.flops["fp8"] and new.price_usd_per_hour == 1.5
    assert new.flops["bf16"] == hw.flops["bf16"] and new.memory_bytes == hw.memory_bytes
    assert new.id == hw.id and new.family == hw.family          # same calibration: only the physics moves
    assert [o.field for o in done] == ["memory_bw_tbs", "tflops.fp8", "price_usd_per_hour"]
    assert done[0].was == pytest.approx(3.35) and any("what-if" in c for c in new.caveats)


def test_two_x_bandwidth_halves_a_memory_bound_decode_step():
    # Llama 3.1 8B, bf16, one H100 (3.35 TB/s), batch 1, pure roofline: the step reads every weight but the input
    # embedding table (one row is gathered) plus the KV at the mean context.
    #   weights: 8,030,261,248 - 128,256 x 4,096 (embedding) = 7,504,924,672 params x 2 B = 15,009,849,344 B
    #   KV: 32 layers x 2 x 8 kv heads x 128 x 2 B = 131,072 B/token x (1024 + 256/2 = 1152) = 150,994,944 B
    #   (15,009,849,344 + 150,994,944) / 3.35e12 = 4.5256 ms
    base = _decode(get_hardware("h100-sxm"))
    assert base.decode_step_s == pytest.approx(15_160_844_288 / 3.35e12, rel=2e-3)
    fast = _decode(apply(get_hardware("h100-sxm"), {"memory_bw_tbs": "2x"})[0])
    assert fast.decode_step_s == pytest.approx(base.decode_step_s / 2, rel=1e-9)
    # halving the FLOP/s leaves the memory-bound step alone and slows the compute-bound prefill
    slow = _decode(apply(get_hardware("h100-sxm"), {"tflops.bf16": "0.5x"})[0])
    assert slow.decode_step_s == pytest.approx(base.decode_step_s, rel=1e-6) and slow.ttft_s > 1.8 * base.ttft_s


@pytest.mark.parametrize("batch", [1, 64, 256])
def test_more_bandwidth_never_slows_a_step(batch):
    hw = get_hardware("h100-sxm")
    steps = [infer("llama-3.1-8b", apply(hw, {"memory_bw_tbs": f"{x}x"})[0], chips=1, batch=batch,
                   input_len=1024, output_len=256).decode_step_s for x in (0.5, 1, 1.5, 2, 4)]
    assert np.all(np.diff(steps) <= 1e-15), steps


def test_price_override_scales_cost_only():
    hw = get_hardware("h100-sxm")
    a = _decode(hw)
    b = _decode(apply(hw, {"price_usd_per_hour": f"{2 * hw.price_usd_per_hour}"})[0])
    assert b.decode_step_s == a.decode_step_s
    assert b.cost_per_mtok_output_usd == pytest.approx(2 * a.cost_per_mtok_output_usd)


def test_scaleup_domain_override_on_a_system():
    sys576, _ = apply(get_system("gb200-nvl72", 576), {"scaleup_domain": "576"})
    assert sys576.scaleup_domain == 576 and sys576.domains == 1
    assert get_system("gb200-nvl72", 576).domains == 8


@pytest.mark.parametrize("pairs, field, words", [
    (["memory_bw=3"], "set.memory_bw", "memory_bw_tbs"),       # unknown: the closest valid field is named
    (["memory_bw_tbs=0"], "set.memory_bw_tbs", "between"),     # the hardware file's range
    (["memory_bw_tbs=fast"], "set.memory_bw_tbs", "number"),
    (["scaleup_domain=7.5"], "set.scaleup_domain", "integer"),
    (["tflops=100"], "set.tflops", "tflops.bf16"),
    (["tflops.fp5=100"], "set.tflops.fp5", "tflops.fp4"),
    (["memory_gb"], "set", "FIELD=VALUE"),
    (["memory_gb=80", "hbm_gb=90"], "set.memory_gb", "twice"),
])
def test_bad_overrides_name_the_field(pairs, field, words):
    with pytest.raises(InputError) as e:
        apply(get_hardware("h100-sxm"), parse_pairs(pairs))
    assert e.value.field == field and words in str(e.value.valid) + str(e.value.problem)


def test_vary_values_parse():
    assert vary_values("scaleup_domain=8, 72,576") == ("scaleup_domain", ["8", "72", "576"])
    with pytest.raises(InputError):
        vary_values("scaleup_domain=")


def test_cli_set_json_and_explain():
    args = ["infer", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "none", "--peak"]
    base = json.loads(run(*args, "--json").output)
    r = run(*args, "--set", "memory_bw_tbs=6.7", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["what_if"] == [{"field": "memory_bw_tbs", "value": 6.7, "catalog": 3.35, "unit": "TB/s"}]
    assert d["decode_step_s"] == pytest.approx(base["decode_step_s"] / 2, rel=1e-9)
    r = run(*args, "--set", "memory_bw_tbs=6.7", "--explain")
    assert r.exit_code == 0 and "memory_bw_tbs = 6.7 TB/s (catalog 3.35)" in r.output


def test_cli_vary_is_one_json_list_and_one_table():
    args = ["infer", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "none", "--peak", "--vary",
            "memory_bw_tbs=3.35,6.7,13.4"]
    d = json.loads(run(*args, "--json").output)
    assert d["vary"] == "memory_bw_tbs" and d["values"] == [3.35, 6.7, 13.4]
    steps = [x["decode_step_s"] for x in d["results"]]
    assert steps[1] == pytest.approx(steps[0] / 2) and steps[2] == pytest.approx(steps[0] / 4)
    r = run(*args)
    head = r.output.splitlines()[0].split()
    assert r.exit_code == 0 and head[0] == "memory_bw_tbs" and "decode_step_s" in head
    assert len(r.output.splitlines()) == 4


def test_cli_bad_set_exits_2_with_json_error():
    r = run("hyperbola", "--set", "hbm_bandwidth=3", "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"]["field"] == "set.hbm_bandwidth"
    r = run("infer", "--vary", "memory_bw_tbs=1", "--set", "memory_bw_tbs=2")
    assert r.exit_code == 2


def test_plan_on_a_576_chip_domain(fixtures):
    """The closing figure's shape: the hypothetical 2T/100B MoE on 576 GB200s, 8 NVL72 racks vs one 576-domain.
    One domain can never be worse: every layout of 8 racks is also a layout of one domain, with faster links."""
    r = run("plan", "-m", str(fixtures / "whatif-moe-2t-a100b.json"), "-S", "gb200-nvl72", "--chips", "576",
            "--min-tokens-per-s-per-user", "50", "--vary", "scaleup_domain=72,576", "--json", "--no-budget")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    racks, one = (x["best"] for x in d["results"])
    assert one["cost_per_mtok_output_request_usd"] <= racks["cost_per_mtok_output_request_usd"]
    assert one["domains_spanned"] == 1


def test_link_figures_a_topology_does_not_use_are_refused():
    tpu = get_system("tpu-v5p", 64)
    for pairs, field in ((["scaleup_gbs=900"], "set.scaleup_gbs"), (["scaleup_domain=128"], "set.scaleup_domain")):
        with pytest.raises(InputError) as e:
            apply(tpu, parse_pairs(pairs))
        assert e.value.field == field


# ---- --set is the Deployment's what_if field; --vary asks the typed question once per value ---------------------

def _json(*args):
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


DSV3 = ("infer", "-m", "deepseek-v3", "-H", "h200", "--chips", "8", "--ep", "8")


def test_vary_over_a_deployment_field_the_busier_expert_rank_slows_the_decode_step():
    """DeepSeek-V3 on 8 H200s, EP 8, batch 64: the step waits for the busiest expert rank, so a rank with 1.5x and 2x
    the mean tokens makes every step longer (and the answers equal `--ep-imbalance` given alone)."""
    d = _json(*DSV3, "-b", "64", "--vary", "ep_imbalance=1,1.5,2")
    assert d["vary"] == "ep_imbalance" and d["values"] == [1.0, 1.5, 2.0] and d["set"] == []
    steps = [x["decode_step_s"] for x in d["results"]]
    assert steps[0] < steps[1] < steps[2], steps
    alone = _json(*DSV3, "-b", "64", "--ep-imbalance", "1.5")
    assert d["results"][1]["decode_step_s"] == alone["decode_step_s"]
    assert all(x["what_if"] == [] for x in d["results"])


def test_vary_over_a_workload_field_serves_each_concurrency():
    d = _json("infer", "--vary", "concurrency=8,64")
    assert d["vary"] == "concurrency" and d["values"] == [8, 64]
    loads = [x["load"] for x in d["results"]]
    # more users in the closed loop: more tokens per chip, each user slower
    assert loads[1]["output_tokens_per_s_per_chip"] > loads[0]["output_tokens_per_s_per_chip"]
    assert loads[1]["output_tokens_per_s_per_user"] < loads[0]["output_tokens_per_s_per_user"]
    assert d["results"][0] == {**_json("infer", "--concurrency", "8"), "what_if": []}
    r = run("infer", "--vary", "concurrency=8,64")
    head = r.output.splitlines()[0].split()
    assert r.exit_code == 0 and head[0] == "concurrency" and len(r.output.splitlines()) == 3


def test_vary_with_set_keeps_the_set_figures_in_every_answer():
    d = _json("infer", "--engine", "none", "--peak", "--set", "tflops.bf16=2x", "--vary", "memory_bw_tbs=3.35,6.7")
    assert [o["field"] for o in d["set"]] == ["tflops.bf16"]
    assert [[o["field"] for o in x["what_if"]] for x in d["results"]] == [["tflops.bf16", "memory_bw_tbs"]] * 2


def test_set_price_equals_the_price_option():
    """--set price_usd_per_hour=2 and --price-usd-per-hour 2 ask the same question: the same figures (the --set
    answer also lists the override under what_if)."""
    by_set = _json("infer", "-b", "16", "--set", "price_usd_per_hour=2")
    by_option = _json("infer", "-b", "16", "--price-usd-per-hour", "2")
    assert by_set.pop("what_if") == [{"field": "price_usd_per_hour", "value": 2.0, "catalog": 2.99,
                                      "unit": "$/chip-hour"}]
    # each answer echoes the question as it was typed (specs/question/answer_schema.py); the figures are the same
    assert by_set.pop("question")["deployment"]["what_if"] == ["price_usd_per_hour=2"]
    assert by_option.pop("question")["deployment"]["price_usd_per_hour"] == 2.0
    assert by_set == by_option
    assert by_option["price_usd_per_chip_hour"] == 2.0
    r = run("infer", "--set", "price=2", "--price-usd-per-hour", "3")
    assert r.exit_code == 2 and "set.price_usd_per_hour" in r.output


def test_vary_refuses_a_field_given_twice_or_unknown():
    r = run("infer", "--vary", "ep_imbalance=1,2", "--ep-imbalance", "2", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "vary.ep_imbalance"
    r = run("infer", "--vary", "ep_imbalanse=1,2", "--json")
    err = json.loads(r.stdout)["error"]
    assert r.exit_code == 2 and err["field"] == "vary.ep_imbalanse" and "ep_imbalance" in err["valid"]
    r = run("infer", "--vary", "ep_imbalance=1,0.5", "--json")        # each value validated as the option is
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "ep_imbalance"


def test_the_python_api_takes_what_if_and_reports_it():
    import tokenmath
    r = tokenmath.infer("llama-3.1-8b", "h100-sxm", batch=8, what_if=["memory_bw_tbs=6.7"])
    assert r.to_dict()["what_if"] == [{"field": "memory_bw_tbs", "value": 6.7, "catalog": 3.35, "unit": "TB/s"}]
    assert r.hardware.memory_bw == 6.7e12
    assert "what_if" not in tokenmath.infer("llama-3.1-8b", "h100-sxm", batch=8).to_dict()


def test_price_and_fleet_take_set_and_vary():
    d = _json("price", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--vary", "price=1,2")
    a, b = (x["cost_per_mtok_output_usd"] for x in d["results"])
    assert b == pytest.approx(2 * a)
    d = _json("fleet", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--demand", "1e4", "--set", "memory_bw_tbs=2x")
    assert d["what_if"][0]["field"] == "memory_bw_tbs"


def test_export_takes_set_and_vary_like_every_serving_command():
    """export answers with a dict and has no --explain: `export --set memory_bw_tbs=2` escaped an AttributeError and
    `export --vary batch=1,2` exited 1 (an unexpected keyword 'explain'); found by benchmarks/fuzz_cli.py."""
    from tests.test_cli_fuzz import run_main
    code, out, err = run_main(["export", "--set", "memory_bw_tbs=2"])
    assert code == 0 and "what-if hardware (not a catalog chip): memory_bw_tbs=2" in out, err[-300:]
    for spec in ("batch=1,2", "memory_bw_tbs=2,3"):
        code, out, err = run_main(["export", "--vary", spec, "--json"])
        assert code == 0, err[-300:]
        d = json.loads(out)
        assert d["vary"] == spec.split("=")[0] and len(d["results"]) == 2
