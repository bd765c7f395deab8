"""Charts of a simulation (matplotlib, imported lazily): latency CDFs and the queue and KV cache over time."""
from __future__ import annotations

from tokenmath.faces.plots import pyplot, save_figure


def simulation_plot(r, path) -> str:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    q = r.cdf["q"]
    for key, label, color in (("ttft_s", "time to first token", "C0"), ("itl_s", "inter-token gap", "C1"),
                              ("tpot_s", "time per output token (request)", "C2"), ("e2e_s", "end to end", "C3")):
        xs = [x for x in r.cdf[key] if x is not None]
        if xs:
            a1.step([x * 1e3 for x in r.cdf[key] if x is not None], q[:len(xs)], where="post", color=color,
                    label=label)
    a1.axvline(r.ttft_target_s * 1e3, color="C0", ls=":", lw=1, label=f"TTFT target {r.ttft_target_s * 1e3:g} ms")
    a1.axvline(r.itl_target_s * 1e3, color="C2", ls=":", lw=1, label=f"TPOT target {r.itl_target_s * 1e3:g} ms")
    a1.set_xscale("log")
    a1.set_xlabel("latency (ms)")
    a1.set_ylabel("fraction of requests (tokens for the inter-token gap)")
    a1.set_title("latency CDFs")
    a1.legend(fontsize=8, loc="lower right")
    s = r.series
    a2.plot(s["t_s"], s["queue"], color="C3", label="waiting requests")
    a2.plot(s["t_s"], s["running"], color="C0", label="running requests")
    a2.set_xlabel("time (s)")
    a2.set_ylabel("requests")
    b = a2.twinx()
    b.plot(s["t_s"], [x * 100 for x in s["kv_fraction"]], color="C2", alpha=0.7, label="KV cache used (%)")
    b.set_ylabel("KV cache used (%)", color="C2")
    b.set_ylim(0, 105)
    a2.legend(fontsize=8, loc="upper left")
    a2.set_title("queue and KV cache over time")
    sp = r.speculation
    spec = "" if not sp else (f"; {sp['k']} MTP token(s)" if sp["mtp"] else f"; draft {sp['draft_model']}, k = {sp['k']}") \
        + (f", acceptance {sp['acceptance']:g}" if sp else "")
    fig.suptitle(f"{r.model} on {r.chips} x {r.hardware}, {r.engine.get('name', '')}: {r.workload_description}{spec}",
                 fontsize=9)
    return save_figure(fig, path)
