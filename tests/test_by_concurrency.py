"""pareto and plan by concurrency (issue 17, part 3): each layout's closed-loop steady state at each concurrency,
next to the static-batch figures, which stay as they were."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.by_concurrency import DEFAULT_CONCURRENCY, cheapest_meeting
from tokenmath.analyses.serving.pareto import pareto
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.steady_state import steady_state
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

STATIC = ("by_concurrency", "by_concurrency_notes", "best_by_concurrency")


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


def _pt(layout, tp, dp, c, speed, tok_s, ttft):
    return {"layout": layout, "tp": tp, "pp": 1, "ep": 1, "dp": dp, "concurrency": c,
            "output_tokens_per_s_per_user": speed, "output_tokens_per_s": tok_s, "ttft_s": ttft}


def test_cheapest_meeting_by_hand():
    pts = [_pt("tp=8", 8, 1, 8, 70.0, 560.0, 0.06),      # 8 chips / 560 tok/s x 1e6 = 14,286 chip-s per Mtok
           _pt("tp=8", 8, 1, 64, 38.0, 2432.0, 0.08),    # 8 / 2,432 x 1e6 = 3,289.5
           _pt("tp=4 dp=2", 4, 2, 64, 33.0, 2112.0, 0.07),   # 3,787.9
           _pt("tp=8", 8, 1, 512, 9.0, 4608.0, 0.9)]     # 1,736.1, the cheapest, but slow and late
    assert cheapest_meeting(pts, None, None, None)["concurrency"] == 512
    c = cheapest_meeting(pts, 0.5, 20.0, 2.99)
    assert (c["layout"], c["concurrency"], c["chips"]) == ("tp=8", 64, 8)
    assert c["chip_s_per_mtok_output"] == pytest.approx(8 / 2432.0 * 1e6)
    # $ = 8 chips x $2.99 / 3600 s per chip-hour / 2,432 tok/s x 1e6 = $2.7321 per Mtok
    assert c["cost_per_mtok_output_request_usd"] == pytest.approx(8 * 2.99 / 3600 / 2432.0 * 1e6)
    assert cheapest_meeting(pts, 0.5, 20.0, None)["cost_per_mtok_output_request_usd"] is None
    assert cheapest_meeting(pts, 0.05, None, 2.99) is None          # no point's own TTFT is within 50 ms
    # equal chip-seconds: the more interactive point wins
    tie = [_pt("a", 8, 1, 64, 30.0, 2000.0, 0.1), _pt("b", 8, 1, 32, 40.0, 2000.0, 0.1)]
    assert cheapest_meeting(tie, None, None, None)["layout"] == "b"


def test_plan_names_the_cheapest_continuously_batched_point_that_meets_the_targets():
    # A TTFT target of 500 ms holds a static batch to the few prompts one prefill of the whole batch allows; under
    # continuous batching each request waits only for its own prompt, so far more users meet it, far cheaper.
    p = plan("llama-3.1-70b", "hgx-h100", chips=8, ttft_ms=500, engine="vllm")
    c = p.best_by_concurrency
    # the one continuous search covers every layout that fits, so it is at least as cheap as any traced point shown
    assert c["ttft_s"] <= 0.5 and p.best["ttft_s"] <= 0.5
    assert c["concurrency"] > p.best["batch"]
    assert c["cost_per_mtok_output_request_usd"] < p.best["cost_per_mtok_output_request_usd"]
    ok = [q for q in p.by_concurrency if q["ttft_s"] <= 0.5]
    assert c["chip_s_per_mtok_output"] <= min(8 / q["output_tokens_per_s"] * 1e6 for q in ok) * (1 + 1e-12)
    # a speed target: every traced point below it is excluded, and the answer meets it
    q = plan("llama-3.1-70b", "hgx-h100", chips=8, min_tokens_per_s_per_user=40, engine="vllm").best_by_concurrency
    assert q["output_tokens_per_s_per_user"] >= 40
    assert plan("llama-3.1-70b", "hgx-h100", chips=8, engine="vllm", concurrency=()).best_by_concurrency is None
    r = CliRunner().invoke(cli, ["plan", "--model", "llama-3.1-70b", "--system", "hgx-h100", "--chips", "8",
                                 "--ttft-ms", "500"])
    assert "cheapest continuously batched point (1-1,024 users traced) meeting TTFT <= 500 ms" in r.output


def test_the_boundary_between_two_traced_concurrencies_is_bisected_to_one_user():
    # >= 20 tok/s/user: tp=4 dp=2 runs 24.4 tok/s/user at 128 users and 15.9 at 256; the answer is the largest user
    # count between them that still meets the target, and one user more misses it (the steady state, by itself)
    p = plan("llama-3.1-70b", "hgx-h100", chips=8, min_tokens_per_s_per_user=20, engine="vllm")
    c = p.best_by_concurrency
    assert c["bisected"] and c["output_tokens_per_s_per_user"] >= 20
    axis = sorted(q["concurrency"] for q in p.by_concurrency if q["layout"] == c["layout"] and not q.get("bisected"))
    assert c["concurrency"] not in axis
    below = max(a for a in axis if a < c["concurrency"])
    above = min(a for a in axis if a > c["concurrency"])
    assert below < c["concurrency"] < above
    kw = dict(chips=8, tp=c["tp"], pp=c["pp"], dp=c["dp"], engine="vllm")
    here, nxt = steady_state("llama-3.1-70b", "h100-sxm", concurrency=[c["concurrency"], c["concurrency"] + 1],
                             **kw).points
    assert here.output_tokens_per_s_per_user == pytest.approx(c["output_tokens_per_s_per_user"])
    assert nxt.output_tokens_per_s_per_user < 20
    # no targets: nothing to bisect, and the cheapest point is an axis point
    assert not any(q.get("bisected") for q in plan("llama-3.1-70b", "hgx-h100", chips=8, engine="vllm").by_concurrency)
