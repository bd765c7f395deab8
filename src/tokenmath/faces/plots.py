"""Charts (matplotlib, imported only here). Each function takes an analysis result and a path (.png or .svg)."""
from __future__ import annotations

from pathlib import Path

from tokenmath.base.errors import InputError
from tokenmath.base.install import install_hint
from tokenmath.faces.names import chip_label


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("plot", "matplotlib is not installed", install_hint("plot")) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


PLOT_SUFFIXES = (".png", ".svg")
SIGNATURE = "`tokenmath` (matplotlib)"   # in the file (PNG Software, SVG creator): marks it as ours (base/files.py)


def save_figure(fig, path) -> str:
    """The chart as PNG or SVG (by the suffix), written whole or not at all (tokenmath.base.files.write_atomic: no
    link followed, a file tokenmath did not write replaced only when `path` carries --force)."""
    import io

    from tokenmath.base.files import check_destination, write_atomic
    dest = check_destination(path, "plot", PLOT_SUFFIXES)
    fmt = Path(dest).suffix.lower().lstrip(".")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format=fmt, dpi=130, metadata={"Software" if fmt == "png" else "Creator": SIGNATURE})
    import matplotlib.pyplot as plt
    plt.close(fig)
    return write_atomic(dest, buf.getvalue(), "plot")


def hyperbola_plot(h, path) -> str:
    plt = pyplot()
    d = h.to_dict()
    su = h.setup
    fig, ax = plt.subplots(figsize=(8, 5))
    cost = h.cost_per_mtok_output_usd
    y = cost if cost is not None else h.per_token_s * 1e3
    ylabel = "decode cost ($ per million output tokens)" if cost is not None else "time per output token (ms)"
    ax.plot(h.batch, y, color="C0", lw=2, label="cost per output token")
    floor = h.floor_cost_per_mtok_output_usd if cost is not None else h.floor_per_token_s * 1e3
    ax.axhline(float(floor), color="C2", ls="--", label=f"floor ({d['floor_bottleneck']}-bound) = {float(floor):.3g}")
    if h.critical_batch:
        ax.axvline(h.critical_batch, color="C3", ls=":", label=f"critical batch ~{h.critical_batch}")
    ax.axvline(h.max_batch, color="gray", ls="-.", label=f"max batch that fits = {h.max_batch}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size (concurrent sequences)")
    ax.set_ylabel(ylabel)
    ax2 = ax.twinx()
    ax2.plot(h.batch, h.step_s * 1e3, color="C1", alpha=0.7, label="step latency")
    ax2.set_ylabel("decode step latency (ms)", color="C1")
    ax.set_title(f"{su.model.name} on {su.chips} x {chip_label(su.hardware)}, context {h.context:,}: "
                 "weights are fetched once per step, so batching amortizes them", fontsize=9)
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def pareto_plot(p, path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [q["output_tokens_per_s_per_user"] for q in p.points]
    ys = [q["output_tokens_per_s_per_chip"] for q in p.points]
    ax.scatter(xs, ys, s=6, color="lightgray", label="(layout, batch) points that fit")
    fx = [q["output_tokens_per_s_per_user"] for q in p.frontier]
    fy = [q["output_tokens_per_s_per_chip"] for q in p.frontier]
    ax.plot(fx, fy, "-o", color="C0", ms=3, label="Pareto frontier")
    for q in p.frontier[:: max(1, len(p.frontier) // 6)]:
        c = q["cost_per_mtok_output_request_usd"]
        ax.annotate(f"{q['layout'].replace(' pp=1', '').replace(' ep=1', '')} b={q['batch']}"
                    + (f"\n${c:.3g}/Mtok (request)" if c is not None else ""),
                    (q["output_tokens_per_s_per_user"], q["output_tokens_per_s_per_chip"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("interactivity (output tokens/s per user)")
    ax.set_ylabel("throughput (output tokens/s per chip)")
    if getattr(p, "by_concurrency", None):
        from tokenmath.faces.plots_concurrency import concurrency_curves
        concurrency_curves(ax, p.by_concurrency, engine=p.setup.engine_dict.get("id", ""))
    ax.set_title(f"{p.setup.model.name} on {p.chips} x {chip_label(p.setup.hardware)}: faster users cost throughput", fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def slowmode_plot(s, path) -> str:
    plt = pyplot()
    d = s.to_dict()
    rows = [r for r in d["rows"] if r["feasible"]]
    fig, ax = plt.subplots(figsize=(8, 5))
    key = ("cost_per_mtok_output_request_usd" if rows and rows[0]["cost_per_mtok_output_request_usd"] is not None
           else "chip_s_per_mtok_output")
    xs = [r["budget_s"] * 1e3 for r in rows]
    ax.plot(xs, [r[key] for r in rows], "-o", color="C0", label="cheapest within the budget")
    last, n = None, 0
    for r in rows:              # label a point only where the answer changes (chips, batch), not every budget
        if (r["chips"], r["batch"]) != last:
            ax.annotate(f"{r['chips']} chips, batch {r['batch']}", (r["budget_s"] * 1e3, r[key]), fontsize=7,
                        xytext=(4, 6 if n % 2 == 0 else -12), textcoords="offset points")   # alternate: no overlap
            last, n = (r["chips"], r["batch"]), n + 1
    f = d.get("fastest")
    if f is not None and f.get("cost") is not None:
        ax.plot([f["latency_s"] * 1e3], [f["cost"]], "s", color="C1", label="the fastest point")
    if d["saturation_budget_s"]:
        ax.axvline(d["saturation_budget_s"] * 1e3, color="C3", ls=":", label="waiting buys nothing beyond here")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, NullLocator
    ticks = sorted({x for x in xs} | ({f["latency_s"] * 1e3} if f else set()))
    ax.set_xticks(ticks if len(ticks) <= 8 else ticks[::2])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:.3g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.set_xlabel("latency budget (ms " + ("per request)" if d["per_request"] else "per output token)"))
    ax.set_ylabel("cheapest cost ($ per million output tokens, whole request)" if key.startswith("cost")
                  else "chip-seconds per million output tokens")
    ax.set_title(f"{s.setup.model.name} on {chip_label(s.setup.hardware)}\npatience lowers cost only until the batch "
                 "fills memory", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def prices_plot(p, path) -> str:
    plt = pyplot()
    rows = [r for r in p.rows if r["fits"]]
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [r["input_len"] for r in rows]
    ax.plot(x, [r["cost_per_mtok_output"] for r in rows], "-o", label="output token (decode)")
    ax.plot(x, [r["cost_per_mtok_input"] for r in rows], "-o", label="input token (prefill)")
    ax.plot(x, [r["cost_per_mtok_cached_input"] for r in rows], "--", label=f"cached hit, cost floor (KV kept {p.cache_ttl_s:g} s)")
    for r in rows:
        ax.annotate(f"{r['output_input_ratio']:.1f}x", (r["input_len"], r["cost_per_mtok_output"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context length (input tokens per request)")
    ax.set_ylabel(f"cost ({rows[0]['unit'] if rows else '$/Mtok'})")
    ax.set_title(f"{p.setup.model.name} on {p.setup.chips} x {chip_label(p.setup.hardware)}: output tokens cost more "
                 "(labels: output/input ratio)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def context_plot(c, path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [r["context"] for r in c.curve]
    ax.plot(x, [r["kv_share"] for r in c.curve], label="KV reads share of decode step")
    ax.plot(x, [r["weight_share"] for r in c.curve], label="weight reads share of decode step")
    if c.crossover_context:
        ax.axvline(c.crossover_context, color="C3", ls=":", label=f"KV = weights at ~{c.crossover_context:,} tokens")
    if c.max_context_at_batch:
        ax.axvline(c.max_context_at_batch, color="gray", ls="-.", label=f"max context at batch {c.batch}")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("context length (tokens per sequence)")
    ax.set_ylabel("fraction of decode step time")
    ax.set_title(f"{c.setup.model.name} on {c.setup.chips} x {chip_label(c.setup.hardware)}, batch {c.batch}: "
                 "where long context starts to cost like the model", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def fleet_plot(sweep: list[dict], path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [r["demand_output_tokens_per_s"] for r in sweep]
    ax.plot(x, [r["chips"] for r in sweep], "-o", label="chips")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("demand (output tokens/s)")
    ax.set_ylabel("chips")
    for r in sweep:
        lab = f"{r['megawatts']:.3g} MW" if r["megawatts"] is not None else f"{r['domains']} domains"
        ax.annotate(lab, (r["demand_output_tokens_per_s"], r["chips"]), fontsize=7, xytext=(3, -10), textcoords="offset points")
    ax.set_title(f"{sweep[0]['model']} on {sweep[0]['hardware']}: fleet grows linearly with demand "
                 f"at >= {sweep[0]['min_tokens_per_s_per_user']:g} tok/s per user", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def validation_plot(v, path) -> str:
    """Held-out prediction vs published measurement, colored by regime: left leave-one-source-out, right
    leave-one-regime-out (v: analyses.calibration.validate.Validation)."""
    from tokenmath.analyses.calibration.labels import REGIMES
    plt = pyplot()
    rows = [d for d in v.rows() if "skipped" not in d and "not_scored" not in d]
    fig, axes = plt.subplots(1, 2, figsize=(12, 6), sharex=True, sharey=True)
    vals = [x for d in rows for x in (d["measured"], *[y for y in d["predicted_heldout"].values() if y])]
    lo, hi = min(vals), max(vals)
    med = v.summary()["median_ape"]
    for ax, scheme, title in zip(axes, ("loso", "loro"), ("leave one source out", "leave one regime out")):
        for i, reg in enumerate(REGIMES):
            sel = [d for d in rows if d["regime"] == reg and d["predicted_heldout"][scheme] is not None]
            if not sel:
                continue
            m = med[scheme]["regime"].get(reg, {}).get("median_ape")
            ax.scatter([d["measured"] for d in sel], [d["predicted_heldout"][scheme] for d in sel], s=18,
                       marker="o" if reg != "training" else "s", color=f"C{i}",
                       label=f"{reg} ({len(sel)}): median {m:.0%}" if m is not None else reg)
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="prediction = measurement")
        ax.plot([lo, hi], [lo * 1.25, hi * 1.25], "k:", lw=0.6, label="+-25%")
        ax.plot([lo, hi], [lo / 1.25, hi / 1.25], "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("published measurement (metric's unit: tokens/s, s, TFLOP/s)")
        ax.set_title(f"model {v.model.name!r}, held out: {title}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("tokenmath prediction, held out (same unit)")
    return save_figure(fig, path)