"""Speculative decoding and MTP (engine/speculative.py, analyses/serving/speculative.py, --draft/--mtp options)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.speculative import speculation, speculative
from tokenmath.base.errors import InputError
from tokenmath.engine.speculative import MTP_ACCEPTANCE, expected_tokens
from tokenmath.faces.cli import cli
from tokenmath.specs.efficiency import PEAK

BATCHES = [1, 8, 64, 256, 512]


def test_expected_tokens_leviathan_eq1():
    # E = (1 - a^(k+1)) / (1 - a): a = 0.7, k = 4 -> (1 - 0.16807) / 0.3 = 2.7731; a = 0 -> 1; a = 1 -> k + 1
    assert float(expected_tokens(0.7, 4)) == pytest.approx(2.7731)
    assert float(expected_tokens(0.0, 4)) == 1.0 and float(expected_tokens(1.0, 4)) == 5.0
    assert float(expected_tokens(0.875, 1)) == pytest.approx(1.875)         # DeepSeek-V3 MTP, one head
    assert np.all(np.diff(expected_tokens(np.linspace(0, 1, 11), 3)) > 0)     # more acceptance, more tokens


def test_hand_computed_small_case():
    # Llama 3.1 8B target, Llama 3.2 1B draft, one H100 (3.35 TB/s), batch 1, pure roofline, no engine.
    # plain step = (15,009,849,344 B weights read + 131,072 B/token x 1,152 KV) / 3.35e12 = 4.5256 ms (test_whatif.py)
    # draft step: all 1,235,814,400 params (tied embedding read as the output head) x 2 B = 2,471,628,800 B
    #             + KV 16 x 2 x 8 x 64 x 2 = 32,768 B/token x 1,151 = 37,715,968 B -> 2,509,344,768 / 3.35e12 = 0.7491 ms
    # verify (5 tokens, still memory-bound) ~ the plain step; step = 4 x 0.7491 + 4.5256 = 7.522 ms
    # per token = 7.522 / 2.7731 = 2.7125 ms; speedup = 4.5256 / 2.7125 = 1.668
    r = speculative("llama-3.1-8b", "h100-sxm", speculation("llama-3.2-1b", 4, 0.7), batches=[1], chips=1,
                    efficiency=PEAK, engine="none")
    assert r.plain_step_s[0] == pytest.approx(4.5256e-3, rel=2e-3)
    assert r.draft_s[0] / 4 == pytest.approx(2_509_344_768 / 3.35e12, rel=2e-3)
    assert r.verify_s[0] == pytest.approx(r.plain_step_s[0], rel=5e-3)
    assert r.per_token_s[0] == pytest.approx((4 * 0.7491e-3 + 4.5256e-3) / 2.7731, rel=5e-3)
    assert r.speedup[0] == pytest.approx(1.668, rel=5e-3)


@pytest.mark.parametrize("spec", [speculation("llama-3.2-1b", 4, 0.0), speculation(None, None, 0.0, 2)],
                         ids=["draft", "mtp"])
def test_acceptance_zero_never_beats_plain_decoding(spec):
    model = "llama-3.1-70b" if spec.draft else "deepseek-v3"
    hw, chips = ("h100-sxm", 8) if spec.draft else ("gb200-nvl72", 72)
    r = speculative(model, hw, spec, batches=BATCHES, chips=chips)
    assert r.tokens_per_step == 1.0
    assert np.all(r.per_token_s >= r.plain_step_s)
    c0, c1 = r.cost(r.plain_step_s), r.cost(r.per_token_s)
    assert np.all(c1 >= c0)


def test_no_gain_once_compute_bound():
    """Small batch: the verify pass re-reads the same weights, so speculation pays. Large batch: the plain step is
    compute-bound, the verify pass does ~(k + 1) x its FLOPs for E = 2.77 < 5 tokens: no gain."""
    r = speculative("llama-3.1-70b", "h100-sxm", speculation("llama-3.2-1b", 4, 0.7), batches=BATCHES, chips=8)
    assert r.speedup[0] > 1.5
    assert r.verify_bottleneck[-1] == "compute" and r.speedup[-1] < 1.0
    assert np.all(np.diff(r.speedup) < 0)                   # the gain shrinks as the batch grows


def test_deepseek_mtp_default_acceptance_is_sourced():
    s = speculation(mtp=1)
    assert s.acceptance == MTP_ACCEPTANCE and 0.85 <= s.acceptance <= 0.90 and "2412.19437" in s.acceptance_source
    r = speculative("deepseek-v3", "gb200-nvl72", s, batches=[1, 64, 1024], chips=72)
    # the report's 1.8x TPS with one MTP module: the model gives 1.7-1.85x at these batches (a check, not a fit)
    assert np.all((r.speedup > 1.6) & (r.speedup < 1.875))
    assert r.draft == "deepseek-v3/mtp"


@pytest.mark.parametrize("kw, field", [
    (dict(draft="llama-3.2-1b", k=4), "acceptance"),          # no published default for a draft pair
    (dict(draft="llama-3.2-1b", k=4, acceptance=1.2), "acceptance"),
    (dict(draft="llama-3.2-1b", k=0, acceptance=0.5), "spec_k"),
    (dict(draft="llama-3.2-1b", mtp=1), "mtp"),
    (dict(acceptance=0.5), "acceptance"),
])
def test_bad_speculation_names_the_field(kw, field):
    with pytest.raises(InputError) as e:
        speculation(**kw)
    assert e.value.field == field


def test_draft_must_share_the_vocabulary():
    with pytest.raises(InputError) as e:
        speculative("deepseek-v3", "gb200-nvl72", speculation("llama-3.2-1b", 2, 0.5), chips=72)
    assert e.value.field == "draft"


def test_cli_infer_and_hyperbola():
    r = CliRunner().invoke(cli, ["infer", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--chips", "8", "--draft",
                                 "llama-3.2-1b", "--spec-k", "4", "--acceptance", "0.7", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    s = d["speculative"]
    assert s["batch"] == [d["batch"]] and s["tokens_per_step"] == pytest.approx(2.7731)
    assert s["output_tokens_per_s_per_user"][0] > d["output_tokens_per_s_per_user"]
    r = CliRunner().invoke(cli, ["hyperbola", "-m", "llama-3.1-8b", "--mtp", "1", "--acceptance", "0.8"])
    assert r.exit_code == 0 and "MTP head x 1" in r.output and "speedup" in r.output
    r = CliRunner().invoke(cli, ["infer", "--draft", "llama-3.2-1b", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "acceptance"
