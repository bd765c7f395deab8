"""deduce (price -> architecture) and price (architecture -> price)."""
import click

from tokenmath.faces.commands.question_options import question_options

from tokenmath.faces.commands.common import (MAX_SEARCH_CHIPS, count, dtype_options, emit_json, engine_option,
                                             guarded, model_hardware, number, positive, positive_float)

DEFAULT_API_MODEL = "deepseek-chat (DeepSeek-V3)"   # data/api_prices.toml: DeepSeek's own API row


def _range(ctx, param, value):
    if value is None:
        return None
    try:
        lo, hi = (float(x) for x in str(value).split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not LOW,HIGH") from None
    if not lo <= hi:
        raise click.BadParameter("LOW must not exceed HIGH")
    return (lo, hi)


def _curve(value):
    """--ttft-curve TOKENS:SECONDS,...  ->  ((tokens, seconds), ...) (deduce checks the numbers)."""
    if value is None:
        return None
    from tokenmath.base.errors import InputError
    try:
        return tuple(tuple(float(x) for x in p.split(":")) for p in str(value).split(",") if p.strip())
    except ValueError:
        raise InputError("ttft_curve", f"{value!r} is not TOKENS:SECONDS,...", "e.g. 1000:0.45,10000:0.84") from None


# what each way of asking reads (the rest was silently ignored: issue 40, found by benchmarks/fuzz_cli.py); output
# flags (--json, --explain) aside
EVIDENCE = ("input_price", "output_price", "cached_input_price", "long_context_threshold", "long_input_price",
            "long_output_price", "output_speed", "ttft", "ttft_prompt_tokens", "batch_discount", "context_window",
            "ttft_curve")
PRIORS = ("hardware", "margin", "utilization", "batch", "chip_cost", "noise", "samples", "seed", "uncalibrated")
MODES = {"calibrate": (), "validate": ("samples",), "table_model": ("provider",) + PRIORS,
         "api_model": ("provider", "evidence", "width_budget") + PRIORS, "dataset": PRIORS}
VALIDATE_SAMPLES = 20_000


def _options_of_one_mode(ctx, samples: int) -> None:
    """One way of asking at a time, and only the options it reads: each other option given is refused, naming it."""
    from click.core import ParameterSource

    from tokenmath.base.errors import InputError

    def given(name):
        return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

    def opt(name):
        return "--" + name.replace("_", "-")
    modes = [m for m in MODES if given(m)]
    if len(modes) > 1:
        raise InputError(modes[1], f"{opt(modes[1])} given with {opt(modes[0])}", "one way of asking at a time")
    mode = modes[0] if modes else None
    reads = MODES[mode] if mode else EVIDENCE + PRIORS
    for name in EVIDENCE + PRIORS + ("provider", "evidence", "width_budget"):
        if given(name) and name not in reads:
            where = f"with {opt(mode)}" if mode else "without --api-model" if name in ("evidence", "width_budget") \
                else "without --api-model or --table-model"
            raise InputError(name, f"{opt(name)} is not read {where}",
                             f"leave {opt(name)} out" + (f", or ask without {opt(mode)}" if mode else
                                                         f", or add {'--api-model NAME' if name != 'provider' else '--api-model or --table-model NAME'}"))
    if mode == "validate" and samples > VALIDATE_SAMPLES:
        raise InputError("samples", f"{samples:,} with --validate, which runs at most {VALIDATE_SAMPLES:,} per row",
                         f"at most {VALIDATE_SAMPLES:,} with --validate")


@click.command()
# prices below 1e-6 $/Mtok, speeds below 1e-3 tok/s overflow the likelihood (numpy warnings; no provider's)
@click.option("--input-price", type=number(1e-6, 1e6, "$/Mtok"), help="$ per million input tokens.")
@click.option("--output-price", type=number(1e-6, 1e6, "$/Mtok"), help="$ per million output tokens.")
@click.option("--cached-input-price", type=number(1e-6, 1e6, "$/Mtok"), help="$ per million cached input tokens.")
@click.option("--long-context-threshold", type=number(None, None), help="Tokens above which the long-context tier applies.")
@click.option("--long-input-price", type=number(1e-6, 1e6, "$/Mtok"), help="$ per million input tokens above --long-context-threshold.")
@click.option("--long-output-price", type=number(1e-6, 1e6, "$/Mtok"), help="$ per million output tokens above --long-context-threshold.")
@click.option("--output-speed", type=number(1e-3, 1e7, "tokens/s"), help="Measured output tokens/s per user.")
@click.option("--ttft", type=number(1e-6, 1e4, "s"), help="Measured time to first token, s (with --ttft-prompt-tokens).")
@click.option("--ttft-prompt-tokens", type=number(None, None), help="Prompt length of the --ttft measurement, tokens.")
@click.option("--batch-discount", type=number(1e-3, 1.0), help="Batch-API price / standard price, e.g. 0.5.")
@click.option("--context-window", type=number(None, None), help="The endpoint's context window, tokens.")
@click.option("--ttft-curve", help="TTFTs at several prompt lengths, TOKENS:SECONDS,... e.g. 1000:0.45,10000:0.84: "
              "how the TTFT grows with the prompt is the prefill rate.")
@click.option("--table-model", help="Deduce an endpoint of the Artificial Analysis provider table "
              "(data/provider_table.toml, 2026-05-31) with price, + speed, + TTFT against prompt length (--provider).")
@click.option("--api-model", help="Deduce a model of data/api_prices.toml from all its evidence (data/api_evidence.toml).")
@click.option("--provider", help="With --api-model: which provider's row (default: the first listed).")
@click.option("--evidence", help="With --api-model: kinds to use, comma-separated (default all): "
              "price,cached,long_context,batch,speed,ttft,context_window,hardware.")
@click.option("--validate", is_flag=True, help="Held-out-by-provider validation on open-weight rows, with and "
              "without speed (4-7 minutes).")
@click.option("--width-budget", is_flag=True, help="With --api-model: re-deduce with each hidden prior pinned to its "
              "middle, to show which unknown makes the 80% interval wide.")
@click.option("--hardware", "-H", help="Chip id(s), comma-separated: replaces the hardware prior.")
@click.option("--margin", callback=_range, help="Gross margin range LOW,HIGH within [0, 0.95] (default 0,0.75).")
@click.option("--utilization", callback=_range, help="Utilization range LOW,HIGH within [0.01, 1] (default 0.3,0.8).")
@click.option("--batch", callback=_range, help="Decode batch range LOW,HIGH within [1, 100000] (default 4,512).")
@click.option("--chip-cost", callback=_range,
              help="Multiplier range on catalog $/h, LOW,HIGH within [0.01, 100] (default 0.4,1.2).")
@click.option("--noise", type=number(None, None), default=0.30, show_default=True,
              help="Log-sd between a price and the cost it covers, 0.01 to 3.")
@click.option("--samples", type=count(1000, 2_000_000), default=200_000, show_default=True, help="Monte Carlo samples, 1,000 to 2,000,000.")
@click.option("--seed", type=count(0, 2 ** 32 - 1), default=0, show_default=True,
              help="Seed of the random prior draws (the same seed, the same interval).")
@click.option("--dataset", is_flag=True, help="Run over the shipped API price rows: coverage on open-weight models.")
@click.option("--uncalibrated", is_flag=True, help="cost_scale = 1 instead of the scale fitted on open-weight prices.")
@click.option("--calibrate", is_flag=True, help="Refit the cost scale on the shipped open-weight prices (about 30 s).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@click.option("--explain", is_flag=True, help="Show the arithmetic behind the answer, line by line.")
@guarded
def deduce(input_price, output_price, cached_input_price, long_context_threshold, long_input_price, long_output_price,
           output_speed, ttft, ttft_prompt_tokens, batch_discount, context_window, ttft_curve, table_model, api_model,
           provider, evidence,
           validate, width_budget, hardware, margin, utilization, batch, chip_cost, noise, samples, seed, dataset, uncalibrated,
           calibrate, as_json, explain):
    """Deduce active params, KV bytes and batch regime from API prices (an 80% interval over explicit priors)."""
    from dataclasses import replace
    from tokenmath.analyses.inverse.deduce import Priors, check_priors, deduce as run
    from tokenmath.base.errors import InputError
    _options_of_one_mode(click.get_current_context(), samples)
    if calibrate:
        from tokenmath.analyses.inverse.calibrate import calibrate_cost_scale
        emit_json(calibrate_cost_scale())
        return
    pr = Priors(price_noise=noise, samples=samples, seed=seed)
    if uncalibrated:
        pr = replace(pr, cost_scale=1.0)
    if hardware:
        hw = [h.strip() for h in hardware.split(",") if h.strip()]
        pr = replace(pr, hardware=tuple((h, 1.0 / len(hw)) for h in hw))
    for name, val in (("margin", margin), ("utilization", utilization), ("batch", batch), ("chip_cost_factor", chip_cost)):
        if val is not None:
            pr = replace(pr, **{name: val})
    check_priors(pr)   # the physical ranges (also for --dataset), each error naming the prior and its range
    if validate:
        from tokenmath.analyses.inverse.validation import validate as run_validation
        v = run_validation(samples=min(samples, VALIDATE_SAMPLES))
        if as_json:
            emit_json(v.to_dict())
        else:
            from tokenmath.faces.explain_inverse import validation_table
            click.echo(validation_table(v))
        return
    if table_model:
        from tokenmath.analyses.inverse.table_validation import deduce_table_model
        r = deduce_table_model(table_model, provider, pr)
        if as_json:
            emit_json(r)
        else:
            from tokenmath.faces.explain_inverse import explain_table_deduction
            click.echo(explain_table_deduction(r, explain))
        return
    curve = _curve(ttft_curve)
    evidence_given = any(v is not None for v in (input_price, output_price, cached_input_price, long_context_threshold,
                                                 long_input_price, long_output_price, output_speed, ttft,
                                                 batch_discount, context_window, curve))
    if not (api_model or dataset or evidence_given):
        # nothing asked: an API whose architecture is public, so the deduction can be read against the truth
        api_model = DEFAULT_API_MODEL
        click.echo(f"note: no prices given: deducing {DEFAULT_API_MODEL} from its shipped evidence (its architecture "
                   "is public); --input-price and --output-price, or --api-model NAME, for another", err=True)
    if api_model:
        from tokenmath.analyses.inverse.narrowing import deduce_api_model
        kinds = [k.strip() for k in evidence.split(",") if k.strip()] if evidence else None
        if width_budget:
            from tokenmath.analyses.inverse.evidence import find
            from tokenmath.analyses.inverse.width_budget import width_budget as run_budget
            ev = find(api_model, provider)
            b = run_budget(ev.deduce_kwargs(kinds), pr)
            if as_json:
                emit_json({"model": ev.model, "provider": ev.provider, "evidence": list(kinds or ev.available()),
                           **b.to_dict()})
            else:
                from tokenmath.faces.explain_inverse import width_budget_table
                click.echo(width_budget_table(ev, kinds or ev.available(), b))
            return
        r = deduce_api_model(api_model, provider, pr, kinds)
        if as_json:
            emit_json(r.to_dict())
        else:
            from tokenmath.faces.explain_inverse import explain_api_deduction
            click.echo(explain_api_deduction(r, explain))
        return
    if dataset:
        from tokenmath.analyses.inverse.calibrate import coverage
        cov = coverage(pr)
        if as_json:
            emit_json(cov)
            return
        from tokenmath.faces.tables import coverage_table
        coverage_table(cov)
        return
    if input_price is None or output_price is None:
        raise InputError("input_price" if input_price is None else "output_price", "missing",
                         "--input-price and --output-price in $ per million tokens (or --api-model NAME, or --dataset)")
    d = run(input_price, output_price, cached_input_price=cached_input_price,
            long_context_threshold=long_context_threshold, long_input_price=long_input_price,
            long_output_price=long_output_price, output_speed=output_speed, ttft_s=ttft,
            ttft_prompt_tokens=ttft_prompt_tokens, batch_discount=batch_discount, context_window=context_window,
            ttft_curve=curve, priors=pr)
    from tokenmath.analyses.inverse.same_question import note_for_typed
    note = note_for_typed({k: v for k, v in d.observed.__dict__.items() if v is not None})
    if as_json:
        emit_json({**d.to_dict(), "api_model_note": note})
    else:
        from tokenmath.faces.explain_inverse import explain_deduction
        click.echo(explain_deduction(d))
        if note:
            click.echo(f"note: {note}")


@click.command()
@question_options("price")
@click.option("--margin", type=number(0.0, 0.99), default=0.5, show_default=True, help="Gross margin (0..1).")
@click.option("--utilization", type=number(0.01, 1.0), default=0.6, show_default=True, help="Share of time serving at that load.")
@click.option("--max-chips", type=count(1, MAX_SEARCH_CHIPS), callback=positive,
              help="Most chips one replica may span (default: the chip's scale-up domain, at most 72).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@click.option("--explain", is_flag=True, help="Show the arithmetic behind the answer, line by line.")
@guarded
def price(deployment, workload, margin, utilization, max_chips, as_json, explain):
    """What serving a model costs per million input/output tokens at a latency target, and the implied price."""
    from tokenmath.analyses.ask import price as run
    r = run(deployment, workload, margin=margin, utilization=utilization, max_chips=max_chips)
    if as_json:
        emit_json(r.to_dict())
    else:
        from tokenmath.faces.explain_serving import explain_price
        click.echo(explain_price(r))
    return r
