"""Issue 23 item 3: `tokenmath hardware --template` writes a commented file of the documented schema, and
`tokenmath hardware --check FILE` reports what tokenmath reads from it (defaults named) or exits 2 naming the field."""
import json
import tomllib

import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import cli
from tokenmath.faces.hardware_template import FIELDS
from tokenmath.specs.hardware import KNOWN_KEYS, get_hardware


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_every_schema_key_is_documented_once():
    # the template's FIELDS and the loader's KNOWN_KEYS must name the same keys: a key added to the loader
    # without documentation (or documented but refused) fails here
    names = [k for k, _, _ in FIELDS]
    assert sorted(names) == sorted(KNOWN_KEYS)
    assert len(names) == len(set(names))
    assert {k for k, req, _ in FIELDS if req} == {"memory_gb", "memory_bw_tbs", "tflops"}


def test_template_parses_and_equals_the_catalog_h100(tmp_path):
    r = run("hardware", "--template")
    assert r.exit_code == 0, r.output
    tomllib.loads(r.output)   # valid TOML
    f = tmp_path / "mychip.toml"
    f.write_text(r.output)
    mine, cat = get_hardware(str(f)), get_hardware("h100-sxm")
    assert mine.id == "my-chip"
    # same physics as the catalog chip it copies: 85.5208 GB, 3.35 TB/s, 989 dense bf16 TFLOP/s, 8 x 450 GB/s
    assert mine.memory_bytes == cat.memory_bytes == 85.5208e9
    assert mine.memory_bw == cat.memory_bw == 3.35e12
    assert dict(mine.flops) == dict(cat.flops) and mine.flops["bf16"] == 989e12
    assert (mine.scaleup_domain, mine.scaleup_bw, mine.scaleout_bw) == (8, 450e9, 50e9)
    assert mine.caveats == ()   # every figure carries its source in the template's [sources]


def test_check_reports_figures_and_defaults(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text('memory_gb = 16\nmemory_bw_tbs = 0.5\ntflops = { bf16 = 100 }\n')
    r = run("hardware", "--check", str(f), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["ok"] and d["memory_gb"] == 16 and d["memory_bw_tbs"] == 0.5
    # ridge point = 100e12 FLOP/s / 0.5e12 B/s = 200 FLOP/byte
    assert d["ridge_flop_per_byte"] == pytest.approx(200)
    assert d["scaleup_domain"] == 1 and d["scaleup_gbs"] is None
    text = " ".join(d["defaults"])
    for what in ("scaleup_domain = 1", "scaleup_latency_us = 6", "scaleout_latency_us = 40", "tdp_w unknown",
                 "price_usd_per_hour unknown", "family = other", "kernel_class = generic"):
        assert what in text
    plain = run("hardware", "--check", str(f))
    assert plain.exit_code == 0 and "200 FLOP/byte" in plain.output and "16 GB at 0.5 TB/s" in plain.output


@pytest.mark.parametrize("body,field", [
    ('memory_bw_tbs = 0.5\ntflops = { bf16 = 100 }\n', "memory_gb"),
    ('memory_gb = 16\nmemory_bw_tbs = 0.5\ntflops = { bf61 = 100 }\n', "tflops.bf61"),
    ('memory_gb = 16\nmemory_bw_tbs = 0.5\ntflops = { bf16 = 100 }\nscaleup_domain = 4\n', "scaleup_gbs"),
    ('memory_gb = 16\nmemory_bw_tbs = 0.5\ntflops = { bf16 = 100 }\nmemroy_gb = 3\n', "memroy_gb"),
])
def test_check_names_the_bad_field(tmp_path, body, field):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    r = run("hardware", "--check", str(f), "--json")
    assert r.exit_code == 2
    err = json.loads(r.output[:r.output.rindex("}") + 1])["error"]
    assert field in err["field"] or field in err["problem"]
    assert "Traceback" not in r.output


def test_check_and_template_together_is_an_input_error():
    r = run("hardware", "--template", "--check", "x.toml")
    assert r.exit_code == 2 and "Traceback" not in r.output
