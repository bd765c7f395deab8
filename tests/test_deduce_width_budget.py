"""Issue 22, round two: which unknown makes deduce's 80% interval wide (analyses/inverse/width_budget.py)."""
import math
from dataclasses import replace

import pytest

from tokenmath.analyses.inverse.deduce import Priors
from tokenmath.analyses.inverse.width_budget import PROVIDER_UNKNOWNS, UNKNOWNS, pinned, width_budget
from tokenmath.base.errors import InputError

SMALL = Priors(samples=20_000)


def test_pinned_values_are_the_middles_of_the_ranges():
    pr = Priors()
    # uniform: arithmetic middle; margin (0, 0.75) -> 0.375, utilization (0.3, 0.8) -> 0.55
    assert pinned(pr, "margin").margin == (0.375, 0.375)
    assert pinned(pr, "utilization").utilization == pytest.approx((0.55, 0.55))
    # log-uniform: geometric middle; batch (4, 512) -> sqrt(2048) = 45.25, chip $/h factor (0.4, 1.2) -> 0.693
    assert pinned(pr, "batch").batch == pytest.approx((math.sqrt(2048),) * 2)
    assert pinned(pr, "chip_cost_factor").chip_cost_factor == pytest.approx((math.sqrt(0.48),) * 2)
    # choices: the most likely one (h100-sxm 0.30 of the fleet prior, fp8 0.55 of the dtype prior)
    assert pinned(pr, "hardware").hardware == (("h100-sxm", 1.0),)
    assert pinned(pr, "weight_dtype").weight_dtype == (("fp8", 1.0),)
    assert pinned(pr, "moe").moe_share == 0.0 and pinned(pr, "attention").mla_share == 0.0
    # one pin changes one prior only
    assert replace(pinned(pr, "margin"), margin=pr.margin) == pr


def test_unknown_pin_is_refused_with_the_valid_names():
    with pytest.raises(InputError) as e:
        pinned(Priors(), "margn")
    assert "margin" in str(e.value)


def test_pinning_every_provider_unknown_narrows_the_interval():
    """Llama 3.1 405B's Azure price ($5.33 in / $16 out): the interval with every provider unknown pinned must be
    narrower than with the priors (measured at 100,000 samples: x18.4 -> x2.6); and pinning cannot move the
    interval off the physical range."""
    kw = {"input_price": 5.33, "output_price": 16.0}
    b = width_budget(kw, SMALL, names=("margin",))
    assert [p.name for p in b.pins] == ["margin", "all provider unknowns", "all provider unknowns + attention"]
    allp = b.pins[1]
    assert allp.width < b.base_width / 2
    assert allp.narrower == pytest.approx(b.base_width / allp.width)
    assert b.dominant().name == "margin"          # the only single pin asked for
    d = b.to_dict()
    assert d["base"]["width"] == pytest.approx(b.base_width) and d["dominant"] == "margin"


def test_every_unknown_is_a_prior_or_a_model_choice():
    assert set(PROVIDER_UNKNOWNS) < set(UNKNOWNS)
    for n in UNKNOWNS:
        pinned(Priors(), n)        # each one pins without error


def test_width_budget_command_text_and_json():
    from click.testing import CliRunner
    import json
    from tokenmath.faces.cli import cli as main
    args = ["deduce", "--api-model", "Meta-Llama-3.1-405B-Instruct", "--provider", "Microsoft Azure AI",
            "--evidence", "price", "--width-budget", "--samples", "20000"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "pinned to its middle" in res.output and "all provider unknowns" in res.output
    d = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    assert d["provider"] == "Microsoft Azure AI" and d["evidence"] == ["price"]
    assert {p["name"] for p in d["pins"]} >= {"margin", "hardware", "all provider unknowns"}
    assert d["dominant"] in {p["name"] for p in d["pins"]}


def test_validation_scale_for_a_provider_is_chosen_without_its_rows():
    """Held out by provider: changing one provider's prices 10x cannot change the cost_scale its rows are scored
    with (that scale is chosen on the other providers' rows only)."""
    from tokenmath.analyses.inverse.evidence import load
    from tokenmath.analyses.inverse.validation import heldout_scales
    rows = [r for r in load() if r.open_weights and r.catalog_id and r.catalog_id in ("llama-3.1-8b", "llama-3.1-70b")]
    rows = [r for r in rows if r.provider in ("Together AI", "DeepInfra", "AWS Bedrock")][:4]
    grid = (0.5, 1.0, 2.0)
    scales, _ = heldout_scales(rows, samples=2_000, grid=grid)
    p = rows[0].provider
    moved = [replace(r, input_price=10 * r.input_price, output_price=10 * r.output_price) if r.provider == p else r
             for r in rows]
    scales2, _ = heldout_scales(moved, samples=2_000, grid=grid)
    assert scales2[p] == scales[p] and set(scales) == {r.provider for r in rows}


def test_explain_marks_gateway_speeds_as_not_used():
    from click.testing import CliRunner
    from tokenmath.faces.cli import cli as main
    res = CliRunner().invoke(main, ["deduce", "--api-model", "openai/gpt-oss-20b", "--provider", "Together AI",
                                    "--explain", "--samples", "5000"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.strip().startswith("gateway_speed"))
    assert "vercel.com" in line and "not used" in line
    assert "output speed" not in res.output.split("Which evidence")[-1].split("Evidence used")[0]
