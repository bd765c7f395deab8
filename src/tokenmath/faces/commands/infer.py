import click

from tokenmath.faces.commands.common import batch_arg, dtype_options, guarded, layout_options, model_hardware, output_options, positive


@click.command()
@model_hardware
@layout_options
@click.option("--cp", type=int, callback=positive,
              help="Context-parallel degree: each prompt split over cp chips (ring attention); chips = tp x pp x ep x dp x cp.")
@click.option("--batch", "-b", callback=batch_arg, default="1", show_default=True, help="Concurrent sequences, or 'max'.")
@click.option("--input-len", type=int, default=1024, show_default=True, callback=positive, help="Prompt tokens per sequence.")
@click.option("--output-len", type=int, default=256, show_default=True, callback=positive, help="Generated tokens per sequence.")
@dtype_options
@click.option("--peak", is_flag=True, help="Pure roofline: 100% of every peak instead of the achievable fractions.")
@click.option("--uncalibrated", is_flag=True, help="Kernel-microbenchmark efficiencies instead of the ones calibrated on "
              "published measurements (the default; see tokenmath validate).")
@output_options
@guarded
def infer(model, hardware, chips, tp, pp, ep, dp, cp, batch, input_len, output_len, weight_dtype, kv_dtype, peak, uncalibrated,
          as_json, explain):
    """How fast and how expensive: prefill (TTFT), decode step, throughput, $/Mtok, memory, bottleneck."""
    from tokenmath.analyses.serving.infer import infer as run
    from tokenmath.specs.efficiency import PEAK
    from tokenmath.faces.commands.common import emit_json
    from tokenmath.specs.efficiency import DEFAULT
    eff = PEAK if peak else (DEFAULT if uncalibrated else None)
    r = run(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, cp=cp, batch=batch, input_len=input_len,
            output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=eff)
    if as_json:
        emit_json(r.to_dict())
    elif explain:
        from tokenmath.faces.explain_infer import explain_infer
        click.echo(explain_infer(r))
    else:
        from tokenmath.faces.tables import infer_table
        infer_table(r)
