"""From tokenmath's answer to what runs it: the `vllm serve` command for infer's layout, the `vllm bench serve` command
that measures it, and the numbers tokenmath expects that benchmark to print, so the user can check the prediction
(and feed the result file back to `tokenmath calibrate`).

Every flag written is one of data/engine_flags.toml's, each read off the engine's own argument parser at a pinned
commit (vllm-project/vllm @ 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b vllm/engine/arg_utils.py for `vllm serve`;
@ def9ce85ba1079af970a58ed3d42dd861ae35d58 vllm/benchmarks/serve.py for `vllm bench serve`).

Layout mapping (tokenmath -> vLLM): tp -> --tensor-parallel-size; pp -> --pipeline-parallel-size; a MoE's ep groups
(attention data-parallel, experts sharded over all ep x tp ranks) -> --data-parallel-size ep
--enable-expert-parallel; dp independent replicas of a dense model -> --data-parallel-size dp (vLLM balances requests
over them); with both ep and dp, dp copies of the ep server behind a load balancer.
"""
from __future__ import annotations

import json
import math
import re
import shlex

from tokenmath.base.errors import InputError

ENGINES = ("vllm",)
_HF = re.compile(r"huggingface\.co/([\w.-]+/[\w.-]+)")
_AIC = re.compile(r"model_configs/([\w.-]+?)--([\w.-]+?)_config\.json")    # aiconfigurator's org--name copies
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
WEIGHT_QUANT = {"fp8": "fp8"}          # an fp8 deployment of a 16-bit checkpoint: vLLM quantizes at load


def flags_of(tool: str) -> dict:
    from tokenmath.specs.catalog import shipped
    return shipped("engine_flags.toml")[tool]


def hf_id(model) -> str | None:
    """The Hugging Face repository a catalog model's source names (None: it names none)."""
    src = getattr(model, "source", "") or ""
    m = _HF.search(src)
    if m:
        return m.group(1)
    m = _AIC.search(src)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def _cmd(head: list[str], args: list[tuple[str, object]], tool: str) -> list[str]:
    known = set(flags_of(tool)["flags"])
    out = list(head)
    for flag, value in args:
        if flag not in known:
            raise AssertionError(f"{flag} is not in data/engine_flags.toml [{tool}]")
        out.append(flag)
        if value is not None:
            out.append(str(value))
    return out


def export(dep, wl, engine: str = "vllm") -> dict:
    """The launch and benchmark commands for infer's answer to (dep, wl), with the figures it expects."""
    from dataclasses import replace

    from tokenmath.analyses.ask import infer
    if engine not in ENGINES:
        raise InputError("engine", f"export writes {', '.join(ENGINES)} commands, not {engine!r}",
                         ", ".join(ENGINES) + " (SGLang and TensorRT-LLM launch commands are not written yet)")
    notes = []
    if wl.concurrency is None and wl.arrival_rate is None:
        n = wl.batch if isinstance(wl.batch, int) else 1
        wl = replace(wl, concurrency=n, batch=None)
        notes.append(f"benchmarked as a closed loop of {n} users (the static batch's size)")
    r = infer(dep, wl)
    if not r.fits:
        raise InputError("batch", "this deployment does not fit: nothing to export", "; ".join(r.advice[:1]) or
                         "more chips or a smaller batch")
    if dep.draft is None and dep.mtp is not None:
        raise InputError("mtp", "MTP speculation is not exported yet", "leave --mtp out, or use --draft")
    model = r.model
    name = hf_id(model)
    if name is None:
        name = getattr(model, "id", str(dep.model))
        notes.append(f"{name} names no Hugging Face repository in the catalog: replace it with your checkpoint")
    lay = r.layout
    tp, pp, ep, dp = int(lay.tp), int(lay.pp), int(lay.ep), int(lay.dp)
    args: list[tuple[str, object]] = [("--tensor-parallel-size", tp)]
    if pp > 1:
        args.append(("--pipeline-parallel-size", pp))
    if ep > 1:
        args += [("--data-parallel-size", ep), ("--enable-expert-parallel", None)]
        if dp > 1:
            notes.append(f"run {dp} copies of this server (one per {tp * pp * ep} chips) behind a load balancer")
    elif dp > 1:
        args.append(("--data-parallel-size", dp))
    dom = int(getattr(r.hardware, "scaleup_domain", 0) or 0)
    server_chips = tp * pp * (ep if ep > 1 else dp)
    if dom and server_chips > dom:
        notes.append(f"one server spans {math.ceil(server_chips / dom)} nodes of {dom} chips: start it on each node "
                     "with --data-parallel-size-local, --data-parallel-start-rank and --data-parallel-address "
                     "(vLLM's multi-node data-parallel launch), or with Ray")
    eng = r.engine
    if eng is None or eng.id != engine:
        raise InputError("engine", f"the answer assumed {getattr(eng, 'id', 'no engine')}, and export writes "
                         f"{engine} commands", f"--engine {engine}")
    # what tokenmath assumed the engine runs with, written out so the server runs the same: vLLM's defaults for this
    # chip's memory (specs/serving_engines.py limits_for), or the user's --max-running
    max_running, max_tokens = eng.limits_for(r.hardware.memory_bytes)
    max_running = dep.max_running or r.running_cap or max_running
    if max_running:
        args.append(("--max-num-seqs", int(max_running)))
    if max_tokens:
        args.append(("--max-num-batched-tokens", int(max_tokens)))
    kv = r.precision.kv.name
    args.append(("--kv-cache-dtype", KV_DTYPE.get(kv, kv)))
    wq = r.precision.weight.name
    if dep.weight_dtype is not None and wq in WEIGHT_QUANT:
        args.append(("--quantization", WEIGHT_QUANT[wq]))
    elif dep.weight_dtype is not None and wq not in ("bf16", "fp16"):
        notes.append(f"{wq} weights: serve a checkpoint already quantized to {wq} (vLLM reads its quantization)")
    ctx = int(r.input_len) + int(r.output_len)
    args.append(("--max-model-len", 1 << math.ceil(math.log2(max(ctx, 256)))))
    if dep.draft is not None:
        from tokenmath.specs.model_catalog import get_model
        draft = get_model(dep.draft)
        spec = {"model": hf_id(draft) or getattr(draft, "id", dep.draft), "num_speculative_tokens": dep.spec_k or 4}
        args.append(("--speculative-config", json.dumps(spec, separators=(",", ":"))))
    serve = _cmd(["vllm", "serve", name], args, "vllm serve")
    ld = r.load
    bench_args: list[tuple[str, object]] = [("--model", name), ("--dataset-name", "random"),
                                            ("--input-len", int(r.input_len)), ("--output-len", int(r.output_len))]
    if ld.arrival_rate is not None:
        n = max(200, int(math.ceil(float(ld.arrival_rate) * 120)))
        bench_args += [("--request-rate", f"{float(ld.arrival_rate):g}"), ("--num-prompts", n)]
    else:
        c = int(ld.concurrency)
        bench_args += [("--max-concurrency", c), ("--num-prompts", max(10 * c, 100))]
    bench_args += [("--ignore-eos", None), ("--percentile-metrics", "ttft,tpot,itl,e2el"),
                   ("--save-result", None), ("--result-filename", "tokenmath-check.json")]
    bench = _cmd(["vllm", "bench", "serve"], bench_args, "vllm bench serve")
    expected = {"output_tokens_per_s": float(ld.output_tokens_per_s), "mean_ttft_s": float(ld.ttft_s),
                "mean_tpot_s": float(ld.tpot_s), "requests_in_flight": float(ld.running)}
    hw = getattr(r.hardware, "id", str(dep.hardware))
    check = ["tokenmath", "calibrate", "tokenmath-check.json", "--hardware", hw, "--chips", str(int(r.chips)),
             "--tp", str(tp), "--pp", str(pp), "--ep", str(ep), "--dp", str(dp)]
    return {"engine": engine, "serve": serve, "serve_line": shlex.join(serve), "bench": bench,
            "bench_line": shlex.join(bench), "expected": expected, "calibrate_line": shlex.join(check),
            "sources": {t: {k: flags_of(t)[k] for k in ("repo", "commit", "path")}
                        for t in ("vllm serve", "vllm bench serve")},
            "layout": {"chips": int(r.chips), "tp": tp, "pp": pp, "ep": ep, "dp": dp},
            "notes": notes, "infer": r.to_dict()}
