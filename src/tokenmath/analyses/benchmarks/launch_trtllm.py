"""`trtllm-serve MODEL` for one server tokenmath laid out. Every flag is one of data/engine_flags.toml's
["trtllm-serve"] (tensorrt_llm/commands/serve.py); what has no flag goes in the YAML file --extra_llm_api_options
names, every key of which is one of ["trtllm-serve extra_llm_api_options"] (tensorrt_llm/llmapi/llm_args.py).

Mapping: tp -> --tp_size; pp -> --pp_size; a MoE's ep groups -> attention DP: --tp_size ep --ep_size ep and
enable_attention_dp: true (TensorRT-LLM's attention DP gives every rank its own attention, so one rank per group:
tp must be 1); dense dp replicas -> copies of the server (TensorRT-LLM runs no data-parallel replicas of a dense
model inside one server); max_running -> --max_batch_size; max_batched_tokens -> --max_num_tokens, with
--enable_chunked_prefill when a prompt may be longer; max_model_len -> --max_seq_len; kv_dtype fp8 ->
kv_cache_config.dtype fp8 (16-bit: the checkpoint's own, the default); MTP -> speculative_config {decoding_type MTP,
max_draft_len n}; a draft model -> {decoding_type Eagle3 / Eagle when its name says so, else Draft_Target,
max_draft_len k, speculative_model}; role prefill / decode -> cache_transceiver_config.backend DEFAULT; adp_balance
under attention DP -> attention_dp_config {enable_balance: true, timeout_iters, batching_wait_iters: 0}, the scheduler
tokenmath's balanced figures model (TensorRT-LLM tech blog 10). The all-to-all transport, its overlap and EPLB have no
key in the pinned tables: unwritten.py names them.
"""
from __future__ import annotations

from tokenmath.analyses.benchmarks.launch_base import Command, ServerSpec, draft_tokens, shared_notes, yaml_text
from tokenmath.base.errors import InputError

SERVE, API = "trtllm-serve", "trtllm-serve extra_llm_api_options"
YAML = "extra_llm_api_options.yaml"


def _decoding(draft: str) -> str:
    name = draft.lower()
    return "Eagle3" if "eagle3" in name else "Eagle" if "eagle" in name else "Draft_Target"


def _balance() -> dict:
    """ADP balance as the answer priced it: a group ready for a prompt waits for the others up to the timeout the
    figures assume (steady_state.ADP_TIMEOUT_STEPS, the blog's and AttentionDpConfig's default of 50), and no extra
    batching wait, which the figures leave out (AttentionDpConfig defaults it to 10; InferenceX's recipes set 0)."""
    from tokenmath.analyses.serving.steady_state import ADP_TIMEOUT_STEPS
    return {"enable_balance": True, "timeout_iters": int(ADP_TIMEOUT_STEPS), "batching_wait_iters": 0}


def command(spec: ServerSpec) -> Command:
    if spec.ep > 1 and spec.tp > 1:
        raise InputError("tp", "TensorRT-LLM's attention DP runs attention on every rank apart, so it cannot keep "
                         f"{spec.tp} ranks of tensor-parallel attention in each expert-parallel group",
                         "tp 1 with ep (attention DP on ep ranks), or ep 1 with tp")
    if spec.ep > 1 and spec.pp > 1:
        raise InputError("pp", "tokenmath writes no TensorRT-LLM command for pipeline parallelism together with "
                         "attention DP (ep > 1)", "pp 1 with ep, or pp with ep 1")
    cmd = Command(head=["trtllm-serve", spec.model])
    cmd.use(SERVE)
    options: dict = {}
    cmd.flag(SERVE, "--tp_size", spec.tp * spec.ep)
    if spec.pp > 1:
        cmd.flag(SERVE, "--pp_size", spec.pp)
    if spec.ep > 1:
        cmd.flag(SERVE, "--ep_size", spec.ep)
        options["enable_attention_dp"] = True
        if spec.max_running is not None or spec.max_batched_tokens is not None:
            cmd.notes.append("--max_batch_size and --max_num_tokens hold for each attention-DP rank")
    elif spec.experts_whole:
        cmd.flag(SERVE, "--ep_size", spec.tp)          # EP inside TP: whole experts over the TP ranks
        cmd.honour("experts_whole")
    if spec.ep == 1 and spec.dp > 1:
        cmd.notes.append(f"run {spec.dp} copies of this server ({spec.tp * spec.pp} chips each) behind a load "
                         "balancer, each on its own port or node: TensorRT-LLM runs no data-parallel replicas of a "
                         "dense model inside one server")
    shared_notes(spec, cmd)
    if spec.max_running is not None:
        cmd.flag(SERVE, "--max_batch_size", spec.max_running)
    if spec.max_batched_tokens is not None:
        cmd.flag(SERVE, "--max_num_tokens", spec.max_batched_tokens)
    cmd.flag(SERVE, "--max_seq_len", spec.max_model_len)
    if spec.max_batched_tokens is not None and spec.max_batched_tokens < spec.max_model_len:
        cmd.flag(SERVE, "--enable_chunked_prefill")
    if spec.kv_dtype == "fp8":
        options["kv_cache_config"] = {"dtype": "fp8"}
    if spec.weight_quant == "fp8":
        cmd.notes.append("weight_quant fp8: TensorRT-LLM's PyTorch backend reads the quantization of the checkpoint "
                         "it serves and writes none at load; serve an FP8 checkpoint (e.g. a ModelOpt FP8 export) "
                         "in place of the 16-bit one")
    if spec.draft_model is not None:
        options["speculative_config"] = {"decoding_type": _decoding(spec.draft_model),
                                         "max_draft_len": draft_tokens(spec, cmd),
                                         "speculative_model": spec.draft_model}
    elif spec.mtp_tokens is not None:
        options["speculative_config"] = {"decoding_type": "MTP", "max_draft_len": spec.mtp_tokens}
    if spec.adp_balance and spec.ep > 1:
        options["attention_dp_config"] = _balance()
        cmd.honour("adp_balance")
    if spec.role != "both":
        options["cache_transceiver_config"] = {"backend": "DEFAULT"}
        side = "context_servers" if spec.role == "prefill" else "generation_servers"
        cmd.notes.append(f"a {spec.role} server of a disaggregated pair: list its URL under {side} in the config of "
                         "`trtllm-serve disaggregated -c FILE`, the router in front of both pools; that file is not "
                         "written (its keys are not pinned in data/engine_flags.toml)")
    if options:
        cmd.files[YAML] = yaml_text(API, options, cmd)
        cmd.flag(SERVE, "--extra_llm_api_options", YAML)
    if spec.nodes > 1:
        cmd.notes.append(f"one server over {spec.nodes} nodes: TensorRT-LLM starts its ranks through MPI; run the "
                         f"command under `mpirun` (or `srun`) with {spec.chips} ranks over the {spec.nodes} nodes, "
                         "each wrapped by `trtllm-llmapi-launch`")
    cmd.flag(SERVE, "--port", spec.port, frontend=True)
    return cmd
