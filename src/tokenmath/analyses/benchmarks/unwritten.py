"""The one place that names an option a launch command does not carry. An option is honoured or the answer says why
it cannot apply, never dropped (issue 37): the eight of infer's options that shape its expected figures without being
part of the layout (--adp-balance, --attention-sharding, --ep-comm, --ep-imbalance, --overlap-ep,
--min-tokens-per-s-per-user, --price-usd-per-hour, --ttft-ms) are each written by the engine module that has a pinned
flag or key for them (launch_vllm.py, launch_sglang.py, launch_trtllm.py: Command.honour) or named here.

- spec_notes: for launch() on its own, the ServerSpec options (launch_base.OPTION_FIELDS) an engine's command lacks,
  with the reason;
- export_notes: for export(), every one of the eight options the question set and the command does not carry: what
  it changed in the expected figures (infer asked again without it, the same load; for a saved plan or fleet answer,
  whose question is read from its echo, that its figures assume it), and why it is not written.
A flag a user could set by hand is named only with the pinned source it was read in."""
from __future__ import annotations

from dataclasses import dataclass, replace

ENGINE = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
# the question's field each ServerSpec option (launch_base.OPTION_FIELDS) comes from (export.py: eplb_redundant from
# --ep-imbalance eplb)
QUESTION_FIELD = {"ep_comm": "ep_comm", "ep_overlap": "ep_overlap", "eplb_redundant": "ep_imbalance",
                  "adp_balance": "adp_balance", "experts_whole": "moe_sharding"}
DEPLOYMENT = ("adp_balance", "attention_sharding", "ep_comm", "ep_imbalance", "ep_overlap", "moe_sharding",
              "price_usd_per_hour")
WORKLOAD = ("min_tokens_per_s_per_user", "ttft_ms")
# read at the commit data/engine_flags.toml's ["vllm serve"] `where` names (VllmConfig.__post_init__)
VLLM_DBO_SRC = "vllm/config/vllm.py @ 09f030eaf851"
NOT_PINNED = "no flag or key in data/engine_flags.toml's pinned {engine} tables sets it"


def _pinned(tool: str) -> str:
    """A pinned table's file and commit, as a note cites them."""
    from tokenmath.analyses.benchmarks.launch_base import source
    s = source(tool)
    return f"{s['path']} @ {s['commit'][:12]}"


def _label(name: str, spec) -> str:
    return {"ep_comm": f"--ep-comm {spec.ep_comm}", "ep_overlap": "--overlap-ep",
            "eplb_redundant": "--ep-imbalance eplb", "adp_balance": "--adp-balance",
            "experts_whole": "--moe-sharding ep"}[name]


def why(engine: str, name: str, spec) -> str:
    """Why ServerSpec option `name` is not in `engine`'s command for `spec`."""
    if spec.ep == 1:
        return "this server runs no expert parallelism (ep 1), so there is no all-to-all or attention-DP group to set"
    eng = ENGINE[engine]
    if name == "adp_balance":
        if spec.pp > 1:
            return ("with pipeline stages tokenmath couples no attention groups "
                    "(simulation/step_cost.StepCost.coupled), so there is no balance to set")
        src = _pinned("sglang launch_server")
        near = (f"; SGLang's nearest setting, --enable-prefill-delayer ({src}: 'Enable prefill delayer for DP "
                "attention to reduce idle time', at most --prefill-delayer-max-delay-passes 30 passes), holds "
                "prefills by a rule of its own, not the one modelled: set it by hand to try it") \
            if engine == "sglang" else ""
        return (f"{eng} has no scheduler setting that holds a prompt until every attention-DP group has one ("
                + NOT_PINNED.format(engine=eng) + "); TensorRT-LLM's attention_dp_config.enable_balance is the one "
                "modelled, which `--engine tensorrt-llm` writes" + near)
    if name == "ep_overlap" and engine == "vllm":
        return (f"vLLM runs its dual-batch overlap (--enable-dbo) only on a DeepEP all-to-all ({VLLM_DBO_SRC} refuses "
                "it with any other --all2all-backend), and the answer priced the bf16 one; --ep-comm fp8 or deepep "
                "writes both")
    if engine == "trtllm":
        if name == "eplb_redundant":
            src = _pinned("trtllm-serve extra_llm_api_options")
            return (f"TensorRT-LLM's EPLB is moe_config.load_balancer ({src}: num_slots, the model's experts + "
                    f"{spec.eplb_redundant} redundant here, and layer_updates_per_iter): set it by hand; it is not "
                    "written because the update cadence the figure assumes is not pinned")
        return (f"TensorRT-LLM chooses its MoE all-to-all{' and its overlap' if name == 'ep_overlap' else ''} "
                "itself: " + NOT_PINNED.format(engine=eng))
    return NOT_PINNED.format(engine=eng)


@dataclass(frozen=True)
class Shown:
    """The answer being exported, as its notes read it."""
    question: str                   # infer | plan | fleet
    tp: int                         # the layout's tensor-parallel degree (before the engines' DP attention)
    moe: bool                       # the model has routed experts
    ttft_s: float                   # the mean TTFT and TPOT one benchmark should print (s)
    tpot_s: float
    cost_per_mtok_output_usd: float | None = None
    infer: object = None            # infer's answer: what an option changed is infer asked again without it


def spec_notes(engine: str, spec, names) -> list[str]:
    """One note for each ServerSpec option in `names` that `engine`'s command does not carry."""
    return [f"{_label(n, spec)} is not written: {why(engine, n, spec)}" for n in names]


def _declared(name: str):
    """The question field's declaration (specs/question: its option and default)."""
    from tokenmath.specs.question import deployment, workload
    return deployment.field(name) if name in DEPLOYMENT else workload.field(name)


def _default(name: str, question: str):
    """The field's default in `question` (its own, specs/question/defaults.py, else the declared one)."""
    from tokenmath.specs.question.defaults import question_defaults
    from tokenmath.specs.question.fields import coerce_basic
    own = question_defaults(question)
    return coerce_basic(_declared(name), own[name]) if name in own else _declared(name).default


def given(dep, wl, question: str = "infer") -> list[tuple[str, object]]:
    """The eight options the question set away from its defaults, as (field, value). A searching question's answer
    states the attention sharding of the point it chose, and its layout carries it: not an option to name."""
    names = [n for n in DEPLOYMENT + WORKLOAD if question == "infer" or n != "attention_sharding"]
    return [(n, v) for n in names for v in (getattr(dep if n in DEPLOYMENT else wl, n),)
            if v is not None and v != _default(n, question)]     # None: left out, the question's default


def _option(name: str, value) -> str:
    f = _declared(name)
    return f.option if f.kind == "bool" else f"{f.option} {value:g}" if isinstance(value, float) else \
        f"{f.option} {value}"


def _figures(r) -> tuple[float, float, float] | None:
    """(output tokens/s of one server, mean TTFT s, mean TPOT s) as export's expected figures count them."""
    if r is None or not r.fits or r.load is None:
        return None
    ld = r.load
    return float(ld.output_tokens_per_s) / int(r.layout.dp), float(ld.ttft_s), float(ld.tpot_s)


def _text(f) -> str:
    return f"{f[0]:,.0f} tok/s, TTFT {f[1] * 1e3:,.1f} ms, TPOT {f[2] * 1e3:,.2f} ms"


def effect(name: str, dep, wl, r) -> str:
    """What option `name` changed in infer's expected figures: infer asked again with it at its default."""
    from tokenmath.analyses.ask import infer
    from tokenmath.base.errors import InputError
    try:
        r0 = infer(replace(dep, **{name: _declared(name).default}), wl) if name in DEPLOYMENT else \
            infer(dep, replace(wl, **{name: _declared(name).default}))
    except InputError as e:
        return f"without it infer refuses the question ({e.problem})"
    now, before = _figures(r), _figures(r0)
    if before is None:
        return "without it the deployment does not fit"
    if all(abs(a - b) <= 5e-4 * max(abs(a), abs(b), 1e-12) for a, b in zip(now, before)):
        return "the expected figures are the same without it"
    return f"without it tokenmath would expect {_text(before)} (the figures above assume it)"


def _reason(name: str, value, engine: str, spec, s: Shown) -> str:
    """Why a question option that no ServerSpec field carries is not written."""
    searched = s.question != "infer"
    if name == "price_usd_per_hour":
        cost = s.cost_per_mtok_output_usd
        priced = "" if cost is None else f"; it prices the answer's output at ${cost:,.2f} per million tokens"
        return "a chip-hour price is not a server setting: no engine flag carries it" + priced
    if name == "ttft_ms":
        ttft = s.ttft_s * 1e3
        how = (f"the {s.question} searched for a deployment that meets it" if searched else "infer prices the layout "
               "asked for and searches for none that meets it (`tokenmath plan --ttft-ms` does)")
        return (f"a latency target, not a server setting: {how}; the mean TTFT expected, {ttft:,.1f} ms, "
                f"{'meets' if ttft <= float(value) else 'misses'} it")
    if name == "min_tokens_per_s_per_user":
        speed = 1.0 / s.tpot_s
        how = (f"the {s.question} searched for a deployment that meets it" if searched else "under load the users or "
               "the arrival rate set the batch (`tokenmath plan --min-tokens-per-s-per-user` searches for a deployment "
               "that meets it)")
        return (f"a per-user speed target, not a server setting: {how}; the {speed:,.1f} tokens/s per user expected "
                f"{'meets' if speed >= float(value) else 'misses'} it")
    if name == "attention_sharding":
        if s.tp == 1:
            return "it shards attention inside a tensor-parallel group, and this layout has tp 1"
        if value == "heads":
            return "the engines shard attention by KV head inside a tensor-parallel group, as heads sharding does"
        return ("the engines shard attention by KV head inside a tensor-parallel group, and no flag in "
                "data/engine_flags.toml shards it over the batch: the server runs heads sharding")
    if name == "moe_sharding":
        if s.tp == 1:
            return "it places the experts inside a tensor-parallel group, and this layout has tp 1"
        if not s.moe:
            return "a dense model has no experts to place"
        return (f"under attention DP the engines already spread whole experts over all {spec.tp * spec.ep} ranks, "
                "the placement --moe-sharding ep prices")
    if name == "ep_imbalance":
        if spec.ep == 1 or value == "eplb":
            return why(engine, "eplb_redundant", spec)
        return ("it describes how unevenly the traffic routes tokens to the experts, not a server setting; an "
                "engine's EPLB (--ep-imbalance eplb) is the setting that evens it")
    return why(engine, {v: k for k, v in QUESTION_FIELD.items()}[name], spec)


def export_notes(dep, wl, s: Shown, engine: str, spec, unwritten) -> list[str]:
    """A note for each of the eight options the question set that `engine`'s command for `spec` does not carry:
    the option, what it changed in the expected figures (infer's: s.infer asked again without it; a saved plan's or
    fleet's: that they assume it), and why it is not written. unwritten: the ServerSpec options launch() could not
    write (LaunchCommand.unwritten)."""
    from tokenmath.analyses.benchmarks.launch_base import options_set
    carried = {QUESTION_FIELD[n] for n in options_set(spec) if n not in unwritten}
    notes = []
    for name, value in given(dep, wl, s.question):
        if name in carried:
            continue                        # written into the command by the engine's module
        if name == "attention_sharding" and value == "dp" and s.tp > 1:
            continue                        # written as the engines' DP attention: export._spec_of's note says so
        if name == "attention_sharding" and value == "heads" and s.tp > 1:
            notes.append(f"{_option(name, value)}: written as the command's tensor parallelism "
                         f"({_reason(name, value, engine, spec, s)})")
            continue
        changed = effect(name, dep, wl, s.infer) if s.infer is not None else \
            f"the {s.question} answer was priced with it"
        notes.append(f"{_option(name, value)}: {changed}; not written: {_reason(name, value, engine, spec, s)}")
    return notes
