"""Text for the by-concurrency section of `pareto` and `plan`: the closed-loop steady state at each concurrency
(analyses/serving/by_concurrency.py). Formatting only."""
from __future__ import annotations

from tokenmath.base import units as u

_HEAD = f"{'users':>6} {'tok/s/user':>11} {'tok/s/chip':>11} {'TTFT':>9} {'TPOT':>9} {'running':>8}  limit"


def _row(q: dict, layout: bool) -> str:
    s = lambda x: u.seconds(x) if x is not None else "n/a"     # noqa: E731
    n = lambda x, f: format(x, f) if x is not None else "n/a"  # noqa: E731
    return (f"{q['concurrency']:>6} {n(q['output_tokens_per_s_per_user'], ',.1f'):>11} "
            f"{n(q['output_tokens_per_s_per_chip'], ',.1f'):>11} {s(q['ttft_s']):>9} {s(q['tpot_s']):>9} "
            f"{n(q['running'], ',.0f'):>8}  {q['limit']}" + (f"  {q['layout']}" if layout else ""))


def _intro(engine: str) -> list[str]:
    return ["", f"By concurrency (closed loop, {engine} scheduler, steady state: continuous batching, TTFT per "
                "request, tok/s/user = 1 / time per output token):"]


def pareto_concurrency_text(p) -> str:
    """The points of the by-concurrency frontier (every layout at every concurrency), most interactive first."""
    pts = p.by_concurrency
    if not pts:
        return ""
    front = sorted((q for q in pts if q.get("frontier")), key=lambda q: -(q["output_tokens_per_s_per_user"] or 0))
    L = _intro(p.setup.engine_dict.get("name") or p.setup.engine_dict.get("id", "the engine's"))
    L.append(f"  frontier: {len(front)} of {len(pts)} (layout, concurrency) points")
    L.append("  " + _HEAD + "  layout")
    L += ["  " + _row(q, True) for q in front]
    L += [f"note: {n}" for n in p.by_concurrency_notes]
    return "\n" + "\n".join(L)


def plan_concurrency_text(p) -> str:
    """The best layout's points at each concurrency (the runner-ups' are in --json)."""
    pts = p.by_concurrency
    if not pts:
        return ""
    best = [q for q in pts if q["layout"] == p.best["layout"] and not q.get("bisected")]
    L = _intro(p.setup.engine_dict.get("name") or p.setup.engine_dict.get("id", "the engine's"))
    L.append(f"  best layout {p.best['layout']}" + (" (runner-up layouts' points in --json)" if len(best) < len(pts) else ""))
    L.append("  " + _HEAD)
    L += ["  " + _row(q, False) for q in best]
    L += _cheapest_lines(p)
    L += [f"note: {n}" for n in p.by_concurrency_notes]
    return "\n" + "\n".join(L)


def _cheapest_lines(p) -> list[str]:
    """The cheapest traced point meeting the targets with its own TTFT, against the static best above."""
    c, t = p.best_by_concurrency, p.targets
    goal = " and ".join([*([f"TTFT <= {u.seconds(t['ttft_s'])} per request"] if t.get("ttft_s") is not None else []),
                         *([f">= {t['min_tokens_per_s_per_user']:g} tok/s/user"]
                           if t.get("min_tokens_per_s_per_user") is not None else [])]) or "no target"
    users = sorted({q["concurrency"] for q in p.by_concurrency if not q.get("bisected")})
    among = f"{users[0]:,}-{users[-1]:,} users" if len(users) > 1 else f"{users[0]:,} users"
    if c is None:
        return [f"  continuously batched ({among} traced), no point meets {goal}"]
    cost = c["cost_per_mtok_output_request_usd"]
    static = p.best.get("cost_per_mtok_output_request_usd")
    vs = (f" (the static batch above: {u.usd(static)}, its TTFT the whole batch's prefill)"
          if cost is not None and static is not None else "")
    return [f"  cheapest continuously batched point ({among} traced) meeting {goal}: {c['layout']} at "
            f"{c['concurrency']:,} users, "
            f"{c['output_tokens_per_s_per_user']:,.1f} tok/s/user, TTFT {u.seconds(c['ttft_s'])}, "
            f"{c['output_tokens_per_s_per_chip']:,.1f} tok/s/chip"
            + (f", {u.usd(cost)}/Mtok whole request{vs}" if cost is not None else "")]
