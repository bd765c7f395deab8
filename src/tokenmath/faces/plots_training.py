"""Charts of the training questions: over-training's cost against model size, Chinchilla's IsoFLOP curves."""
from __future__ import annotations

import math

import numpy as np

from tokenmath.analyses.training.overtrain import OvertrainResult
from tokenmath.analyses.training.scaling_laws import ChinchillaResult, compute_optimal, loss
from tokenmath.faces.names import chip_label
from tokenmath.faces.plots import pyplot, save_figure


def plot_overtrain(r: OvertrainResult, path: str) -> str:
    """Total, training and inference cost vs N (log-log), Chinchilla point and optimum marked."""
    plt = pyplot()   # the charts' shared setup: Agg backend, a clear error when matplotlib is missing
    cv = r.curve
    N = cv["params"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ok = np.isfinite(cv["total_usd"])
    ax.plot(N[ok], cv["total_usd"][ok], lw=2, color="k", label="total")
    tr_label = "training (training engine)" if r.training_model == "engine" else f"training (6ND at MFU {r.mfu:g})"
    ax.plot(N, cv["training_usd"], color="C0", label=tr_label)
    if np.any(cv["inference_usd"][ok] > 0):
        ax.plot(N[ok], cv["inference_usd"][ok], color="C1",
                label="inference (2N FLOPs)" if r.flop_only else "inference (serving engine)")
        if not r.flop_only:
            ax.plot(N, cv["total_usd_flop_only"], ls="--", color="grey", lw=1, label="total, FLOP-only inference")
    o, c = r.optimum, r.chinchilla
    ax.plot([o.params], [o.total_usd], "o", color="C3", ms=8,
            label=f"optimum: {o.params / 1e9:.3g}B params, {o.tokens / o.params:,.0f} tok/param")
    if math.isfinite(c.total_usd):
        ax.plot([c.params], [c.total_usd], "s", color="C2", ms=8,
                label=f"Chinchilla: {c.params / 1e9:.3g}B params, {c.tokens / c.params:,.0f} tok/param")
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = np.nanmax(cv["total_usd"][ok]) if ok.any() else 1
    ax.set_ylim(max(o.total_usd / 20, 1e-9), min(top, o.total_usd * 30))
    from matplotlib.ticker import FuncFormatter
    billions = FuncFormatter(lambda x, _: f"{x / 1e9:.3g}")
    ax.xaxis.set_major_formatter(billions)
    ax.xaxis.set_minor_formatter(billions)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("model parameters N (billions)")
    ax.set_ylabel("cost (USD)")
    ax.set_title(f"loss {r.target_loss:.4f} ({r.fit.name} fit), {r.inference_tokens + r.rl_rollout_tokens:.3g} "
                 f"inference tokens, {chip_label(r.hardware)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_chinchilla(r: ChinchillaResult, path: str) -> str:
    """IsoFLOP curves (loss vs N at fixed C = 6ND) at C/10, C, 10C, each optimum marked; the asked point too."""
    plt = pyplot()   # the charts' shared setup: Agg backend, a clear error when matplotlib is missing
    f = r.fit
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, C in ((0.1, r.compute / 10), (1, r.compute), (10, r.compute * 10)):
        n_opt, _ = compute_optimal(C, f)
        N = np.logspace(np.log10(n_opt) - 1.5, np.log10(n_opt) + 1.5, 300)
        ax.plot(N, loss(N, C / (6 * N), f), lw=2 if k == 1 else 1, alpha=1 if k == 1 else 0.5,
                label=f"C = {C:.3g} FLOPs")
        ax.plot([n_opt], [loss(n_opt, C / (6 * n_opt), f)], "o", color="k" if k == 1 else "grey")
    ax.annotate(f"optimum {r.optimum_params / 1e9:.3g}B params,\n{r.optimum_tokens / 1e12:.3g}T tokens",
                (r.optimum_params, r.optimum_loss), textcoords="offset points", xytext=(10, -30))
    if r.mode == "point":
        ax.plot([r.params], [r.loss], "s", color="C3", label=f"asked: N={r.params:.3g}, D={r.tokens:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("model parameters N")
    ax.set_ylabel("predicted loss L(N, D = C/6N) (nats/token)")
    ax.set_title(f"IsoFLOP curves, Chinchilla fit '{f.name}'")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
