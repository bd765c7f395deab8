import click

from tokenmath.faces.commands.common import (batch_arg, dtype_options, engine_option, guarded, layout_options, model_hardware,
                                             output_options, positive, positive_float)
from tokenmath.faces.commands.common import ep_transport_options
from tokenmath.faces.commands.common import attention_option, prefix_hit_option
from tokenmath.faces.commands.speculation import speculation_options
from tokenmath.faces.commands.whatif import whatif_options


@click.command()
@whatif_options
@speculation_options
@model_hardware
@layout_options
@click.option("--cp", type=int, callback=positive,
              help="Context-parallel degree: each prompt split over cp chips (ring attention); chips = tp x pp x ep x dp x cp.")
@click.option("--batch", "-b", callback=batch_arg, default="1", show_default=True, help="Concurrent sequences, or 'max'.")
@click.option("--input-len", type=int, default=1024, show_default=True, callback=positive, help="Prompt tokens per sequence.")
@click.option("--output-len", type=int, default=256, show_default=True, callback=positive, help="Generated tokens per sequence.")
@click.option("--concurrency", type=int, callback=positive,
              help="Serve under load: this many users in a closed loop (TTFT per request from the steady state).")
@click.option("--arrival-rate", type=float, callback=positive_float,
              help="Serve under load: requests/s arriving at random (Poisson; simulated).")
@dtype_options
@engine_option
@ep_transport_options
@prefix_hit_option
@attention_option
@click.option("--peak", is_flag=True, help="100% of every peak instead of the achievable fractions (with --engine none: "
              "the pure roofline, no engine limits or costs).")
@click.option("--uncalibrated", is_flag=True, help="Kernel-microbenchmark efficiencies instead of the ones calibrated on "
              "published measurements (the default; see tokenmath validate).")
@output_options
@guarded
def infer(model, hardware, chips, tp, pp, ep, dp, cp, batch, input_len, output_len, concurrency, arrival_rate, weight_dtype,
          kv_dtype, engine, ep_overlap, ep_comm, ep_imbalance, prefix_hit, attention_sharding, peak, uncalibrated, as_json,
          explain):
    """How fast and how expensive: prefill (TTFT), decode step, throughput, $/Mtok, memory, bottleneck."""
    from tokenmath.analyses.serving.infer import infer as run
    from tokenmath.specs.efficiency import PEAK
    from tokenmath.faces.commands.common import emit_json
    from tokenmath.specs.efficiency import DEFAULT
    eff = PEAK if peak else (DEFAULT if uncalibrated else None)
    r = run(model, hardware, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, cp=cp, batch=batch, input_len=input_len,
            output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, efficiency=eff, engine=engine,
            concurrency=concurrency, arrival_rate=arrival_rate, ep_overlap=ep_overlap, ep_comm=ep_comm,
            prefix_hit=prefix_hit, attention_sharding=attention_sharding, ep_imbalance=ep_imbalance)
    if as_json:
        emit_json(r.to_dict())
    elif explain:
        from tokenmath.faces.explain_infer import explain_infer
        click.echo(explain_infer(r))
    else:
        from tokenmath.faces.tables import infer_table
        infer_table(r)
    if r.load is not None and not as_json:
        from tokenmath.faces.explain_simulation import load_text
        click.echo(load_text(r.load))
