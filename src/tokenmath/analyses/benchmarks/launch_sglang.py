"""`python -m sglang.launch_server` for one server tokenmath laid out. Every flag is one of data/engine_flags.toml's
["sglang launch_server"] (python/sglang/srt/server_args.py, whose ServerArgs fields name the flags).

Mapping: tp -> --tp-size; pp -> --pp-size; a MoE's ep groups -> DP attention: --tp-size ep x tp (every rank of the
server) --dp-size ep --enable-dp-attention (attention tensor-parallel over tp ranks inside each of the ep groups)
--ep-size ep x tp (experts over every rank); dense dp replicas -> --dp-size dp; max_running ->
--max-running-requests; max_batched_tokens -> --chunked-prefill-size (both written server-wide: SGLang divides them
by --dp-size under DP attention); kv_dtype fp8 -> --kv-cache-dtype fp8_e4m3 (auto for 16-bit); weight_quant fp8 ->
--quantization fp8; max_model_len -> --context-length; MTP -> --speculative-algorithm NEXTN with
--speculative-num-steps n --speculative-eagle-topk 1 --speculative-num-draft-tokens n + 1; a draft model -> EAGLE3 /
EAGLE when its name says so, else STANDALONE, with --speculative-draft-model-path; role prefill / decode ->
--disaggregation-mode with --disaggregation-transfer-backend nixl; nodes > 1 -> --nnodes, --node-rank,
--dist-init-addr. Under DP attention (ep > 1): ep_comm fp8 or deepep -> --moe-a2a-backend deepep (SGLang picks DeepEP's
kernels per batch, a note says how that differs from the one transport priced); ep_overlap ->
--enable-two-batch-overlap (SGLang runs it on a DeepEP all-to-all, or on its default MoE path beside
--enable-dp-attention); eplb_redundant r -> --enable-eplb --ep-num-redundant-experts r. adp_balance has no SGLang
setting: unwritten.py names it.
"""
from __future__ import annotations

from tokenmath.analyses.benchmarks.launch_base import HEAD, Command, ServerSpec, draft_tokens, shared_notes
from tokenmath.base.errors import InputError

TOOL = "sglang launch_server"
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3"}
INIT_PORT = 20000                # the port of the first node that --dist-init-addr names: any free one will do
# what the transport tokenmath priced does on every step, against SGLang's --deepep-mode auto (its default: normal
# kernels for batches that carry prompts, low-latency ones for decode-only batches)
PRICED = {"fp8": "DeepEP's low-latency transport (FP8 dispatch, bf16 combine)",
          "deepep": "DeepEP's normal transport (FP8 dispatch, one copy per remote domain)"}


def _algorithm(draft: str) -> str:
    name = draft.lower()
    return "EAGLE3" if "eagle3" in name else "EAGLE" if "eagle" in name else "STANDALONE"


def command(spec: ServerSpec) -> Command:
    if spec.pp > 1 and spec.ep > 1:
        raise InputError("pp", "tokenmath writes no SGLang command for pipeline parallelism together with DP attention "
                         "(ep > 1)", "pp 1 with ep, or pp with ep 1")
    cmd = Command(head=["python", "-m", "sglang.launch_server"])
    cmd.flag(TOOL, "--model-path", spec.model)
    cmd.head, cmd.engine = cmd.head + cmd.engine, []          # the model is the head; the flags after it follow
    dp_attention = spec.ep > 1
    ranks = spec.ep if dp_attention else 1                    # what SGLang divides the server-wide limits by
    cmd.flag(TOOL, "--tp-size", spec.tp * spec.ep)
    if spec.pp > 1:
        cmd.flag(TOOL, "--pp-size", spec.pp)
    if dp_attention:
        cmd.flag(TOOL, "--dp-size", spec.ep)
        cmd.flag(TOOL, "--enable-dp-attention")
        cmd.flag(TOOL, "--ep-size", spec.tp * spec.ep)
        _expert_parallel(spec, cmd)
    elif spec.dp > 1:
        cmd.flag(TOOL, "--dp-size", spec.dp)
    if spec.experts_whole and not dp_attention:
        cmd.flag(TOOL, "--ep-size", spec.tp)          # EP inside TP: whole experts over the TP ranks
        cmd.honour("experts_whole")
    shared_notes(spec, cmd)
    if spec.max_running is not None:
        cmd.flag(TOOL, "--max-running-requests", spec.max_running * ranks)
    if spec.max_batched_tokens is not None:
        cmd.flag(TOOL, "--chunked-prefill-size", spec.max_batched_tokens * ranks)
    if dp_attention and (spec.max_running is not None or spec.max_batched_tokens is not None):
        cmd.notes.append(f"--max-running-requests and --chunked-prefill-size are server-wide under DP attention "
                         f"(SGLang divides them by --dp-size {spec.ep}): written {spec.ep} x the per-rank figures")
    cmd.flag(TOOL, "--kv-cache-dtype", KV_DTYPE[spec.kv_dtype])
    if spec.weight_quant == "fp8":
        cmd.flag(TOOL, "--quantization", "fp8")
    cmd.flag(TOOL, "--context-length", spec.max_model_len)
    if spec.draft_model is not None:
        k = draft_tokens(spec, cmd)
        cmd.flag(TOOL, "--speculative-algorithm", _algorithm(spec.draft_model))
        cmd.flag(TOOL, "--speculative-draft-model-path", spec.draft_model)
        _steps(cmd, k)
    elif spec.mtp_tokens is not None:
        cmd.flag(TOOL, "--speculative-algorithm", "NEXTN")
        _steps(cmd, spec.mtp_tokens)
    if spec.role != "both":
        cmd.flag(TOOL, "--disaggregation-mode", spec.role)
        cmd.flag(TOOL, "--disaggregation-transfer-backend", "nixl")
        cmd.notes.append(f"a {spec.role} server of a disaggregated pair: the router that pairs prefill and decode "
                         "servers (sglang_router's --pd-disaggregation, with each prefill server's bootstrap port, "
                         "8998 by default; or NVIDIA Dynamo) is not written")
    if spec.nodes > 1:
        cmd.flag(TOOL, "--nnodes", spec.nodes)
        cmd.flag(TOOL, "--node-rank", 0)
        cmd.flag(TOOL, "--dist-init-addr", f"{HEAD}:{INIT_PORT}")
        cmd.notes.append(f"one server over {spec.nodes} nodes: run the same command on each, with --node-rank 0 on the "
                         f"first (whose address replaces {HEAD}) and --node-rank k on node k (1 to {spec.nodes - 1})")
    cmd.flag(TOOL, "--port", spec.port, frontend=True)
    return cmd


def _expert_parallel(spec: ServerSpec, cmd: Command) -> None:
    """The all-to-all, its overlap and EPLB, as the answer priced them (data/engine_flags.toml's `where` for each)."""
    if spec.ep_comm in PRICED:
        cmd.flag(TOOL, "--moe-a2a-backend", "deepep")
        cmd.honour("ep_comm")
        cmd.notes.append(f"--moe-a2a-backend deepep runs in SGLang's default --deepep-mode auto (normal kernels for "
                         f"steps that carry prompts, low-latency ones for decode-only steps); tokenmath priced "
                         f"{PRICED[spec.ep_comm]} on every step")
    else:
        cmd.notes.append("expert parallelism over SGLang's default MoE transport (--moe-a2a-backend none), as the "
                         "answer priced a bf16 all-to-all; --ep-comm fp8 or deepep writes the DeepEP one "
                         "(--moe-a2a-backend deepep) that large expert-parallel recipes add")
    if spec.ep_overlap:
        # accepted on either transport here: --enable-dp-attention is written with it (_check_two_batch_overlap)
        cmd.flag(TOOL, "--enable-two-batch-overlap")
        cmd.honour("ep_overlap")
    if spec.eplb_redundant is not None:
        cmd.flag(TOOL, "--enable-eplb")
        cmd.flag(TOOL, "--ep-num-redundant-experts", spec.eplb_redundant)
        cmd.honour("eplb_redundant")


def _steps(cmd: Command, k: int) -> None:
    """A chain of k draft tokens: k steps of one token each, k + 1 tokens verified (the draft and the bonus)."""
    cmd.flag(TOOL, "--speculative-num-steps", k)
    cmd.flag(TOOL, "--speculative-eagle-topk", 1)
    cmd.flag(TOOL, "--speculative-num-draft-tokens", k + 1)
