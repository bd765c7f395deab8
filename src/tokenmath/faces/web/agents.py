"""/api/agents: `tokenmath agents` on the web API: the most concurrent agent sessions each system keeps at a speed
target (analyses/serving/agent_capacity.agents, its to_dict() and --explain text; the page draws sessions per GPU
and per kW as bars, with the offload what-if). No physics here."""
from __future__ import annotations

from dataclasses import replace
from functools import partial

from tokenmath.base.errors import InputError, unknown_name
from tokenmath.faces.web.endpoints import Endpoint, ModelLookup
from tokenmath.faces.web.overrides import SET
from tokenmath.faces.web.params import Param
from tokenmath.analyses.serving.agent_capacity import LAYOUTS
from tokenmath.faces.web.serving_fields import MODEL, dtype_params, engine_param
from tokenmath.specs.question.workload import field as wfield

DEFAULT_SYSTEMS = "hgx-h100,hgx-h200,hgx-b200,gb200-nvl72,mi355x"     # agent_capacity.DEFAULT_SYSTEMS
MAX_WEB_SYSTEMS = 6             # systems of one request (each traces up to `layouts` replicas a level: ~0.1-2 s each)
MAX_WEB_LAYOUTS = 16


def system_ids(v: str) -> list[str]:
    """The systems of a request: catalog ids only (a system or a chip id; never a file path, which the API reads
    none of), at most MAX_WEB_SYSTEMS."""
    from tokenmath.specs.hardware import catalog as chips
    from tokenmath.specs.systems import catalog as systems
    ids = [s.strip().lower() for s in str(v).split(",") if s.strip()]
    if not ids:
        raise InputError("systems", "no system given", "catalog systems such as hgx-h100,gb200-nvl72")
    if len(ids) > MAX_WEB_SYSTEMS:
        raise InputError("systems", f"{len(ids)} systems", f"at most {MAX_WEB_SYSTEMS} in one web request, or "
                         "`tokenmath agents` on your own machine")
    known = set(systems()) | set(chips())
    for s in ids:
        if s not in known:
            raise unknown_name("systems", s, known)
    return ids


def agents_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.agent_capacity import agents
    from tokenmath.faces.tables_agents import explain_agents
    r = agents(model(a["model"]), system_ids(a["systems"]), min_tokens_per_s_per_user=a["min_tokens_per_s_per_user"],
               ttft_ms=a["ttft_ms"], context_len=a["context_len"], output_len=a["output_len"],
               prefix_hit=a["prefix_hit"], tool_gap_s=a["tool_gap_s"], offload=a["offload"], pue=a["pue"],
               layouts=a["layouts"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], engine=a["engine"],
               what_if=a["set"] or ())
    d = r.to_dict()
    d["explain"] = explain_agents(r)
    return d


def agents_table(model: ModelLookup) -> dict[str, Endpoint]:
    return {"agents": Endpoint(
        (replace(MODEL, default="gpt-oss-120b"),
         Param("systems", "text", DEFAULT_SYSTEMS, f"catalog systems or chips, comma-separated (at most "
               f"{MAX_WEB_SYSTEMS})"),
         replace(wfield("min_tokens_per_s_per_user"), default=20.0, lo=1e-9),
         replace(wfield("ttft_ms"), lo=1e-3),
         Param("context_len", "int", 27_000, "prompt tokens of one agent turn (AA-AgentPerf mean ~27K)", 2,
               10_000_000, unit="tokens"),
         Param("output_len", "int", 150, "tokens one turn generates (AA-AgentPerf median ~150)", 2, 1_000_000,
               unit="tokens"),
         Param("prefix_hit", "float", 0.86, "share of a turn's prompt already cached (InferenceX agentic traces "
               "~0.86)", 0.0, 1.0),
         replace(wfield("tool_gap_s"), default=3.0, help="seconds of tool time between turns (an assumption)"),
         Param("offload", "choice", "hbm", "where idle prefixes may wait for the headline figures",
               choices=("hbm", "dram", "nvme")),
         Param("pue", "float", 1.0, "facility power / IT power", 0.5, 5.0),
         Param("layouts", "int", LAYOUTS, "most replica layouts traced per level of each system (an 8-GPU node's "
               "replicas, then the whole scale-up domain's)", 1, MAX_WEB_LAYOUTS),
         *dtype_params(), engine_param(), SET),
        partial(agents_response, model), "tokenmath.analyses.serving.agent_capacity.agents")}
