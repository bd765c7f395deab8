import click

from tokenmath.faces.commands.common import (MAX_TOKENS, MAX_TRAIN_CHIPS, count, ep_transport_options, guarded,
                                             number, output_options, positive)

DEFAULT_CHIPS = 8


@click.command()
@click.option("--model", "-m", default="llama-3.1-8b", show_default=True, help="Catalog id or path to a config.json.")
@click.option("--system", "--hardware", "-H", "system", default="h100-sxm", show_default=True,
              help="Hardware catalog id or file: the chip in its usual scale-up domain (h100-sxm = HGX 8-GPU nodes).")
@click.option("--chips", type=count(1, MAX_TRAIN_CHIPS), callback=positive,
              help=f"Total chips = tp x pp x dp x ep x cp (default {DEFAULT_CHIPS} when --dp is not given).")
@click.option("--tp", type=count(1, MAX_TRAIN_CHIPS), callback=positive, help="Tensor-parallel degree (with sequence parallelism).")
@click.option("--pp", type=count(1, MAX_TRAIN_CHIPS), callback=positive,
              help="Pipeline stages (the slowest holds ceil(layers / pp) layers).")
@click.option("--dp", type=count(1, MAX_TRAIN_CHIPS), callback=positive, help="Data-parallel replicas (default: the remaining chips).")
@click.option("--ep", type=count(1, MAX_TRAIN_CHIPS), callback=positive, help="Expert-parallel degree (MoE).")
@click.option("--cp", type=count(1, MAX_TRAIN_CHIPS), callback=positive, help="Context-parallel degree (splits each sequence).")
@click.option("--seq-len", type=count(1, MAX_TOKENS), default=4096, show_default=True, callback=positive, help="Tokens per sequence.")
@click.option("--global-batch-tokens", type=count(1, 10 ** 12), default=4_194_304, show_default=True, callback=positive,
              help="Tokens per optimizer step.")
@click.option("--micro-batch", type=count(1, 1_000_000), default=1, show_default=True, callback=positive,
              help="Sequences per micro-batch.")
@click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="selective",
              show_default=True, help="Activation recomputation.")
@click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default="1", show_default=True,
              help="ZeRO stage: 1 shards the optimizer over DP, 2 also gradients, 3 also weights.")
@click.option("--dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True,
              help="Matmul precision.")
@click.option("--schedule", type=click.Choice(["1f1b", "interleaved", "zb-h1"]), default="1f1b", show_default=True,
              help="Pipeline schedule: 1F1B, interleaved 1F1B (--virtual-stages chunks per rank) or zero-bubble ZB-H1.")
@click.option("--virtual-stages", type=count(1, 1024), callback=positive,
              help="Model chunks per pipeline rank for --schedule interleaved (default 2).")
@click.option("--balanced-stages", is_flag=True,
              help="Llama 3's balancing: the embedding and the output head each take one layer slot.")
@click.option("--tp-comm-overlap", is_flag=True,
              help="Overlap the tensor-parallel collectives with the GEMMs (Megatron/Transformer Engine userbuffers).")
@click.option("--pp-comm-overlap", is_flag=True,
              help="Overlap the interleaved schedule's point-to-point hand-offs with the chunks' compute (Megatron "
                   "overlap_p2p_comm).")
@click.option("--act-storage", type=click.Choice(["bf16", "fp8", "deepseek-v3"]),
              help="How activations are stored: bf16; fp8 (Transformer Engine keeps the FP8 GEMM inputs, the default "
                   "with --dtype fp8); deepseek-v3 (its norm / MLA up-projection recompute and FP8 caching).")
@click.option("--adam-bytes", type=number(None, None), help="Optimizer bytes per parameter (default 12: fp32 master + moments; "
                                                "8 with BF16 moments, DeepSeek-V3).")
@click.option("--grad-bytes", type=number(None, None), help="Gradient bytes per parameter (default 2, bf16; 4 for fp32).")
@click.option("--dualpipe", is_flag=True, help="DualPipe's memory: two stages per rank, PP + 1 micro-batches.")
@click.option("--tokens", type=number(None, None), help="Training tokens: adds time, chip-hours, cost and energy of the run.")
@click.option("--overlap/--no-overlap", default=True, show_default=True,
              help="Overlap data-parallel communication with backward compute.")
@click.option("--peak", is_flag=True, help="Pure roofline: 100% of every peak.")
@click.option("--search", "do_search", is_flag=True,
              help="Rank the layouts of --chips chips that fit (top 10): tp, pp, dp, ep, micro-batch, recompute and "
                   "ZeRO (1, 3) are searched; --cp stays as given.")
@ep_transport_options
@output_options
@guarded
def train(model, system, chips, tp, pp, dp, ep, cp, seq_len, global_batch_tokens, micro_batch, recompute, zero, dtype,
          schedule, virtual_stages, balanced_stages, tp_comm_overlap, pp_comm_overlap, ep_overlap, ep_comm, ep_imbalance,
          tokens,
          overlap, peak, do_search, as_json, explain, act_storage, adam_bytes, grad_bytes, dualpipe):
    """Training step time, MFU, memory per chip, and the time/cost/energy of a run; --search ranks layouts."""
    from tokenmath.analyses.training.train import train as run
    from tokenmath.analyses.training.train_search import search
    from tokenmath.faces.commands.common import emit_json
    from tokenmath.faces.explain_training import explain_train
    from tokenmath.specs.efficiency import PEAK
    eff = PEAK if peak else None
    mem = dict(act=act_storage, adam_bytes=adam_bytes, grad_bytes=grad_bytes, dualpipe=dualpipe)
    if chips is None and dp is None:
        chips = DEFAULT_CHIPS
    if do_search:
        r = search(model, system, chips=chips if chips is not None else _product(tp, pp, dp, ep, cp),
                   seq_len=seq_len, global_batch_tokens=global_batch_tokens, cp=cp, dtype=dtype, tokens=tokens,
                   overlap=overlap, efficiency=eff, balanced=balanced_stages, tp_overlap=tp_comm_overlap,
                   pp_overlap=pp_comm_overlap, ep_comm=ep_comm, ep_overlap=ep_overlap, ep_imbalance=ep_imbalance,
                   **mem)
        if as_json:
            emit_json(r.to_dict())
        else:
            _search_table(r)
            if explain and r.top:
                click.echo(explain_train(r.top[0]))
        return
    r = run(model, system, chips=chips, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, seq_len=seq_len,
            global_batch_tokens=global_batch_tokens, micro_batch=micro_batch, recompute=recompute, zero=int(zero),
            dtype=dtype, tokens=tokens, overlap=overlap, efficiency=eff, schedule=schedule,
            virtual_stages=virtual_stages, balanced=balanced_stages, tp_overlap=tp_comm_overlap,
            pp_overlap=pp_comm_overlap, ep_comm=ep_comm, ep_overlap=ep_overlap, ep_imbalance=ep_imbalance, **mem)
    if as_json:
        emit_json(r.to_dict())
    elif explain:
        click.echo(explain_train(r))
    else:
        _table(r)


def _product(*xs):
    n = 1
    for x in xs:
        n *= x or 1
    return n


def _table(r) -> None:
    from rich.console import Console
    from rich.table import Table

    from tokenmath.base import units as u
    d = r.to_dict()
    t = Table(title=f"Training {r.model.name} on {r.chips} x {r.hardware.name}", header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("layout", f"tp={d['tp']} pp={d['pp']} dp={d['dp']} ep={d['ep']} cp={d['cp']}")
    t.add_row("batch", f"{d['global_batch_tokens']:,} tokens/step, seq {d['seq_len']:,}, micro-batch {d['micro_batch']}"
              f" x {d['micro_batches']:,.6g}")
    t.add_row("recompute / ZeRO / dtype", f"{d['recompute']} / {d['zero']} / {d['dtype']}")
    if d["pp"] > 1:
        t.add_row("pipeline schedule", d["schedule"] + (f" (v={d['virtual_stages']})" if d["virtual_stages"] > 1
                                                        else "") + (", balanced stages" if d["balanced_stages"] else ""))
    mb = d["memory_breakdown_bytes"]
    t.add_row("memory per chip",
              f"{u.bytes_(d['memory_per_chip_bytes'])} of {u.bytes_(d['memory_usable_per_chip_bytes'])}"
              f" (weights {u.bytes_(mb['weights'])}, grads {u.bytes_(mb['gradients'])}, optimizer "
              f"{u.bytes_(mb['optimizer'])}, act. {u.bytes_(mb['activations'])})")
    t.add_row("fits", "[green]yes[/]" if d["fits"] else "[red]no[/]")
    if d["fits"]:
        bd = d["breakdown_s"]
        t.add_row("step time", f"{u.seconds(d['step_time_s'])} (pure roofline {u.seconds(d['step_floor_s'])})")
        t.add_row("  compute / TP / EP / CP",
                  " / ".join(u.seconds(bd[k]) for k in ("compute", "tp_comm", "ep_comm", "cp_comm")))
        t.add_row("  bubble / p2p / DP exposed (total) / DP contention / optimizer",
                  f"{u.seconds(bd['pp_bubble'])} ({d['bubble_fraction']:.1%}) / {u.seconds(bd['pp_p2p'])} / "
                  f"{u.seconds(bd['dp_comm_exposed'])} ({u.seconds(bd['dp_comm_total'])}) / "
                  f"{u.seconds(bd['dp_overlap_contention'])} / {u.seconds(bd['optimizer'])}")
        t.add_row("tokens/s", f"{d['tokens_per_s']:,.0f}")
        t.add_row("MFU (6N) / with attention / HFU",
                  f"{d['mfu']:.1%} / {d['mfu_with_attention']:.1%} / {d['hfu']:.1%}")
        t.add_row("TFLOP/s per chip (model / executed)",
                  f"{d['tflops_per_chip']:,.1f} / {d['hardware_tflops_per_chip']:,.1f}")
        if d["train_time_s"] is not None:
            t.add_row("training time", f"{d['train_time_s'] / 86400:,.2f} days ({d['steps']:,.0f} steps)")
            t.add_row("chip-hours", f"{d['chip_hours']:,.0f}")
            t.add_row("cost", u.usd(d["cost_usd"]))
            t.add_row("energy (at TDP)", "n/a" if d["energy_kwh"] is None else f"{d['energy_kwh']:,.0f} kWh")
    c = Console()
    c.print(t)
    for a in d["advice"]:
        c.print(f"[yellow]advice:[/] {a}")
    for n in d["notes"]:
        c.print(f"[dim]note: {n}[/]")


def _search_table(r) -> None:
    from tokenmath.base import units as u
    from tokenmath.faces.names import chip_label
    rows = [x.to_dict() for x in r.top]
    wide = any(d["ep"] > 1 or d["cp"] > 1 for d in rows)
    with_run = r.tokens is not None
    click.echo(f"Fastest layouts: {r.model.name} on {r.chips} x {chip_label(r.hardware)} "
               f"({r.fitting:,} of {r.evaluated:,} fit; ranked by step time)")
    head = (f"{'#':>2}  {'tp x pp x dp' + (' x ep x cp' if wide else ''):<{22 if wide else 14}}{'mb':>3} "
            f"{'recompute':<10}{'zero':>4} {'pipeline':<9}{'step':>9} {'MFU':>6} {'mem/chip':>9} {'bubble':>7}")
    if with_run:
        head += f" {'days':>8} {'cost':>12}"
    click.echo(head)
    for i, d in enumerate(rows, 1):
        lay = f"{d['tp']}x{d['pp']}x{d['dp']}" + (f"x{d['ep']}x{d['cp']}" if wide else "")
        sched = ("-" if d["pp"] == 1 else d["schedule"] if d["schedule"] != "interleaved"
                 else f"interl.{d['virtual_stages']}")
        line = (f"{i:>2}  {lay:<{22 if wide else 14}}{d['micro_batch']:>3} {d['recompute']:<10}{d['zero']:>4} "
                f"{sched:<9}{u.seconds(d['step_time_s']):>9} {d['mfu']:>6.1%} {u.bytes_(d['memory_per_chip_bytes']):>9} "
                f"{d['bubble_fraction']:>7.1%}")
        if with_run:
            line += f" {d['train_time_s'] / 86400:>8,.1f} {u.usd(d['cost_usd']):>12}"
        click.echo(line)
    for n in r.notes:
        click.echo(f"note: {n}")
