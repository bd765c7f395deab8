"""`vllm serve` for one server tokenmath laid out. Every flag is one of data/engine_flags.toml's ["vllm serve"]
(vllm/engine/arg_utils.py) or ["vllm serve frontend"] (vllm/entrypoints/openai/cli_args.py); the keys of the JSON
that --speculative-config and --kv-transfer-config carry are those of ["vllm serve speculative_config"]
(vllm/config/speculative.py) and ["vllm serve kv_transfer_config"] (vllm/config/kv_transfer.py).

Mapping (the one export.py writes for infer's layout): tp -> --tensor-parallel-size; pp -> --pipeline-parallel-size;
a MoE's ep groups -> --data-parallel-size ep --enable-expert-parallel (attention data-parallel, experts over all
ep x tp ranks); dense dp replicas -> --data-parallel-size dp; max_running -> --max-num-seqs; max_batched_tokens ->
--max-num-batched-tokens (both per data-parallel rank, as vLLM counts them); kv_dtype -> --kv-cache-dtype (auto for
16-bit, fp8); weight_quant fp8 -> --quantization fp8; max_model_len -> --max-model-len; a draft model ->
--speculative-config {"model", "num_speculative_tokens"} (vLLM detects the method: draft model or EAGLE); MTP ->
{"method": "mtp", "num_speculative_tokens"}; role prefill / decode -> --kv-transfer-config {"kv_connector":
"NixlConnector", "kv_role": "kv_both"}, as vLLM's own prefill/decode test starts both sides. With expert parallelism
(ep > 1): ep_comm fp8 -> --all2all-backend deepep_low_latency, deepep -> deepep_high_throughput (DeepEP's two kernel
sets, the transports engine/expert_parallel.py prices); ep_overlap -> --enable-dbo (dual-batch overlap) where a DeepEP
backend is written, the only ones vLLM runs it on; eplb_redundant r -> --enable-eplb --eplb-config
{"num_redundant_experts": r}. adp_balance has no vLLM setting: unwritten.py names it.
"""
from __future__ import annotations

import shlex

from tokenmath.analyses.benchmarks.launch_base import HEAD, Command, ServerSpec, draft_tokens, shared_notes
from tokenmath.base.errors import InputError

SERVE, FRONT = "vllm serve", "vllm serve frontend"
SPEC, KVX = "vllm serve speculative_config", "vllm serve kv_transfer_config"
EPLB = "vllm serve eplb_config"
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
# tokenmath's --ep-comm names -> vLLM's all2all backends: fp8 dispatch + bf16 combine is DeepEP's low-latency kernels,
# one copy per remote domain its normal (high-throughput) ones; bf16 is vLLM's default (allgather_reducescatter)
ALL2ALL = {"fp8": "deepep_low_latency", "deepep": "deepep_high_throughput"}


def command(spec: ServerSpec) -> Command:
    cmd = Command(head=["vllm", "serve", spec.model])
    cmd.use(SERVE)
    cmd.flag(SERVE, "--tensor-parallel-size", spec.tp)
    if spec.pp > 1:
        cmd.flag(SERVE, "--pipeline-parallel-size", spec.pp)
    if spec.ep > 1:
        cmd.flag(SERVE, "--data-parallel-size", spec.ep)
        cmd.flag(SERVE, "--enable-expert-parallel")
        _expert_parallel(spec, cmd)
    elif spec.dp > 1:
        cmd.flag(SERVE, "--data-parallel-size", spec.dp)
    if spec.experts_whole and spec.ep == 1:
        # without data parallelism vLLM's expert parallelism spreads whole experts over the TP ranks
        cmd.flag(SERVE, "--enable-expert-parallel")
        cmd.honour("experts_whole")
    shared_notes(spec, cmd)
    if spec.max_running is not None:
        cmd.flag(SERVE, "--max-num-seqs", spec.max_running)
    if spec.max_batched_tokens is not None:
        cmd.flag(SERVE, "--max-num-batched-tokens", spec.max_batched_tokens)
    cmd.flag(SERVE, "--kv-cache-dtype", KV_DTYPE[spec.kv_dtype])
    if spec.weight_quant == "fp8":
        cmd.flag(SERVE, "--quantization", "fp8")
    cmd.flag(SERVE, "--max-model-len", spec.max_model_len)
    if spec.draft_model is not None:
        cfg = {"model": spec.draft_model, "num_speculative_tokens": draft_tokens(spec, cmd)}
        cmd.flag(SERVE, "--speculative-config", cmd.json_value(SPEC, cfg))
    elif spec.mtp_tokens is not None:
        cfg = {"method": "mtp", "num_speculative_tokens": spec.mtp_tokens}
        cmd.flag(SERVE, "--speculative-config", cmd.json_value(SPEC, cfg))
    if spec.role != "both":
        cfg = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        cmd.flag(SERVE, "--kv-transfer-config", cmd.json_value(KVX, cfg))
        cmd.notes.append(f"a {spec.role} server of a disaggregated pair: a router that sends each request to a "
                         "prefill server and then a decode server (NVIDIA Dynamo, llm-d, or vLLM's "
                         "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py) is not written; servers "
                         "sharing a host need distinct VLLM_NIXL_SIDE_CHANNEL_PORT values")
    if spec.nodes > 1:
        _nodes(spec, cmd)
    cmd.flag(FRONT, "--port", spec.port, frontend=True)
    return cmd


def _expert_parallel(spec: ServerSpec, cmd: Command) -> None:
    """The all-to-all, its overlap and EPLB, as the answer priced them (what has no flag here: unwritten.py)."""
    if spec.ep_comm in ALL2ALL:
        cmd.flag(SERVE, "--all2all-backend", ALL2ALL[spec.ep_comm])
        cmd.honour("ep_comm")
        if spec.ep_overlap:
            # vllm/config/vllm.py accepts dual-batch overlap only on a DeepEP backend (data/engine_flags.toml)
            cmd.flag(SERVE, "--enable-dbo")
            cmd.honour("ep_overlap")
    if spec.eplb_redundant is not None:
        cmd.flag(SERVE, "--enable-eplb")
        cmd.flag(SERVE, "--eplb-config", cmd.json_value(EPLB, {"num_redundant_experts": spec.eplb_redundant}))
        cmd.honour("eplb_redundant")


def _nodes(spec: ServerSpec, cmd: Command) -> None:
    """A server over several nodes: vLLM's multi-node data-parallel launch when it runs data-parallel ranks (each
    node starts its share of them), else Ray for tensor / pipeline parallelism across nodes."""
    ranks = spec.replicas
    if ranks > 1:
        if ranks % spec.nodes:
            raise InputError("nodes", f"{ranks} data-parallel ranks do not split evenly over {spec.nodes} nodes",
                             f"a node count that divides {ranks}")
        local = ranks // spec.nodes
        cmd.flag(SERVE, "--data-parallel-size-local", local)
        cmd.flag(SERVE, "--data-parallel-address", HEAD)
        worker = Command(head=list(cmd.head), engine=list(cmd.engine))
        worker.flag(SERVE, "--data-parallel-start-rank", local)
        worker.flag(FRONT, "--headless", frontend=True)
        cmd.use(FRONT)
        cmd.notes.append(f"one server over {spec.nodes} nodes, {local} data-parallel ranks on each: run the command on "
                         f"the first node, with {HEAD} its address; on each other node k (1 to {spec.nodes - 1}) run "
                         f"`{shlex.join(worker.argv())}` with --data-parallel-start-rank {local} x k")
    else:
        cmd.flag(SERVE, "--distributed-executor-backend", "ray")
        cmd.notes.append(f"one server over {spec.nodes} nodes by tensor / pipeline parallelism: start a Ray cluster "
                         "on them first (`ray start --head` on the first node, `ray start --address` on the others), "
                         "then run the command on the first node")
