"""Readable tables for the terminal (rich), built from analysis results only."""
from __future__ import annotations

import json

import click

from tokenmath.base import units as u


def console():
    """rich's console at the terminal's width, or plain_table.PIPED_WIDTH when the answer goes to a pipe or file."""
    from rich.console import Console
    from tokenmath.faces.plain_table import term_width
    return Console(width=term_width())


def add_id_column(t, header: str, ids) -> None:
    """A column of ids a user types back (chip, model, row ids): never cut. Its minimum width is the longest id, so
    rich narrows (wraps) the other columns first; `fold` rather than an ellipsis if the terminal is narrower still."""
    width = max([len(header), *(len(str(i)) for i in ids)])
    t.add_column(header, min_width=width, overflow="fold")


def id_table(title: str, ids, columns, left=()):
    """A rich Table: an id column that is never cut (add_id_column), then `columns`, right-justified but for those
    in `left`."""
    from rich.table import Table
    t = Table(title=title)
    add_id_column(t, "id", ids)
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def count_cell(v) -> str:
    """A count or a throughput with thousands separators, "-" for None."""
    return "-" if v is None else f"{v:,.0f}"


def ratio_cell(v) -> str:
    """A predicted / measured ratio to two decimals, "-" for None."""
    return "-" if v is None else f"{v:.2f}"


def pct_cell(v) -> str:
    """A fraction as a whole percentage, "-" for None."""
    return "-" if v is None else f"{v:.0%}"


def held_out_medians(title: str, summary: dict, groupings, second: tuple[str, str], ratio_key: str, ape_key: str):
    """The closing table of a held-out section: per group of each grouping (and "all"), its rows, a second count
    (second = (header, key)), the median predicted / measured and the median |error|."""
    from rich.table import Table
    t = Table(title=title)
    for col in ("group", "rows", second[0], "median ratio", "median |error|"):
        t.add_column(col)
    cells = lambda x: (str(x["rows"]), str(x[second[1]]), ratio_cell(x[ratio_key]), pct_cell(x[ape_key]))  # noqa: E731
    for grouping in groupings:
        for g, x in summary[grouping].items():
            t.add_row(f"{grouping}: {g}", *cells(x))
    t.add_row("all", *cells(summary["all"]))
    return t


def print_table(c, t) -> None:
    """Print t on console c at the terminal's width, or wider when its id columns need more (lines then run past the
    edge rather than losing the end of an id or a column)."""
    from rich.measure import Measurement
    m = Measurement.get(c, c.options.update_width(10_000), t)
    if m.minimum <= c.width:
        c.print(t)
        return
    old = c.width
    c.width = m.maximum      # Console.print caps its width at the console's, so widen the console for this table only
    try:
        c.print(t)
    finally:
        c.width = old


def infer_table(r) -> None:
    """The default answer of `tokenmath infer`: drawn in plain text (faces/plain_table.py), not rich, since this is
    the command whose start-up a newcomer meets first."""
    from tokenmath.faces.plain_table import box_table, wrapped
    d = r.to_dict()
    rows = [
        ("layout", f"tp={d['tp']} pp={d['pp']} ep={d['ep']} dp={d['dp']}"
                   + (f" attn={d['attention_sharding']}" if d.get("attention_sharding") else "")),
        ("dtypes", f"weights {d['weight_dtype']}" + (f", experts {d['expert_dtype']}" if d['expert_dtype'] != d['weight_dtype'] else "")
         + f", KV {d['kv_dtype']}"),
        ("workload", f"batch {d['batch']}, {d['input_len']:,} in / {d['output_len']:,} out"),
        ("serving engine", d["engine"]["name"] + _release(d["engine"])
         + (f" (largest batch {d['max_batch']:,})" if d.get("max_batch") else "")
         + ("; its defaults: --explain" if d["engine"].get("id") not in (None, "none") else "")),
        ("parameters (total / active)", f"{u.count(d['params_total'])} / {u.count(d['params_active'])}"),
        ("weights", u.bytes_(d["weights_bytes"])),
        ("KV cache per token", u.bytes_(d["kv_bytes_per_token"])),
    ]
    mb = d["memory_breakdown_bytes"]
    rows.append(("memory per chip", f"{u.bytes_(d['memory_per_chip_bytes'])} of {u.bytes_(d['memory_usable_per_chip_bytes'])} "
                 f"(weights {u.bytes_(mb['weights'])}, KV {u.bytes_(mb['kv_cache'])}, act. {u.bytes_(mb['activations'])})"))
    rows.append(("fits", "yes" if d["fits"] else "no"))
    styles = {(len(rows) - 1, 1): {"fg": "green" if d["fits"] else "red"}}
    if d["fits"]:
        rows += [
            ("TTFT (one request, queue included)" if d.get("load") else "TTFT (whole batch)", u.seconds(d["ttft_s"])),
            ("time per output token" if d.get("load") else "decode step",
             f"{u.seconds(d['decode_step_s'])} (pure roofline {u.seconds(d['decode_floor_s'])})"),
            ("tokens/s per user", f"{d['output_tokens_per_s_per_user']:,.1f}"),
            ("tokens/s (system)", f"{d['output_tokens_per_s']:,.1f}"),
            ("bottleneck prefill / decode", f"{d['bottleneck_prefill']} / {d['bottleneck_decode']}"),
        ]
        styles[(len(rows) - 1, 1)] = {"bold": True}
        rows += [
            ("$ per Mtok input", u.usd(d["cost_per_mtok_input_usd"])),
            ("$ per Mtok output: decode only / whole request",
             f"{u.usd(d['cost_per_mtok_output_usd'])} / {u.usd(d['cost_per_mtok_output_request_usd'])}"),
        ]
        if d["energy_j_per_output_token"] is not None:
            rows.append(("energy per output token (at TDP)", f"{d['energy_j_per_output_token']:.3g} J"))
    op = d.get("operating_point")
    if op is not None and op["batch"] != d["batch"]:
        label = f"a provider's batch (>= {op['min_tokens_per_s_per_user']:g} tokens/s per user)"
        rows.append((label, op.get("reason") or
                     f"batch {op['batch']:,}: {u.usd(op['cost_per_mtok_output_usd'])} decode only / "
                     f"{u.usd(op['cost_per_mtok_output_request_usd'])} whole request per Mtok output, "
                     f"{u.usd(op['cost_per_mtok_input_usd'])} input; TTFT {u.seconds(op['ttft_s'])}"))
    click.echo(box_table(f"{r.model.name} on {r.chips} x {r.hardware.name}", ["quantity", "value"],
                         [list(x) for x in rows], right=(1,), styles=styles))
    from tokenmath.faces.names import name_ids
    for a in d["advice"]:
        a = name_ids(a, r.hardware, r.model)
        click.echo(click.style("advice:", fg="yellow") + wrapped("advice: ", a)[len("advice:"):])
    # the engine's defaults are its row's detail (said once, in --explain), not a note under every answer
    notes = [n for n in d["notes"] if not n.startswith("engine: ")]
    notes += [op["static_ttft_note"]] if op is not None and op.get("static_ttft_note") else []
    for n in notes:
        click.echo(click.style(wrapped("note: ", name_ids(n, r.hardware, r.model)), dim=True))
    if not d["fits"]:
        click.echo(click.style("Does not fit: no speeds are reported for a configuration that cannot run.", fg="red"))


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
    add_id_column(t, "id", [r["id"] for r in rows])
    for col in ("total", "active", "architecture"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], u.count(r["params_total"]), u.count(r["params_active"]), r["summary"])
    print_table(console(), t)


def hardware_table(as_json: bool) -> None:
    from tokenmath.specs.hardware import get_hardware, hardware_ids
    rows = []
    for hid in hardware_ids():
        h = get_hardware(hid)
        rows.append({"id": hid, "name": h.name, "memory_bytes": h.memory_bytes, "memory_bw": h.memory_bw,
                     "flops": dict(h.flops), "scaleup_domain": h.scaleup_domain, "scaleup_bw": h.scaleup_bw,
                     "scaleout_bw": h.scaleout_bw, "tdp_w": h.tdp_w, "price_usd_per_hour": h.price_usd_per_hour,
                     "price_date": h.price_date, "price_market": h.price_market,
                     "sources": dict(h.sources)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table
    # humane units in the headers, plain numbers in the cells: the table fits 80 columns with every id whole
    t = Table(title="Hardware catalog (dense peaks, per chip)")
    add_id_column(t, "id", [r["id"] for r in rows])
    for col in ("bf16\nTFLOP/s", "fp8\nTFLOP/s", "memory\nGB", "bandwidth\nTB/s", "scale-up\nchips x\nGB/s", "$/h"):
        t.add_column(col, justify="right")
    for r in rows:
        f = r["flops"]
        t.add_row(r["id"], f"{(f.get('bf16') or f.get('fp16') or 0) / 1e12:,.4g}",
                  f"{f['fp8'] / 1e12:,.4g}" if f.get("fp8") else "-", f"{r['memory_bytes'] / 1e9:,.4g}",
                  f"{r['memory_bw'] / 1e12:.3g}", f"{r['scaleup_domain']} x {r['scaleup_bw'] / 1e9:,.4g}",
                  f"{r['price_usd_per_hour']:g}" if r["price_usd_per_hour"] is not None else "-")
    print_table(console(), t)


def hyperbola_table(h) -> None:
    from rich.table import Table
    d = h.to_dict()
    from tokenmath.faces.names import chip_label
    t = Table(title=f"{h.setup.model.name} on {h.setup.chips} x {chip_label(h.setup.hardware)}: decode at context {h.context:,}"
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
    c = console()
    c.print(t)
    c.print(explain_hyperbola(h))


def coverage_table(cov: dict) -> None:
    from rich.table import Table
    c = console()
    t = Table(title="deduce on open-weight API prices (true active params known)")
    # model and provider stacked in one cell: the two names stay whole and the numbers keep the rest of the width
    add_id_column(t, "model\nprovider", [r["model"] for r in cov["open"]] + [r["provider"] for r in cov["open"]])
    for col in ("$/Mtok\nin/out", "true B", "median B", "80% interval", "inside"):
        t.add_column(col)
    for r in cov["open"]:
        who, usd = f"{r['model']}\n{r['provider']}", f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}"
        if "error" in r:
            t.add_row(who, usd, f"{r['true_active_params_b']:.3g}", "-", r["error"], "-")
            continue
        a = r["active_params_b"]
        t.add_row(who, usd, f"{r['true_active_params_b']:.3g}", f"{a['median']:.3g}", f"{a['low']:.3g} - {a['high']:.3g}",
                  "yes" if r["inside_80"] else "no")
    print_table(c, t)
    if cov["coverage_80"] is not None:
        c.print(f"coverage of the 80% interval: {cov['coverage_80']:.0%} of {cov['scored']} rows; "
                f"median error of the median: x{cov['median_error_factor']:.2f}")
    t2 = Table(title="closed models: deduced active params (billions)")
    add_id_column(t2, "model\nprovider", [r["model"] for r in cov["closed"]] + [r["provider"] for r in cov["closed"]])
    for col in ("$/Mtok\nin/out", "median", "80% interval", "total (median)"):
        t2.add_column(col)
    for r in cov["closed"]:
        who, usd = f"{r['model']}\n{r['provider']}", f"{r['input_usd_per_mtok']}/{r['output_usd_per_mtok']}"
        if "error" in r:
            t2.add_row(who, usd, "-", r["error"], "-")
            continue
        a, tt = r["active_params_b"], r["total_params_b"]
        t2.add_row(who, usd, f"{a['median']:.3g}", f"{a['low']:.3g} - {a['high']:.3g}", f"{tt['median']:.3g}")
    print_table(c, t2)


def validation_table(v, other=None) -> None:
    """Every row, then held-out median errors by regime / MoE-dense / vendor, the pure-roofline check, the fitted
    parameters with their edges, and the row counts (v: analyses.calibration.validate.Validation of the shipped set;
    other: the same for a set it is compared with, e.g. the flat per-family fit)."""
    from rich.table import Table
    c = console()
    pct = pct_cell
    t = Table(title=f"Predicted vs published measurements (model {v.model.name!r})")
    add_id_column(t, "id", [d["id"] for d in v.rows() if "skipped" not in d])
    for col in ("regime", "metric", "measured", "pure roofline", "defaults", "LOSO", "err", "LORO", "err", "flag"):
        t.add_column(col, overflow="fold")
    for d in v.rows():
        if "skipped" in d:
            continue
        h, e = d["predicted_heldout"], d["ape_heldout"]
        t.add_row(d["id"], d["regime"], d["metric"], f"{d['measured']:.4g}", f"{d['predicted_pure_roofline']:.4g}",
                  f"{d['predicted_roofline']:.4g}", f"{h['loso']:.4g}" if h["loso"] is not None else "-",
                  pct(e["loso"]), f"{h['loro']:.4g}" if h["loro"] is not None else "-", pct(e["loro"]),
                  "beats roofline" if d["beats_pure_roofline"] else ("not scored" if "not_scored" in d else ""))
    print_table(c, t)
    for w in ([v] if other is None else [v, other]):
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
        for col in ("parameter", "group", "value", "bounds", "rows", "decides", "edge"):
            t3.add_column(col)
        for d in w.parameters():
            t3.add_row(d["name"], d["group"], f"{d['value']:.4g}", f"{d['bounds'][0]:.4g} - {d['bounds'][1]:.4g}",
                       str(d["rows"]), f"{d['decides_rows']} ({d['decides_sources']} src)",
                       f"[red]{d['at_edge']} bound: physics missing[/]" if d["at_edge"] else "")
        c.print("rows: the rows the value was searched on; decides: the rows whose prediction takes it (no more "
                "specific group holds one for them) and their sources")
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


def _release(engine: dict) -> str:
    """" 0.5.9" where the answer was asked for a release (`--engine sglang@0.5.9`), else ""."""
    v = str(engine.get("version") or "")
    return f" {v}" if v[:1].isdigit() else ""
