"""Chinchilla scaling laws: the parametric loss L(N, D) = E + A/N^alpha + B/D^beta and the compute-optimal split.

N = parameters, D = training tokens, C = training FLOPs ~= 6 N D (forward 2ND + backward 4ND; Kaplan et al. 2020,
Hoffmann et al. 2022 Sec. 3.3). Losses are in nats per token on the fit's own data (MassiveText for all three fits
below): compare losses within one fit, never across fits or with another model's reported loss.

Fits (selectable by name; see FITS):
- "epoch" (default): Besiroglu, Erdil, Barnett, You 2024, "Chinchilla Scaling: A replication attempt",
  arXiv:2404.10102; constants from the authors' notebook (github.com/epoch-research/analyzing-chinchilla,
  data_analysis.ipynb, cell "Parameter estimates and their standard errors"). It reproduces Chinchilla's own
  ~20 tokens/parameter (70B on 1.4T tokens) that Hoffmann's Approaches 1 and 2 found.
- "hoffmann": Hoffmann et al. 2022 (arXiv:2203.15556) Approach 3, the unrounded values behind the paper's TeX
  (Epoch notebook, `true_params`). Use it to reproduce Sardana et al. 2023 (arXiv:2401.00448), who used these.
- "hoffmann-rounded": the values as printed in Hoffmann App. D.2 (E=1.69, A=406.4, B=410.7, 0.34, 0.28). The
  rounding biases the optimum (~93 tokens/param at 5.76e23 FLOPs); kept only for reproducing papers that used it.

Compute-optimal frontier (Hoffmann Sec. 3.3, closed form under C = 6ND): minimising L subject to 6ND = C gives
    alpha A / N^alpha = beta B / D^beta   (the tangency condition)
    N_opt = G (C/6)^a,  D_opt = (C/6)^b / G,  G = (alpha A / (beta B))^(1/(alpha+beta)),
    a = beta/(alpha+beta),  b = alpha/(alpha+beta).
The same tangency condition answers "the cheapest (in 6ND) model reaching loss l": with x = A/N^alpha,
B/D^beta = (alpha/beta) x and l = E + x (1 + alpha/beta), so x = (l - E) beta/(alpha+beta) in closed form.
`numeric_optimum` checks the closed form with an independent golden-section search on the 6ND = C line.

Everything is vectorized: N, D, C and l may be numpy arrays and broadcast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenmath.base.errors import InputError, unknown_name

FLOPS_PER_PARAM_TOKEN = 6.0  # training: forward 2 + backward 4 FLOPs per parameter per token


@dataclass(frozen=True)
class Fit:
    name: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str
    note: str = ""

    @property
    def a(self) -> float:
        """Exponent of N_opt in C."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of D_opt in C."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))

    def constants(self) -> dict:
        return {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta,
                "source": self.source, "note": self.note}


FITS: dict[str, Fit] = {
    "epoch": Fit(
        "epoch", E=1.81686, A=482.006, B=2085.434, alpha=0.34781, beta=0.36585,
        source="Besiroglu et al. 2024, 'Chinchilla Scaling: A replication attempt', arXiv:2404.10102; "
               "github.com/epoch-research/analyzing-chinchilla data_analysis.ipynb (parameter estimates; "
               "SE: E 0.026, A 124.5, B 1293.3, alpha 0.0154, beta 0.0206)",
        note="refit of Hoffmann's own data; ~20 tokens/param at Chinchilla's compute, like Approaches 1 and 2"),
    "hoffmann": Fit(
        "hoffmann", E=math.exp(0.5267228), A=math.exp(6.0073404), B=math.exp(6.0179186),
        alpha=0.33917084, beta=0.2849083,
        source="Hoffmann et al. 2022, arXiv:2203.15556, Approach 3 (Sec. 3.3, App. D.2), unrounded values from "
               "the Epoch notebook `true_params` (E=exp(0.5267228), A=exp(6.0073404), B=exp(6.0179186))",
        note="the set Sardana et al. 2023 (arXiv:2401.00448) used; Epoch found the fit converged poorly"),
    "hoffmann-rounded": Fit(
        "hoffmann-rounded", E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28,
        source="Hoffmann et al. 2022, arXiv:2203.15556, App. D.2 as printed: E=1.69, A=406.4, B=410.7, "
               "alpha=0.34, beta=0.28",
        note="rounded; biased optimum (~90+ tokens/param). Not for quantitative use"),
}
DEFAULT_FIT = "epoch"


def get_fit(fit: str | Fit | None) -> Fit:
    if fit is None:
        return FITS[DEFAULT_FIT]
    if isinstance(fit, Fit):
        return fit
    if not isinstance(fit, str) or fit.lower() not in FITS:
        raise unknown_name("fit", str(fit), FITS)
    return FITS[fit.lower()]


# ---- checks (every bad input names its field) -----------------------------------------------------------------

def positive_number(v, field: str, unit: str = "") -> float:
    """A finite number > 0, else InputError naming the field."""
    what = f"a positive number{(' of ' + unit) if unit else ''}, e.g. 1e24"
    if isinstance(v, bool):
        raise InputError(field, f"{v!r} is not a number", what)
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(field, f"{v!r} is not a number", what) from None
    if not math.isfinite(x):
        raise InputError(field, f"{v!r} is not finite", what)
    if x <= 0:
        raise InputError(field, f"{x:g} must be greater than 0", what)
    return x


def check_loss(v, fit: Fit, field: str = "loss") -> float:
    x = positive_number(v, field, "nats/token")
    if x <= fit.E:
        raise InputError(field, f"{x:g} is at or below the irreducible loss E = {fit.E:.4g} of the {fit.name!r} fit "
                         "(no finite model and data reach it)", f"a loss above {fit.E:.4g}")
    return x


# ---- the law -----------------------------------------------------------------------------------------------------

def loss(N, D, fit="epoch"):
    """L(N, D) = E + A/N^alpha + B/D^beta (nats/token), broadcasting over arrays."""
    f = get_fit(fit)
    N = np.asarray(N, dtype=float)
    D = np.asarray(D, dtype=float)
    return f.E + f.A / N ** f.alpha + f.B / D ** f.beta


def compute_optimal(C, fit="epoch"):
    """Closed-form compute-optimal (N_opt, D_opt) for C = 6ND training FLOPs (Hoffmann Sec. 3.3)."""
    f = get_fit(fit)
    c6 = np.asarray(C, dtype=float) / FLOPS_PER_PARAM_TOKEN
    return f.G * c6 ** f.a, c6 ** f.b / f.G


def optimal_for_loss(target, fit="epoch"):
    """The compute-optimal (N, D) whose loss is `target`: the cheapest 6ND reaching it (closed form)."""
    f = get_fit(fit)
    x = (np.asarray(target, dtype=float) - f.E) * f.beta / (f.alpha + f.beta)  # x = A/N^alpha at the optimum
    N = (f.A / x) ** (1.0 / f.alpha)
    D = (f.B / (f.alpha / f.beta * x)) ** (1.0 / f.beta)
    return N, D


def min_params_for_loss(target, fit="epoch"):
    """Below this N the loss target is out of reach with any amount of data: A/N^alpha >= target - E."""
    f = get_fit(fit)
    return (f.A / (np.asarray(target, dtype=float) - f.E)) ** (1.0 / f.alpha)


def tokens_for_loss(N, target, fit="epoch"):
    """Training tokens D that bring a model of N parameters to loss `target` (inf where N is too small)."""
    f = get_fit(fit)
    gap = np.asarray(target, dtype=float) - f.E - f.A / np.asarray(N, dtype=float) ** f.alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, (f.B / np.where(gap > 0, gap, 1.0)) ** (1.0 / f.beta), np.inf)


def numeric_optimum(C: float, fit="epoch", tol: float = 1e-12) -> tuple[float, float]:
    """Independent check: golden-section minimisation of L(N, C/(6N)) over ln N in [0, ln(C/6)].
    L along the line is a sum of two exponentials in ln N, hence convex, so golden section converges."""
    f = get_fit(fit)
    c6 = C / FLOPS_PER_PARAM_TOKEN

    def g(u):
        return f.A * math.exp(-f.alpha * u) + f.B * (c6 / math.exp(u)) ** (-f.beta)

    lo, hi = 0.0, math.log(c6)
    r = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
    g1, g2 = g(x1), g(x2)
    while hi - lo > tol:
        if g1 < g2:
            hi, x2, g2 = x2, x1, g1
            x1 = hi - r * (hi - lo)
            g1 = g(x1)
        else:
            lo, x1, g1 = x1, x2, g2
            x2 = lo + r * (hi - lo)
            g2 = g(x2)
    n = math.exp((lo + hi) / 2)
    return n, c6 / n


# ---- the `chinchilla` analysis -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChinchillaResult:
    """One point of the law (FLOPs, parameters, tokens, nats/token) and the compute-optimal split of its compute."""
    fit: Fit
    mode: str                 # "compute-optimal" | "point" | "loss-target"
    compute: float
    params: float
    tokens: float
    loss: float
    optimum_params: float     # compute-optimal N at the same compute (== params in compute-optimal mode)
    optimum_tokens: float
    optimum_loss: float
    numeric_params: float     # golden-section check of optimum_params
    numeric_tokens: float
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params

    @property
    def loss_terms(self) -> dict:
        f = self.fit
        return {"irreducible": f.E, "params_term": f.A / self.params ** f.alpha, "data_term": f.B / self.tokens ** f.beta}

    def to_dict(self) -> dict:
        f = self.fit
        return {
            "fit": f.name, "fit_constants": f.constants(), "mode": self.mode,
            "compute": self.compute, "params": self.params, "tokens": self.tokens, "loss": self.loss,
            "tokens_per_param": self.tokens_per_param, "loss_terms": self.loss_terms,
            "compute_optimal": {
                "params": self.optimum_params, "tokens": self.optimum_tokens, "loss": self.optimum_loss,
                "tokens_per_param": self.optimum_tokens / self.optimum_params,
                "exponent_params": f.a, "exponent_tokens": f.b, "G": f.G,
                "numeric_check": {"params": self.numeric_params, "tokens": self.numeric_tokens,
                                  "relative_difference": abs(self.numeric_params / self.optimum_params - 1)},
            },
            "notes": self.notes,
        }


CHINCHILLA_COMPUTE = 5.76e23  # Hoffmann App. F: Chinchilla/Gopher training compute (Rae et al. counting)


def chinchilla(compute=None, params=None, tokens=None, loss_target=None, fit="epoch") -> ChinchillaResult:
    """Chinchilla scaling law.

    - compute=C: the compute-optimal N, D (closed form, checked numerically) and their loss;
    - params=N, tokens=D: the loss of that model, its 6ND compute and the compute-optimal split of the same C;
    - compute with params (or tokens): the other follows from C = 6ND;
    - loss_target=l: the cheapest (compute-optimal) N, D reaching loss l.
    With nothing given, Chinchilla's own compute (5.76e23 FLOPs).
    """
    f = get_fit(fit)
    notes: list[str] = []
    given = [k for k, v in (("compute", compute), ("params", params), ("tokens", tokens), ("loss", loss_target))
             if v is not None]
    if loss_target is not None and len(given) > 1:
        raise InputError("loss", "a loss target fixes N and D by itself", "give --loss alone")
    if len(given) == 3:
        raise InputError("compute", "--compute, --params and --tokens over-determine C = 6ND", "give two of them at most")
    if not given:
        compute = CHINCHILLA_COMPUTE
        notes.append("no budget given: Chinchilla's own training compute, 5.76e23 FLOPs (Hoffmann et al. App. F)")
    C = positive_number(compute, "compute", "FLOPs") if compute is not None else None
    N = positive_number(params, "params", "parameters") if params is not None else None
    D = positive_number(tokens, "tokens", "tokens") if tokens is not None else None
    mode = "point"
    if loss_target is not None:
        lt = check_loss(loss_target, f, "loss")
        N, D = (float(x) for x in optimal_for_loss(lt, f))
        C = FLOPS_PER_PARAM_TOKEN * N * D
        mode = "loss-target"
    elif C is not None and N is None and D is None:
        mode = "compute-optimal"
    elif C is not None and N is not None:
        D = C / (FLOPS_PER_PARAM_TOKEN * N)
    elif C is not None and D is not None:
        N = C / (FLOPS_PER_PARAM_TOKEN * D)
    elif N is None or D is None:
        missing = "tokens" if D is None else "params"
        raise InputError(missing, "missing", "give --params and --tokens together, or --compute")
    else:
        C = FLOPS_PER_PARAM_TOKEN * N * D
    if C < 6.0 or not math.isfinite(C):
        raise InputError("compute", f"{C:g} FLOPs is not a training budget", "at least 6 FLOPs (one parameter, one token)")
    n_opt, d_opt = (float(x) for x in compute_optimal(C, f))
    n_num, d_num = numeric_optimum(C, f)
    if mode == "compute-optimal":
        N, D = n_opt, d_opt
    if N < 1 or D < 1:
        raise InputError("params" if N < 1 else "tokens", f"{min(N, D):g} is below one", "at least 1")
    if mode != "compute-optimal" and D / N > 1000:
        notes.append(f"{D / N:,.0f} tokens/param: beyond ~1000 the Chinchilla D-term is over-optimistic "
                     "(Sardana et al. 2023, arXiv:2401.00448)")
    if f.name == "hoffmann-rounded":
        notes.append("the rounded Hoffmann constants bias the optimum; prefer --fit epoch (or hoffmann)")
    return ChinchillaResult(fit=f, mode=mode, compute=C, params=N, tokens=D, loss=float(loss(N, D, f)),
                            optimum_params=n_opt, optimum_tokens=d_opt, optimum_loss=float(loss(n_opt, d_opt, f)),
                            numeric_params=n_num, numeric_tokens=d_num, notes=notes)
