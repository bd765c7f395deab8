"""Chart of a verify result (matplotlib through faces/plots' helpers): measured vs predicted against batch."""
from __future__ import annotations

from tokenmath.faces.plots import pyplot, save_figure
from tokenmath.local.verify_result import Verification


def verify_plot(v: Verification, path: str) -> str:
    """Step time and time per token (the cost hyperbola) against batch: measured points, predicted lines."""
    plt = pyplot()
    b = [r.batch for r in v.rows]
    ms = [r.measured_step_s * 1e3 for r in v.rows]
    ps = [r.predicted_step_s * 1e3 for r in v.rows]
    pr = [r.predicted_roofline_s * 1e3 for r in v.rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    a1.plot(b, ps, "-", color="C0", lw=2, label="predicted (ops + overhead)")
    a1.plot(b, pr, "--", color="C0", alpha=0.6, label="predicted ops alone")
    pk = [r.flat_step_s * 1e3 if r.flat_step_s else None for r in v.rows]
    has_k = all(x is not None for x in pk)
    if has_k:
        a1.plot(b, pk, "-", color="C7", lw=1.5, label="at 100% of the figures (no kernel model)")
    a1.plot(b, ms, "o", color="C3", ms=7, label="measured (median)")
    lo = [r.measured_min_s * 1e3 for r in v.rows]
    a1.plot(b, lo, "x", color="C3", alpha=0.5, label="measured (fastest step)")
    a1.set_xlabel("batch size (concurrent sequences)")
    a1.set_ylabel("decode step time (ms)")
    a1.set_title("decode step")
    a2.plot(b, [p / x for p, x in zip(ps, b)], "-", color="C0", lw=2, label="predicted")
    a2.plot(b, [p / x for p, x in zip(pr, b)], "--", color="C0", alpha=0.6, label="predicted ops alone")
    if has_k:
        a2.plot(b, [p / x for p, x in zip(pk, b)], "-", color="C7", lw=1.5, label="at 100% of the figures")
    a2.plot(b, [m / x for m, x in zip(ms, b)], "o", color="C3", ms=7, label="measured")
    a2.set_xlabel("batch size (concurrent sequences)")
    a2.set_ylabel("time per output token = step / batch (ms)")
    a2.set_title("cost per token: the batching hyperbola")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    plain = FuncFormatter(lambda x, _: f"{x:g}")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.xaxis.set_major_locator(FixedLocator(b))
        a.xaxis.set_major_formatter(plain)
        a.xaxis.set_minor_formatter(NullFormatter())
        a.set_yscale("log")
        a.yaxis.set_major_formatter(plain)
        a.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:g}" if f"{y:.1g}"[0] in "25" else ""))
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    s = v.summary()
    fig.suptitle(f"{v.model_name}, fp32, context {v.context}, transformers {v.versions['transformers']} on "
                 f"{v.hardware.name}\nmedian |error| {s['median_abs_error']:.0%}"
                 + (" with the measured kernel model" if v.efficiency.kernels is not None else
                    " at 100% of the measured figures")
                 + (f", {s['flat_median_abs_error']:.0%} at 100% of the figures"
                    if "flat_median_abs_error" in s else ""), fontsize=9)
    return save_figure(fig, path)
