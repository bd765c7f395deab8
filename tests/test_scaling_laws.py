"""Chinchilla scaling law: hand arithmetic, closed form vs numeric minimisation, published points, bad input.

Reference values: shared/reference/scaling_laws.md (Sec. 1 and 1.1), from Hoffmann et al. 2022 (arXiv:2203.15556)
and the Epoch AI replication (Besiroglu et al. 2024, arXiv:2404.10102).
"""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.training.scaling_laws import (
    FITS,
    chinchilla,
    compute_optimal,
    loss,
    numeric_optimum,
    optimal_for_loss,
    tokens_for_loss,
)
from tokenmath.faces.cli import cli
from tokenmath.base.errors import InputError


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_compute_is_6ND_by_hand():
    r = chinchilla(params=70e9, tokens=1.4e12)
    assert r.compute == pytest.approx(6 * 70e9 * 1.4e12)        # = 5.88e23, Hoffmann App. F compares 5.76e23
    assert r.compute == pytest.approx(5.88e23)
    r = chinchilla(compute=6e21, params=1e9)                     # D = C / 6N = 1e12
    assert r.tokens == pytest.approx(6e21 / (6 * 1e9)) and r.tokens == pytest.approx(1e12)


def test_loss_by_hand():
    # Epoch constants, Llama-3-70B-like N = 70e9, D = 15e12
    by_hand = 1.81686 + 482.006 / 70e9 ** 0.34781 + 2085.434 / 15e12 ** 0.36585
    assert float(loss(70e9, 15e12, "epoch")) == pytest.approx(by_hand, rel=1e-12)
    assert chinchilla(params=70e9, tokens=15e12).loss == pytest.approx(1.92986, abs=1e-4)
    # Hoffmann as printed: E + A/N^a + B/D^b
    assert float(loss(70e9, 1.4e12, "hoffmann-rounded")) == pytest.approx(
        1.69 + 406.4 / 70e9 ** 0.34 + 410.7 / 1.4e12 ** 0.28, rel=1e-12)


@pytest.mark.parametrize("fit", list(FITS))
@pytest.mark.parametrize("C", [1e20, 5.76e23, 1e26])
def test_closed_form_is_the_minimum_on_the_6ND_line(fit, C):
    n, d = (float(x) for x in compute_optimal(C, fit))
    assert 6 * n * d == pytest.approx(C, rel=1e-12)
    f = FITS[fit]
    # tangency: alpha A / N^alpha = beta B / D^beta
    assert f.alpha * f.A / n ** f.alpha == pytest.approx(f.beta * f.B / d ** f.beta, rel=1e-9)
    # independent numeric minimisations: golden section, and a brute numpy grid over N on D = C / 6N
    n_gs, _ = numeric_optimum(C, fit)
    assert n_gs == pytest.approx(n, rel=1e-4)
    N = np.geomspace(n / 100, n * 100, 200_001)
    n_grid = N[np.argmin(loss(N, C / (6 * N), fit))]
    assert n_grid == pytest.approx(n, rel=1e-3)
    # and every neighbour on the line is worse
    for k in (0.5, 0.9, 1.1, 2.0):
        assert loss(n * k, C / (6 * n * k), fit) > loss(n, d, fit)


@pytest.mark.parametrize("fit,C,N,D,ratio", [
    # scaling_laws.md Sec. 1.1 table (N_opt / D_opt / D:N)
    ("hoffmann-rounded", 5.76e23, 32.2e9, 2.98e12, 93),
    ("hoffmann", 5.76e23, 40.4e9, 2.38e12, 59),
    ("epoch", 5.76e23, 72.4e9, 1.33e12, 18.3),
    ("epoch", 1e24, 96.0e9, 1.74e12, 18.1),
    ("hoffmann", 1e25, 149e9, 11.2e12, 76),
    ("epoch", 1e26, 1.02e12, 16.4e12, 16.1),
])
def test_published_frontier(fit, C, N, D, ratio):
    r = chinchilla(compute=C, fit=fit)
    assert r.params == pytest.approx(N, rel=0.01)
    assert r.tokens == pytest.approx(D, rel=0.01)
    assert r.tokens_per_param == pytest.approx(ratio, rel=0.02)


def test_epoch_fit_gives_about_20_tokens_per_param_and_chinchilla_itself():
    for C in (1e21, 1e23, 5.76e23, 1e25):
        assert 15 < chinchilla(compute=C).tokens_per_param < 23   # Chinchilla 70B / 1.4T = 20 (Hoffmann Sec. 3.4)
    assert chinchilla(compute=5.76e23).params == pytest.approx(70e9, rel=0.05)
    # implied exponent N_opt ~ C^a (scaling_laws.md: Epoch 0.513, unrounded Hoffmann 0.457)
    for fit, a in (("epoch", 0.513), ("hoffmann", 0.457), ("hoffmann-rounded", 0.452)):
        n1, _ = compute_optimal(1e22, fit)
        n2, _ = compute_optimal(1e26, fit)
        assert math.log(n2 / n1) / math.log(1e4) == pytest.approx(a, abs=0.001)


def test_loss_always_above_E_and_decreasing():
    rng = np.random.default_rng(0)
    N = 10 ** rng.uniform(6, 15, 1000)
    D = 10 ** rng.uniform(6, 16, 1000)
    for name, f in FITS.items():
        L = loss(N, D, name)
        assert np.all(L > f.E)
        assert np.all(loss(N * 2, D, name) < L) and np.all(loss(N, D * 2, name) < L)
    assert float(loss(1e30, 1e30)) > FITS["epoch"].E


def test_loss_target_round_trip():
    for fit in FITS:
        for ell in (FITS[fit].E + 0.05, 1.95, 2.3):
            n, d = (float(x) for x in optimal_for_loss(ell, fit))
            assert float(loss(n, d, fit)) == pytest.approx(ell, rel=1e-12)
            n2, _ = compute_optimal(6 * n * d, fit)      # it is the compute-optimal model of its own budget
            assert float(n2) == pytest.approx(n, rel=1e-9)
            assert float(tokens_for_loss(n, ell, fit)) == pytest.approx(d, rel=1e-9)
    # scaling_laws.md Sec. 3.4: the 70B-optimal loss under unrounded Hoffmann is 1.880
    n, _ = optimal_for_loss(1.880, "hoffmann")
    assert float(n) == pytest.approx(70e9, rel=0.01)
    r = chinchilla(loss_target=1.880, fit="hoffmann")
    assert r.mode == "loss-target" and r.params == pytest.approx(70e9, rel=0.01)


def test_point_reports_the_compute_optimal_split_of_its_budget():
    r = chinchilla(params=70e9, tokens=15e12)
    n, d = compute_optimal(6 * 70e9 * 15e12)
    assert r.optimum_params == pytest.approx(float(n)) and r.optimum_tokens == pytest.approx(float(d))
    assert r.optimum_loss < r.loss          # 70B on 15T is over-trained: the same compute buys a lower loss
    assert r.tokens_per_param == pytest.approx(15e12 / 70e9)


@pytest.mark.parametrize("kw,field", [
    (dict(compute=0), "compute"), (dict(compute=-1e24), "compute"), (dict(compute=float("nan")), "compute"),
    (dict(params=70e9), "tokens"), (dict(tokens=1e12), "params"), (dict(params=-5, tokens=1e12), "params"),
    (dict(compute=1e24, params=1e9, tokens=1e12), "compute"),
    (dict(loss_target=1.81686), "loss"), (dict(loss_target=1.0), "loss"), (dict(loss_target=-2), "loss"),
    (dict(compute=1e24, fit="chinchila"), "fit"),
])
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(InputError) as e:
        chinchilla(**kw)
    assert e.value.field == field


def test_cli_json_and_errors():
    r = run("chinchilla", "--compute", "5.76e23", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("params", "tokens", "loss", "tokens_per_param", "fit", "compute"):
        assert k in d
    assert d["fit"] == "epoch" and d["params"] == pytest.approx(72.4e9, rel=0.01)
    assert d["compute_optimal"]["numeric_check"]["relative_difference"] < 1e-4
    r = run("chinchilla", "--params", "70e9", "--tokens", "15e12", "--fit", "hoffmann", "--json")
    d = json.loads(r.output)
    assert d["compute"] == pytest.approx(6 * 70e9 * 15e12) and d["fit"] == "hoffmann"
    for args, field in ((["--fit", "hofman"], "fit"), (["--compute", "0"], "compute"), (["--compute", "-1e20"], "compute"),
                        (["--loss", "1.5"], "loss"), (["--params", "1e9"], "tokens")):
        r = run("chinchilla", *args, "--json")
        assert r.exit_code == 2, r.output
        assert json.loads(r.stdout)["error"]["field"] == field
    assert "hoffmann" in json.loads(run("chinchilla", "--fit", "hofman", "--json").stdout)["error"]["valid"]


def test_explain_and_table():
    r = run("chinchilla", "--compute", "1e24", "--explain")
    assert r.exit_code == 0
    assert "6ND = C" in r.output and "G = " in r.output and "golden-section" in r.output and "96 B" in r.output
    r = run("chinchilla", "--params", "7e9", "--tokens", "2e12")
    assert r.exit_code == 0 and "tokens/param" in r.output


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    p = tmp_path / "iso.png"
    r = run("chinchilla", "--compute", "1e24", "--plot", str(p))
    assert r.exit_code == 0, r.output
    assert p.stat().st_size > 5000
