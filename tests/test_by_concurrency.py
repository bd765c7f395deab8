"""pareto and plan by concurrency (issue 17, part 3): each layout's closed-loop steady state at each concurrency,
next to the static-batch figures, which stay as they were."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.by_concurrency import DEFAULT_CONCURRENCY
from tokenmath.analyses.serving.pareto import pareto
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.steady_state import steady_state
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

STATIC = ("by_concurrency", "by_concurrency_notes")


@pytest.fixture(scope="module")
def p70():
    return pareto("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")


def _curves(points):
    by = {}
    for q in points:
        by.setdefault(q["layout"], []).append(q)
    return {k: sorted(v, key=lambda q: q["concurrency"]) for k, v in by.items()}


def test_every_fitting_layout_at_every_default_concurrency(p70):
    curves = _curves(p70.by_concurrency)
    fitting = {q["layout"] for q in p70.points}
    assert set(curves) == fitting and len(curves) >= 2
    for qs in curves.values():
        assert [q["concurrency"] for q in qs] == list(DEFAULT_CONCURRENCY)


def test_more_users_more_throughput_per_chip_less_speed_per_user(p70):
    """Continuous batching: each added user shares the weight reads (throughput per chip up) and lengthens the step
    (tokens/s per user down); once the running requests are capped, throughput stops growing."""
    for qs in _curves(p70.by_concurrency).values():
        y = [q["output_tokens_per_s_per_chip"] for q in qs]
        x = [q["output_tokens_per_s_per_user"] for q in qs]
        assert all(b >= a * (1 - 1e-9) for a, b in zip(y, y[1:])), y
        assert all(b <= a * (1 + 1e-9) for a, b in zip(x, x[1:])), x
        assert y[-1] > 10 * y[0]
        for q in qs:       # running requests never exceed the users; the rest queue
            assert q["running"] <= q["concurrency"] + 1e-9
            assert q["running"] + q["queued"] == pytest.approx(q["concurrency"])


def test_points_are_the_steady_state_of_that_layout(p70):
    """The same numbers as steady_state for the layout on its own (one closed form, not a second model)."""
    q = next(q for q in p70.by_concurrency if q["tp"] == 8 and q["concurrency"] == 64)
    s = steady_state("llama-3.1-70b", "h100-sxm", chips=8, tp=8, engine="vllm", concurrency=64).points[0]
    assert q["output_tokens_per_s_per_chip"] == pytest.approx(s.output_tokens_per_s_per_chip, rel=1e-12)
    assert q["output_tokens_per_s_per_user"] == pytest.approx(s.output_tokens_per_s_per_user, rel=1e-12)
    assert q["ttft_s"] == pytest.approx(s.ttft_s, rel=1e-12)


def test_frontier_flags_are_the_undominated_points(p70):
    pts = p70.by_concurrency
    for q in pts:
        dominated = any(o["output_tokens_per_s_per_user"] >= q["output_tokens_per_s_per_user"]
                        and o["output_tokens_per_s_per_chip"] >= q["output_tokens_per_s_per_chip"]
                        and (o["output_tokens_per_s_per_user"], o["output_tokens_per_s_per_chip"])
                        != (q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"]) for o in pts)
        xy = (q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"])
        twin_flagged = any(o is not q and o["frontier"] and (o["output_tokens_per_s_per_user"],
                                                             o["output_tokens_per_s_per_chip"]) == xy for o in pts)
        if q["frontier"]:
            assert not dominated and not twin_flagged, q       # an equal point (saturated KV) is flagged once
        else:
            assert dominated or twin_flagged, q
    # one user on the widest tensor-parallel layout is the most interactive point of all
    top = max(pts, key=lambda q: q["output_tokens_per_s_per_user"])
    assert top["frontier"] and top["concurrency"] == 1 and top["tp"] == 8


def test_static_batch_output_unchanged(p70):
    off = pareto("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm", concurrency=()).to_dict()
    on = p70.to_dict()
    assert off["by_concurrency"] == [] and on["by_concurrency"]
    assert {k: v for k, v in on.items() if k not in STATIC} == {k: v for k, v in off.items() if k not in STATIC}


def test_no_engine_no_axis_and_an_explicit_axis_needs_one():
    assert pareto("llama-3.1-8b", "h100-sxm", chips=1).by_concurrency == []          # Python default: no engine
    with pytest.raises(InputError) as e:
        pareto("llama-3.1-8b", "h100-sxm", chips=1, concurrency=[8])
    assert e.value.field == "concurrency"
    with pytest.raises(InputError) as e:
        pareto("llama-3.1-8b", "h100-sxm", chips=1, engine="vllm", concurrency=[0])
    assert e.value.field == "concurrency"


def test_plan_traces_the_best_layout_and_runner_ups():
    p = plan("llama-3.1-70b", "hgx-h100", chips=8, engine="sglang", concurrency=[1, 16, 256])
    layouts = [p.best["layout"], *(r["layout"] for r in p.runner_ups)]
    curves = _curves(p.by_concurrency)
    assert set(curves) == set(layouts)
    assert [q["concurrency"] for q in curves[p.best["layout"]]] == [1, 16, 256]
    d = p.to_dict()
    assert d["by_concurrency"] == list(p.by_concurrency)
    off = plan("llama-3.1-70b", "hgx-h100", chips=8, engine="sglang", concurrency=()).to_dict()
    strip = lambda x: {k: v for k, v in x.items() if k not in (*STATIC, "search_s")}     # noqa: E731
    assert strip(d) == strip(off)


def test_cli_pareto_and_plan():
    r = CliRunner().invoke(cli, ["pareto", "--model", "llama-3.1-8b", "--chips", "2", "--concurrency", "1,64",
                                 "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {q["concurrency"] for q in d["by_concurrency"]} == {1, 64}
    r = CliRunner().invoke(cli, ["pareto", "--model", "llama-3.1-8b", "--chips", "2", "--concurrency", "none",
                                 "--json"])
    assert json.loads(r.output)["by_concurrency"] == []
    r = CliRunner().invoke(cli, ["plan", "--model", "llama-3.1-8b", "--chips", "2", "--concurrency", "4,32"])
    assert r.exit_code == 0, r.output
    assert "By concurrency" in r.output and "best layout" in r.output
    r = CliRunner().invoke(cli, ["plan", "--model", "llama-3.1-8b", "--concurrency", "0", "--json"])
    assert r.exit_code == 2
