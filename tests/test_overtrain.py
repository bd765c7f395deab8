"""Over-training: minimise training + lifetime inference cost at a target loss.

Physics asserted: the FLOP-only variant reproduces Sardana et al. 2023 (arXiv:2401.00448) and the worked examples in
shared/reference/scaling_laws.md Sec. 3.3-3.4; costs are 6ND and 2N FLOPs priced by hand; inference from the
serving engine is what the engine says and never beats its roofline; more demand never makes the optimal model
larger; a lower loss never costs less; zero demand is Chinchilla at a fixed MFU, and with the training engine the
cheapest run in $ (never dearer than Chinchilla's).
"""
import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.training.inference_cost import dense_arch, dense_model, dense_shape, serve_cost
from tokenmath.analyses.training.overtrain import overtrain
from tokenmath.analyses.training.scaling_laws import (
    FITS,
    compute_optimal,
    loss,
    optimal_for_loss,
)
from tokenmath.faces.cli import cli
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.params import count_params

USD_PER_FLOP_H100 = 2.99 / 3600 / (989e12 * 0.4)   # catalog price $/h, bf16 dense peak, MFU 0.4
LLAMA70_LOSS = 1.81686 + 482.006 / 70e9 ** 0.34781 + 2085.434 / 15e12 ** 0.36585   # Epoch fit, 70B on 15T tokens


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def engine70():
    """One engine-based run, shared: Llama-3-70B-class loss, 1e13 lifetime tokens, demand x 0 .. 1000."""
    return overtrain(target_loss=LLAMA70_LOSS, inference_tokens=1e13, demand_factors=(0, 0.1, 1, 10, 100, 1000))


# ---- the architecture rule ---------------------------------------------------------------------------------------

def test_rule_counts_params_like_params_py():
    # Llama 3 8B's shape (32 layers x 4096, 32 heads, 8 KV heads, SwiGLU 14336, vocab 128256) = 8.03B by hand
    by_hand = 32 * (2 * 4096 * 4096 + 2 * 4096 * 8 * 128 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096
    assert by_hand == 8_030_261_248
    assert count_params(dense_arch(32, 4096)).total == by_hand
    for N in (1.2e9, 8e9, 70e9, 187e9, 400e9):
        m = dense_model(N)
        P = count_params(m).total
        L, d, p = dense_shape(N)
        assert P == p and (m.n_layers, m.d_model) == (L, d)
        assert P == pytest.approx(N, rel=0.04)                    # params match N within a few %
        assert m.n_heads % 8 == 0 and m.kv_heads == 8 and m.hd == 128
        assert abs(m.n_heads * 128 - d) <= 512                    # query width ~ d_model
        assert m.ffn_intermediate == round(3.5 * d / 256) * 256
        assert 0.8 < d / (128 * L) < 1.25                         # d_model ~ 128 x layers


def test_engine_cost_per_token_is_the_engine_and_rises_with_N():
    hw = get_hardware("h100-sxm")
    prev = 0.0
    for N in np.geomspace(2e9, 3e11, 9):
        s = serve_cost(float(N), hw, 20.0, 512, 512)
        assert s.feasible
        # $/output token = chips x $/chip-s x decode step / batch, and the step meets the latency target
        assert s.usd_per_output_token == pytest.approx(s.chips * 2.99 / 3600 * s.decode_step_s / s.batch)
        assert 1 / s.decode_step_s >= 20.0
        # the step never beats the roofline: weights read once per step over the chips' bandwidth, and 2 FLOPs per
        # parameter per token of the batch over the chips' peak
        assert s.decode_step_s >= 2 * s.params / (s.chips * 3.35e12)
        assert s.decode_step_s >= 2 * s.params * s.batch / (s.chips * 989e12)
        assert s.chips & (s.chips - 1) == 0 and s.tp <= 8           # power of two; TP inside the 8-GPU domain
        assert s.usd_per_output_token > prev                        # a bigger model never serves cheaper
        prev = s.usd_per_output_token


def test_cheapest_batch_is_the_largest_power_of_two_meeting_the_speed_target():
    from tokenmath.analyses.serving.infer import infer
    s = serve_cost(8e9, get_hardware("h100-sxm"), 60.0, 512, 512)
    m = dense_model(8e9)
    assert s.feasible and 1 / s.decode_step_s >= 60
    r = infer(m, "h100-sxm", chips=s.chips, tp=s.tp, pp=s.pp, batch=s.batch, input_len=512, output_len=512)
    assert r.decode_step_s == pytest.approx(s.decode_step_s)
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):       # brute force over the same chips
        if b > s.max_batch:
            break
        rb = infer(m, "h100-sxm", chips=s.chips, tp=s.tp, pp=s.pp, batch=b, input_len=512, output_len=512)
        if 1 / rb.decode_step_s >= 60:
            assert s.chips * rb.decode_step_s / b >= s.chips * s.decode_step_s / s.batch * (1 - 1e-9)


# ---- FLOP-only: Sardana et al. -----------------------------------------------------------------------------------

def test_flop_only_reproduces_sardana_figure_1():
    # target: the loss of a 13B model trained compute-optimally (unrounded Hoffmann constants, as Sardana et al.)
    f = FITS["hoffmann"]
    c6 = (13e9 / f.G) ** (1 / f.a)                  # N_opt = G (C/6)^a  ->  C/6 = (N/G)^(1/a)
    ell = float(loss(13e9, c6 / 13e9, "hoffmann"))
    assert ell == pytest.approx(2.0238, abs=1e-4)
    r = overtrain(target_loss=ell, inference_tokens=2e12, flop_only=True, fit="hoffmann")
    o, c = r.optimum, r.chinchilla
    assert c.params == pytest.approx(13e9, rel=1e-6)
    assert o.params == pytest.approx(7.12e9, rel=0.01)       # "instead training a 7B model on more data"
    assert o.tokens == pytest.approx(1.295e12, rel=0.01)
    # the saving in FLOPs: (6 N_c D_c + 2 N_c D_inf) - (6 N D + 2 N D_inf), about 1.7e22 (17%) in the paper
    flops = lambda n, d: 6 * n * d + 2 * n * 2e12
    saving = flops(c.params, c.tokens) - flops(o.params, o.tokens)
    assert saving == pytest.approx(1.64e22, rel=0.02)
    assert r.saving_usd == pytest.approx(saving * USD_PER_FLOP_H100, rel=1e-9)
    assert r.saving_fraction == pytest.approx(0.163, abs=0.002)


@pytest.mark.parametrize("fit,ell,d_inf,N,tpp,saving", [
    # scaling_laws.md Sec. 3.4 (target = the loss of a Chinchilla-optimal 7B / 70B model)
    ("hoffmann", 2.101, 1e11, 6.05e9, 57, 0.007),
    ("hoffmann", 2.101, 1e12, 3.79e9, 166, 0.17),
    ("hoffmann", 2.101, 1e13, 2.09e9, 984, 0.56),
    ("hoffmann", 1.880, 1e13, 42.5e9, 195, 0.11),
    ("hoffmann", 1.880, 1e14, 23.2e9, 1063, 0.49),
    ("epoch", 1.976, 1e13, 32.7e9, 112, 0.29),
    ("epoch", 1.976, 1e14, 20.2e9, 640, 0.62),
])
def test_flop_only_worked_examples(fit, ell, d_inf, N, tpp, saving):
    r = overtrain(target_loss=ell, inference_tokens=d_inf, flop_only=True, fit=fit)
    assert r.optimum.params == pytest.approx(N, rel=0.015)
    assert r.optimum.tokens / r.optimum.params == pytest.approx(tpp, rel=0.02)
    assert r.saving_fraction == pytest.approx(saving, abs=0.006)


def test_costs_by_hand():
    r = overtrain(target_loss=1.95, inference_tokens=3e12, rl_rollout_tokens=1e12, flop_only=True)
    o = r.optimum
    assert r.usd_per_flop == pytest.approx(USD_PER_FLOP_H100)
    assert o.training_usd == pytest.approx(6 * o.params * o.tokens * USD_PER_FLOP_H100)
    assert o.inference_usd == pytest.approx(2 * o.params * (3e12 + 1e12) * USD_PER_FLOP_H100)
    assert float(loss(o.params, o.tokens)) == pytest.approx(1.95, abs=1e-9)   # the optimum is on the constraint
    # a cheaper chip-hour or a higher MFU scales every dollar, not the optimum
    r2 = overtrain(target_loss=1.95, inference_tokens=3e12, rl_rollout_tokens=1e12, flop_only=True, mfu=0.8)
    assert r2.optimum.params == pytest.approx(o.params) and r2.optimum.total_usd == pytest.approx(o.total_usd / 2)


# ---- invariants --------------------------------------------------------------------------------------------------

def test_zero_demand_is_chinchilla_flop_only():
    r = overtrain(target_loss=LLAMA70_LOSS, inference_tokens=0, flop_only=True)
    n_c, d_c = (float(x) for x in optimal_for_loss(LLAMA70_LOSS))
    assert r.chinchilla.params == pytest.approx(n_c) and r.chinchilla.tokens == pytest.approx(d_c)
    assert r.optimum.params == pytest.approx(n_c, rel=1e-3) and r.saving_usd == pytest.approx(0, abs=1e-6)
    assert r.optimum.inference_usd == 0
    # Chinchilla itself: the compute-optimal model of its own 6ND budget
    n2, _ = compute_optimal(6 * n_c * d_c)
    assert float(n2) == pytest.approx(n_c, rel=1e-9)


def test_zero_demand_is_chinchilla_at_a_fixed_mfu():
    # one $/FLOP for every size: the cheapest model to train is the compute-optimal one
    r = overtrain(target_loss=LLAMA70_LOSS, inference_tokens=1e13, mfu=0.4, demand_factors=(0, 1), engine_points=8)
    n_c, _ = optimal_for_loss(LLAMA70_LOSS)
    zero = r.demand_sweep[0]
    assert zero["factor"] == 0 and zero["inference_usd"] == 0
    assert zero["params"] == pytest.approx(float(n_c), rel=1e-3)
    assert zero["saving_fraction"] == pytest.approx(0, abs=1e-9)
    assert r.training_model == "fixed-mfu" and r.to_dict()["training_nodes"] == []


def test_zero_demand_engine_minimises_training_dollars_not_flops(engine70):
    # with the training engine the $ per FLOP depends on the size (its layout's MFU), so at zero demand the optimum
    # is the cheapest run in $, which is never dearer than the compute-optimal (Chinchilla) run, and only moves off
    # it as far as the MFU difference pays for the extra FLOPs
    zero = engine70.demand_sweep[0]
    assert zero["factor"] == 0 and zero["inference_usd"] == 0
    assert zero["total_usd"] <= zero["chinchilla_total_usd"] * (1 + 1e-12)
    n_c, d_c = (float(x) for x in optimal_for_loss(LLAMA70_LOSS))
    flops_ratio = zero["params"] * zero["tokens"] / (n_c * d_c)       # >= 1: Chinchilla has the fewest FLOPs
    assert flops_ratio >= 1 - 1e-9
    assert flops_ratio < 1.25                                           # an MFU gap of at most ~25%, not a new law


def test_engine_training_is_the_training_engine(engine70):
    # every training node is `tokenmath train --search`'s fastest layout on its cluster, and its $ per token is
    # chips x $/chip-s x step / tokens per step, by hand
    from tokenmath.analyses.training.train_search import search
    from tokenmath.analyses.training.training_cost import batch_tokens, sized_chips
    hw = get_hardware("h100-sxm")
    t = engine70.optimum.training
    assert t is not None and engine70.training_model == "engine"
    best = search(dense_model(t.params), hw, chips=t.chips, global_batch_tokens=batch_tokens(t.chips), top=1).top[0]
    assert t.step_time_s == pytest.approx(best.step_time_s)
    assert t.usd_per_token == pytest.approx(t.chips * 2.99 / 3600 * t.step_time_s / t.global_batch_tokens)
    assert engine70.optimum.training_usd == pytest.approx(engine70.optimum.tokens * t.usd_per_token)
    # the cluster: 6ND at 40% MFU within 90 days, a power of two from 8 chips (grown only where nothing fits)
    assert t.chips >= sized_chips(t.params, t.tokens, hw, 90.0) and t.chips & (t.chips - 1) == 0
    # Llama 3's batch: 1,024 sequences of 4,096 tokens up to 8,192 chips, one sequence per 8 chips beyond
    assert batch_tokens(512) == 4096 * 1024 and batch_tokens(16384) == 4096 * 2048
    # MFU inside what published dense runs reach on H100 (Llama 3 405B 38-43%; the engine's own validation table)
    assert 0.3 < engine70.mfu < 0.65
    # a longer horizon means a smaller cluster: never more chips
    from tokenmath.analyses.training.training_cost import training_cost
    a = training_cost(t.params, t.tokens, hw, run_days=30.0)
    b = training_cost(t.params, t.tokens, hw, run_days=300.0)
    assert a.chips >= t.chips >= b.chips and a.run_days <= 30 * 1.5 and b.run_days >= a.run_days


def _monotone_in_demand(sweep):
    demand = [s["inference_tokens"] + s["rl_rollout_tokens"] for s in sweep]
    assert demand == sorted(demand)
    N = [s["params"] for s in sweep]
    tpp = [s["tokens_per_param"] for s in sweep]
    assert all(b <= a for a, b in itertools.pairwise(N)), N                # never larger
    assert all(b >= a for a, b in itertools.pairwise(tpp)), tpp          # trained longer
    assert N[-1] < 0.5 * N[0]                                      # and it does move
    assert all(0 <= s["saving_fraction"] < 1 for s in sweep)


def test_more_demand_never_makes_the_model_larger_engine(engine70):
    _monotone_in_demand(engine70.demand_sweep)
    assert engine70.optimum.params < engine70.chinchilla.params
    row = next(s for s in engine70.demand_sweep if s["factor"] == 1)
    assert row["params"] == engine70.optimum.params and row["total_usd"] == pytest.approx(engine70.optimum.total_usd)


def test_more_demand_never_makes_the_model_larger_flop_only():
    r = overtrain(target_loss=LLAMA70_LOSS, inference_tokens=1e13, flop_only=True,
                  demand_factors=(0, 0.01, 0.1, 1, 10, 100, 1000))
    _monotone_in_demand(r.demand_sweep)


@pytest.mark.parametrize("flop_only", [True, False])
def test_lower_target_loss_never_costs_less(flop_only):
    totals = []
    for ell in (1.96, 1.95, 1.94):
        r = overtrain(target_loss=ell, inference_tokens=1e12, flop_only=flop_only, engine_points=8,
                      demand_factors=(1,))
        totals.append(r.optimum.total_usd)
        assert r.optimum.total_usd <= r.chinchilla.total_usd
    assert totals[0] < totals[1] < totals[2]


def test_rl_rollouts_are_decode_tokens():
    a = overtrain(target_loss=LLAMA70_LOSS, rl_rollout_tokens=1e12, demand_factors=(1,), engine_points=8)
    b = overtrain(target_loss=LLAMA70_LOSS, inference_tokens=2e12, demand_factors=(1,), engine_points=8)
    ca, cb = a.chinchilla, b.chinchilla                      # the same model, the same serving config
    s = ca.serving
    assert (s.chips, s.batch) == (cb.serving.chips, cb.serving.batch)
    # RL: 1e12 generated tokens, all priced at the decode ($/output token) rate
    assert ca.inference_usd == pytest.approx(1e12 * s.usd_per_output_token)
    # serving 2e12 tokens at 1 input per output token: 1e12 decode + 1e12 prefill tokens
    assert cb.inference_usd == pytest.approx(1e12 * s.usd_per_output_token + 1e12 * s.usd_per_input_token)
    # decode is dearer than prefill per token
    assert s.usd_per_output_token > s.usd_per_input_token


def test_budget_sets_the_target():
    C = 5.76e23
    r = overtrain(compute=C, inference_tokens=1e12, flop_only=True)
    n, d = compute_optimal(C)
    assert r.target_loss == pytest.approx(float(loss(n, d)))
    assert r.chinchilla.params == pytest.approx(float(n), rel=1e-9)
    assert 6 * r.chinchilla.params * r.chinchilla.tokens == pytest.approx(C, rel=1e-9)


# ---- errors and faces --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,field", [
    (dict(target_loss=1.81686), "target_loss"), (dict(target_loss=1.5), "target_loss"),
    (dict(target_loss=1.69, fit="hoffmann"), "target_loss"), (dict(compute=0), "compute"),
    (dict(compute=-1e24), "compute"), (dict(target_loss=1.95, compute=1e24), "target_loss"),
    (dict(target_loss=1.95, inference_tokens=-1), "inference_tokens"),
    (dict(target_loss=1.95, rl_rollout_tokens=float("inf")), "rl_rollout_tokens"),
    (dict(target_loss=1.95, fit="kaplan"), "fit"), (dict(target_loss=1.95, mfu=0), "mfu"),
    (dict(target_loss=1.95, mfu=1.2), "mfu"), (dict(target_loss=1.95, hardware="h100sxm"), "hardware"),
    (dict(target_loss=1.95, min_tokens_per_s_per_user=0), "min_tokens_per_s_per_user"),
    (dict(target_loss=1.95, weight_dtype="fp3"), "weight_dtype"),
    # a budget whose search passes the engine's largest buildable model names the budget, not the model's d_model
    (dict(compute=1e33), "compute"), (dict(target_loss=1.8172), "target_loss"),
])
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(InputError) as e:
        overtrain(**kw)
    assert e.value.field == field


def test_unservable_speed_target_is_an_input_error():
    with pytest.raises(InputError) as e:
        overtrain(target_loss=LLAMA70_LOSS, inference_tokens=1e12, min_tokens_per_s_per_user=5000, engine_points=6)
    assert e.value.field == "min_tokens_per_s_per_user"


def test_cli_json_explain_plot(tmp_path):
    r = run("overtrain", "--target-loss", "1.95", "--inference-tokens", "1e12", "--flop-only", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("params", "tokens", "tokens_per_param", "training_usd", "inference_usd", "total_usd", "chinchilla",
              "saving_usd", "saving_fraction", "demand_sweep", "mfu", "mfu_source", "fit"):
        assert k in d
    assert [s["factor"] for s in d["demand_sweep"]] == [0.1, 1, 10, 100]
    assert d["chinchilla"]["total_usd"] >= d["total_usd"] and d["inference_model"] == "flop-only"
    for args, field in ((["--target-loss", "1.8"], "target_loss"), (["--compute", "0"], "compute"),
                        (["--target-loss", "1.95", "--fit", "epock"], "fit"),
                        (["--target-loss", "1.95", "--inference-tokens", "-1e12"], "inference_tokens")):
        r = run("overtrain", *args, "--json")
        assert r.exit_code == 2, r.output
        assert json.loads(r.stdout)["error"]["field"] == field
    r = run("overtrain", "--target-loss", "1.95", "--inference-tokens", "1e12", "--flop-only", "--explain")
    assert r.exit_code == 0 and "6 N D(N)" in r.output and "2N x $/FLOP" in r.output and "saving" in r.output
    pytest.importorskip("matplotlib")
    p = tmp_path / "ot.svg"
    r = run("overtrain", "--target-loss", "1.95", "--inference-tokens", "1e13", "--flop-only", "--plot", str(p))
    assert r.exit_code == 0, r.output
    assert "cost (USD)" in p.read_text() or p.stat().st_size > 5000


def test_no_target_is_chinchillas_own_compute():
    # as `chinchilla` does: with neither a loss nor a budget, the target is the loss Chinchilla's own training
    # compute (5.76e23 FLOPs, Hoffmann et al. App. F) reaches at its compute-optimal N, D under the fit
    from tokenmath.analyses.training.scaling_laws import compute_optimal, get_fit, loss
    f = get_fit("epoch")
    n, d = compute_optimal(5.76e23, f)
    r = overtrain(flop_only=True)
    assert r.target_loss == pytest.approx(float(loss(n, d, f)))
    assert any("no target given" in n for n in r.notes)
