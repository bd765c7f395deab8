"""Caveats that only the JSON carried are said in the text a person reads."""
import json

from click.testing import CliRunner

from tokenmath.faces.cli import cli


def run(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_context_text_says_the_memory_limit_lies_beyond_the_models_window():
    # Llama 3.1 70B on 8 x H100 at batch 1: memory holds 1,416,040 tokens of KV (328 kB each), ten times the
    # 131,072 the model was trained to attend to
    out = run("context", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8", "--batch", "1")
    assert "1,416,040 tokens of context by memory, but the model attends to 131,072 at most" in out
    assert "note: max_context_at_batch" in out
    # a context limit inside the window carries no such caveat
    small = run("context", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8", "--batch", "64")
    d = json.loads(run("context", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8", "--batch", "64",
                       "--json"))
    assert d["max_context_at_batch"] < 131_072 and "but the model attends to" not in small


def test_prices_text_reads_the_cached_cost_as_a_floor_with_the_list_prices():
    out = run("prices", "--model", "deepseek-v3", "--hardware", "h200", "--chips", "8", "--contexts", "4096")
    assert "cached-hit floor $" in out
    assert "cost floor for a hit" in out and "not a price" in out and "DeepSeek $0.07 vs $0.27" in out


def test_train_text_that_does_not_fit_names_what_would():
    out = run("train", "--model", "llama-3.1-405b", "--chips", "8192", "--tp", "8", "--pp", "16", "--dp", "64",
              "--seq-len", "8192", "--global-batch-tokens", "16777216")
    flat = " ".join(out.split())
    assert "the largest term is activations" in flat
    assert "nearest change that fits: --balanced-stages fits" in flat
