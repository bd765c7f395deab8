"""Readable tables for the terminal (rich), built from analysis results only."""
from __future__ import annotations

import json

import click

from tokenmath.base import units as u


def _console():
    from rich.console import Console
    return Console()


def infer_table(r) -> None:
    from rich.table import Table
    d = r.to_dict()
    t = Table(title=f"{r.model.name} on {r.chips} x {r.hardware.name}", show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("layout", f"tp={d['tp']} pp={d['pp']} ep={d['ep']} dp={d['dp']}")
    t.add_row("dtypes", f"weights {d['weight_dtype']}" + (f", experts {d['expert_dtype']}" if d['expert_dtype'] != d['weight_dtype'] else "")
              + f", KV {d['kv_dtype']}")
    t.add_row("workload", f"batch {d['batch']}, {d['input_len']:,} in / {d['output_len']:,} out")
    t.add_row("serving engine", d["engine"]["name"] + (f" (largest batch {d['max_batch']:,})" if d.get("max_batch") else ""))
    t.add_row("parameters (total / active)", f"{u.count(d['params_total'])} / {u.count(d['params_active'])}")
    t.add_row("weights", u.bytes_(d["weights_bytes"]))
    t.add_row("KV cache per token", u.bytes_(d["kv_bytes_per_token"]))
    mb = d["memory_breakdown_bytes"]
    t.add_row("memory per chip", f"{u.bytes_(d['memory_per_chip_bytes'])} of {u.bytes_(d['memory_usable_per_chip_bytes'])} "
              f"(weights {u.bytes_(mb['weights'])}, KV {u.bytes_(mb['kv_cache'])}, act. {u.bytes_(mb['activations'])})")
    t.add_row("fits", "[green]yes[/]" if d["fits"] else "[red]no[/]")
    if d["fits"]:
        t.add_row("TTFT (whole batch)", u.seconds(d["ttft_s"]))
        t.add_row("decode step", f"{u.seconds(d['decode_step_s'])} (pure roofline {u.seconds(d['decode_floor_s'])})")
        t.add_row("tokens/s per user", f"{d['output_tokens_per_s_per_user']:,.1f}")
        t.add_row("tokens/s (system)", f"{d['output_tokens_per_s']:,.1f}")
        t.add_row("bottleneck prefill / decode", f"[bold]{d['bottleneck_prefill']}[/] / [bold]{d['bottleneck_decode']}[/]")
        t.add_row("$ per Mtok input", u.usd(d["cost_per_mtok_input_usd"]))
        t.add_row("$ per Mtok output: decode only / whole request",
                  f"{u.usd(d['cost_per_mtok_output_usd'])} / {u.usd(d['cost_per_mtok_output_request_usd'])}")
        if d["energy_j_per_output_token"] is not None:
            t.add_row("energy per output token (at TDP)", f"{d['energy_j_per_output_token']:.3g} J")
    c = _console()
    c.print(t)
    for a in d["advice"]:
        c.print(f"[yellow]advice:[/] {a}")
    for n in d["notes"]:
        c.print(f"[dim]note: {n}[/]")
    if not d["fits"]:
        c.print("[red]Does not fit: no speeds are reported for a configuration that cannot run.[/]")


def models_table(as_json: bool) -> None:
    from tokenmath.specs.model_catalog import get_model, model_ids
    from tokenmath.specs.params import count_params
    rows = []
    for mid in model_ids():
        m = get_model(mid)
        p = count_params(m)
        rows.append({"id": mid, "name": m.name, "params_total": p.total, "params_active": p.active,
                     "official_params_total": m.official_params_total, "summary": m.describe(), "source": m.source})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table
    t = Table(title="Model catalog")
    for col in ("id", "total", "active", "architecture"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], u.count(r["params_total"]), u.count(r["params_active"]), r["summary"])
    _console().print(t)


def hardware_table(as_json: bool) -> None:
    from tokenmath.specs.hardware import get_hardware, hardware_ids
    rows = []
    for hid in hardware_ids():
        h = get_hardware(hid)
        rows.append({"id": hid, "name": h.name, "memory_bytes": h.memory_bytes, "memory_bw": h.memory_bw,
                     "flops": dict(h.flops), "scaleup_domain": h.scaleup_domain, "scaleup_bw": h.scaleup_bw,
                     "scaleout_bw": h.scaleout_bw, "tdp_w": h.tdp_w, "price_usd_per_hour": h.price_usd_per_hour,
                     "price_date": h.price_date, "sources": dict(h.sources)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table
    t = Table(title="Hardware catalog (dense peaks)")
    for col in ("id", "bf16", "fp8", "memory", "bandwidth", "scale-up", "$/h"):
        t.add_column(col)
    for r in rows:
        f = r["flops"]
        t.add_row(r["id"], u.rate(f.get("bf16") or f.get("fp16") or 0, "FLOP/s"),
                  u.rate(f["fp8"], "FLOP/s") if f.get("fp8") else "-", u.bytes_(r["memory_bytes"]),
                  u.rate(r["memory_bw"], "B/s"), f"{r['scaleup_domain']} x {u.rate(r['scaleup_bw'], 'B/s')}",
                  f"{r['price_usd_per_hour']:g}" if r["price_usd_per_hour"] is not None else "-")
    _console().print(t)


def hyperbola_table(h) -> None:
    from rich.table import Table
    d = h.to_dict()
    t = Table(title=f"{h.setup.model.name} on {h.setup.chips} x {h.setup.hardware.id}: decode at context {h.context:,}"
                    f" (engine: {d['engine']['name'] if d['engine']['id'] != 'none' else 'none'})")
    for col in ("batch", "step", "tok/s/user", "tok/s", "$/Mtok out (decode)", "weights", "KV", "bound"):
        t.add_column(col, justify="right")
    pts = d["points"]
    idx = sorted({0, len(pts) - 1} | {i for i, p in enumerate(pts) if p["batch"] & (p["batch"] - 1) == 0})
    for i in idx:
        p = pts[i]
        t.add_row(str(p["batch"]), u.seconds(p["step_s"]), f"{p['tokens_per_s_per_user']:,.1f}", f"{p['tokens_per_s']:,.0f}",
                  u.usd(p["cost_per_mtok_output_usd"]), f"{p['weight_share']:.0%}", f"{p['kv_share']:.0%}", p["bottleneck"])
    from tokenmath.faces.explain_serving import explain_hyperbola
    c = _console()
    c.print(t)
    c.print(explain_hyperbola(h))


def coverage_table(cov: dict) -> None:
    from rich.table import Table
    c = _console()
    t = Table(title="deduce on open-weight API prices (true active params known)")
    for col in ("model", "provider", "in/out $/Mtok", "true B", "median B", "80% interval", "inside"):
        t.add_column(col)
    for r in cov["open"]:
        if "error" in r:
            t.add_row(r["model"], r["provider"], f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}",
                      f"{r['true_active_params_b']:.3g}", "-", r["error"][:40], "-")
            continue
        a = r["active_params_b"]
        t.add_row(r["model"], r["provider"], f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}",
                  f"{r['true_active_params_b']:.3g}", f"{a['median']:.3g}", f"{a['low']:.3g} - {a['high']:.3g}",
                  "yes" if r["inside_80"] else "no")
    c.print(t)
    if cov["coverage_80"] is not None:
        c.print(f"coverage of the 80% interval: {cov['coverage_80']:.0%} of {cov['scored']} rows; "
                f"median error of the median: x{cov['median_error_factor']:.2f}")
    t2 = Table(title="closed models: deduced active params (billions)")
    for col in ("model", "provider", "in/out $/Mtok", "median", "80% interval", "total (median)"):
        t2.add_column(col)
    for r in cov["closed"]:
        if "error" in r:
            t2.add_row(r["model"], r["provider"], f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}", "-", r["error"][:50], "-")
            continue
        a, tt = r["active_params_b"], r["total_params_b"]
        t2.add_row(r["model"], r["provider"], f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}",
                   f"{a['median']:.3g}", f"{a['low']:.3g} - {a['high']:.3g}", f"{tt['median']:.3g}")
    c.print(t2)


def validation_table(v, physics=None) -> None:
    """Every row, then held-out median errors by regime / MoE-dense / vendor, the pure-roofline check, the fitted
    parameters with their edges, and the row counts (v: analyses.calibration.validate.Validation; physics: the same
    for the issue-16 model, when the engine provides it)."""
    from rich.table import Table
    c = _console()
    pct = lambda y: f"{y:.0%}" if y is not None else "-"  # noqa: E731
    t = Table(title=f"Predicted vs published measurements (model {v.model.name!r})")
    for col in ("id", "regime", "metric", "measured", "pure roofline", "defaults", "LOSO", "err", "LORO", "err", "flag"):
        t.add_column(col, overflow="fold")
    for d in v.rows():
        if "skipped" in d:
            continue
        h, e = d["predicted_heldout"], d["ape_heldout"]
        t.add_row(d["id"][:48], d["regime"], d["metric"], f"{d['measured']:.4g}", f"{d['predicted_pure_roofline']:.4g}",
                  f"{d['predicted_roofline']:.4g}", f"{h['loso']:.4g}" if h["loso"] is not None else "-",
                  pct(e["loso"]), f"{h['loro']:.4g}" if h["loro"] is not None else "-", pct(e["loro"]),
                  "beats roofline" if d["beats_pure_roofline"] else ("not scored" if "not_scored" in d else ""))
    c.print(t)
    for w in ([v] if physics is None else [v, physics]):
        s = w.summary()
        med = s["median_ape"]
        cols = ("pure_roofline", "roofline_defaults", "loso", "loro", "lovo", "lomo")
        for grouping, title in (("regime", "regime"), ("moe", "MoE / dense"), ("vendor", "chip vendor")):
            t2 = Table(title=f"Median |error| by {title}, model {w.model.name!r} (held out: LOSO source, LORO regime, "
                             "LOVO vendor, LOMO MoE/dense left out of the fit)")
            for col in (title, "rows", "pure roofline", "defaults", "LOSO", "LORO", "LOVO", "LOMO"):
                t2.add_column(col)
            for g, x in med["pure_roofline"][grouping].items():
                t2.add_row(g, str(x["rows"]), *[pct(med[k][grouping].get(g, {}).get("median_ape")) for k in cols])
            a = med["pure_roofline"]["all"]
            t2.add_row("all", str(a["rows"]), *[pct(med[k]["all"]["median_ape"]) for k in cols])
            c.print(t2)
        f = s["faster_than_pure_roofline"]
        c.print(f"predictions faster than the pure roofline: {f['count']} (must be 0)")
        for r in f["rows"]:
            c.print(f"  [red]{r['id']}[/]: {r['prediction']} {r['value']:.4g} vs bound {r['pure_roofline']:.4g}")
        t3 = Table(title=f"Fitted parameters, model {w.model.name!r} (in-sample fit on {s['rows']['scored']} rows)")
        for col in ("parameter", "group", "value", "bounds", "rows", "edge"):
            t3.add_column(col)
        for d in w.parameters():
            t3.add_row(d["name"], d["group"], f"{d['value']:.4g}", f"{d['bounds'][0]:.4g} - {d['bounds'][1]:.4g}",
                       str(d["rows"]), f"[red]{d['at_edge']} bound: physics missing[/]" if d["at_edge"] else "")
        c.print(t3)
    s = v.summary()
    if s["measured_beats_pure_roofline"]:
        c.print("measurements faster than the pure roofline (data or configuration wrong, see --json flag): "
                + ", ".join(s["measured_beats_pure_roofline"]))
    for k, x in s["training"].items():
        c.print(f"training: {k.replace('_', ' ')} {x:.1f}")
    cnt = v.counts()
    c.print("rows (scored/all) by " + "; ".join(
        f"{g}: " + ", ".join(f"{k} {n['scored']}/{n['rows']}" for k, n in cnt[g].items()) for g in ("regime", "vendor", "engine")))
    c.print(f"{s['rows']['skipped']} rows skipped (reasons in --json): batch unpublished, layouts tokenmath cannot "
            "express or fit in its memory model")