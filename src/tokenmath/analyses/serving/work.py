"""The work a serving question will do, weighed from its typed Deployment and Workload before anything runs (issue 40).

One home for the counting, shared by every face: the web server (faces/web/budget.py) holds it to its own small limits,
and analyses/serving/work_budget.py holds the command line and Python to this machine's memory. Only the limits differ:
a question costs the same wherever it is asked.

What drives the cost. The questions that trace a serving engine's steady state (pareto and plan by concurrency, fleet's
and price's continuously batched answers, simulate) build step-cost tables per layout whose size grows with the tokens
one step of the whole replica set may hold, i.e. with the replica groups (dp x ep, or chips / tp); the static search
over (layouts x batches) is one vectorized engine call, cheap beside them. So a question is weighed in replica groups
("units") summed over the layouts it traces, and, under an engine without chunked prefill, in table tokens (one
sequence's tokens times the layouts). Measured (peak resident memory of the process, wall time; single runs on a
shared 2-core machine unless marked 1 core; deepseek-v3 "ds", llama-3.1-8b "l8"):

    question                         layouts  units        time    peak
    pareto ds h100 chips=64 (1 core)   22        752         8 s   0.7 GB
    pareto ds nvl72 (1 core)           30      1,323         9 s   0.8 GB
    pareto ds h100 chips=256 (1 core)  30      3,968        61 s   2.7 GB
    pareto l8 h100 chips=1024 (1 core)  4      1,920        13 s   3.7 GB
    pareto ds h200 chips=8             10         49       3.6 s   0.13 GB
    pareto ds h200 chips=32            18        316       8.4 s   0.39 GB
    pareto ds h200 chips=4096          36     69,120     > 60 s  > 14 GB (killed at 60 s; 22 GB on the server)
    plan   ds h200 chips=8             40        114       3.3 s   0.14 GB
    plan   ds h200 chips=32           126        609        13 s   0.39 GB
    plan   ds h200 chips=128          282      2,661        25 s   1.4 GB
    pareto ds h200 chips=128           26      1,744        20 s   1.4 GB
    plan   ds h200 chips=4096         842     50,690     > 60 s  > 18 GB (killed at 60 s)
    simulate l8 dp=256 req=20000 (1c)   1        256         5 s   1.0 GB
    simulate l8 dp=512 req=20000 (1c)   1        512        11 s   1.8 GB
    simulate l8 dp=100000 req=1000      1    100,000       2.8 s   0.59 GB
    simulate l8 dp=100000 req=20000     1    100,000     > 39 s  > 9.7 GB (MemoryError at a 10 GB cap; 25.6 M tokens)
    fleet  ds h200 max_chips=4096     193      1,716     > 60 s   2.7 GB (killed at 60 s; the same as 512)
    price  ds h200 max_chips=4096     193      1,716     > 60 s   2.7 GB (killed at 60 s)
    slowmode ds h200 max_chips=4096   193          0       1.0 s   0.08 GB (static search only)

Per unit that is at most ~2 MB (l8's tables hold the most tokens per group) and ~16 ms (ds at 256 chips), over a base
of ~0.3 GB (python, numpy, the catalogs) and ~3 s. A simulation's tables hold one step's token budget over all its
groups (vLLM: 8,192 per group), but never more than its requests hold in all (requests x (input + output)): so
simulate --dp 100000 with its default 1,000 requests of 1,280 tokens is 1.3 M tokens, 2.8 s and 0.59 GB (measured),
while dp=256 at 20,000 requests is 2.1 M tokens, 1.0 GB and 5 s, dp=512 4.2 M, 1.8 GB and 11 s: ~400 B and ~2.6 us
a table token, and over 380 B at 25.6 M tokens (the dp=100000, 20,000-request row): the estimate takes 600 B.
The estimate takes those upper figures (an over-estimate of 1-3x for deepseek-v3 is the safe side): it is a gate,
not a prediction to print as an answer. No physics here: a count of layouts and degrees.

A Pareto search's peak is its widest layout's (each layout's tables are freed before the next is traced): peak
resident memory against the replica groups of the widest layout, measured 2026-12-07 (2 cores, h100-sxm, vllm):

    pareto l8  chips=64    widest 64 groups     0.30 GB
    pareto l8  chips=128   widest 128 groups    0.55 GB    (3.2 MB a group over the base)
    pareto l8  chips=256   widest 256 groups    1.06 GB
    pareto l8  chips=401   widest 401 groups    1.64 GB    (one layout: tp1 x dp401)
    pareto l8  chips=512   widest 512 groups    1.94 GB
    pareto l70 chips=256   widest 128 groups    0.58 GB    (2.2 MB a group)
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.base.errors import InputError

BASE_BYTES = 0.3e9          # python, numpy and the catalogs loaded
BASE_S = 3.0
UNIT_BYTES = 2.0e6          # per replica group of a traced layout's step tables (pareto, plan, fleet, price)
UNIT_S = 0.016
SIM_TOKEN_BYTES = 600.0     # per token of a simulated replica's step tables (simulate)
SIM_TOKEN_S = 3.0e-6
TOKEN_BYTES = 1.4e3         # per table token under an engine that prefills a prompt whole
STATIC_POINT_BYTES = 2.0e4  # per (layout, batch) point of the static search (one engine call)
STATIC_POINT_S = 2.0e-5
BATCH_POINTS = 129          # grid.up_to's batch axis (128 points and the largest batch)
WEIGHED = ("pareto", "plan", "fleet", "price", "slowmode", "simulate")     # the questions that build step tables


@dataclass(frozen=True)
class Work:
    """A question's weight: the field that sizes it, the units it traces, and the peak memory and time those imply."""
    question: str
    field: str              # the option that sets the size (chips, max_chips, dp, input_len, ...)
    units: int              # replica groups whose step tables are built
    layouts: int            # layouts searched
    table_tokens: int       # tokens of step tables under an engine without chunked prefill (0: chunked)
    peak_bytes: float
    seconds: float
    what: str               # "4,096 chips is 36 layouts with 69,120 replica groups to simulate"
    cheaper: str            # the cheaper question that answers it

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def replica_groups(*, chips=None, dp=None, tp=None, pp=None, ep=None) -> tuple[int, str]:
    """(replica groups dp x ep of one layout, the field that sets them): from dp when given, else from
    chips / (tp x pp); left out, the fewest chips that fit (one group, or ep)."""
    def deg(v):
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 1
    if isinstance(dp, int) and not isinstance(dp, bool):
        return dp * deg(ep), "dp"
    if isinstance(chips, int) and not isinstance(chips, bool):
        return max(1, chips // (deg(tp) * deg(pp))), "chips"
    return deg(ep), "ep"


def searched(model, hardware, chips, *, allow_pp=False, attention=0, max_tp=True) -> list[tuple[int, ...]]:
    """The layouts of `chips` a search evaluates (mapping.candidates.layouts_for; max_tp: the scale-up domain)."""
    from tokenmath.mapping.candidates import layouts_for
    return layouts_for(model, int(chips), allow_pp=allow_pp, attention=attention,
                       max_tp=hardware.scaleup_domain if max_tp else None)


def pareto_units(model, hardware, chips: int | None, allow_pp: bool, attention=0) -> tuple[int, int, int, int]:
    """(units, layouts, chips, widest) of a Pareto search: the replica groups (chips / tp) summed over the layouts of
    `chips` (blank: the chip's scale-up domain) that it evaluates, and those of the widest one (its tables peak on
    that layout, freed before the next: 2-10 MB a group, the module docstring's second table)."""
    n = int(chips) if chips is not None else int(hardware.scaleup_domain)
    groups = [n // int(t[0]) for t in searched(model, hardware, n, allow_pp=allow_pp, attention=attention)]
    return sum(groups), len(groups), n, max(groups, default=0)


def up_to_layouts(model, hardware, top: int, attention=0) -> list[tuple[int, ...]]:
    """The layouts grid.up_to searches: every count of grid.CHIP_COUNTS up to `top` (fleet, price, slowmode)."""
    from tokenmath.analyses.serving.grid import CHIP_COUNTS
    counts = [c for c in CHIP_COUNTS if c <= top] or [top]
    return [t for c in counts for t in searched(model, hardware, c, attention=attention)]


def longest(input_len, output_len, turns=None) -> tuple[int, str]:
    """(the most tokens one sequence holds, the length field that sets most of them); numbers or length specs.
    turns: an agent session's (simulate --turns), whose last turn holds every earlier turn's prompt and output."""
    from tokenmath.analyses.serving.simulation.workload import parse_lengths
    n = {}
    for k, v, default in (("input_len", input_len, 1024), ("output_len", output_len, 256)):
        n[k] = default if v is None else parse_lengths(v, k).max if isinstance(v, str) else int(v)
    t = int(turns or 1)
    return t * (n["input_len"] + n["output_len"]), "turns" if t > 1 else max(n, key=n.get)


def _profile(engine):
    """The serving-engine profile a question names (an id or a profile), None for none or an unknown id (its
    question refuses that itself)."""
    from tokenmath.specs.serving_engines import resolve_engine
    if engine is None or engine == "none":
        return None
    if not isinstance(engine, str):
        return engine
    try:
        return resolve_engine(engine)
    except InputError:
        return None


def unchunked(engine) -> bool:
    """Whether the serving engine prefills a prompt whole (its step tables then cover one sequence)."""
    eng = _profile(engine)
    return eng is not None and not getattr(eng, "chunked_prefill", True)


def uncapped(engine) -> bool:
    """Whether the serving engine runs every sequence its KV holds (no running-sequence cap)."""
    eng = _profile(engine)
    return eng is not None and not getattr(eng, "max_running", 1)


def sim_tokens(engine, hardware, groups: int, requests: int, need: int) -> int:
    """The tokens of one simulated replica's step tables (simulation/replica.Replica.cost): one step's budget over
    all groups (the engine's tokens per group x groups), at most what the requests hold in all; under an engine
    without chunked prefill at least one whole sequence."""
    from tokenmath.specs.serving_engines import resolve_engine
    try:
        eng = resolve_engine(engine) if isinstance(engine, str) else engine
        per_group = eng.limits_for(hardware.memory_bytes)[1] if eng is not None else None
    except (InputError, AttributeError):
        per_group = None
    most = requests * need if not per_group else min(int(per_group) * groups, requests * need)
    return max(most, need) if unchunked(engine) else most


def figures(units: int, static_points: int = 0, table_tokens: int = 0, simulated: bool = False) -> tuple[float, float]:
    """(peak bytes, seconds) of a question tracing `units` replica groups (simulated: a simulation whose step tables
    hold `table_tokens`), after the measurements above."""
    if simulated:
        return BASE_BYTES + table_tokens * SIM_TOKEN_BYTES, BASE_S + table_tokens * SIM_TOKEN_S
    peak = BASE_BYTES + units * UNIT_BYTES + static_points * STATIC_POINT_BYTES + table_tokens * TOKEN_BYTES
    return peak, BASE_S + units * UNIT_S + static_points * STATIC_POINT_S


def _attention(dep, default) -> object:
    from tokenmath.analyses.serving.grid import attention_arg
    try:
        return attention_arg(dep.attention_sharding or default)
    except (InputError, AttributeError):
        return 0


def _groups(lays) -> int:
    return sum(int(t[2]) * int(t[3]) for t in lays)


def weigh(question: str, dep, wl, **own) -> Work | None:
    """The Work of `question` (a command's name) asked with Deployment `dep`, Workload `wl` and its own keywords;
    None for a question with no step tables to build (infer, hyperbola, ...) or one the estimate cannot weigh (an
    unknown model: the question itself refuses it)."""
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    if question not in WEIGHED:
        return None
    try:
        m = dep.model if not isinstance(dep.model, str) else get_model(dep.model)
        hw = dep.hardware if not isinstance(dep.hardware, str) else get_hardware(dep.hardware)
        tokens, len_field = longest(wl.input_len, wl.output_len, wl.turns if question == "simulate" else 1)
    except (InputError, ValueError, TypeError):
        return None
    whole = unchunked(dep.engine)
    traced = dep.engine not in (None, "none") and own.get("concurrency") not in ((), False)
    if question == "simulate":
        groups, field = replica_groups(chips=dep.chips, dp=dep.dp, tp=dep.tp, pp=dep.pp, ep=dep.ep)
        requests = int(own.get("requests") or 1000)
        tt = sim_tokens(dep.engine, hw, groups, requests, tokens)
        peak, s = figures(0, table_tokens=tt, simulated=True)
        return Work(question, field, groups, 1, tt, peak, s,
                    f"{requests:,} requests of {tokens:,} tokens on {groups:,} replica groups (dp x ep) is {tt:,} "
                    "tokens of step tables", "fewer requests (--requests), or one replica (--dp 1) with its share of "
                    "the load (replicas are independent: --concurrency / dp or --arrival-rate / dp)")
    if question in ("pareto", "plan"):
        plan = question == "plan"
        n = int(dep.chips) if dep.chips is not None else int(hw.scaleup_domain)
        allow_pp = (not dep.speculating) if plan else bool(own.get("allow_pp")) and not dep.speculating
        attn = _attention(dep, "any" if plan else "heads")
        lays = searched(m, hw, n, allow_pp=allow_pp, attention=attn, max_tp=not plan)
        if plan:       # the best layout and the runner-ups traced (at most the largest groups each), then the
            k = 1 + int(own.get("runner_ups", 5) or 0)      # continuous search over every layout, dp folded (ep groups)
            folded = {(int(t[0]), int(t[1]), int(t[2])) + tuple(t[4:]) for t in lays}
            units = (sum(sorted((int(t[2]) * int(t[3]) for t in lays), reverse=True)[:k])
                     + sum(int(t[2]) for t in folded)) if traced else 0
        else:          # every layout traced (the web's count: faces/web/budget.py)
            units = pareto_units(m, hw, n, allow_pp, attn)[0] if traced else 0
        field, where = "chips", f"{n:,} chips"
        cheaper = (f"fewer chips (--chips {min(n, int(hw.scaleup_domain))}: one scale-up domain, or a few)"
                   + (", without --allow-pp" if allow_pp and not plan else "")
                   + ", or --concurrency none (the static search alone)")
        n_static = len(lays)
    else:
        top = own.get("max_chips")
        field = "max_chips"
        if top is None:
            top = int(hw.scaleup_domain) if question != "fleet" else (
                max(int(hw.scaleup_domain), 8) if hw.scaleup_domain <= 72 else 64)
        lays = up_to_layouts(m, hw, int(top), attention=_attention(dep, "heads"))
        # fleet and price trace the continuously batched answer over the layouts, dp folded (one replica each)
        folded = {(int(t[0]), int(t[1]), int(t[2])) + tuple(t[4:]) for t in lays}
        units = sum(int(t[2]) for t in folded) if traced and question != "slowmode" else 0
        where = f"--max-chips {int(top):,} (every layout of up to {min(int(top), 512):,} chips)"
        cheaper = f"fewer chips (--max-chips {min(int(top), int(hw.scaleup_domain))}: one scale-up domain)"
        n_static = len(lays)
    tt = tokens * n_static if whole and traced else 0
    peak, s = figures(units, n_static * BATCH_POINTS, tt)
    if tt and tt * TOKEN_BYTES > units * UNIT_BYTES:
        field, cheaper = len_field, ("shorter sequences, or an engine with chunked prefill (--engine vllm or sglang), "
                                     "or " + cheaper)
    return Work(question, field, units, n_static, tt, peak, s,
                f"{where} is {n_static:,} layouts with {units:,} replica groups to trace"
                + (f" and {tt:,} tokens of step tables" if tt else ""), cheaper)
