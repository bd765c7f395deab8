"""--help reads in the order a question is asked, every option says what it is, and a chip's short name works."""
import click
import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import COMMANDS, cli
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.systems import get_system


def _command(name):
    return cli.get_command(click.Context(cli), name)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_has_a_description_and_model_hardware_come_first(name):
    cmd = _command(name)
    opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    assert not [p.name for p in opts if not p.help], f"{name}: options without help"
    names = [p.name for p in opts]
    first = [n for n in ("model", "hardware") if n in names]
    assert names[:len(first)] == first
    for late in ("what_if", "vary"):
        if late in names:
            # nothing but --set/--vary (and --help, which click adds) follows them
            assert all(n in ("what_if", "vary") for n in names[names.index(late):]), names


def test_infer_help_lists_model_before_draft_set_and_vary():
    out = CliRunner().invoke(cli, ["infer", "--help"]).output
    pos = {k: out.index(k) for k in ("--model", "--hardware", "--draft", "--set", "--vary")}
    assert pos["--model"] < pos["--hardware"] < pos["--draft"] < pos["--set"] and pos["--hardware"] < pos["--vary"]
    assert "(heads|batch|dp|any) (heads|batch|dp|any)" not in " ".join(out.split())


@pytest.mark.parametrize("short,full", [("h100", "h100-sxm"), ("H100", "h100-sxm"), ("a100", "a100-80gb"),
                                        ("gb200", "gb200-nvl72")])
def test_short_chip_names_resolve_to_the_form_they_usually_mean(short, full):
    assert get_hardware(short).id == full
    assert get_system(short).chip == full


def test_an_unknown_chip_still_gets_the_closest_names():
    r = CliRunner().invoke(cli, ["infer", "--hardware", "h1000"])
    assert r.exit_code == 2 and "did you mean" in r.output


def test_every_priced_chip_says_when_and_in_which_market_it_was_priced():
    from tokenmath.specs.hardware import hardware_ids
    priced = [get_hardware(h) for h in hardware_ids() if get_hardware(h).price_usd_per_hour is not None]
    assert len(priced) >= 10
    for h in priced:
        assert h.price_date and h.price_market and "price" in h.sources, h.id
        assert h.price_market.startswith(("on-demand", "reserved", "spot")), h.id


def test_a_gb200_gpu_hour_costs_more_than_an_hgx_b200_one():
    # the same B200 silicon plus a Grace CPU share and the 72-GPU NVLink rack: CoreWeave's on-demand list
    # (coreweave.com/pricing, read 2026-09-20) is $42.00 per 4-GPU GB200 instance = $10.50/GPU-h vs HGX B200
    # $68.80 / 8 = $8.60; Spheron's $9.08 per superchip / 2 = $4.54 priced it below a B200 and is no longer used
    gb, b = get_hardware("gb200-nvl72"), get_hardware("b200")
    assert gb.price_usd_per_hour == 42.00 / 4
    assert gb.price_usd_per_hour > b.price_usd_per_hour
