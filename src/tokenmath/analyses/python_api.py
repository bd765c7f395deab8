"""The Python API's form of every serving question: `tokenmath.infer(deployment, workload)` or the keyword form
`tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=16)`, both validated into a Deployment and a Workload
and answered by analyses.ask, the function the command line and the web page call, with each question's own
defaults (specs/question/defaults.py) applied as the command line applies them."""
from __future__ import annotations

from tokenmath.analyses.ask import QUESTIONS, ask, split
from tokenmath.base.errors import InputError
from tokenmath.specs.question.deployment import Deployment
from tokenmath.specs.question.workload import Workload

AXIS_QUESTIONS = ("pareto", "plan")       # questions whose `concurrency` can be a list: an axis of users


def public(question: str):
    """The Python API's form of a question: `tokenmath.infer(deployment, workload)` or the keyword form
    `tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=16)`: both are validated into a Deployment and a
    Workload (the one set of defaults, vLLM's engine included) and answered by the same function as the CLI."""
    def call(*args, **kw):
        if args and isinstance(args[0], Deployment):
            dep = args[0]
            wl = args[1] if len(args) > 1 else kw.pop("workload", None) or Workload()
            return remembered(ask(question, dep, wl, **kw), question, dep, wl)
        # pareto's and plan's concurrency may be an axis (a list of users, () for none): the question's own keyword
        axis = ({"concurrency": kw.pop("concurrency")} if question in AXIS_QUESTIONS
                and isinstance(kw.get("concurrency"), (list, tuple)) else {})
        # the question's own defaults, as the command line applies them (specs/question/defaults.py); a model or
        # hardware given by position is given
        from tokenmath.specs.question.defaults import question_defaults
        positional = ("model", "hardware")[:len(args)]
        own_defaults = {k: v for k, v in question_defaults(question).items() if k not in kw and k not in positional}
        dep, wl, own = split(*args, **own_defaults, **kw)
        return remembered(ask(question, dep, wl, **own, **axis), question, dep, wl)
    call.__name__ = question
    call.__doc__ = (QUESTIONS[question].__doc__ or "") + "\n\n" + (public.__doc__ or "")
    return call


def remembered(answer, question: str, dep: Deployment, wl: Workload):
    """The answer, holding the question it answered (`_asked`): tokenmath.export(answer) reads it as it reads a saved
    `--json` answer's "question" echo, so the options asked reach the launch commands either way."""
    try:
        object.__setattr__(answer, "_asked", (question, dep, wl))
    except (AttributeError, TypeError):
        pass                            # an answer that keeps no attributes: exported as one saved without its echo
    return answer


def infer_api(*args, **kw):
    """tokenmath.infer(deployment, workload) or tokenmath.infer(model, hardware, **fields): see `public`."""
    return public("infer")(*args, **kw)


def hyperbola_api(*args, **kw):
    """tokenmath.hyperbola(deployment, workload, context=...) or the keyword form: see `public`."""
    return public("hyperbola")(*args, **kw)


def price_api(*args, **kw):
    """tokenmath.price(deployment, workload, margin=..., utilization=..., max_chips=...) or the keyword form: see
    `public`."""
    return public("price")(*args, **kw)


def pareto_api(*args, **kw):
    """tokenmath.pareto(deployment, workload, allow_pp=..., concurrency=[...]) or the keyword form: see `public`."""
    return public("pareto")(*args, **kw)


def fleet_api(*args, **kw):
    """tokenmath.fleet(deployment, workload, demand=..., max_chips=..., pue=...) or the keyword form: see
    `public`."""
    return public("fleet")(*args, **kw)


def plan_api(*args, **kw):
    """tokenmath.plan(deployment, workload, disaggregated=..., concurrency=[...]) or the keyword form: see
    `public`."""
    return public("plan")(*args, **kw)


def simulate_api(*args, speculation=None, **kw):
    """tokenmath.simulate(deployment, workload, requests=..., seed=..., trace=..., burstiness=..., itl_ms=...,
    prefix_cache_share=...) or the keyword form: see `public`. speculation: a speculative.Speculation (the object
    `speculative.speculation(...)` returns), read back into the Deployment's draft / spec_k / acceptance / mtp
    fields, so the one validation and the one set of defaults apply."""
    if speculation is not None and speculation.k < 1:
        speculation = None              # k = 0 drafts nothing: plain decoding (simulation/replica.make_replica)
    if speculation is not None:
        if args and isinstance(args[0], Deployment):
            raise InputError("speculation", "given beside a Deployment", "the Deployment's draft / spec_k / "
                             "acceptance / mtp fields")
        from tokenmath.analyses.serving.speculative import MTP_ACCEPTANCE_SOURCE
        sp = speculation
        default_rate = sp.mtp and sp.acceptance_source == MTP_ACCEPTANCE_SOURCE
        kw.update({"mtp": sp.k} if sp.mtp else {"draft": sp.draft, "spec_k": sp.k})
        kw["acceptance"] = None if default_rate else sp.acceptance
    return public("simulate")(*args, **kw)


def export_api(answer=None, *args, disaggregated=None, stack=None, image=None, gpus_per_node=None, **kw):
    """tokenmath.export(answer) deploys a plan, fleet or infer answer (the result, which remembers its question, or a
    saved --json answer as a dict, which echoes it) with the options its question asked;
    tokenmath.export(deployment, workload) or tokenmath.export(model, hardware, **fields) deploys infer's answer, as
    `tokenmath export` does: the engine launch commands, the Kubernetes manifest for `stack` (dynamo, llm-d), the
    `vllm bench serve` command and the figures it should print."""
    from tokenmath.analyses.benchmarks.export import export, export_answer
    opts = {"stack": stack, "image": image, "gpus_per_node": gpus_per_node}
    if hasattr(answer, "to_dict") and not isinstance(answer, Deployment):
        opts["asked"] = getattr(answer, "_asked", None)        # its typed question, as a saved answer echoes it
        answer = answer.to_dict()
    if isinstance(answer, dict):
        if args or kw:
            raise InputError("answer", "a saved answer already holds its deployment and workload, so "
                             f"{', '.join(list(kw) or ['the positional arguments'])} would be ignored",
                             "export the answer alone, or ask the question again with them")
        return export_answer(answer, disaggregated=disaggregated, **opts)
    if disaggregated is not None:
        raise InputError("disaggregated", "chooses between a plan or fleet answer's pools", "pass that answer")
    if isinstance(answer, Deployment):
        wl = args[0] if args else kw.pop("workload", None) or Workload()
        return export(answer, wl, **opts)
    from tokenmath.specs.question.defaults import question_defaults
    pos = ((answer,) if answer is not None else ()) + args
    own_defaults = {k: v for k, v in question_defaults("infer").items() if k not in kw
                    and k not in ("model", "hardware")[:len(pos)]}
    dep, wl, own = split(*pos, **own_defaults, **kw)
    if own:
        raise InputError(next(iter(own)), "is not a field of a deployment or a workload, and export takes no other",
                         "the fields tokenmath.Deployment and tokenmath.Workload declare")
    return export(dep, wl, **opts)
