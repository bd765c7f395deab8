"""Issue 15 item 5: one meaning per cost key, in every command.

- cost_per_mtok_output_usd: the decode step alone, $/s x step / batch x 1e6 (an API's output price when the
  input is billed separately);
- cost_per_mtok_output_request_usd: a whole request's chip time (its prompt's prefill and all its decode steps) per
  output token, $/s x (TTFT + output x step) / (batch x output) x 1e6;
- cost_per_mtok_input_usd: the prefill, $/s x TTFT / (batch x input) x 1e6.

The decode-only figure keeps the old key name (the CLI contract names it) with that one meaning everywhere; the
whole-request figure has its own key. Before the fix `cost_per_mtok_output_usd` meant the first in infer, hyperbola, prices and price and the second in plan,
slowmode, fleet and pareto: at the same point (Llama 3.1 70B, 8 x H100 SXM, tp=4 dp=2, batch 654, 1,024 in / 256 out)
infer printed $0.450 and slowmode $1.555 under the same name.
"""
import json

import pytest
from click.testing import CliRunner

import tokenmath as tm
from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.grid import evaluate, point
from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.input_vs_output import prices
from tokenmath.analyses.serving.pareto import pareto
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.provider_price import price
from tokenmath.analyses.serving.slowmode import slowmode
from tokenmath.analyses.setup import setup
from tokenmath.faces.cli import cli

DEC, REQ, INP = "cost_per_mtok_output_usd", "cost_per_mtok_output_request_usd", "cost_per_mtok_input_usd"
USD_S = 8 * 2.99 / 3600           # 8 x H100 SXM at $2.99 per chip-hour, $ per second


def _infer(layout, batch, input_len=1024, output_len=256):
    tp, pp, ep, dp = layout
    return tm.infer("llama-3.1-70b", "h100-sxm", chips=tp * pp * ep * dp, tp=tp, pp=pp, ep=ep, dp=dp, batch=batch,
                    input_len=input_len, output_len=output_len, engine="none").to_dict()


def test_the_same_point_has_one_figure_per_key():
    d = _infer((4, 1, 1, 2), 654)
    step, ttft = d["decode_step_s"], d["ttft_s"]
    # decode only: $/s x step / batch x 1e6 (~$0.498 at this point)
    assert d[DEC] == pytest.approx(USD_S * step / 654 * 1e6, rel=1e-12)
    # whole request: $/s x (TTFT + 256 steps) / (654 x 256 tokens) x 1e6 (~$1.488)
    assert d[REQ] == pytest.approx(USD_S * (ttft + 256 * step) / (654 * 256) * 1e6, rel=1e-12)
    # the two differ by exactly the prompt's prefill, billed per output token: input cost x 1,024 / 256
    assert d[REQ] == pytest.approx(d[DEC] + d[INP] * 1024 / 256, rel=1e-9)
    assert d[REQ] > 2.5 * d[DEC]     # 1,024-token prompts billed over 256 output tokens: prefill dominates
    # the grid the plan, slowmode, pareto and fleet questions read gives the same figures under the same keys
    su = setup("llama-3.1-70b", "h100-sxm")
    p = point(evaluate(su, [(4, 1, 1, 2)], [654], 1024, 256), 0, 0, 2.99)
    for k in (DEC, REQ, INP):
        assert p[k] == pytest.approx(d[k], rel=1e-9)


def _same_as_infer(p, input_len=1024, output_len=256, keys=(DEC, REQ)):
    d = _infer((p["tp"], p["pp"], p["ep"], p["dp"]), p["batch"], input_len, output_len)
    for k in keys:
        assert p[k] == pytest.approx(d[k], rel=1e-9), k


def test_every_command_uses_each_key_with_one_meaning():
    s = slowmode("llama-3.1-70b", "h100-sxm", budgets_s=[0.03, 0.06, 0.2])
    for r in s.rows:
        _same_as_infer(r)
    pa = pareto("llama-3.1-70b", "h100-sxm", chips=8)
    for q in pa.frontier[:: max(1, len(pa.frontier) // 5)]:
        _same_as_infer(q)
    pl = plan("llama-3.1-70b", "h100-sxm", chips=8).to_dict()
    for q in [pl["best"]] + pl["runner_ups"][:2]:
        _same_as_infer(q)
    f = fleet("llama-3.1-70b", "h100-sxm", demand=100_000).to_dict()
    _same_as_infer(f)
    # the fleet's own figure (its chips all year over the demand) carries the idle headroom of the last replica
    assert f["fleet_cost_per_mtok_output_usd"] >= f[REQ] * (1 - 1e-12)
    pr = price("llama-3.1-70b", "h100-sxm").to_dict()
    _same_as_infer(pr, 2000, 500, keys=(DEC, INP))
    # hyperbola and prices: decode only (hyperbola decodes at a context with one output step)
    h = hyperbola("llama-3.1-70b", "h100-sxm", chips=8, context=2048).to_dict()
    for q in h["points"][::64]:
        d = _infer((8, 1, 1, 1), q["batch"], 2048, 1)
        assert q[DEC] == pytest.approx(d[DEC], rel=1e-9)
    pc = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[1024], batch=64).to_dict()["rows"][0]
    d = _infer((8, 1, 1, 1), 64)
    assert pc["cost_per_mtok_output"] == pytest.approx(d[DEC], rel=1e-9)
    assert pc["cost_per_mtok_input"] == pytest.approx(d[INP], rel=1e-9)


def _keys(x):
    if isinstance(x, dict):
        return set(x) | set().union(*(_keys(v) for v in x.values()))
    if isinstance(x, list):
        return set().union(*(_keys(v) for v in x)) if x else set()
    return set()


@pytest.mark.parametrize("cmd", [
    "infer --model llama-3.1-70b --hardware h100-sxm --chips 8",
    "hyperbola --model llama-3.1-8b --hardware h100-sxm",
    "slowmode --model llama-3.1-8b --hardware h100-sxm --budget-ms 20,200",
    "pareto --model llama-3.1-8b --hardware h100-sxm --chips 2",
    "prices --model llama-3.1-8b --hardware h100-sxm --contexts 1024",
    "fleet --model llama-3.1-8b --hardware h100-sxm --demand 10000",
    "price --model llama-3.1-8b --hardware h100-sxm",
    "plan --model llama-3.1-8b --system hgx-h100 --chips 8",
    "plan --model llama-3.1-8b --system hgx-h100 --chips 8 --disaggregated",
    "moe --model mixtral-8x7b --system hgx-h100 --chips 8",
])
def test_every_command_names_the_whole_request_cost_apart(cmd):
    """Where a command reports a whole-request cost it is under its own key; the decode-only key is never it."""
    r = CliRunner().invoke(cli, cmd.split() + ["--json"])
    assert r.exit_code == 0, r.output
    keys = _keys(json.loads(r.output))
    assert "cost_per_mtok_output_decode_usd" not in keys
    assert not any(k.startswith("colocated_cost_per_mtok_output_usd") for k in keys)


def test_tables_say_which_output_cost_they_show():
    r = CliRunner().invoke(cli, "infer --model llama-3.1-8b --hardware h100-sxm".split())
    assert r.exit_code == 0 and "decode only" in r.output and "whole request" in r.output
    r = CliRunner().invoke(cli, "pareto --model llama-3.1-8b --hardware h100-sxm --chips 2".split())
    assert r.exit_code == 0 and "whole request" in r.output
    r = CliRunner().invoke(cli, "hyperbola --model llama-3.1-8b --hardware h100-sxm".split())
    head = "\n".join(r.output.split("\n")[:5])          # the header (rich may wrap it over two lines)
    assert r.exit_code == 0 and "(decode)" in head
