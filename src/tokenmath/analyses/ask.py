"""Every serving question asked the one way: (Deployment, Workload) -> the analysis' answer, for the CLI, the web
page and Python alike (so the same question gets the same figures wherever it is asked).

A question maps the typed declarations onto its analysis here, once; a field the question does not use is never
dropped silently: question/applies.not_applied names it in the answer's notes. The analyses keep their keyword
signatures (their tests and callers inside the package use them); `tokenmath.infer(deployment, workload)` and the
keyword form `tokenmath.infer(model, hardware, ...)` both arrive here.
"""
from __future__ import annotations

from dataclasses import fields as dc_fields, is_dataclass, replace

from tokenmath.analyses.inert_options import no_ep_group, no_tp_group
from tokenmath.analyses.serving.work_budget import check as within_budget
from tokenmath.base.errors import InputError
from tokenmath.specs.question.applies import not_applied
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS, KNOB_FIELDS, Deployment
from tokenmath.specs.question.workload import WORKLOAD_FIELDS, Workload

_DEPLOYMENT_NAMES = {f.name for f in DEPLOYMENT_FIELDS}
_WORKLOAD_NAMES = {f.name for f in WORKLOAD_FIELDS}


def split(model=None, hardware=None, **kw) -> tuple[Deployment, Workload, dict]:
    """Keyword arguments -> (Deployment, Workload, the question's own other keywords), each validated."""
    # a field given as None is the field left out (its default), never a keyword of the question's own
    dep = {k: v for k in list(kw) if k in _DEPLOYMENT_NAMES for v in (kw.pop(k),) if v is not None}
    wl = {k: v for k in list(kw) if k in _WORKLOAD_NAMES for v in (kw.pop(k),) if v is not None}
    if model is not None:
        dep["model"] = model
    if hardware is not None:
        dep["hardware"] = hardware
    return Deployment.of(**dep), Workload.of(**wl), kw


def efficiency_of(dep: Deployment):
    """The Efficiency object the deployment names (None: the calibrated default for the chip and engine); a
    calibration profile (analyses/benchmarks/profiles.py) replaces the shipped calibration."""
    if dep.profile is not None:
        if dep.efficiency != "calibrated":
            raise InputError("profile", f"is a calibration, and efficiency {dep.efficiency!r} asks for another",
                             "one of the two")
        from tokenmath.analyses.benchmarks.profiles import efficiency_of as of_profile, load_profile
        return of_profile(load_profile(dep.profile), dep.hardware, dep.engine)
    if not isinstance(dep.efficiency, str):
        return dep.efficiency           # an Efficiency object from Python
    if dep.efficiency == "calibrated":
        return None
    from tokenmath.specs.efficiency import DEFAULT, PEAK
    return PEAK if dep.efficiency == "peak" else DEFAULT


def speculation_of(dep: Deployment):
    """The deployment's speculation (speculative.Speculation) or None."""
    if not dep.speculating:
        return None
    from tokenmath.analyses.serving.speculative import speculation
    return speculation(dep.draft, dep.spec_k, dep.acceptance, dep.mtp)


def speculation_notes(dep: Deployment) -> list[str]:
    """What the serving engine itself does when this deployment speculates and sets no running-request cap: SGLang
    resets --max-running-requests to 48 (specs/serving_engines: max_running_speculative). Named, not applied: a
    speculative deployment sets the cap it needs (InferenceX's recipes do), and the figures assume that."""
    if not dep.speculating or dep.max_running is not None or dep.profile is not None:
        return []
    from tokenmath.specs.serving_engines import NO_ENGINE, get_engine
    if dep.engine == NO_ENGINE:
        return []
    try:
        eng = get_engine(dep.engine)
    except InputError:
        return []
    cap = eng.max_running_speculative
    if not cap:
        return []
    return [f"{eng.name} speculating runs at most {cap} requests at once (in all, split over its attention-DP "
            f"groups) unless --max-running-requests is set ({eng.sources.get('max_running_speculative', '')}); "
            "these figures assume the cap the batch needs: set the engine's --max-running-requests to it, or ask "
            f"with --max-running {cap} (per scheduler: {cap} / the attention-DP groups) for the engine's default"]


def _notes(question: str, dep: Deployment, wl: Workload) -> list[str]:
    """A speculating question's notes on the fields it was asked with: those it does not use, then what the serving
    engine itself does when it speculates (speculation_notes)."""
    return not_applied(question, dep, wl) + speculation_notes(dep)


def knobs(dep: Deployment) -> dict:
    """The setup-level keywords every serving analysis takes (analyses.setup.setup / with_deployment_knobs)."""
    eff = efficiency_of(dep)
    # a profile's engine carries the CPU time it fitted: passed as the object, not re-resolved from its name
    return dict(weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, efficiency=eff,
                engine=eff.engine if dep.profile is not None else dep.engine,
                **{n: getattr(dep, n) for n in KNOB_FIELDS})


def filled(dep: Deployment, context: int, batch=1) -> tuple[Deployment, list[str]]:
    """The deployment with its chip count filled when chips and dp are both left out: the fewest that hold `batch`
    sequences of `context` tokens (analyses.serving.fewest_chips.blank_chips, the web page's rule too), and the
    note saying so; unchanged when a count is named or none fits (the answer then says why it does not fit)."""
    from tokenmath.analyses.serving.fewest_chips import blank_chips
    from tokenmath.mapping.layout import make_layout
    from tokenmath.specs.model_catalog import get_model
    n = blank_chips(dep.model, dep.hardware, chips=dep.chips, dp=dep.dp, context=context, batch=batch, tp=dep.tp,
                    pp=dep.pp, ep=dep.ep, weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, engine=dep.engine,
                    what_if=dep.what_if)
    if n is None or n == dep.chips:
        return dep, []
    given = make_layout(get_model(dep.model), **_layout(dep, "tp", "pp", "ep", "cp")).chips
    if n == given:
        return dep, []
    b = batch if isinstance(batch, int) else 1
    what = "one sequence" if b == 1 else f"{b:,} sequences"
    return replace(dep, chips=n), [f"chips left out: {n}, the fewest that hold {what} of {context:,} tokens "
                                   "(--chips N asks for another count)"]


def _layout(dep: Deployment, *names) -> dict:
    return {n: getattr(dep, n) for n in (names or ("chips", "tp", "pp", "ep", "dp"))}


def with_notes(result, notes: list[str]):
    """The answer with `notes` added where it keeps its notes (a `notes` tuple, or a `result` dict's list)."""
    if not notes:
        return result
    if is_dataclass(result) and "notes" in {f.name for f in dc_fields(result)}:
        return replace(result, notes=tuple(result.notes) + tuple(notes))
    if isinstance(getattr(result, "result", None), dict):
        result.result["notes"] = list(result.result.get("notes", [])) + list(notes)
        return result
    raise AssertionError(f"{type(result).__name__} keeps no notes")


def _attention(dep: Deployment, search_default: str | None):
    a = dep.attention_sharding
    if a == "any" and search_default is None:
        raise InputError("attention_sharding", "'any' searches the sharding, and this question takes one layout",
                         "heads, batch or dp")
    return search_default if a is None else a


def infer(dep: Deployment, wl: Workload):
    """One configuration: a static batch, or under load (concurrency / arrival rate)."""
    from tokenmath.analyses.serving.fewest_chips import sequence_of
    from tokenmath.analyses.serving.infer import infer as run
    dep, chips_note = filled(dep, sequence_of(wl.input_len, wl.output_len), wl.batch)
    spec = speculation_of(dep)
    if spec is not None and (dep.pp or 1) > 1 or spec is not None and (dep.cp or 1) > 1:
        raise InputError("pp" if (dep.pp or 1) > 1 else "cp",
                         "speculative decoding is modelled without pipeline or context parallelism", "leave it out")
    def call(batch, speed_batch=None):
        return run(dep.model, dep.hardware, **_layout(dep, "chips", "tp", "pp", "ep", "dp", "cp"),
                   batch=batch, input_len=wl.input_len, output_len=wl.output_len,
                   concurrency=wl.concurrency, arrival_rate=wl.arrival_rate, prefix_hit=wl.prefix_hit or None,
                   attention_sharding=_attention(dep, None), speculation=spec, speed=wl.min_tokens_per_s_per_user,
                   speed_batch=speed_batch, **knobs(dep))
    r = call(wl.batch if wl.batch is not None else 1)
    if r.speed_batch is not None:
        r = replace(r, operating_point=_operating_point(r, call, wl.min_tokens_per_s_per_user))
    if spec is not None and r.load is None and r.fits:
        r = replace(r, speculative=speculative_beside(dep, wl, r))
    if wl.min_tokens_per_s_per_user is not None and r.load is not None:
        r = with_notes(r, ["--min-tokens-per-s-per-user sets the operating point beside a static batch; under load "
                           "the users or the arrival rate set the batch"])
    if dep.adp_balance and r.load is None:
        r = with_notes(r, ["--adp-balance changes nothing for a static batch: its prompts already split evenly over "
                           "the attention groups (it acts under load: --concurrency / --arrival-rate)"])
    return with_notes(r, chips_note + _notes("infer", dep, wl) + no_tp_group(dep, r.layout.tp)
                      + no_ep_group(dep, r.layout.ep))


def _operating_point(r, call, speed) -> dict:
    """Beside a static batch, the batch a provider would run: the largest giving `speed` tokens/s per user (default
    operating_point.DEFAULT_SPEED), answered by the same function at that batch."""
    from tokenmath.analyses.serving.operating_point import DEFAULT_SPEED, operating_point_dict
    target = DEFAULT_SPEED if speed is None else float(speed)
    if not r.speed_batch:
        return {"min_tokens_per_s_per_user": target, "batch": 0,
                "reason": f"even batch 1 is slower than {target:g} tokens/s per user" if r.max_batch >= 1
                else "batch 1 does not fit"}
    from tokenmath.analyses.serving.operating_point import static_ttft_note
    # the speed batch is known: the call at it does not search for it again (the same search, the same answer)
    op = operating_point_dict(r if r.speed_batch == r.batch else call(r.speed_batch, r.speed_batch), target)
    note = static_ttft_note(op["ttft_s"], op["batch"], "a server batching continuously keeps the first token within "
                            "it: `infer --concurrency N` answers for one")
    return {**op, "static_ttft_note": note}


def speculative_beside(dep: Deployment, wl: Workload, answer):
    """A static batch's speculative decoding beside its plain answer (analyses/serving/speculative.py): the batch
    asked for (or, for a hyperbola, 1, 2, 4, ... up to its largest batch that fits)."""
    from tokenmath.analyses.serving.speculative import speculative
    if not hasattr(answer, "load"):        # a hyperbola: its batches, not one
        d = answer.to_dict()
        top = max(int(d.get("max_batch") or 1), 1)
        batches = [1 << i for i in range(top.bit_length()) if 1 << i <= top]
        batches += [top] if top not in batches else []
        lens = dict(input_len=max(int(d["context"]) - 1, 1), output_len=1)
    else:
        batches = [int(answer.batch)]
        lens = dict(input_len=wl.input_len, output_len=wl.output_len)
    return speculative(dep.model, dep.hardware, speculation_of(dep), batches=batches, chips=dep.chips, tp=dep.tp,
                       ep=dep.ep, dp=dep.dp, **knobs(dep), **lens)


def simulate(dep: Deployment, wl: Workload, **own):
    """The serving simulator on one replica; own: requests, seed, trace, burstiness, itl_ms, prefix_cache_share."""
    own = within_budget("simulate", dep, wl, own)
    from tokenmath.analyses.serving.fewest_chips import sequence_of
    from tokenmath.analyses.serving.simulation.simulate import simulate as run
    # a session's last turn holds every earlier turn: the longest sequence is turns x (input + output)
    dep, chips_note = filled(dep, sequence_of(wl.input_len, wl.output_len) * wl.turns)
    r = run(dep.model, dep.hardware, **_layout(dep), concurrency=wl.concurrency, arrival_rate=wl.arrival_rate,
            input_len=wl.input_len, output_len=wl.output_len, ttft_ms=wl.ttft_ms, prefix_hit=wl.prefix_hit or None,
            turns=wl.turns, tool_gap_s=wl.tool_gap_s, speculation=speculation_of(dep),
            attention_sharding=_attention(dep, None), **own, **knobs(dep))
    balance = ([] if not dep.adp_balance or int(r.layout["ep"]) <= 1 else
               ["--adp-balance: each step's prompt chunks split evenly over the ep attention groups; the coordinated "
                "wait that balances them is not simulated, so TTFT leaves it out (infer --concurrency adds it: "
                "steady_state.balance_wait_steps)"])
    return with_notes(r, chips_note + _notes("simulate", dep, wl) + no_tp_group(dep, r.layout["tp"]) + balance
                      + no_ep_group(dep, r.layout["ep"]))


def hyperbola(dep: Deployment, wl: Workload, context=2048, **own):
    from tokenmath.analyses.serving.hyperbola import hyperbola as run
    dep, chips_note = filled(dep, context)
    r = run(dep.model, dep.hardware, **_layout(dep), context=context, attention_sharding=_attention(dep, None),
            **own, **knobs(dep))
    if dep.speculating:
        if (dep.pp or 1) > 1:
            raise InputError("pp", "speculative decoding is modelled without pipeline parallelism", "leave --pp out")
        r = replace(r, speculative=speculative_beside(dep, wl, r))
    return with_notes(r, chips_note + not_applied("hyperbola", dep, wl) + no_tp_group(dep, r.setup.layout.tp)
                      + no_ep_group(dep, r.setup.layout.ep))


def context(dep: Deployment, wl: Workload, context=8192):
    from tokenmath.analyses.serving.context import context as run
    dep, chips_note = filled(dep, context, wl.batch)
    k = knobs(dep)
    r = run(dep.model, dep.hardware, **_layout(dep), batch=wl.batch if wl.batch is not None else 1,
            context=context, weight_dtype=k["weight_dtype"], kv_dtype=k["kv_dtype"], efficiency=k["efficiency"],
            engine=k["engine"], max_running=dep.max_running, what_if=dep.what_if)
    return with_notes(r, chips_note + not_applied("context", dep, wl))


def fleet(dep: Deployment, wl: Workload, *, demand, **own):
    """Chips for a demand (output tokens/s); own: max_chips, pue."""
    own = within_budget("fleet", dep, wl, own)
    from tokenmath.analyses.serving.fleet import fleet as run
    r = run(dep.model, dep.hardware, demand=demand, input_len=wl.input_len, output_len=wl.output_len,
            min_tokens_per_s_per_user=_or(wl.min_tokens_per_s_per_user, 20.0), speculation=speculation_of(dep),
            attention_sharding=_attention(dep, "heads"), prefix_hit=wl.prefix_hit or None, **own, **knobs(dep))
    return with_notes(r, _notes("fleet", dep, wl) + no_ep_group(dep))


def price(dep: Deployment, wl: Workload, **own):
    """What serving costs per Mtok at a speed target, and the price at a margin; own: margin, utilization,
    max_chips."""
    own = within_budget("price", dep, wl, own)
    from tokenmath.analyses.serving.provider_price import price as run
    r = run(dep.model, dep.hardware, input_len=wl.input_len, output_len=wl.output_len,
            min_tokens_per_s_per_user=_or(wl.min_tokens_per_s_per_user, 20.0), speculation=speculation_of(dep),
            attention_sharding=_attention(dep, "heads"), **own, **knobs(dep))
    return with_notes(r, _notes("price", dep, wl) + no_ep_group(dep))


def plan(dep: Deployment, wl: Workload, **own):
    """The best layout on a system; own: disaggregated, runner_ups, concurrency axis (a list)."""
    own = within_budget("plan", dep, wl, own)
    from tokenmath.analyses.serving.plan import SEARCH_ATTENTION, plan as run
    cs = own.pop("concurrency", None)
    if cs is not None and wl.concurrency is not None:
        raise InputError("concurrency", "given as the workload's and as plan's axis", "one of the two")
    r = run(dep.model, dep.hardware, chips=dep.chips, ttft_ms=wl.ttft_ms,
            min_tokens_per_s_per_user=wl.min_tokens_per_s_per_user, input_len=wl.input_len,
            output_len=wl.output_len, prefix_hit=wl.prefix_hit or None, speculation=speculation_of(dep),
            concurrency=cs if cs is not None else wl.concurrency,
            attention_sharding=_attention(dep, SEARCH_ATTENTION), **own, **knobs(dep))
    return with_notes(r, _notes("plan", dep, wl) + no_ep_group(dep))


def pareto(dep: Deployment, wl: Workload, **own):
    """Throughput per chip against tokens/s per user over layouts and batches; own: allow_pp, concurrency axis."""
    own = within_budget("pareto", dep, wl, own)
    from tokenmath.analyses.serving.pareto import pareto as run
    cs = own.pop("concurrency", None)
    if cs is not None and wl.concurrency is not None:
        raise InputError("concurrency", "given as the workload's and as pareto's axis", "one of the two")
    r = run(dep.model, dep.hardware, chips=dep.chips, input_len=wl.input_len, output_len=wl.output_len,
            concurrency=cs if cs is not None else wl.concurrency, speculation=speculation_of(dep),
            attention_sharding=_attention(dep, "heads"), **own, **knobs(dep))
    return with_notes(r, _notes("pareto", dep, wl) + no_ep_group(dep))


def slowmode(dep: Deployment, wl: Workload, **own):
    """The cheapest point within each latency budget; own: budgets_s, per_request, max_chips."""
    own = within_budget("slowmode", dep, wl, own)
    from tokenmath.analyses.serving.slowmode import slowmode as run
    r = run(dep.model, dep.hardware, input_len=wl.input_len, output_len=wl.output_len,
            speculation=speculation_of(dep), attention_sharding=_attention(dep, "heads"), **own, **knobs(dep))
    return with_notes(r, _notes("slowmode", dep, wl) + no_ep_group(dep))


def prices(dep: Deployment, wl: Workload, **own):
    """Input against output cost across contexts; own: contexts, cache_ttl_s."""
    from tokenmath.analyses.serving.fewest_chips import tokens_of
    from tokenmath.analyses.serving.input_vs_output import prices as run
    # the fewest chips that hold one sequence of the shortest context asked (longer rows say if they do not fit)
    dep, chips_note = filled(dep, min(own.get("contexts") or [256]) + tokens_of(wl.output_len, 256), wl.batch)
    r = run(dep.model, dep.hardware, **_layout(dep), output_len=wl.output_len,
            batch=None if wl.batch == "max" else wl.batch,     # None: the largest batch that fits at each context
            min_tokens_per_s_per_user=wl.min_tokens_per_s_per_user, attention_sharding=_attention(dep, None), **own,
            **knobs(dep))
    lay = _resolved_layout(dep)
    return with_notes(r, chips_note + not_applied("prices", dep, wl) + no_tp_group(dep, lay.tp) + no_ep_group(dep, lay.ep))


def sensitivity(dep: Deployment, wl: Workload, **own):
    """Which hardware figure or efficiency moves infer's answer most; own: metric, delta."""
    from tokenmath.analyses.serving.fewest_chips import sequence_of
    from tokenmath.analyses.serving.sensitivity import sensitivity as run
    dep, chips_note = filled(dep, sequence_of(wl.input_len, wl.output_len), wl.batch)
    k = knobs(dep)
    eff = k.pop("efficiency")
    r = run(dep.model, dep.hardware, **_layout(dep), batch=wl.batch if wl.batch is not None else "max",
            input_len=wl.input_len, output_len=wl.output_len, efficiency=eff,
            attention_sharding=_attention(dep, None), **own, **k)
    lay = _resolved_layout(dep)
    return with_notes(r, chips_note + not_applied("sensitivity", dep, wl) + no_tp_group(dep, lay.tp)
                      + no_ep_group(dep, lay.ep))


def moe(dep: Deployment, wl: Workload, **own):
    """A MoE against the rack; own: context (tokens held per sequence)."""
    from tokenmath.analyses.serving.moe import moe as run
    if wl.batch == "max":
        raise InputError("batch", "'max' is not a batch moe compares layouts at", "a number of sequences, or leave it "
                         "out (16 per chip)")
    r = run(dep.model, dep.hardware, chips=dep.chips, batch=wl.batch, output_len=wl.output_len, **own, **knobs(dep))
    return with_notes(r, not_applied("moe", dep, wl) + no_ep_group(dep))


def agents(dep: Deployment, wl: Workload, **own):
    """The agent-capacity table (analyses/serving/agent_capacity.py): sessions at a speed target per GPU, kW, $/hour
    and system, for each system; own: systems, context_len, prefix_hit, offload, pue, layouts. The workload's
    output_len is a turn's (default 150, AgentPerf's median), its tool_gap_s the time between turns (None: the
    analysis' default, agents.DEFAULTS' 3 s), its speed target 20 tokens/s."""
    from tokenmath.analyses.serving.agent_capacity import agents as run
    from tokenmath.specs.question.workload import field
    # a turn's output and cached share: the question's own keywords, else the workload's when set away from its default
    for name in ("output_len", "prefix_hit"):
        v = getattr(wl, name)
        if own.get(name) is None and v != field(name).default:
            own[name] = v
    if own.get("tool_gap_s") is None and wl.tool_gap_s is not None:      # None: the analysis' own default
        own["tool_gap_s"] = wl.tool_gap_s
    r = run(dep.model, own.pop("systems", None), min_tokens_per_s_per_user=_or(wl.min_tokens_per_s_per_user, 20.0),
            ttft_ms=wl.ttft_ms, **own, **knobs(dep))
    traced = [t for row in r.rows for t in row.get("layouts_traced") or ()]      # "tp=8 pp=1 ep=1 dp=1", ...
    no_ep = traced and all(" ep=1 " in f" {t} " for t in traced)
    return with_notes(r, not_applied("agents", dep, wl)
                      + no_ep_group(dep, 1 if no_ep else None, "every layout traced has ep = 1"))


def _resolved_layout(dep: Deployment):
    """The layout the deployment's degrees resolve to (mapping/layout.make_layout), for a note about it."""
    from tokenmath.mapping.layout import make_layout
    from tokenmath.specs.model_catalog import get_model
    return make_layout(get_model(dep.model), **_layout(dep, "chips", "tp", "pp", "ep", "dp", "cp"))


def _or(v, default):
    return default if v is None else v


QUESTIONS = {"infer": infer, "simulate": simulate, "hyperbola": hyperbola, "context": context, "fleet": fleet,
             "price": price, "plan": plan, "pareto": pareto, "slowmode": slowmode, "prices": prices,
             "sensitivity": sensitivity, "moe": moe,
             "agents": agents}


def ask(question: str, deployment: Deployment | None = None, workload: Workload | None = None, **own):
    """The answer to `question` (a command's name) for this deployment and workload."""
    if question not in QUESTIONS:
        from tokenmath.base.errors import unknown_name
        raise unknown_name("question", question, QUESTIONS)
    return QUESTIONS[question](deployment or Deployment(), workload or Workload(), **own)
