"""Speculative decoding in pareto's and plan's curves by concurrency (issues 17 and 18): the draft reaches the
closed-loop steady state of every traced layout (by_concurrency.trace)."""
import json
import math

import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.by_concurrency import trace
from tokenmath.analyses.serving.pareto import pareto
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.speculative import resolve_draft, speculation, speculative
from tokenmath.analyses.setup import setup
from tokenmath.faces.cli import cli

DRAFT = speculation("llama-3.2-1b", 4, 0.7)


@pytest.fixture(scope="module")
def p70():
    return pareto("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm", concurrency=[1, 16, 64], speculation=DRAFT)


def _at(points, layout, c):
    return next(p for p in points if p["layout"] == layout and p["concurrency"] == c)


def test_one_user_equals_infer_draft_by_hand(p70):
    """Concurrency 1, 1,024 in / 256 out: the user's 255 tokens after the first come E = (1 - 0.7^5) / 0.3 = 2.7731
    a verification step, so D = ceil(255 / 2.7731) = ceil(91.96) = 92 steps, each infer --draft's batch-1 step
    (draft's 4 steps + the 5-token verification pass). Speed = 255 / (92 x step); infer --draft's per-token speed is
    E / step, so the two differ by 255 / (92 x 2.7731) = 0.99952 only (a request's last step is not full)."""
    E = (1 - 0.7 ** 5) / (1 - 0.7)
    assert E == pytest.approx(2.7731, abs=1e-4)
    D = math.ceil(255 / E)
    assert D == 92
    inf = speculative("llama-3.1-70b", "h100-sxm", DRAFT, chips=8, engine="vllm").to_dict()
    step = inf["step_s"][0]
    pt = _at(p70.by_concurrency, "tp=8 pp=1 ep=1 dp=1", 1)
    assert pt["output_tokens_per_s_per_user"] == pytest.approx(255 / (D * step), rel=2e-3)
    assert pt["output_tokens_per_s_per_user"] == pytest.approx(inf["output_tokens_per_s_per_user"][0] * 255 / (D * E),
                                                               rel=2e-3)
    assert pt["running"] == 1 and pt["limit"] == "users"
    # the draft's note and object ride along; the static frontier decodes with it too
    d = p70.to_dict()
    assert d["speculation"]["k"] == 4 and d["by_concurrency"]


@pytest.mark.parametrize("model,chips,spec", [
    ("llama-3.1-70b", 8, ("llama-3.2-1b", 1, 0.5)),
    ("llama-3.1-70b", 8, ("llama-3.2-1b", 4, 0.7)),
    ("llama-3.1-70b", 4, ("llama-3.2-1b", 2, 0.9)),
    ("llama-3.1-8b", 1, ("llama-3.2-1b", 4, 0.6)),
    ("mixtral-8x7b", 2, (None, None, None, 1)),          # an MTP head at the default acceptance 0.875
])
def test_speculation_never_slows_one_user(model, chips, spec):
    """At concurrency 1 the step is memory-bound: verifying k + 1 tokens reads the weights once, so with a sensible
    acceptance the user is never slower (acceptance 0 is: tests/test_speculative.py)."""
    su = setup(model, "h100-sxm", chips=chips, engine="vllm")
    lay = (int(su.layout.tp), int(su.layout.pp), int(su.layout.ep), int(su.layout.dp))
    sp = speculation(*spec)
    dr = resolve_draft(sp, su.model, su.precision)
    plain, _ = trace(su, [lay], (1,), 1024, 256)
    spec_, _ = trace(su, [lay], (1,), 1024, 256, draft=dr)
    assert spec_[0]["output_tokens_per_s_per_user"] > plain[0]["output_tokens_per_s_per_user"]


def test_plan_traces_with_the_draft_and_agrees_with_pareto(p70):
    p = plan("llama-3.1-70b", "hgx-h100", chips=8, engine="vllm", concurrency=[1, 16, 64], speculation=DRAFT)
    assert p.by_concurrency and p.draft is not None
    for q in p.by_concurrency:
        r = _at(p70.by_concurrency, q["layout"], q["concurrency"])
        assert q["output_tokens_per_s_per_user"] == pytest.approx(r["output_tokens_per_s_per_user"], rel=1e-12)
    plain = plan("llama-3.1-70b", "hgx-h100", chips=8, engine="vllm", concurrency=[1])
    lay = "tp=8 pp=1 ep=1 dp=1"
    assert _at(p.by_concurrency, lay, 1)["output_tokens_per_s_per_user"] > \
        1.5 * _at(plain.by_concurrency, lay, 1)["output_tokens_per_s_per_user"]


def test_a_layout_the_simulator_does_not_model_is_left_out_with_a_note():
    su = setup("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")
    dr = resolve_draft(DRAFT, su.model, su.precision)
    pts, notes = trace(su, [(4, 2, 1, 1), (8, 1, 1, 1)], (1, 4), 1024, 256, draft=dr)
    assert {p["layout"] for p in pts} == {"tp=8 pp=1 ep=1 dp=1"}
    assert any("tp=4 pp=2" in n and "pipeline" in n for n in notes)


def test_cli_pareto_draft_prints_the_curve():
    r = CliRunner().invoke(cli, ["pareto", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--chips", "8", "--engine", "vllm",
                                 "--draft", "llama-3.2-1b", "--acceptance", "0.7", "--concurrency", "1,16", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["speculation"]["draft_model"] == "llama-3.2-1b"
    assert {p["concurrency"] for p in d["by_concurrency"]} == {1, 16}
