"""Issue 15, items 9 and 18 (deduce and price): the calibration's direction, the attention prior with MLA, and
options that were silently ignored or absurd."""
import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.inverse.deduce import Priors, attention_prior, attn_flops_per_kv_byte, deduce
from tokenmath.analyses.serving.provider_price import price
from tokenmath.base.errors import InputError
from tokenmath.engine import closed_form
from tokenmath.faces.cli import cli as main
from tokenmath.faces.explain_inverse import explain_deduction
from tokenmath.specs.efficiency import DEFAULT
from tokenmath.specs.model_catalog import get_model

FAST = dict(samples=20_000, seed=3)


# ---- item 9: which way the calibration goes ---------------------------------------------------------------------

def _cost_scale_line(text):
    return next(line for line in text.splitlines() if line.strip().startswith("cost_scale"))


@pytest.mark.parametrize("scale, word", [(2.52, "above"), (0.5, "below")])
def test_explain_states_the_calibration_direction(scale, word):
    """deduce compares an observed price with cost_scale x (the closed form's cost / (u (1 - m))): with
    cost_scale = 2.52 the model that reproduces a list price is the one whose closed-form price is 2.52x lower, i.e.
    list prices sit 2.52x ABOVE the closed form at the priors' middles. The scenario's own arithmetic shows it:
    price = chip-s x $/chip-s / ((1 - m) u) x cost_scale."""
    d = deduce(0.27, 1.10, priors=Priors(cost_scale=scale, **FAST))
    sc = d.scenario
    closed_form_price = sc["chip_s_in"] * sc["usd_per_chip_s"] / ((1 - sc["margin"]) * sc["utilization"]) * 1e6
    assert closed_form_price * scale == pytest.approx(0.27, rel=1e-12)      # list = scale x closed form
    line = _cost_scale_line(explain_deduction(d))
    assert word in line and f"{scale:.2f}" in line, line
    assert ("below" if word == "above" else "above") not in line, line


def test_explain_says_uncalibrated_at_one():
    line = _cost_scale_line(explain_deduction(deduce(0.27, 1.10, priors=Priors(cost_scale=1.0, **FAST))))
    assert "uncalibrated" in line and "above" not in line and "below" not in line, line


# ---- item 9: attention FLOPs per KV byte ------------------------------------------------------------------------

def test_mla_attention_flops_per_kv_byte_by_hand():
    """DeepSeek-V3 decodes MLA in the absorbed form: per (query, cached token) pair and layer, scores over the
    512-dim latent + 64-dim RoPE key and values over the latent, for each of 128 heads:
        2 x 128 x (512 + 64) + 2 x 128 x 512 = 2 x 128 x 1,088 = 278,528 FLOPs,
    against (512 + 64) x 2 B = 1,152 B of bf16 KV per token and layer: g = 278,528 / 1,152 = 241.8."""
    m = get_model("deepseek-v3")
    assert (m.n_heads, m.kv_lora_rank, m.qk_rope_head_dim) == (128, 512, 64)
    g = attn_flops_per_kv_byte(m)
    assert g == pytest.approx(278_528 / 1_152, rel=1e-12) == pytest.approx(241.78, abs=0.01)
    pr = Priors()
    lo, hi = pr.attn_flops_per_kv_byte
    assert not lo <= g <= hi                               # the GQA/MHA range alone cannot hold it
    mlo, mhi = pr.mla_range()
    assert mlo <= g <= mhi                                 # the MLA branch of the prior does


def test_mha_and_gqa_attention_flops_per_kv_byte_by_hand():
    """MHA (Llama 2 7B, 32 heads of 128): 4 x 32 x 128 = 16,384 FLOPs per pair and layer against
    2 x 32 x 128 x 2 B = 16,384 B of KV: g = 1. GQA (Llama 3.1 70B, 64 query heads over 8 KV heads): g = 64 / 8 = 8."""
    assert attn_flops_per_kv_byte(get_model("llama-2-7b")) == pytest.approx(16_384 / 16_384) == 1.0
    assert attn_flops_per_kv_byte(get_model("llama-3.1-70b")) == pytest.approx(4 * 64 * 128 / (2 * 8 * 128 * 2)) == 8.0
    assert "1 for MHA" in closed_form.__doc__ and "2 for MHA" not in closed_form.__doc__


def test_attention_prior_samples_mla_and_doubles_g_for_fp8_kv():
    pr = Priors(mla_share=0.25, kv_fp8_share=0.5)
    g, kv_scale = attention_prior(pr, np.random.default_rng(0), 200_000)
    mlo, mhi = pr.mla_range()
    lo, hi = pr.attn_flops_per_kv_byte
    bf16 = kv_scale == 1.0
    assert set(np.unique(kv_scale)) == {0.5, 1.0}
    # bf16 KV: g in the GQA range (1-16) or the MLA range; fp8 KV holds half the bytes for the same FLOPs: g x 2
    in_mla = (g >= mlo) & (g <= mhi)
    assert np.all((in_mla | ((g >= lo) & (g <= hi)))[bf16])
    assert np.all((((g / 2 >= mlo) & (g / 2 <= mhi)) | ((g / 2 >= lo) & (g / 2 <= hi)))[~bf16])
    assert np.mean(in_mla[bf16]) == pytest.approx(0.25, abs=0.01)


# ---- item 18: options silently ignored or absurd ----------------------------------------------------------------

def test_long_price_without_threshold_is_refused():
    """Before: deduce(1, 4, long_input_price=2) dropped the long price (kv_informed_by = [])."""
    with pytest.raises(InputError) as e:
        deduce(1.0, 4.0, long_input_price=2.0, priors=Priors(**FAST))
    assert e.value.field == "long_context_threshold"
    d = deduce(1.0, 4.0, long_input_price=2.0, long_context_threshold=200_000, priors=Priors(**FAST)).to_dict()
    assert d["kv_informed_by"] == ["long_input_price"]


@pytest.mark.parametrize("kw, field", [
    (dict(price_noise=1e308), "price_noise"), (dict(price_noise=0.0), "price_noise"),
    (dict(utilization=(1e-300, 0.5)), "utilization"), (dict(margin=(0.0, 1.0)), "margin"),
    (dict(batch=(0.0, 512.0)), "batch"), (dict(chip_cost_factor=(0.0, 1.0)), "chip_cost_factor"),
    (dict(samples=10**9), "samples"), (dict(samples=10), "samples")])
def test_absurd_priors_are_refused_with_the_range(kw, field):
    """Before: --noise 1e308 ran and returned the prior itself (active params 0.76-1204 B, effective samples =
    all 200,000: the prices were ignored)."""
    with pytest.raises(InputError) as e:
        deduce(1.0, 4.0, priors=Priors(**{**FAST, **kw}))
    assert e.value.field == field and e.value.valid


@pytest.mark.parametrize("kw", [dict(long_context_threshold=0.5), dict(long_context_threshold=1e300)])
def test_threshold_is_a_token_count(kw):
    with pytest.raises(InputError) as e:
        deduce(1.0, 4.0, long_input_price=2.0, priors=Priors(**FAST), **kw)
    assert e.value.field == "long_context_threshold"


def test_cli_noise_and_samples_are_refused():
    r = CliRunner().invoke(main, ["deduce", "--input-price", "1", "--output-price", "4", "--noise", "1e308"])
    assert r.exit_code == 2 and "price_noise" in r.output and "3" in r.output
    r = CliRunner().invoke(main, ["deduce", "--input-price", "1", "--output-price", "4", "--samples", "999999999"])
    assert r.exit_code == 2 and "samples" in r.output      # before: silently capped at 2,000,000
    r = CliRunner().invoke(main, ["deduce", "--input-price", "1", "--output-price", "4", "--long-output-price", "9"])
    assert r.exit_code == 2 and "long_context_threshold" in r.output


def test_price_utilization_range():
    """price = cost / (u (1 - m)). Before: u = 1e-300 at m = 0.5 gave $1.23e300 per output Mtok. Now u must be in
    [0.01, 1]; at the bottom of the range the price is cost / (0.01 x 0.5) = 200 x cost."""
    with pytest.raises(InputError) as e:
        price("llama-3.1-70b", "h100-sxm", utilization=1e-300, efficiency=DEFAULT)
    assert e.value.field == "utilization" and "0.01" in e.value.valid
    r = price("llama-3.1-70b", "h100-sxm", utilization=0.01, margin=0.5, efficiency=DEFAULT).to_dict()
    assert r["price_per_mtok_input_usd"] == pytest.approx(r["cost_per_mtok_input_usd"] * 200, rel=1e-12)


def test_price_margin_range_and_empty_hardware_prior():
    """Before: price --margin 0.999999 returned a price 1e6x the cost; deduce --hardware , was an internal error."""
    with pytest.raises(InputError) as e:
        price("llama-3.1-70b", "h100-sxm", margin=0.999999, efficiency=DEFAULT)
    assert e.value.field == "margin" and "0.95" in e.value.valid
    r = CliRunner().invoke(main, ["deduce", "--input-price", "1", "--output-price", "4", "--hardware", ","])
    assert r.exit_code == 2 and "hardware" in r.output and "internal error" not in r.output
