"""Issue 15, item 11: a hardware file without `scaleup_gbs`, and catalog figures without a source.

Choice: refuse. A file that puts several chips in one scale-up domain (scaleup_domain > 1) must say how fast the link
between them is: the old silent default (PCIe Gen4, 32 GB/s) made the first real file a user writes 14x slower to
communicate than an H100's NVLink (450 GB/s), and a note is easily missed while the number is wrong. A file of single
chips (scaleup_domain 1, the default) needs no link: its chips only ever talk over scale-out."""
import pytest
from click.testing import CliRunner

import tokenmath as tm
from tokenmath.analyses.serving.context import context
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli as main
from tokenmath.specs.efficiency import PEAK
from tokenmath.specs.hardware import catalog, from_record, get_hardware

H100ISH = 'name = "my H100 box"\nmemory_gb = 80\nmemory_bw_tbs = 3.35\ntflops = { bf16 = 989 }\n'


def test_file_with_a_domain_but_no_link_is_refused(tmp_path):
    """Before: this file loaded with scaleup_bw = 32e9 B/s, and Llama 3.1 70B on 8 of its chips had a 0.230 s TTFT,
    'communication'-bound (h100-sxm with its 450 GB/s NVLink: 0.059 s, compute-bound)."""
    f = tmp_path / "hw.toml"
    f.write_text(H100ISH + "scaleup_domain = 8\n")
    with pytest.raises(InputError) as e:
        get_hardware(str(f))
    assert e.value.field == "hardware.scaleup_gbs"
    assert "450" in e.value.valid and "scaleup_domain = 1" in e.value.valid
    r = CliRunner().invoke(main, ["infer", "--model", "llama-3.1-70b", "--hardware", str(f), "--chips", "8"])
    assert r.exit_code == 2 and "scaleup_gbs" in r.output


def test_single_chip_file_needs_no_link(tmp_path):
    f = tmp_path / "hw.toml"
    f.write_text(H100ISH)                                   # scaleup_domain defaults to 1
    hw = get_hardware(str(f))
    assert hw.scaleup_domain == 1 and hw.caveats == ()
    r = tm.infer("llama-3.1-8b", hw, batch=1, input_len=512, output_len=1, efficiency=PEAK)
    assert r.fits


def test_file_with_its_link_gets_exactly_that_link(tmp_path):
    """450 GB/s one way, as written: the all-reduce of one 16 KiB activation over 8 chips moves
    2 x 7/8 x 16,384 B = 28,672 B at 450e9 B/s = 63.7 ns (plus latency), not 896 ns at 32e9 B/s."""
    f = tmp_path / "hw.toml"
    f.write_text(H100ISH + "scaleup_domain = 8\nscaleup_gbs = 450\n")
    hw = get_hardware(str(f))
    assert hw.scaleup_bw == 450e9
    assert 2 * 7 / 8 * 16_384 / hw.scaleup_bw == pytest.approx(63.7e-9, rel=1e-3)


def test_catalog_chips_with_a_domain_have_a_link():
    for hid, rec in catalog().items():
        if rec.get("scaleup_domain", 1) > 1:
            assert rec.get("scaleup_gbs"), hid


def test_unsourced_catalog_figures_are_caveats_and_reach_the_notes():
    """mi355x's link is an assumption (no vendor figure): the Hardware says so, and so does an answer's notes.
    Before: mi355x had no scaleup_gbs and silently got PCIe Gen4's 32 GB/s."""
    hw = get_hardware("mi355x")
    assert hw.scaleup_bw == pytest.approx(7 * 153.6 / 2 * 1e9)          # 537.6 GB/s, the stated assumption
    assert any("scaleup_gbs" in c and "assum" in c for c in hw.caveats), hw.caveats
    notes = context("llama-3.1-8b", "mi355x").to_dict()["notes"]
    assert any("scaleup_gbs" in n for n in notes), notes
    # every figure a catalog chip gives carries a source, or is a caveat that answers print
    for hid in catalog():
        for c in get_hardware(hid).caveats:
            assert "assum" in c.lower(), (hid, c)


def test_a_figure_without_a_source_is_a_caveat():
    rec = {"memory_gb": 80, "memory_bw_tbs": 3.35, "tflops": {"bf16": 989}, "scaleup_domain": 8, "scaleup_gbs": 450,
           "tdp_w": 700, "sources": {"memory": "datasheet", "flops": "datasheet", "scaleup": "datasheet"}}
    hw = from_record("x", rec)
    assert hw.caveats == ("x: tdp_w = 700 has no source in the catalog",)
