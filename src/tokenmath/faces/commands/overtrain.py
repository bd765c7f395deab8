import click

from tokenmath.faces.commands.common import (DEFAULT_HARDWARE, MAX_TOKENS, count, dtype_options, guarded,
                                             nonneg_float, number, positive, with_plot)


RECIPE = ("rl_group_size", "rl_prompt_len", "rl_response_len", "rl_reward_params", "rl_no_reference")


def _recipe_needs_rl(ctx, rl_phase: bool) -> None:
    """The RL recipe's options shape only an RL phase (--rl): without it they were silently ignored (issue 40, found by
    benchmarks/fuzz_cli.py); now refused, naming the option."""
    from click.core import ParameterSource

    from tokenmath.base.errors import InputError
    if rl_phase:
        return
    for name in RECIPE:
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            opt = "--" + name.replace("_", "-")
            raise InputError(name, f"{opt} describes the RL phase's recipe, and no RL phase was asked",
                             f"--rl with --rl-rollout-tokens N to price the phase, or leave {opt} out")


@click.command()
@click.option("--target-loss", "-l", type=number(None, None), help="Target loss (nats/token, under --fit).")
@click.option("--compute", "-C", type=number(None, 1e40, "FLOPs"),
              help="Or a training budget (FLOPs): the target is the loss it buys at Chinchilla-optimal.")
@click.option("--inference-tokens", type=number(None, 1e25), default=0.0, show_default=True,
              help="Lifetime tokens served (input + output).")
@click.option("--rl-rollout-tokens", type=number(None, 1e25), default=0.0, show_default=True,
              help="RL rollout tokens generated (priced as output/decode tokens).")
@click.option("--rl", "rl_phase", is_flag=True,
              help="Price --rl-rollout-tokens as an RL phase (rollouts on the engine at the recipe's lengths, shared "
                   "prompts, reference/reward passes, policy update) instead of as output tokens.")
@click.option("--rl-group-size", type=count(1, 1_000_000), default=16, show_default=True, callback=positive,
              help="Responses per prompt (DeepSeek-R1: 16).")
@click.option("--rl-prompt-len", type=count(1, MAX_TOKENS), default=2048, show_default=True, callback=positive,
              help="Prompt tokens per rollout (verl's DAPO recipe max_prompt_length).")
@click.option("--rl-response-len", type=count(1, MAX_TOKENS), default=32768, show_default=True, callback=positive,
              help="Response tokens per rollout (DeepSeek-R1's maximum length).")
@click.option("--rl-reward-params", type=number(None, None), default=0.0, show_default=True, callback=nonneg_float,
              help="Reward-model parameters (0: rule-based rewards, as DeepSeek-R1).")
@click.option("--rl-no-reference", is_flag=True, help="No reference-model pass (no KL term).")
@click.option("--fit", default="epoch", show_default=True, help="epoch, hoffmann or hoffmann-rounded.")
@click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True,
              help="Catalog id or hardware file; its bf16 peak and $/chip-hour price training and inference.")
@click.option("--mfu", type=number(0.01, 1.0), default=None,
              help="Price training as 6ND FLOPs at this model-FLOPs utilisation (PaLM 46.2%; Llama 3 405B 38-43%) "
                   "instead of the training engine's fastest layout per model size (the default; 0.4 with "
                   "--flop-only).")
@click.option("--train-days", type=number(1e-3, 3650.0, "days"), default=90.0, show_default=True,
              help="Training run horizon: each size trains on the smallest power-of-two cluster that ends its run "
                   "within it (sizes the cluster; the cost comes from the engine's step).")
@click.option("--flop-only", is_flag=True,
              help="Inference = 2N FLOPs per token at the training MFU (Sardana et al. 2023) instead of the engine.")
@click.option("--min-tokens-per-s-per-user", type=number(None, None), default=20.0, show_default=True,
              help="Decode speed each user must get (the serving batch is the cheapest that meets it).")
@click.option("--input-output-ratio", type=number(None, None), default=1.0, show_default=True,
              help="Input (prompt) tokens per output token, for the lifetime mix and the request shape.")
@click.option("--output-len", type=count(1, 1_000_000), default=512, show_default=True, help="Generated tokens per request.")
@dtype_options
@with_plot
@guarded
def overtrain(target_loss, compute, inference_tokens, rl_rollout_tokens, rl_phase, rl_group_size, rl_prompt_len,
              rl_response_len, rl_reward_params, rl_no_reference, fit, hardware, mfu, train_days, flop_only,
              min_tokens_per_s_per_user, input_output_ratio, output_len, weight_dtype, kv_dtype, as_json, explain,
              plot_file):
    """Train smaller and longer: minimise training + lifetime inference cost at a target loss."""
    from tokenmath.analyses.training.overtrain import overtrain as run
    from tokenmath.faces.commands.common import plot_then_json
    from tokenmath.faces.explain_overtrain import explain_overtrain, overtrain_text
    from tokenmath.faces.plots_training import plot_overtrain
    _recipe_needs_rl(click.get_current_context(), rl_phase)
    rl = None
    if rl_phase:
        from tokenmath.analyses.training.rl_cost import RLRecipe
        rl = RLRecipe(group_size=rl_group_size, prompt_len=rl_prompt_len, response_len=rl_response_len,
                      reference=not rl_no_reference, reward_params=rl_reward_params)
    r = run(rl=rl, target_loss=target_loss, compute=compute, inference_tokens=inference_tokens,
            rl_rollout_tokens=rl_rollout_tokens, fit=fit, hardware=hardware, mfu=mfu, train_days=train_days,
            flop_only=flop_only,
            min_tokens_per_s_per_user=min_tokens_per_s_per_user, input_output_ratio=input_output_ratio,
            output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if plot_then_json(r, as_json, plot_file, plot_overtrain):
        return
    if explain:
        click.echo(explain_overtrain(r))
    else:
        click.echo(overtrain_text(r))
    if plot_file:
        click.echo(f"plot written to {plot_file}", err=True)
