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
            "--min-tokens-per-s-per-user", "50", "--vary", "scaleup_domain=72,576", "--json")
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
