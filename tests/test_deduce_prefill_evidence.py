"""TTFT against prompt length as deduce evidence (analyses/inverse/prefill_evidence.py): synthetic endpoints generated
by the engine from known models are recovered within the 80% interval at about the stated rate; contradictory
curves are left out and said so; on the held-out provider table the evidence narrows the interval (slow)."""
import numpy as np
import pytest

from tokenmath.analyses.inverse import forward_model as fm
from tokenmath.analyses.inverse import prefill_evidence as pe
from tokenmath.analyses.inverse.deduce import Observed, Priors, deduce
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import get_hardware

CURVE_TEMPLATE = ((1000.0, 1.0), (10000.0, 2.0))


def synthetic(n=24, seed=123):
    """n endpoints drawn from the priors: their true active params, prices, speed and TTFT curve, all predicted by
    the engine's closed form for the drawn model on the drawn chips (noise-free)."""
    pr = Priors()
    hws = [get_hardware(h) for h, _ in pr.hardware]
    obs = Observed(1.0, 1.0, output_speed=1.0, ttft_curve=CURVE_TEMPLATE)
    s = fm.draw(pr, hws, np.random.default_rng(seed), n, obs)
    p = fm.predict(s, obs, pr)
    t0 = 0.3                                  # network + queueing: cancels in the TTFT's growth
    out = []
    for i in range(n):
        dt = float(p[pe.key(1000, 10000)][i])
        out.append((float(s["Na"][i]) / 1e9, dict(input_price=float(p["input_price"][i]),
                                                   output_price=float(p["output_price"][i]),
                                                   output_speed=float(p["output_speed"][i]),
                                                   ttft_curve=((1000, t0), (10000, t0 + dt)))))
    return out


def test_a_synthetic_endpoint_is_recovered_from_its_ttft_curve():
    true_b, kw = synthetic()[0]
    a = deduce(priors=Priors(samples=50_000, seed=7), calibrated=False, **kw).summary["active_params_b"]
    assert a["low"] <= true_b <= a["high"]


def test_synthetic_coverage_near_the_stated_rate_and_narrower():
    """Against price alone, endpoint by endpoint. (Against price + a noise-free speed the curve does not narrow the
    synthetic interval: median 9.5x with it vs 9.0x without; on the real table it does, test_held_out_... below.)"""
    cov, w_with, w_without, refused = [], [], [], 0
    for true_b, kw in synthetic():
        pr = Priors(samples=30_000, seed=7)
        try:
            # the posterior's own interval: truth drawn from the priors is what it is exact for
            a = deduce(priors=pr, calibrated=False, **kw).summary["active_params_b"]
            b = deduce(priors=pr, input_price=kw["input_price"], output_price=kw["output_price"], calibrated=False
                       ).summary["active_params_b"]
        except InputError:      # a corner of the priors too few samples reach (too few effective samples)
            refused += 1
            continue
        cov.append(a["low"] <= true_b <= a["high"])
        w_with.append(a["high"] / a["low"])
        w_without.append(b["high"] / b["low"])
    # 80% nominal; 24 draws: a binomial sd of ~8 points
    assert refused <= 4 and np.mean(cov) >= 0.6, (refused, np.mean(cov))
    # paired, endpoint by endpoint: the curve narrows most of them (14 of 22). The medians of the two widths sit
    # within noise of each other (9.5x vs 9.8x with B200 at 8 TB/s, 9.6x vs 9.3x at 7.672 TB/s): not asserted
    assert np.mean(np.array(w_with) < np.array(w_without)) > 0.5


def test_curve_checks_and_contradictions():
    with pytest.raises(InputError):
        pe.check_curve(((1000, 0.5),))
    with pytest.raises(InputError):
        pe.check_curve(((1000, -1), (10000, 2)))
    with pytest.raises(InputError):
        pe.check_curve("1000:0.5")
    use, notes = pe.pairs(pe.check_curve(((10000, 0.3), (1000, 0.5), (100000, 4.0))))
    assert [(a, b) for a, b, _ in use] == [(10000.0, 100000.0)] and "does not grow" in notes[0]


def test_the_shortest_point_is_also_the_one_sided_ttft_bound():
    d = deduce(0.1, 0.75, ttft_curve=((10000, 0.84), (1000, 0.45)), priors=Priors(samples=5000))
    assert d.observed.ttft_s == 0.45 and d.observed.ttft_prompt_tokens == 1000
    assert d.summary["priors"]["prefill_noise"] == Priors().prefill_noise


def test_price_only_answer_is_unchanged_by_the_new_observation():
    """A deduction without a TTFT curve draws and weighs exactly what it did before."""
    a = deduce(0.15, 0.6, priors=Priors(samples=5000)).summary["active_params_b"]
    b = deduce(0.15, 0.6, priors=Priors(samples=5000, prefill_scale=3.0, prefill_noise=0.9)).summary["active_params_b"]
    assert a == b


@pytest.mark.slow
def test_held_out_table_more_evidence_narrows():
    """On a quarter of the check split (after the cut-off), with the prefill scale chosen on the fit split: the
    median width falls price -> + speed -> + TTFT. (The median error factor does NOT improve with TTFT: docs/deduce.md
    reports it.)"""
    from tokenmath.analyses.inverse import table_validation as tv
    rows = tv.rows_with_truth("check")[::4]
    true = tv.truth(rows)
    pr = Priors(samples=20_000)
    w = [tv.score(tv.run(rows, e, pr, calibrated=False), true)["median_width"] for e in tv.SETS]
    assert w[2] < w[1] <= w[0] * 1.05, w
