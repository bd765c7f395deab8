"""Each InferenceX run configured as it was run: the KV-cache dtype and the expert-parallel transport its recipe
set, read from the recipe InferenceX ran it with (never fitted; a knob the recipe does not set stays tokenmath's
default, which is also the engine's).

A run's row names its engine, chip, precision, EP size, DP attention and disaggregated worker counts, not its
command line; the command line lives in the InferenceX repository's recipe for that engine, chip and precision:
- single node: benchmarks/single_node/fixed_seq_len/dsr1_<precision>_<chip>[_trt|_atom][_mtp].sh
  (github.com/SemiAnalysisAI/InferenceX at 843c6254);
- NVIDIA disaggregated (dynamo-sglang, dynamo-trt): benchmarks/multi_node/srt-slurm-recipes/dsr1/<engine>/
  <chip>-<precision>/<lengths>/disagg/{stp,mtp}/*.yaml (at 792d8aa4, 2026-04-28: the srt-slurm recipes the earlier
  runs used, migrated into the repository unchanged in their server flags);
- AMD disaggregated (mori-sglang): benchmarks/multi_node/amd_utils/models.yaml, entry DeepSeek-R1 (at 843c6254).
A row does not say which of a folder's recipe files (low-latency, mid-curve, max-throughput) ran it, so only a
flag every file of the folder that applies to the row's layout sets is read as the run's.

What the recipes set, and what tokenmath reads from it (RULES, first match wins):
- KV cache in FP8 (--kv-cache-dtype fp8_e4m3 on SGLang, kv_cache_config.dtype: fp8 on TensorRT-LLM,
  --kv_cache_dtype fp8 on ATOM): every engine on every chip but SGLang on Hopper (dsr1_fp8_h200[_mtp].sh and the
  h100-fp8 / h200-fp8 srt-slurm recipes set no KV dtype: SGLang's "auto", the checkpoint's BF16 KV). tokenmath's
  InferenceX predictor read every KV cache as BF16 before: twice the bytes per token, half the users a GPU holds.
- SGLang on GB200 / GB300 NVL72, decode with EP and DP attention: DeepEP (moe-a2a-backend: deepep, deepep-mode:
  low_latency in every gb200/gb300 recipe); prefill with EP and DP attention at FP8: DeepEP's normal kernels
  (deepep-mode: normal); at FP4 the prefill sets no all-to-all backend (flashinfer_cutlass MoE): the default.
  tokenmath's ep_comm "deepep" prices a decode pass with the low-latency kernels (FP8 dispatch, BF16 combine, one
  copy per expert) and a prefill pass with the normal ones (engine/expert_parallel.py).
- No recipe turns on two-batch overlap (--enable-two-batch-overlap appears in none of the DeepSeek-R1 recipes; the
  GB200 FP4 ones set --enable-single-batch-overlap, an overlap of the combine with the down GEMM inside one batch,
  which tokenmath does not model): ep_overlap stays off everywhere.
- TensorRT-LLM disaggregated with EP and attention DP: its own all-to-all with a low-precision combine
  (moe_config use_low_precision_moe_combine: true in the gb200, gb300, h100, h200 and b200/b300-fp4 recipes; the
  NVLink one-sided all-to-all, TensorRT-LLM tech blog 18, nvidia.github.io/TensorRT-LLM/blogs/tech_blog/
  blog18_Optimizing_MoE_Communication_with_One_Sided_AlltoAll_Over_NVLink.html, and the low-precision all-to-all of
  tech blog 14, .../blog14_Scaling_Expert_Parallelism_in_TensorRT-LLM_part3.html). tokenmath's nearest transport is
  "fp8" (FP8 dispatch, BF16 combine, one copy per expert): more bytes than the recipe's, an upper bound on the
  transfer. The b200-fp8 / b300-fp8 recipes do not set it: the default.
- MoRI on MI355X (--moe-a2a-backend mori --deepep-mode normal, SGLANG_MORI_DISPATCH_DTYPE=auto in amd_utils/env.sh):
  the dispatch dtype is left to MoRI ("auto") and the combine's is unset, so no transport is read from it; its
  --ep-dispatch-algorithm fake spreads tokens evenly over the experts, which is tokenmath's default (balanced).
- SGLang's static memory fraction where the recipe sets it for a layout that needs it: DeepSeek-R1 FP8 on 4
  Blackwell GPUs (TP 4: 168 GB of weights on each) runs at --mem-fraction-static 0.95 (dsr1_fp8_b200.sh and
  dsr1_fp8_b300.sh, TP=4 branch: MEM_FRAC_STATIC=0.95; srt-slurm gb200-fp8 low-latency.yaml, prefill and decode:
  mem-fraction-static: 0.95). tokenmath's SGLang profile holds 0.83 (derived on an H100 80GB, data/engines.toml),
  which leaves those GPUs no room for one request: the 28 runs it refused as "does not fit" ran at 0.95 (14 now
  fit). Elsewhere the recipes' fractions (0.6-0.95, per file) are not read: the row does not say which file ran.
- MTP draft length (tokens the MTP head drafts a step), where every recipe of the row's engine, chip and layout
  sets the same: SGLang on NVIDIA drafts 2 (--speculative-num-steps 2 in dsr1_fp8_b200_mtp.sh, dsr1_fp4_b200_mtp.sh,
  dsr1_fp8_b300_mtp.sh, dsr1_fp8_h200_mtp.sh; speculative-num-steps: 2 in every srt-slurm sglang .../disagg/mtp
  recipe at 792d8aa4 and in b200-fp4/1k1k at 843c6254; b200-fp4/8k1k mixes 2 and 3: the default); TensorRT-LLM
  single node drafts 1 with attention DP and 3 without (MTP=1 / MTP=3 in dsr1_fp8_b200_trt_mtp.sh,
  dsr1_fp4_b200_trt_mtp.sh, dsr1_fp8_h200_trt_mtp.sh); Dynamo's TensorRT-LLM decode without attention DP drafts 3
  (num_nextn_predict_layers: 3 in 58 of the 59 such srt-slurm trtllm mtp files at 792d8aa4; with attention DP the
  files set 1, 2 or 3: the default). Elsewhere inferencex.MTP_TOKENS (3: the AMD SGLang and ATOM recipes).
- TensorRT-LLM single node with attention DP balances the groups: every dsr1_<precision>_<chip>_trt[_mtp].sh
  appends attention_dp_config {enable_balance: true, batching_wait_iters: 0, timeout_iters: 60} when
  DP_ATTENTION=true (dsr1_fp8_h200_trt.sh, dsr1_fp8_h200_trt_mtp.sh, dsr1_fp4_b200_trt.sh at 8eec0d4e), so those runs
  are read with adp_balance (TensorRT-LLM tech blog 10's scheduler: a step's prompts split over the groups, TTFT
  gains the coordinated wait). The predictor read them unbalanced before: one group prefilling an 8K prompt while
  seven waited, 0.58x of the measured throughput on H200 8K/1K. Disaggregated decode workers hold no prompts: moot.
- SGLang's running-request cap under MTP: SGLang resets --max-running-requests to 48 when speculative decoding is on
  and none is set (python/sglang/srt/arg_groups/speculative_hook.py @d9ccf6a7). dsr1_fp8_mi325x_mtp.sh and
  dsr1_fp4_mi355x_mtp.sh set none, so their runs hold at most 48 requests at once (one scheduler: TP 8, no DP
  attention); every other single-node SGLang MTP recipe sets the cap at or above its concurrency.
- Routing skew: the NVIDIA recipes hold 32 redundant experts (ep-num-redundant-experts, eplb-algorithm deepseek)
  but load no expert-location statistics, and the rows do not say which file ran: ep_imbalance stays the default.
"""
from __future__ import annotations

from dataclasses import dataclass

REPO = "https://github.com/SemiAnalysisAI/InferenceX/blob"
SINGLE = f"{REPO}/843c6254/benchmarks/single_node/fixed_seq_len"
MULTI = f"{REPO}/792d8aa4/benchmarks/multi_node/srt-slurm-recipes/dsr1"
AMD = f"{REPO}/843c6254/benchmarks/multi_node/amd_utils/models.yaml"
HOPPER = ("h100", "h200")
NVL72 = ("gb200", "gb300")

# (engine as the row names it, chips (None: any), excluded chips) -> KV dtype and the recipe that sets it
KV_RULES: tuple[tuple[str, tuple | None, tuple, str | None, str], ...] = (
    ("sglang", HOPPER, (), None, f"{SINGLE}/dsr1_fp8_h200.sh (no --kv-cache-dtype: the checkpoint's BF16)"),
    ("sglang", None, HOPPER, "fp8", f"{SINGLE}/dsr1_<precision>_<chip>.sh: --kv-cache-dtype fp8_e4m3"),
    ("trt", None, (), "fp8", f"{SINGLE}/dsr1_<precision>_<chip>_trt.sh: kv_cache_config dtype: fp8"),
    ("atom", None, (), "fp8", f"{SINGLE}/dsr1_<precision>_mi355x_atom.sh: --kv_cache_dtype fp8"),
    ("mori-sglang", None, (), "fp8", f"{AMD} DeepSeek-R1 base_flags: --kv-cache-dtype fp8_e4m3"),
    ("dynamo-sglang", HOPPER, (), None, f"{MULTI}/sglang/h200-fp8 (no kv-cache-dtype: the checkpoint's BF16)"),
    ("dynamo-sglang", None, HOPPER, "fp8", f"{MULTI}/sglang/<chip>-<precision>: kv-cache-dtype: fp8_e4m3"),
    ("dynamo-trt", None, (), "fp8", f"{MULTI}/trtllm/<chip>-<precision>: kv_cache_config dtype: fp8"),
)


@dataclass(frozen=True)
class Recipe:
    """What a run's recipe sets for one of its engine instances (role: "aggregated", "prefill" or "decode")."""
    kv_dtype: str | None        # None: the model's default (BF16 KV)
    ep_comm: str                # engine/expert_parallel.EP_COMM
    sources: tuple[str, ...]
    mem_fraction: float | None = None   # the engine's static memory fraction (None: its profile's)
    mtp_tokens: int | None = None       # tokens the MTP head drafts a step (None: inferencex.MTP_TOKENS)
    adp_balance: bool = False           # the scheduler balances the attention-DP groups (TensorRT-LLM ADP balance)
    max_running: int | None = None      # the engine's cap on running requests where the recipe leaves SGLang's own

    @property
    def note(self) -> str:
        parts = [f"KV {self.kv_dtype or 'bf16'}"] + ([f"EP all-to-all {self.ep_comm}"] if self.ep_comm != "bf16"
                                                   else [])
        parts += [f"memory fraction {self.mem_fraction:g}"] if self.mem_fraction else []
        parts += [f"MTP {self.mtp_tokens} draft tokens"] if self.mtp_tokens else []
        parts += ["attention-DP balance"] if self.adp_balance else []
        parts += [f"at most {self.max_running} running (SGLang's speculative default)"] if self.max_running else []
        return "recipe: " + ", ".join(parts)


# gpt-oss-120b's recipes (benchmarks/single_node/fixed_seq_len/deprecated/gptoss_fp4_<chip>[_trt|_atom].sh at 843c6254:
# where the runs of 2025-12 / 2026-01 came from). The Dynamo TensorRT-LLM one (multi_node/deprecated/
# gptoss_fp4_gb200_dynamo-trt.sh) takes its settings from Dynamo's performance sweeps, not read: the defaults.
GPTOSS = f"{SINGLE}/deprecated"
GPTOSS_KV_RULES: tuple[tuple[str, tuple | None, tuple, str | None, str], ...] = (
    ("vllm", ("b200",), (), "fp8", f"{GPTOSS}/gptoss_fp4_b200.sh: config.yaml kv-cache-dtype: fp8"),
    ("vllm", HOPPER, (), None, f"{GPTOSS}/gptoss_fp4_h100.sh, gptoss_fp4_h200.sh (no kv-cache-dtype: BF16)"),
    ("trt", None, (), "fp8", f"{GPTOSS}/gptoss_fp4_b200_trt.sh: kv_cache_config dtype: fp8"),
    ("atom", None, (), "fp8", f"{GPTOSS}/gptoss_fp4_mi355x_atom.sh: --kv_cache_dtype fp8"),
)
# the models whose recipes this module reads beyond KV: DeepSeek-R1's (the rules of the module docstring)
DSR1 = "dsr1"


def kv_dtype(framework: str, hardware: str, model: str = DSR1) -> tuple[str | None, str]:
    """(KV dtype, source) of a run's recipe (KV_RULES, or GPTOSS_KV_RULES for gpt-oss); (None, "") where no rule
    names it."""
    for eng, chips, out, kv, src in (GPTOSS_KV_RULES if model == "gptoss" else KV_RULES):
        if eng == framework and (chips is None or hardware in chips) and hardware not in out:
            return kv, src
    return None, ""


def ep_comm(framework: str, hardware: str, precision: str, role: str, ep: int, dp_attention: bool) -> tuple[str, str]:
    """(EP transport, source) of one engine instance of a run (module docstring); ("bf16", "") by default."""
    if ep <= 1 or not dp_attention:
        return "bf16", ""
    if framework == "dynamo-sglang" and hardware in NVL72:
        if role == "decode":
            return "deepep", f"{MULTI}/sglang/{hardware}-{precision}: moe-a2a-backend deepep, deepep-mode low_latency"
        if role == "prefill" and precision == "fp8":
            return "deepep", f"{MULTI}/sglang/{hardware}-fp8: moe-a2a-backend deepep, deepep-mode normal"
    if framework == "dynamo-trt" and not (hardware in ("b200", "b300") and precision == "fp8"):
        return "fp8", (f"{MULTI}/trtllm/{hardware}-{precision}: use_low_precision_moe_combine: true (TensorRT-LLM "
                       "tech blogs 14 and 18: low-precision one-sided NVLink all-to-all)")
    return "bf16", ""


def mem_fraction(framework: str, hardware: str, precision: str, gpus: int) -> tuple[float | None, str]:
    """(SGLang's static memory fraction, source) where the recipe sets it for the layout (module docstring)."""
    if framework in ("sglang", "dynamo-sglang") and precision == "fp8" and gpus == 4 \
            and hardware in ("b200", "b300", "gb200"):
        where = (f"{MULTI}/sglang/gb200-fp8/1k1k/disagg/stp/low-latency.yaml" if hardware == "gb200"
                 else f"{SINGLE}/dsr1_fp8_{hardware}.sh (TP=4)")
        return 0.95, f"{where}: mem-fraction-static 0.95"
    return None, ""


NVIDIA = ("b200", "b300", "gb200", "gb300", "h100", "h200")


def mtp_tokens(framework: str, hardware: str, precision: str, isl: int, dp_attention: bool) -> tuple[int | None, str]:
    """(tokens the MTP head drafts a step, source) of an engine instance's recipe (module docstring); (None, "")
    where the recipes do not agree or do not say: the default."""
    if hardware not in NVIDIA:
        return None, ""
    if framework == "sglang":
        return 2, f"{SINGLE}/dsr1_{precision}_{hardware}_mtp.sh: SPECULATIVE_NUM_STEPS=2"
    if framework == "dynamo-sglang" and not (hardware == "b200" and precision == "fp4" and isl >= 8192):
        return 2, f"{MULTI}/sglang/{hardware}-{precision}/*/disagg/mtp: speculative-num-steps: 2"
    if framework == "trt":
        return (1 if dp_attention else 3), (f"{SINGLE}/dsr1_{precision}_{hardware}_trt_mtp.sh: MTP="
                                            f"{1 if dp_attention else 3} {'with' if dp_attention else 'without'} "
                                            "DP attention")
    if framework == "dynamo-trt" and not dp_attention:
        return 3, f"{MULTI}/trtllm/{hardware}-{precision}/*/disagg/mtp: num_nextn_predict_layers: 3"
    return None, ""


TRT_SINGLE = f"{REPO}/8eec0d4e/benchmarks/single_node/fixed_seq_len"


def adp_balance(framework: str, precision: str, hardware: str, role: str, dp_attention: bool) -> tuple[bool, str]:
    """(the scheduler balances the attention-DP groups, source) of an engine instance's recipe (module docstring)."""
    if framework == "trt" and role == "aggregated" and dp_attention:
        return True, (f"{TRT_SINGLE}/dsr1_{precision}_{hardware}_trt[_mtp].sh: attention_dp_config enable_balance: "
                      "true, timeout_iters: 60")
    return False, ""


# the single-node SGLang MTP recipes that set no --max-running-requests (every other one sets it to its largest
# concurrency or above: dsr1_fp8_b200_mtp.sh 512, dsr1_fp4_b200_mtp.sh 256, dsr1_fp8_h200_mtp.sh 256-512,
# dsr1_fp8_b300_mtp.sh 512, dsr1_fp8_mi355x_mtp.sh the run's concurrency)
SGLANG_MTP_UNCAPPED = (("mi325x", "fp8"), ("mi355x", "fp4"))


def max_running(framework: str, hardware: str, precision: str, mtp: bool, role: str) -> tuple[int | None, str]:
    """(the engine's cap on running requests, source) where an SGLang MTP recipe leaves it to SGLang's speculative
    default (data/engines.toml sglang.max_running_speculative, 48; module docstring); (None, "") elsewhere: the
    recipes' caps sit at or above their concurrencies."""
    if framework == "sglang" and mtp and role == "aggregated" and (hardware, precision) in SGLANG_MTP_UNCAPPED:
        from tokenmath.specs.serving_engines import get_engine
        eng = get_engine("sglang")           # the engine profile holds the cap and where it was read
        return eng.max_running_speculative, (f"{SINGLE}/dsr1_{precision}_{hardware}_mtp.sh sets no "
                                             f"--max-running-requests; {eng.sources['max_running_speculative']}")
    return None, ""


def recipe(run, role: str) -> Recipe:
    """The recipe of `run` (inferencex.Run) for its engine instance `role`: "aggregated" (one engine, the decode
    columns name its layout), "prefill" or "decode"."""
    r = run.row
    side = "prefill" if role == "prefill" else "decode"
    kv, ksrc = kv_dtype(r["framework"], r["hardware"], r["model"])
    if r["model"] != DSR1:
        # gpt-oss: its recipes set the KV dtype and, for TensorRT-LLM with attention DP, the groups' balance
        bal = bool(r["framework"] == "trt" and role != "prefill" and r[f"{side}_dp_attention"])
        bsrc = f"{GPTOSS}/gptoss_fp4_b200_trt.sh: attention_dp_config enable_balance: true (DP_ATTENTION=true)"
        return Recipe(kv, "bf16", tuple(x for x in (ksrc, bsrc if bal else "") if x), adp_balance=bal)
    comm, csrc = ep_comm(r["framework"], r["hardware"], r["precision"], role, r[f"{side}_ep"],
                         r[f"{side}_dp_attention"])
    if role == "aggregated":
        gpus = r["gpus"]
    else:
        workers = max(r[f"{side}_num_workers"], 1)
        gpus = r[f"num_{side}_gpu"] // workers
    frac, msrc = mem_fraction(r["framework"], r["hardware"], r["precision"], gpus)
    k, tsrc = (mtp_tokens(r["framework"], r["hardware"], r["precision"], r["isl"], r[f"{side}_dp_attention"])
               if run.mtp and role != "prefill" else (None, ""))
    bal, bsrc = adp_balance(r["framework"], r["precision"], r["hardware"], role, r[f"{side}_dp_attention"])
    cap, rsrc = max_running(r["framework"], r["hardware"], r["precision"], bool(run.mtp), role)
    return Recipe(kv, comm, tuple(s for s in (ksrc, csrc, msrc, tsrc, bsrc, rsrc) if s), frac, k, bal, cap)


PLAIN = Recipe(None, "bf16", ())


def plain(run, role: str) -> Recipe:
    """The configuration the predictor used before it read the recipes: BF16 KV, the default transport."""
    return PLAIN
