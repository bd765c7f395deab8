"""Text for `tokenmath scenarios`: one line per scenario and the summary. Formatting only: every number comes from
the sweep's rows (analyses/serving/scenarios.py)."""
from __future__ import annotations

from tokenmath.base import units as u


def _layout(r: dict) -> str:
    if r.get("error") is None and "tp" in r:
        return f"{r['chips']} (tp{r['tp']} pp{r['pp']} ep{r['ep']} dp{r['dp']})"
    lay = r["layout"]
    return ",".join(f"{k}={v}" for k, v in lay.items()) or "default"


def _workload(w: dict) -> str:
    if "concurrency" in w:
        head = f"C={w['concurrency']}"
    elif "arrival_rate" in w:
        head = f"{w['arrival_rate']:g} req/s"
    elif "trace" in w:
        head = "trace"
    else:
        head = "C=64"
    return head + "".join(f" {k}={w[k]}" for k in ("input_len", "output_len") if k in w)


def _s(x) -> str:
    return u.seconds(x) if x is not None else "n/a"


def _n(x, fmt="{:,.1f}") -> str:
    return fmt.format(x) if x is not None else "n/a"


def scenarios_table(sweep) -> str:
    rows = sweep.rows
    steady = sweep.scenarios.method == "steady"
    head = (f"{'#':>4}  {'model':<18} {'hardware':<11} {'layout':<22} {'engine':<13} {'workload':<24}"
            f"{'tok/s/chip':>11} {'tok/s/user':>11} " + (f"{'TTFT mean':>10} {'TPOT mean':>10} {'limit':>11}" if steady
                                                        else f"{'TTFT p50':>10} {'TTFT p99':>10} {'ITL p99':>10} {'goodput':>9}"))
    lines = [head]
    for r in rows:
        left = (f"{r['index']:>4}  {r['model'][:18]:<18} {r['hardware'][:11]:<11} {_layout(r)[:22]:<22} "
                f"{r['engine'][:13]:<13} {_workload(r['workload'])[:24]:<24}")
        if r["error"] is not None:
            e = r["error"]
            lines.append(f"{left}error: {e['field'] + ': ' if e['field'] else ''}{e['problem']}")
            continue
        mid = f"{_n(r['output_tokens_per_s_per_chip']):>11} {_n(r['output_tokens_per_s_per_user']):>11} "
        if steady:
            tail = f"{_s(r['ttft_mean_s']):>10} {_s(r['tpot_mean_s']):>10} {r['limit']:>11}"
        else:
            tail = (f"{_s(r['ttft_p50_s']):>10} {_s(r['ttft_p99_s']):>10} {_s(r['itl_p99_s']):>10} "
                    f"{_n(r['goodput_rps'], '{:,.3g}'):>9}" + ("  queue grows" if r["queue_grows"] else ""))
        lines.append(left + mid + tail)
    sm = sweep.summary()
    run = sm["runner"]
    where = (f"{run['workers']} local process{'es' if run['workers'] != 1 else ''}" if run["kind"] == "processes"
             else f"the Dask cluster at {run['address']} ({run['workers']} workers)")
    lines += ["", f"{sm['scenarios']:,} scenarios ({sm['ok']:,} ran, {sm['errors']:,} errors) in {u.seconds(sm['wall_s'])} "
              f"on {where}; {'closed-form steady states' if steady else 'simulations'}"]
    for key, label, fmt in (("best_output_tokens_per_s_per_chip", "most output tokens/s per chip", _n),
                            ("best_output_tokens_per_s_per_user", "fastest per user (tokens/s)", _n),
                            ("best_goodput_rps", "most goodput (req/s)", lambda x: _n(x, "{:,.3g}")),
                            ("lowest_ttft_p99_s", "lowest TTFT p99", _s)):
        b = sm.get(key)
        if b is not None:
            lines.append(f"  {label}: {fmt(b['value'])} (#{b['index']})")
    if not steady:
        lines.append("goodput: requests/s meeting both the TTFT and the time-per-output-token targets")
    return "\n".join(lines)
