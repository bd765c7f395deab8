"""`tokenmath sensitivity`: each input +-20%, the answer re-evaluated and ranked (analyses/serving/sensitivity.py)."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.sensitivity import sensitivity
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import PEAK


def _rows(r):
    return {x.name: x for x in r.rows}


def test_memory_bound_step_moves_with_bandwidth_only():
    # Llama 3.1 8B on one H100, batch 1, pure roofline: the decode step is bytes / bandwidth (test_whatif.py has the
    # bytes), so bandwidth x 0.8 -> step / 0.8 and x 1.2 -> step / 1.2; FLOP/s do not move it at all.
    r = sensitivity("llama-3.1-8b", "h100-sxm", metric="decode_step_s", batch=1, chips=1, efficiency=PEAK,
                    engine="none")
    rows = _rows(r)
    bw = rows["memory_bw_tbs"]
    assert bw.answer_low == pytest.approx(r.base_answer / 0.8, rel=1e-9)
    assert bw.answer_high == pytest.approx(r.base_answer / 1.2, rel=1e-9)
    assert r.rows[0].name == "memory_bw_tbs"                       # ranked first
    assert rows["tflops.bf16"].swing == pytest.approx(0.0, abs=1e-12 * r.base_answer)
    assert rows["price_usd_per_hour"].swing == 0.0                 # price never moves a time
    # the pure roofline's memory fraction is 1: its upper side is clipped there and says so
    eff = rows["efficiency.memory_bw"]
    assert eff.high == 1.0 and "stops at 1" in eff.note and eff.answer_high == pytest.approx(r.base_answer)
    assert [x.swing for x in r.rows] == sorted((x.swing for x in r.rows), reverse=True)


def test_cost_is_linear_in_price():
    r = sensitivity("llama-3.1-8b", "h100-sxm", batch=16, chips=1)
    p = _rows(r)["price_usd_per_hour"]
    assert p.answer_low == pytest.approx(0.8 * r.base_answer) and p.answer_high == pytest.approx(1.2 * r.base_answer)


def test_one_chip_has_no_link_rows_and_scaleout_is_idle_inside_a_domain():
    r = sensitivity("llama-3.1-8b", "h100-sxm", batch=8, chips=8, tp=8)
    rows = _rows(r)
    assert rows["scaleout_gbs"].swing == 0.0            # 8 chips in one NVLink domain: no traffic leaves it
    assert rows["scaleup_gbs"].answer_low > rows["scaleup_gbs"].answer_high  # slower links, dearer tokens


def test_bad_metric_and_delta():
    with pytest.raises(InputError) as e:
        sensitivity("llama-3.1-8b", "h100-sxm", metric="cost_per_token")
    assert e.value.field == "metric"
    with pytest.raises(InputError):
        sensitivity("llama-3.1-8b", "h100-sxm", delta=1.5)
    # a batch that cannot run is an error on the batch, saying how many fit (354 of 1,280 tokens on one H100)
    with pytest.raises(InputError) as e:
        sensitivity("llama-3.1-8b", "h100-sxm", batch=100000)
    assert e.value.field == "batch" and "354" in str(e.value)


def test_cli_json_table_and_tornado(tmp_path):
    args = ["sensitivity", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--batch", "16"]
    r = CliRunner().invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["metric"] == "cost_per_mtok_output_usd" and len(d["rows"]) >= 8
    r = CliRunner().invoke(cli, [*args, "--plot", str(tmp_path / "t.png")])
    assert r.exit_code == 0 and "price_usd_per_hour" in r.output
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
