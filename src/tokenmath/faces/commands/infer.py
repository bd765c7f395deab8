import click

from tokenmath.faces.commands.common import guarded, output_options
from tokenmath.faces.commands.question_options import question_options


@click.command()
@question_options("infer")
@click.option("--peak", is_flag=True, help="100% of every peak instead of the achievable fractions (= --efficiency "
              "peak; with --engine none: the pure roofline, no engine limits or costs).")
@click.option("--uncalibrated", is_flag=True, help="Kernel-microbenchmark efficiencies instead of the ones calibrated on "
              "published measurements (= --efficiency kernels; see tokenmath validate).")
@output_options
@guarded
def infer(deployment, workload, peak, uncalibrated, as_json, explain):
    """How fast and how expensive: prefill (TTFT), decode step, throughput, $/Mtok, memory, bottleneck."""
    from dataclasses import replace

    from tokenmath.analyses.ask import infer as run
    from tokenmath.faces.commands.common import answering, emit_json
    profile = deployment.profile
    if peak or uncalibrated:
        if profile:
            from tokenmath.base.errors import InputError
            raise InputError("profile", "is a calibration, and --peak / --uncalibrated ask for none", "one of them")
        deployment = answering(replace(deployment, efficiency="peak" if peak else "kernels"))
    r = run(deployment, workload)
    # a profile's answer beside the shipped calibration's (the same question without it)
    r0 = run(replace(deployment, profile=None), workload) if profile else None
    if r0 is not None and as_json:
        emit_json({**r.to_dict(), "profile": profile, "uncalibrated": r0.to_dict()})
        return r
    spec = r.speculative
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
    if spec is not None and not as_json:
        from tokenmath.faces.explain_speculative import explain_speculative, speculative_text
        click.echo(explain_speculative(spec) if explain else speculative_text(spec))
    if r0 is not None:
        from tokenmath.faces.commands.calibrate import side_by_side
        click.echo(side_by_side(r0, r, profile))
    return r
