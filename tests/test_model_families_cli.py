"""Every subcommand that takes a model answers for each new catalog model (issue 20): exit 0 and JSON, or for
a dense model asked about experts, a clear error naming the field."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import cli
from tokenmath.specs.model_catalog import get_model

NEW = ["qwen3-next-80b-a3b", "deepseek-v3.2", "llama-4-scout", "llama-4-maverick", "minimax-m2.5", "glm-4.5-air",
       "nemotron-h-56b", "qwen3.5-35b-a3b", "kimi-linear-48b-a3b", "minimax-m1",
       "nemotron-3-nano-30b-a3b",
       # third round
       "nemotron-4-340b", "granite-4.0-h-tiny", "granite-4.0-h-small",
       # Gemma 4: full layers shaped apart from the sliding ones, a MoE beside the MLP (26B A4B)
       "gemma-4-26b-a4b", "gemma-4-31b"]
ON8 = ["--hardware", "h200", "--chips", "8"]
COMMANDS = {
    "infer": ON8 + ["--batch", "8", "--input-len", "4096", "--output-len", "256"],
    "hyperbola": ON8, "pareto": ON8, "prices": ON8, "context": ON8 + ["--batch", "4"], "plan": ON8,
    "moe": ON8, "sensitivity": ON8, "simulate": ON8,
    "slowmode": ["--hardware", "h200"], "price": ["--hardware", "h200"],
    "fleet": ["--hardware", "h200", "--demand", "1e6"],
    "train": ["--hardware", "h200", "--chips", "1024", "--tp", "8", "--pp", "16", "--ep", "8"],
}


@pytest.mark.parametrize("mid", NEW)
def test_every_subcommand_answers(mid):
    dense = not get_model(mid).is_moe
    for cmd, args in COMMANDS.items():
        if cmd == "train" and dense:
            args = ["--hardware", "h200", "--chips", "64", "--tp", "8", "--pp", "8"]
        if cmd == "train" and get_model(mid).n_heads % 8:      # Granite H-Tiny: 12 heads
            args = ["--hardware", "h200", "--chips", "1024", "--tp", "4", "--pp", "8", "--ep", "8"]
        r = CliRunner().invoke(cli, [cmd, "--model", mid, *args, "--json"])
        if cmd == "moe" and dense:
            assert r.exit_code == 2 and '"field": "model"' in r.output, r.output
            continue
        assert r.exit_code == 0, (cmd, r.output[-600:])
        json.loads(r.output)
