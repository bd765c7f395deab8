"""A question's own defaults for Deployment and Workload fields, where they differ from the fields' declared ones:
one table that the command line (faces/commands/question_options) and the Python keyword form
(analyses/python_api.public) both apply, so `tokenmath price` and `tokenmath.price(model, hardware)` ask the same
question. Values are written as on the command line (Deployment.of / Workload.of read them)."""
from __future__ import annotations

QUESTION_DEFAULTS: dict[str, dict[str, str]] = {
    # a provider's price is quoted for a chat-sized request at a servable speed (the providers table's ~1k-2k
    # prompts, analyses/inverse/provider_table.py), with the heads sharding its layout search keeps
    "price": {"input_len": "2000", "output_len": "500", "min_tokens_per_s_per_user": "20",
              "attention_sharding": "heads"},
    "fleet": {"attention_sharding": "heads", "min_tokens_per_s_per_user": "20"},
    "pareto": {"attention_sharding": "heads"},
    # a MoE that needs a rack, on the default system (an HGX H200): the question plan and moe exist for
    "plan": {"model": "deepseek-v3"},
    "moe": {"model": "deepseek-v3"},
    "sensitivity": {"batch": "max"},
    # an agent turn (analyses/serving/agents.DEFAULTS: AA-AgentPerf's median output, InferenceX's agentic prefix
    # reuse, the 3 s tool gap labelled an assumption there) on the open MoE the agent benchmarks serve
    "agents": {"model": "gpt-oss-120b", "min_tokens_per_s_per_user": "20", "output_len": "150", "prefix_hit": "0.86",
               "tool_gap_s": "3"},
    "context": {"batch": "1"},
}


def question_defaults(question: str) -> dict[str, str]:
    """The question's own defaults (field name -> value as typed on the command line); {} when it has none."""
    return dict(QUESTION_DEFAULTS.get(question, {}))
