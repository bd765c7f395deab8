"""The work a web request may ask for, estimated from its parameters before anything runs (issue 40 items 1-2).

Why: the questions that simulate a serving engine build step-cost tables per layout whose size grows with the tokens
one step of the whole replica set may hold, i.e. with the replica groups (dp x ep, or chips / tp); in-range requests
took gigabytes and minutes (GET /api/pareto?model=deepseek-v3&chips=4096 grew the server to 22 GB;
/api/simulate?dp=100000&requests=20000 ended in a MemoryError). Measured on one core (llama-3.1-8b and deepseek-v3 on
h100-sxm, vllm; peak memory of the process):

    pareto  deepseek-v3 chips=64     22 layouts, sum of chips/tp   752 units     8 s    0.7 GB
    pareto  deepseek-v3 gb200-nvl72  30 layouts                  1,323 units     9 s    0.8 GB
    pareto  deepseek-v3 chips=256    30 layouts                  3,968 units    61 s    2.7 GB
    pareto  llama-3.1-8b chips=1024   4 layouts                  1,920 units    13 s    3.7 GB
    simulate dp=256 requests=20000   256 replica groups                         5 s    1.0 GB
    simulate dp=512 requests=20000   512 replica groups                        11 s    1.8 GB

The counting is analyses/serving/work.py's, shared with the command line and Python (which hold a question to this
machine's free memory instead: analyses/serving/work_budget.py); only these limits are the web's own.
So a request is weighed in the units that drive the tables: pareto by the replica groups summed over the layouts it
searches (mapping.candidates.layouts_for: every layout of `chips`, each with chips / tp groups), simulate and
simulate_sweep by the replica groups of their one layout; under an engine without chunked prefill, also by one
sequence's tokens times the layouts. Beyond the limit the request is refused (422) naming the
field, the limit and the cheaper question that answers it. What the estimate misses is caught while the request runs:
faces/web/workers.py runs these questions in worker processes with a deadline and a memory cap.
No physics here: a count of layouts and degrees.
"""
from __future__ import annotations

from tokenmath.analyses.serving import work
from tokenmath.base.errors import InputError

PARETO_UNITS_MAX = 1536        # sum over the searched layouts of chips / tp (deepseek-v3 on an NVL72 rack: 1,323)
# the widest layout's replica groups: a search peaks on it (work.py's second table: llama-3.1-8b at 256 groups 1.06
# GB, past a worker's 1 GiB; at 128, 0.55 GB). The fuzz found /api/pareto?chips=407 (tp1 x dp407) answered 503
PARETO_GROUPS_MAX = 128
# an engine that prefills a prompt whole (no chunked prefill: tensorrt-llm's profile) sizes each layout's tables by one
# sequence's tokens, about 1.4 kB each (llama-3.1-8b: a 1,000,000-token simulate 1.4 GB, pareto on 8 chips at 400,000
# tokens 0.7 GB): tokens x layouts searched, at most
TABLE_TOKENS_MAX = 600_000
AGENT_TRACES_MAX = 64         # agents: replicas traced at most (agent_capacity.most_traces: systems x levels x layouts;
#                              each 0.05-1 s: the default five systems at 10 a level, 60, ran in 6-8 s for deepseek-v3)
SIM_GROUPS_MAX = 128           # replica groups (dp x ep) of one simulated layout (about 0.5 GB at 20,000 requests)
# the questions a request may ask only in a worker process (faces/web/workers.py): each can run for seconds
# agents with an engine that caps no running sequences (sglang's profile): a GB200 NVL72 replica traces to every turn
# its KV holds, ~1.2 GB for one system at 5 layouts; 3 layouts x 5 systems stay under the worker's 1 GiB
AGENT_TRACES_UNCAPPED_MAX = 15
HEAVY = frozenset({"agents", "pareto", "simulate", "simulate_sweep", "overtrain", "train", "sensitivity", "deduce"})
# what to ask instead when a question ran past its time or memory: (the field that sizes it, the cheaper question)
CHEAPER = {
    "pareto": ("chips", "fewer chips (one scale-up domain), or `tokenmath pareto` on your own machine"),
    "simulate": ("requests", "fewer requests or replicas (dp): replicas are independent, so simulate one with its "
                             "share of the load; or `tokenmath simulate` on your own machine"),
    "simulate_sweep": ("requests", "fewer points or requests per point, or one replica (dp=1) with its share of the "
                                   "load"),
    "overtrain": ("train_days", "flop_only=true (no serving search), or `tokenmath overtrain` on your own machine"),
    "train": ("chips", "fewer chips, or give the layout (tp, pp, dp) instead of searching"),
    "sensitivity": ("chips", "fewer chips or a smaller batch"),
    "deduce": ("samples", "fewer samples"),
    "agents": ("systems", "fewer systems or layouts, or `tokenmath agents` on your own machine"),
}


def cheaper(name: str) -> tuple[str, str]:
    """(field, what to ask instead) of a question that ran past the budget."""
    return CHEAPER.get(name, ("request", "a smaller question, or the command line on your own machine"))


def replica_groups(a: dict) -> tuple[int, str]:
    """(replica groups dp x ep of the request's layout, the field that sets them): analyses/serving/work.py's count,
    the command line's too."""
    return work.replica_groups(chips=a.get("chips"), dp=a.get("dp"), tp=a.get("tp"), pp=a.get("pp"), ep=a.get("ep"))


pareto_units = work.pareto_units       # (units, layouts, chips, widest) of a Pareto search: the one count, shared


def longest(a: dict) -> tuple[int, str]:
    """(the most tokens one sequence of the request holds, the length field that sets most of them)."""
    return work.longest(a.get("input_len"), a.get("output_len"), a.get("turns"))


def unchunked(a: dict) -> bool:
    """Whether the request's serving engine prefills a prompt whole (its tables then cover one sequence)."""
    return work.unchunked(a.get("engine"))


def _uncapped(a: dict) -> bool:
    """Whether the request's serving engine runs every sequence its KV holds (no running-sequence cap)."""
    return work.uncapped(a.get("engine"))


def _check_tokens(name: str, a: dict, layouts: int) -> None:
    if not unchunked(a):
        return
    tokens, field = longest(a)
    if tokens * layouts > TABLE_TOKENS_MAX:
        where = f" over {layouts} layouts" if layouts > 1 else ""
        raise InputError(field, f"{a['engine']} prefills a prompt whole: one sequence of {tokens:,} tokens{where} is "
                         f"{tokens * layouts:,} tokens of step tables, over the {TABLE_TOKENS_MAX:,} one web request "
                         "may", "shorter sequences, an engine with chunked prefill (engine=vllm or sglang), "
                         + ("fewer chips, " if layouts > 1 else "") + f"or `tokenmath {name}` on your own machine")


def check(name: str, a: dict, model_of) -> None:
    """Refuse (InputError, answered 422) a request whose estimated work is over the budget; model_of: a model id ->
    Model. A request the estimate cannot weigh (an unknown model, a bad what-if) passes: its question refuses it."""
    if name == "agents":
        # replicas traced: systems x layouts (faces/web/agents.py bounds each; their product is bounded here)
        from tokenmath.analyses.serving.agent_capacity import LAYOUTS, most_traces
        from tokenmath.faces.web.agents import system_ids
        n = most_traces(system_ids(a.get("systems") or "x"), int(a.get("layouts") or LAYOUTS))
        most, why = AGENT_TRACES_MAX, ""
        if _uncapped(a):
            most, why = AGENT_TRACES_UNCAPPED_MAX, (f" with {a['engine']}, whose scheduler has no running-sequence cap "
                                                    "(its traces run to every sequence the KV holds)")
        if n > most:
            raise InputError("layouts", f"{n} replica traces (systems x levels x layouts){why}, over the {most} "
                             "one web request may", "fewer systems or layouts, or `tokenmath agents` on your own machine")
        return
    if name == "pareto":
        from tokenmath.faces.web.overrides import chip
        from tokenmath.specs.hardware import get_hardware
        try:
            m = model_of(a["model"])
            hw = chip(a)
            hw = get_hardware(hw) if isinstance(hw, str) else hw
        except InputError:
            return
        units, n_lay, n, widest = pareto_units(m, hw, a.get("chips"), bool(a.get("allow_pp")))
        if units > PARETO_UNITS_MAX:
            raise InputError("chips", f"{n:,} chips is {n_lay} layouts with {units:,} replica groups in all to "
                             f"simulate, over the {PARETO_UNITS_MAX:,} one web request may",
                             "fewer chips (one scale-up domain, or a few), allow_pp=false, or `tokenmath pareto "
                             f"--chips {n}` on your own machine")
        if widest > PARETO_GROUPS_MAX:
            raise InputError("chips", f"{n:,} chips has a layout of {widest:,} replica groups to simulate at once, "
                             f"over the {PARETO_GROUPS_MAX:,} one web request may",
                             "fewer chips (one scale-up domain, or a few), or `tokenmath pareto "
                             f"--chips {n}` on your own machine")
        _check_tokens(name, a, n_lay)
    elif name in ("simulate", "simulate_sweep"):
        groups, field = replica_groups(a)
        if groups > SIM_GROUPS_MAX:
            raise InputError(field, f"is {groups:,} replica groups (dp x ep) to simulate, over the "
                             f"{SIM_GROUPS_MAX:,} one web request may",
                             "one replica (dp=1) with its share of the load (replicas are independent: "
                             "concurrency / dp or arrival_rate / dp), or `tokenmath simulate` on your own machine")
        _check_tokens("simulate", a, 1)
