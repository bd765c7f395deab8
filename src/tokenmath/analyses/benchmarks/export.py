"""From tokenmath's answer to what runs it: the engine launch command of each server pool (vLLM, SGLang or
TensorRT-LLM, as the answer assumed), a Kubernetes manifest for the NVIDIA Dynamo or llm-d stack when asked, the
`vllm bench serve` command that measures the deployment and the numbers tokenmath expects it to print, so the user
can check the prediction (and feed the result file back to `tokenmath calibrate`).

Two ways in, one way out (a Deployed: answer_pools.py):
- export(dep, wl): infer's answer to a question (one layout under one load);
- export_answer(answer): a saved answer, read from its JSON: a `plan` or `fleet` answer, so the deployment is exactly
  the one the user saw (its continuously batched servers, or its prefill and decode pools), or an `infer` answer,
  whose question is asked of export(dep, wl) again.
Both ways take the deployment's options from one typed Deployment, through one mapping (options_of): the question
asked, or the one a saved answer's "question" echo records (answer_echo.py).
Every flag written is one of data/engine_flags.toml's, each list read off the engine's own parser at a pinned commit
(launch_commands.py); every manifest is validated against its published schema before it is returned
(k8s_manifests.py). Every option of the question that shaped the expected figures is written into the command or
named in the notes with what it changed and why it is not written (unwritten.py), never dropped.
"""
from __future__ import annotations

import math
import shlex
from dataclasses import replace

from tokenmath.analyses.benchmarks import bench_command as bc
from tokenmath.analyses.benchmarks.answer_pools import ENGINE_IDS, Deployed, PoolPlan, pools_of
from tokenmath.base.errors import InputError

STACKS = ("dynamo", "llm-d")
SCHEMA_OF = {"dynamo": "dynamographdeployment", "llm-d": "llm-d-modelservice"}     # data/schemas/SOURCES.toml


def hf_id(model) -> str | None:
    """The Hugging Face repository a catalog model's source names (None: it names none)."""
    import re
    src = getattr(model, "source", "") or ""
    m = re.search(r"huggingface\.co/([\w.-]+/[\w.-]+)", src)
    if m:
        return m.group(1)
    m = re.search(r"model_configs/([\w.-]+?)--([\w.-]+?)_config\.json", src)     # aiconfigurator's org--name copies
    return f"{m.group(1)}/{m.group(2)}" if m else None


def export(dep, wl, engine: str | None = None, *, stack: str | None = None, image: str | None = None,
           gpus_per_node: int | None = None) -> dict:
    """The commands (and manifest) for infer's answer to (dep, wl), with the figures its benchmark should print."""
    from tokenmath.analyses.ask import infer
    notes = []
    if wl.concurrency is None and wl.arrival_rate is None:
        n = wl.batch if isinstance(wl.batch, int) else 1
        wl = replace(wl, concurrency=n, batch=None)
        notes.append(f"benchmarked as a closed loop of {n} users (the static batch's size)")
    r = infer(dep, wl)
    if not r.fits:
        raise InputError("batch", "this deployment does not fit: nothing to export", "; ".join(r.advice[:1]) or
                         "more chips or a smaller batch")
    eng = r.engine
    eid = ENGINE_IDS.get(getattr(eng, "id", None) or "")
    if eid is None:
        raise InputError("engine", f"the answer assumed {getattr(eng, 'id', 'no serving engine')}, and export writes "
                         "launch commands for vllm, sglang and tensorrt-llm", "--engine vllm, sglang or tensorrt-llm")
    if engine is not None and ENGINE_IDS.get(engine, engine) != eid:
        raise InputError("engine", f"the answer assumed {eng.id}, not {engine}", f"--engine {engine} on the question")
    lay = r.layout
    tp, pp, ep, dp = int(lay.tp), int(lay.pp), int(lay.ep), int(lay.dp)
    ld = r.load
    attn = _attn_name(lay)
    pool = PoolPlan("both", tp, pp, ep, dp, None, attn)     # each scheduler's cap: options_of, else the engine's
    if ld.arrival_rate is not None:
        load = {"arrival_rate": float(ld.arrival_rate) / dp}
    else:
        load = {"concurrency": max(1, math.ceil(int(ld.concurrency) / dp))}
    d = Deployed(question="infer", model=r.model.id, hardware=getattr(r.hardware, "id", str(dep.hardware)),
                 engine=eid, weight_dtype=r.precision.weight.name if dep.weight_dtype is not None else None,
                 kv_dtype=r.precision.kv.name, input_len=int(r.input_len), output_len=int(r.output_len),
                 pools=(pool,), unit="one server",
                 expected={**load, "output_tokens_per_s": float(ld.output_tokens_per_s) / dp,
                           "ttft_s": float(ld.ttft_s), "tpot_s": float(ld.tpot_s), "in_flight": float(ld.running) / dp},
                 notes=tuple(notes))
    opts = options_of(dep)
    if opts["cap"] is None and r.running_cap is not None:
        opts["cap"] = int(r.running_cap)           # the engine's own cap per scheduler, as infer ran it
    out = write(d, stack=stack, image=image, gpus_per_node=gpus_per_node, options=opts, asked=(dep, wl, r))
    out["infer"] = r.to_dict()
    return out


def options_of(dep) -> dict:
    """What a launch command takes from a Deployment beyond its layout and dtypes: the one mapping from the
    question's fields, for infer's options and a saved answer's question echo alike. draft: (Hugging Face id,
    tokens per step) of a draft model; mtp: MTP depth; cap: sequences one scheduler (attention-DP rank) runs at once
    (--max-running; None: the answer's users, else the engine's default); server: the expert-parallel settings the
    figures assumed, for the engine modules to write where they can (eplb: EPLB's redundant experts)."""
    draft = None
    if dep.draft is not None:
        from tokenmath.specs.model_catalog import get_model
        dm = get_model(dep.draft)
        draft = (hf_id(dm) or getattr(dm, "id", dep.draft), dep.spec_k or 4)
    return {"draft": draft, "mtp": dep.mtp if dep.draft is None else None, "cap": dep.max_running,
            "server": {"ep_comm": dep.ep_comm, "ep_overlap": bool(dep.ep_overlap),
                       "adp_balance": bool(dep.adp_balance), "eplb": dep.ep_imbalance == "eplb",
                       "experts_whole": dep.moe_sharding == "ep"}}


NOT_RECORDED = ("the answer was saved without its question (before tokenmath's --json answers carried it), so its "
                "deployment options (--moe-sharding, --ep-comm, --overlap-ep, --ep-imbalance eplb, --adp-balance, "
                "--max-running, --draft / --mtp) were not recorded: the commands carry none of them; save the answer again to export "
                "them")


def export_answer(answer: dict, *, disaggregated: bool | None = None, stack: str | None = None,
                  image: str | None = None, gpus_per_node: int | None = None, asked=None) -> dict:
    """The commands (and manifest) for a saved plan, fleet or infer answer (its JSON as a dict), with the options
    its question echo records written as `export` writes them. asked: the (question, Deployment, Workload) a Python
    result answered, which stands for the echo its to_dict() lacks."""
    from tokenmath.analyses.benchmarks.answer_echo import asked_of, check_agrees, question_of
    from tokenmath.analyses.benchmarks.answer_pools import question_kind
    opts = {"stack": stack, "image": image, "gpus_per_node": gpus_per_node}
    if not isinstance(answer, dict):
        return write(pools_of(answer, disaggregated), **opts)           # refused there, naming what it is
    named = question_of(answer)
    if asked is not None and "question" not in answer:
        named, asked = named or asked[0], tuple(asked[1:])
    else:
        asked = asked_of(answer)
    kind = question_kind(answer)
    if named is not None and kind is not None and named != kind:
        raise InputError("schema", f"{answer['schema']} names a {named} answer, and its keys are a {kind} answer's",
                         f"the id tokenmath wrote: tokenmath.{kind}/...")
    if (named or kind) == "infer":
        return _export_infer(answer, asked, disaggregated, opts)
    d = pools_of(answer, disaggregated, speculation_recorded=asked is not None)
    if asked is None:
        return write(replace(d, notes=d.notes + (NOT_RECORDED,)), **opts)
    dep, wl = asked
    check_agrees(answer, dep, d, ENGINE_IDS)
    # the checkpoint is quantized at load only when the question asked for a weight dtype, as export() writes it
    d = replace(d, weight_dtype=d.weight_dtype if dep.weight_dtype is not None else None)
    return write(d, **opts, options=options_of(dep), asked=(dep, wl, None))


def _export_infer(answer: dict, asked, disaggregated, opts: dict) -> dict:
    """A saved infer answer: its question, read from its echo, asked of export again; a note where today's answer
    is not the one saved (another tokenmath version, calibration or catalog)."""
    if asked is None:
        raise InputError("question", "is missing: an infer answer saved without its question cannot be exported",
                         "save it again with this tokenmath, or give `tokenmath export` infer's options")
    if disaggregated is not None:
        raise InputError("disaggregated", "chooses between a plan or fleet answer's pools, and this is an infer "
                         "answer (one layout)", "leave it out")
    out = export(*asked, **opts)
    now, then = out["infer"], answer
    if asked[1].concurrency is None and asked[1].arrival_rate is None:
        from tokenmath.analyses.ask import infer                 # a static batch, benchmarked as a closed loop
        now = infer(*asked).to_dict()
    moved = [f"{k} {now.get(k)} (saved: {str(then.get(k))[:20]})" for k in ("tp", "pp", "ep", "dp", "fits")
             if now.get(k) != then.get(k)]
    if not _close(_load_tps(now), _load_tps(then)):
        moved.append(f"{_load_tps(now) or 0:,.0f} output tok/s (saved: {_load_tps(then) or 0:,.0f})")
    if moved:
        out["notes"].append("the saved infer answer is not the one this tokenmath gives for its question (another "
                            "version, calibration or catalog, or an edited file): the commands and figures above are "
                            "today's: " + ", ".join(moved))
    return out


def _load_tps(a: dict) -> float | None:
    ld = a.get("load")
    v = ld.get("output_tokens_per_s") if isinstance(ld, dict) else a.get("output_tokens_per_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 5e-4 * max(abs(a), abs(b), 1e-12)


def _attn_name(lay) -> str:
    from tokenmath.mapping.layout import attention_name
    return attention_name(lay)


def _node_chips(hardware: str, gpus_per_node: int | None) -> int:
    """GPUs in one Kubernetes node: the user's, else the catalog system's node or scale-up domain when it is a
    server of at most 8 (a rack-scale domain such as NVL72 is many nodes, whose size the catalog does not hold)."""
    if gpus_per_node is not None:
        return int(gpus_per_node)
    from tokenmath.specs.systems import get_system
    s = get_system(hardware)
    for n in (s.node_chips, s.scaleup_domain):
        if n and n <= 8:
            return int(n)
    raise InputError("gpus_per_node", f"{s.id}'s scale-up domain of {s.scaleup_domain} chips spans several "
                     "Kubernetes nodes, whose size the catalog does not hold", "--gpus-per-node N (GPUs per node)")


def _weight_quant(d: Deployed, model, notes: list[str]) -> str | None:
    native = getattr(model, "native_dtype", "bf16")
    if d.weight_dtype is None or d.weight_dtype == native:
        return None
    if d.weight_dtype == "fp8" and native in ("bf16", "fp16"):
        return "fp8"
    notes.append(f"{d.weight_dtype} weights: serve a checkpoint already quantized to {d.weight_dtype} (the engine "
                 "reads its quantization)")
    return None


def _redundant(experts: int, ranks: int) -> int:
    """EPLB's redundant experts: one per expert-parallel rank, as the EPLB figure's source ran (TensorRT-LLM tech blog
    4, Table 1: 9 slots a rank for DeepSeek-R1's 256 experts at EP32; engine/expert_parallel.EPLB_RANK_CV), raised
    until the experts and their copies split evenly over the ranks."""
    return ranks + (-(experts + ranks)) % ranks


def _spec_of(d: Deployed, p: PoolPlan, named, limits, weight_quant, options: dict, nodes: int, notes: list[str]):
    """The ServerSpec of pool `p`; named: (the name the command gives the model, its catalog Model); options: the
    deployment's (options_of)."""
    from tokenmath.analyses.benchmarks.launch_base import ServerSpec
    model_name, model = named
    tp, ep = p.tp, p.ep
    if p.attention == "dp" and tp > 1:
        if ep == 1:
            raise InputError("attention_sharding", "data-parallel attention inside a tensor-parallel group of a dense "
                             "model has no launch flag in the engines export writes", "ask with --attention-sharding "
                             "heads")
        who = "the servers" if p.role == "both" else f"the {p.role} servers"
        notes.append(f"--attention-sharding dp: {who} run attention data-parallel over all {tp * ep} ranks "
                     f"(the engines' DP attention, tp 1 x ep {tp * ep}); tokenmath split the dense layers {tp} ways, "
                     "the engines replicate them")
        tp, ep = 1, tp * ep
    opts = dict(options.get("server") or {})
    draft, mtp = options.get("draft"), options.get("mtp")
    experts = int(getattr(model, "n_experts", 0) or 0)
    eplb = opts.pop("eplb", False) and experts > 0 and ep > 1      # EPLB places experts over expert-parallel ranks
    # whole experts over the TP ranks is a setting of its own only without attention DP (with it, every engine
    # spreads whole experts over all tp x ep ranks)
    opts["experts_whole"] = bool(opts.get("experts_whole")) and experts > 0 and ep == 1 and tp > 1
    max_running, max_tokens = (int(v) if v else None for v in limits)     # 0: the engine sets no cap
    if options.get("cap"):
        # --max-running caps one scheduler, one attention-DP rank, as the engines count --max-num-seqs
        # (launch_base.ServerSpec) and infer counts it (its running_cap is per attention group)
        max_running = int(options["cap"])
    elif p.max_running:
        # the answer's sequences per server, spread over its data-parallel (attention) ranks
        max_running = max(1, math.ceil(p.max_running / ep))
    ctx = d.input_len + d.output_len
    return ServerSpec(model=model_name, tp=tp, pp=p.pp, ep=ep, dp=1, max_running=max_running,
                      max_batched_tokens=max_tokens, kv_dtype=d.kv_dtype, weight_quant=weight_quant,
                      max_model_len=1 << math.ceil(math.log2(max(ctx, 256))),
                      draft_model=None if draft is None else draft[0], spec_tokens=None if draft is None else draft[1],
                      mtp_tokens=mtp, role=p.role, nodes=nodes,
                      eplb_redundant=_redundant(experts, tp * ep) if eplb else None, **opts)


def _weight_bytes(model, d: Deployed) -> float:
    """The checkpoint's bytes as served (engine/memory.weight_bytes_total at the deployment's weight formats)."""
    from tokenmath.analyses.setup import resolve_precision
    from tokenmath.engine.memory import weight_bytes_total
    prec = resolve_precision(model, d.weight_dtype, d.kv_dtype)
    return float(weight_bytes_total(model, prec.weight.bytes, prec.expert.bytes))


def write(d: Deployed, *, stack: str | None = None, image: str | None = None, gpus_per_node: int | None = None,
          options: dict | None = None, asked=None) -> dict:
    """Every command and file of deployment `d`. options: the deployment's (options_of: draft, MTP, the running cap
    per scheduler, the expert-parallel settings the figures assumed); asked: (deployment, workload, infer's answer
    or None for a saved plan or fleet answer), whose options the command does not carry are named."""
    from tokenmath.analyses.benchmarks.launch_commands import launch
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.serving_engines import resolve_engine
    from tokenmath.specs.systems import get_system
    if stack is not None and stack not in STACKS:
        import difflib
        close = difflib.get_close_matches(str(stack), STACKS, 1)
        raise InputError("stack", f"{stack!r} is not a serving stack export writes",
                         (f"did you mean {close[0]}? " if close else "") + " or ".join(STACKS))
    notes = list(d.notes)
    model = get_model(d.model)
    name = hf_id(model)
    if name is None:
        name = d.model
        notes.append(f"{name} names no Hugging Face repository in the catalog: replace it with your checkpoint")
    hw = get_system(d.hardware)
    node = _node_chips(d.hardware, gpus_per_node) if (stack or any(p.chips_per_server > 8 for p in d.pools)) \
        else int(hw.scaleup_domain or 8)
    eng = resolve_engine({"trtllm": "tensorrt-llm"}.get(d.engine, d.engine))
    limits = eng.limits_for(hw.memory_bytes)
    wq = _weight_quant(d, model, notes)
    pools, srcs = [], {}
    options = options or {}
    for p in d.pools:
        nodes = max(1, math.ceil(p.chips_per_server / node))
        spec = _spec_of(d, p, (name, model), limits, wq, options, nodes, notes)
        lc = launch(d.engine, spec, name_unwritten=asked is None)
        srcs.update(lc.sources)
        notes += [n for n in lc.notes if n not in notes]
        if asked is not None:           # the question's options the command lacks, with what each changed
            from tokenmath.analyses.benchmarks.unwritten import Shown, export_notes
            dep, wl, r = asked
            shown = Shown(d.question, p.tp, bool(getattr(model, "is_moe", False)), float(d.expected["ttft_s"]),
                          float(d.expected["tpot_s"]), None if r is None else r.cost_per_mtok_output_usd, r)
            notes += [n for n in export_notes(dep, wl, shown, d.engine, spec, lc.unwritten) if n not in notes]
        running = spec.max_running * spec.replicas if options.get("cap") and spec.max_running else p.max_running
        pools.append({"role": p.role, "replicas": p.replicas, "chips_per_server": p.chips_per_server,
                      "nodes_per_server": nodes, "tp": p.tp, "pp": p.pp, "ep": p.ep, "attention_sharding": p.attention,
                      "max_running": running, "max_running_per_rank": spec.max_running,
                      "ranks": spec.replicas, "serve": lc.argv, "serve_line": shlex.join(lc.argv),
                      "files": dict(lc.files), "_spec": spec})
    x = d.expected
    in_flight = x.get("in_flight", x.get("concurrency", 0))
    bench = bc.bench(name, d.input_len, d.output_len, concurrency=x.get("concurrency"),
                     arrival_rate=x.get("arrival_rate"))
    first = d.pools[0]
    if len(d.pools) == 1 and first.replicas > 1:
        notes.append(f"run {first.replicas} servers of {first.chips_per_server} chips behind a load balancer; the "
                     "benchmark measures one")
    out = {"question": d.question, "engine": d.engine, "model": d.model, "hardware": d.hardware,
           "disaggregated": d.disaggregated, "chips": d.chips,
           "serve": pools[0]["serve"], "serve_line": pools[0]["serve_line"],
           "bench": bench, "bench_line": shlex.join(bench), "benchmarked_unit": d.unit,
           "expected": bc.expected(x["output_tokens_per_s"], x["ttft_s"], x["tpot_s"], in_flight),
           "calibrate_line": (None if d.disaggregated else
                              bc.calibrate_line(d.hardware, first.chips_per_server, first.tp, first.pp, first.ep, 1,
                                                d.engine)),
           "sources": {**srcs, **bc.sources("vllm bench serve")},
           "layout": {"chips": first.chips_per_server, "tp": first.tp, "pp": first.pp, "ep": first.ep,
                      "dp": first.replicas},
           "pools": [{k: v for k, v in q.items() if k != "_spec"} for q in pools],
           "manifest": None, "notes": notes}
    if d.disaggregated:
        notes.append("tokenmath calibrate fits a colocated server; a disaggregated deployment's result is checked "
                     "against the expected figures only")
    if stack is not None:
        out["manifest"] = _manifest(stack, d, name, pools, image, node, _weight_bytes(model, d))
        if d.disaggregated:     # the stack's frontend is the router the bare commands lack
            notes[:] = [n for n in notes if not ("router" in n and "is not written" in n)]
            notes.append(f"the {stack} frontend routes each request to a prefill and then a decode worker")
        notes.append(f"benchmark the {stack} frontend's service (e.g. kubectl port-forward to it on port 8000, or "
                     "add --base-url http://SERVICE:8000 to the benchmark)")
    return out


def _manifest(stack: str, d: Deployed, name: str, pools: list[dict], image: str | None, node: int,
              model_bytes: float) -> dict:
    from tokenmath.analyses.benchmarks import k8s_manifests as k8s
    from tokenmath.analyses.benchmarks.launch_commands import engine_args
    kp = [k8s.Pool(role=q["role"], replicas=q["replicas"], chips_per_replica=q["chips_per_server"],
                   nodes_per_replica=q["nodes_per_server"], engine_args=engine_args(d.engine, q["_spec"]))
          for q in pools]
    base = f"{d.model}-{d.engine}".replace(".", "-").lower()[:40].strip("-")
    if stack == "dynamo":
        if d.engine == "trtllm":
            # dynamo.trtllm takes flags of its own (--tensor-parallel-size, --expert-parallel-size, ...), not
            # trtllm-serve's, and no pinned table maps one onto the other yet
            raise InputError("stack", "Dynamo's TensorRT-LLM worker takes its own flags, not trtllm-serve's, and "
                             "export does not map them yet", "ask with --engine vllm or sglang for Dynamo")
        doc, schema = k8s.dynamo_graph_deployment(base, name, d.engine, kp, image=image), "dynamo"
    else:
        if d.engine != "vllm":
            raise InputError("stack", f"llm-d's modelservice chart runs vLLM, and the answer assumed {d.engine}",
                             "ask with --engine vllm for llm-d, or use --stack dynamo")
        # the model volume holds the weights (an emptyDir they download into), sized to them with a GiB to spare
        gib = math.ceil(model_bytes / 2 ** 30) + 1
        doc, schema = k8s.llmd_modelservice_values(base, name, kp, image=image, model_gib=gib), "llm-d"
    k8s.validate(doc, SCHEMA_OF[schema])
    return {"stack": stack, "schema": SCHEMA_OF[schema], "schema_source": k8s.sources()[SCHEMA_OF[schema]],
            "document": doc, "yaml": k8s.to_yaml(doc), "gpus_per_node": node}
