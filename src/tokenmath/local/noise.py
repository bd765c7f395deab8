"""Is a measurement steady enough to be this machine's reference? Every figure `tokenmath measure` writes is timed
several times; the spread of those repetitions says whether other programs were loading the machine meanwhile.

spread = median seconds / best seconds - 1 over one figure's repetitions (the same as best rate / median rate - 1):
0 when every repetition took the same time, 1.0 when the median repetition took twice the best one. The figures
checked are those the hardware file uses: the headline triad (memory_bw_tbs), the best matmul of each dtype
(tflops), the per-call overhead the kernel model takes, and the GEMM curve (the upper quartile of its points' spreads).
Figures only recorded beside them (numpy's copy, a slower implementation) do not gate the file.

A section (bandwidth, matmul, GEMM curve, overhead) whose figures spread past SPREAD_LIMIT is measured again, at most
MAX_REMEASURES times and only while the re-runs fit REMEASURE_BUDGET_S; the steadier run is kept. A measurement still
noisy after that is refused as a hardware file (refusal), unless the user accepts it, when the file records the
spreads (measured.noise) and every answer that reads it carries a caveat (specs.hardware.caveats).

Limits: the spread sees load that changes during the run (other programs starting, bursts, time slices taken from
torch's threads). A steady competitor that slows every repetition alike is not seen here; the load-average note
(machine.machine_busy) is all that says so.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from tokenmath.base.errors import InputError

# Why 25%: on a quiet machine the repetitions of a kernel agree within a few percent (DRAM refresh, page placement
# and clock boost move a STREAM triad or a square matmul by ~1-5% run to run; the small GEMM-curve points, a few ms
# each, by up to ~10-15%). A program competing for one of the cores takes scheduler time slices of milliseconds, and
# every call it lands in runs 50-200% slower (on the 2-core VM of docs/measure-verify.md: median/best of 1.9-3.2 for
# numpy's bandwidth and per-call overhead at load average 5). The file's kernel model reads medians, so a spread s
# is an error of up to s in verify's reference: 25% is also the band verify itself counts as agreement
# (summary.within_25pct), above which its comparison says more about the load than about the model.
SPREAD_LIMIT = 0.25
MAX_REMEASURES = 2          # per section: a burst of load from another program usually passes within one re-run
# Seconds of re-measuring allowed in one `measure` (all sections together): a quiet default run stays ~30 s on 2
# cores (no re-run), a noisy one ~60 s of work at most; --quick a few seconds more.
REMEASURE_BUDGET_S, REMEASURE_BUDGET_QUICK_S = 30.0, 5.0

SECTIONS = ("bandwidth", "matmul", "gemm_curve", "overhead")
Spreads = dict[str, float]      # figure (its key under the file's [measured] table) -> spread


def spread(best_s: float, median_s: float) -> float:
    """median / best - 1 of one figure's seconds (or best / median of its rates); 0 where unknown."""
    try:
        best, med = float(best_s), float(median_s)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, med / best - 1.0) if best > 0 and med > 0 else 0.0


def headline_triad(table: dict) -> str | None:
    """The bandwidth kernel memory_bw_tbs is read from: the best triad (any kernel when there is no triad)."""
    ok = {k: v for k, v in table.items() if float(v.get("best") or 0) > 0}
    pool = {k: v for k, v in ok.items() if k.endswith("triad")} or ok
    return max(pool, key=lambda k: pool[k]["best"]) if pool else None


def best_matmuls(table: dict, floor: float) -> dict[str, str]:
    """dtype -> the matmul entry whose best TFLOP/s becomes that dtype's tflops (entries below `floor` left out)."""
    out: dict[str, str] = {}
    for k, r in table.items():
        if not r.get("error") and float(r.get("best") or 0) >= floor:
            d = r["dtype"]
            if d not in out or r["best"] > table[out[d]]["best"]:
                out[d] = k
    return out


def overhead_kernel(table: dict) -> str | None:
    """The overhead entry the kernel model takes as each kernel's fixed time: torch's when measured, else numpy's."""
    return next((k for k in ("torch", "numpy") if k in table), None)


def section_spreads(section: str, table: dict, floor: float = 1e-4) -> Spreads:
    """The spreads of a section's figures that the hardware file uses, keyed as in its [measured] table."""
    if section == "bandwidth":
        k = headline_triad(table)
        return {f"bandwidth_gbs.{k}": spread(table[k]["median"], table[k]["best"])} if k else {}
    if section == "matmul":     # rates: best / median - 1 is median_s / best_s - 1
        return {f"matmul_tflops.{k}": spread(table[k]["median"], table[k]["best"])
                for k in sorted(best_matmuls(table, floor).values())}
    if section == "overhead":
        k = overhead_kernel(table)
        return {f"overhead_us.{k}": spread(table[k]["best_us"], table[k]["median_us"])} if k else {}
    if section == "gemm_curve":
        # one figure for the curve: the upper quartile of its points' spreads. A model's decode reads several points
        # (its shapes at each batch), so a quarter of them past the limit leaves some batches that far off; a few
        # noisy points of ~1 ms do not refuse it. The median point is too lenient: two runs at load average 4-5 on
        # 2 cores had a median point spread of 22% (under the limit) and an upper quartile of 42%, with 16-17 of 36
        # points past 25% and the curve at 1-13% where a quiet run measured 83-100% (docs/measure-verify.md)
        pts = [spread(b, m) for r in table.values() for b, m in zip(r.get("best_s", ()), r.get("median_s", ()))]
        if not pts:
            return {}
        return {"gemm_curve": statistics.quantiles(pts, n=4, method="inclusive")[2] if len(pts) > 1 else pts[0]}
    raise ValueError(f"unknown section {section!r}")


def noisy(spreads: Spreads, limit: float = SPREAD_LIMIT) -> list[str]:
    """The figures whose spread is past the limit, worst first."""
    return sorted((k for k, s in spreads.items() if s > limit), key=lambda k: -spreads[k])


class Budget:
    """Seconds of re-measuring left to one `measure` run."""

    def __init__(self, seconds: float):
        self.left = float(seconds)


def steady(section: str, run: Callable[[], dict], budget: Budget, say: Callable[[str], None],
           floor: float = 1e-4) -> tuple[dict, Spreads, int]:
    """(table, its spreads, re-measurements made): run() once, then again while its figures spread past SPREAD_LIMIT,
    at most MAX_REMEASURES times and only while the budget has room for a run as long as the last one (seconds by
    time.perf_counter). The steadier run (the smaller worst spread) is kept."""
    t0 = time.perf_counter()
    table = run()
    last = time.perf_counter() - t0
    spreads = section_spreads(section, table, floor)
    tries = 0
    while (bad := noisy(spreads)) and tries < MAX_REMEASURES and budget.left >= last:
        tries += 1
        say(f"{section}: {bad[0]} spread {spreads[bad[0]]:.0%} > {SPREAD_LIMIT:.0%} (other programs loading the "
            f"machine?): measuring it again ({tries} of {MAX_REMEASURES})")
        t0 = time.perf_counter()
        again = run()
        last = time.perf_counter() - t0
        budget.left -= last
        s2 = section_spreads(section, again, floor)
        if max(s2.values(), default=0.0) < max(spreads.values(), default=0.0):
            table, spreads = again, s2
    return table, spreads, tries


def summary(spreads: Spreads, remeasured: dict[str, int], load: str | None = None, limit: float = SPREAD_LIMIT,
            budget_s: float = REMEASURE_BUDGET_S) -> dict:
    """The [measured.noise] table of a hardware file (load: the machine's load average as the run ended; budget_s:
    the seconds of re-measuring the run had)."""
    return {**({"load": load} if load else {}), "spread_limit": limit, "remeasure_budget_s": budget_s, "spread": {k: round(float(v), 4) for k, v in spreads.items()},
            "noisy": noisy(spreads, limit), "remeasured": dict(remeasured),
            "how": "spread = median / best - 1 of each figure's repetitions; figures past spread_limit are noisy"}


def notes(noise: dict) -> list[str]:
    """Lines for a measurement's notes: what was re-measured, and what is still noisy."""
    out = [f"{sec} was measured again {n} time{'s' if n > 1 else ''}: its first run spread past "
           f"{noise['spread_limit']:.0%}" for sec, n in noise.get("remeasured", {}).items() if n]
    bad = noise.get("noisy") or []
    if bad:
        out.append("NOISY: " + describe(noise) + "; not a reference to write or verify against (measure again on a "
                   "quiet machine)")
    return out


def describe(noise: dict) -> str:
    """'bandwidth_gbs.numpy_triad 86%, gemm_curve 44% > 25%': the noisy figures and their spreads."""
    bad = noise.get("noisy") or []
    return (", ".join(f"{k} {noise['spread'][k]:.0%}" for k in bad)
            + f" > {noise['spread_limit']:.0%} (median repetition vs best)")


def section_of(figure: str) -> str:
    """'bandwidth_gbs.numpy_triad' -> 'bandwidth': the section a figure is measured in."""
    head = figure.split(".", 1)[0]
    return {"bandwidth_gbs": "bandwidth", "matmul_tflops": "matmul", "overhead_us": "overhead"}.get(head, head)


def refusal(noise: dict) -> InputError | None:
    """The InputError that refuses a noisy measurement as a hardware file (None when it is steady). It names the
    worst figure (as measured.<key>), every noisy spread, the limit, and what to do."""
    bad = noise.get("noisy") or []
    if not bad:
        return None
    tries = noise.get("remeasured", {}).get(section_of(bad[0]), 0)
    again = (f", still after {tries} re-measurement{'s' if tries != 1 else ''}" if tries else
             f", not measured again (a re-run would not fit the {noise.get('remeasure_budget_s', 0):.0f} s "
             "re-measuring budget)")
    return InputError(
        f"measured.{bad[0]}",
        f"the measurement is noisy: {describe(noise)}{again}. Other programs were loading the machine; a file of "
        "these figures would make infer and verify wrong by as much. Nothing was written"
        + (f" ({noise['load']})" if noise.get("load") else ""),
        "close other programs and run `tokenmath measure` again, or pass --accept-noisy to write it anyway, "
        "marked noisy in its [measured.noise] table")
