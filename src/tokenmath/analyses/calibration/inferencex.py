"""The public InferenceX benchmark runs shipped as validation data (data/inferencex_runs.csv.gz): loading, checking,
and what each run means in tokenmath's terms. Nothing is fitted to these rows (analyses/calibration/
inferencex_predict.py predicts them, inferencex_report.py scores them).

The file is rebuilt, never fetched at run time, by benchmarks/rebuild_inferencex.py from a git snapshot of the
InferenceX app (its API captures committed as test fixtures); every row keeps the file and commit it was read from,
its date and its CI run's URL (github.com/SemiAnalysisAI/InferenceX/actions/runs/...).

Interpretation (each a stated reading of the published configuration, never a fitted choice):
- model: "dsr1" is DeepSeek-R1 (the DeepSeek-V3 architecture: catalog deepseek-v3), "gptoss" gpt-oss-120b (its runs
  added from the CI's own artifacts by benchmarks/add_inferencex_raw.py); a model without a catalog entry is skipped
  with the reason.
- chip: InferenceX's hardware key -> tokenmath's catalog id (gb200 / gb300: the NVL72 chips; h100: h100-sxm).
- precision: fp8 -> weight dtype fp8; fp4 -> tokenmath's generic fp4 on every weight for DeepSeek-R1 (the dump says
  neither NVFP4 nor MXFP4 nor which layers stay wider: an upper bound on the saving), gpt-oss-120b's own MXFP4
  checkpoint (mxfp4: its MoE weights, the rest BF16) for gpt-oss. KV cache: the recipe's (inferencex_recipe.py).
- engine: the framework column names the serving engine and, for disaggregated runs, the orchestrator in front of
  it (dynamo-sglang: NVIDIA Dynamo over SGLang; mori-sglang: AMD's MoRI transfer over SGLang). The engine profile
  used: sglang, tensorrt-llm (trt), else vLLM's (ATOM, AMD's engine, has no profile here: said on every ATOM row).
- engine version: parsed from the Docker image (lmsysorg/sglang:v0.5.8 -> sglang 0.5.8, nvcr.io/.../release:1.3.0rc14
  -> TensorRT-LLM 1.3.0rc14, .../tensorrtllm-runtime:0.8.1 -> Dynamo 0.8.1); no image (runs before 2025-12-08 and the
  history file): "unknown", the run's date stands for it.
- chips: `gpus`, what InferenceX divided the throughput by: TP GPUs of one engine instance (EP is inside the TP
  group), or every prefill and decode GPU of a disaggregated deployment.
"""
from __future__ import annotations

import csv
import gzip
import io
import math
import os
import re
from dataclasses import dataclass
from functools import cache

from tokenmath.base.errors import InputError

DATA = "inferencex_runs.csv.gz"
MODELS = {"dsr1": "deepseek-v3", "gptoss": "gpt-oss-120b"}
CHIPS = {"b200": "b200", "b300": "b300", "gb200": "gb200", "gb300": "gb300", "h100": "h100-sxm", "h200": "h200",
         "mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x"}
WEIGHT_DTYPES = {"fp8": "fp8", "fp4": "fp4", "bf16": "bf16"}
# a model whose published checkpoint fixes what a precision means: gpt-oss-120b ships MXFP4 MoE weights
MODEL_WEIGHT_DTYPES = {("gptoss", "fp4"): "mxfp4"}
PROFILES = {"sglang": "sglang", "trt": "tensorrt-llm", "vllm": "vllm"}      # engine -> tokenmath engine profile
FALLBACK_PROFILE = "vllm"
# InferenceX's DeepSeek-R1 MTP recipes on AMD draft 3 tokens a step ("--speculative-num-steps 3",
# benchmarks/single_node/fixed_seq_len/dsr1_fp8_mi355x_mtp.sh at github.com/SemiAnalysisAI/InferenceX 843c6254;
# ATOM's dsr1_fp8_mi355x_atom_mtp.sh --num-speculative-tokens 3): the default; the NVIDIA recipes' own lengths
# (SGLang 2, TensorRT-LLM 1 or 3) are read per run by inferencex_recipe.mtp_tokens
MTP_TOKENS = 3
# InferenceX's client draws every request's input and output lengths uniformly from [ratio x L, L], L the run's isl
# / osl: RANDOM_RANGE_RATIO 0.8 in .github/workflows/benchmark-tmpl.yml and benchmark-multinode-tmpl.yml (the
# workflow input's default, 0.8, since the ratio became one, github.com/SemiAnalysisAI/InferenceX 5a009b0a8,
# 2025-08-12), read by utils/bench_serving/benchmark_serving.py sample_random_requests: randint(int(L x ratio), L + 1)
RANGE_RATIO = 0.8
NUMBERS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "median_intvty", "median_ttft",
           "median_tpot", "median_e2el", "p99_ttft")
INTS = ("prefill_tp", "prefill_ep", "prefill_num_workers", "decode_tp", "decode_ep", "decode_num_workers",
        "num_prefill_gpu", "num_decode_gpu", "gpus", "isl", "osl", "conc")
BOOLS = ("disagg", "is_multinode", "prefill_dp_attention", "decode_dp_attention")
SOURCE = ("date", "run_url", "source_repo", "source_commit", "source_file")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_VERSION = re.compile(r"(?:^|[:\-_v])v?(\d+\.\d+(?:\.\d+)?(?:\.?(?:post|rc)\d+)*)")


def weight_dtype(row: dict) -> str:
    """tokenmath's weight dtype for a run's published model and precision."""
    return MODEL_WEIGHT_DTYPES.get((row["model"], row["precision"]), WEIGHT_DTYPES[row["precision"]])


def lengths(n: int) -> str:
    """The length law InferenceX's client drew for a run of nominal length n (RANGE_RATIO), as a --input-len value."""
    return f"uniform:{int(n * RANGE_RATIO)}-{int(n)}"


def mean_length(n: int) -> float:
    """The mean of lengths(n): tokens per request on average."""
    return (int(n * RANGE_RATIO) + int(n)) / 2


@dataclass(frozen=True)
class Run:
    """One published benchmark: the row as shipped, plus its reading in tokenmath's terms."""
    index: int
    row: dict
    engine: str               # the serving engine (sglang, trt, atom, vllm, ...)
    orchestrator: str         # dynamo, mori, or "" (none)
    engine_version: str       # from the image, or "unknown"
    versioned: str            # the software that version numbers (sglang, trt, dynamo, atom): the image's own
    profile: str              # tokenmath's engine profile used for it
    model_id: str | None      # tokenmath catalog id, None: not in the catalog
    chip_id: str | None

    @property
    def mtp(self) -> bool:
        return self.row["spec_method"] == "mtp"

    @property
    def disagg(self) -> bool:
        return self.row["disagg"]

    @property
    def wide_ep(self) -> bool:
        """Expert parallelism over more than one node's 8 GPUs (the "wide EP" of DeepSeek's and NVIDIA's papers)."""
        r = self.row
        return max(r["decode_ep"], r["prefill_ep"]) > 8

    @property
    def fp4(self) -> bool:
        return self.row["precision"] == "fp4"

    @property
    def generation(self) -> str:
        """software@major.minor as the image names it (sglang@0.5, dynamo@0.8 for Dynamo's TensorRT-LLM runtime
        image), or engine@unknown without an image."""
        v = self.engine_version
        mm = ".".join(v.split(".")[:2]) if v != "unknown" else v
        return f"{self.versioned}@{mm}"

    @property
    def label(self) -> str:
        r = self.row
        tech = "+".join(t for t, on in (("disagg", self.disagg), ("mtp", self.mtp)) if on) or "plain"
        return (f"{r['model']} {r['hardware']} {r['framework']} {r['precision']} {tech} "
                f"{r['isl']}/{r['osl']} conc {r['conc']} ({r['date']})")


def engine_and_orchestrator(framework: str) -> tuple[str, str]:
    """dynamo-sglang -> (sglang, dynamo); trt -> (trt, ""); atom -> (atom, "")."""
    f = framework.strip().lower()
    for orch in ("dynamo", "mori"):
        if f.startswith(orch + "-"):
            return f[len(orch) + 1:], orch
    return f, ""


def engine_version(image: str, engine: str, orchestrator: str) -> str:
    """The version in the image tag (of the orchestrator's runtime image where that is what the tag names)."""
    if not image:
        return "unknown"
    tag = image.rsplit("/", 1)[-1]
    name, _, ver = tag.partition(":")
    if engine == "atom" or name == "atom":
        m = re.search(r"atom(\d+\.\d+\.\d+|\d{8})", ver)
        return m.group(1) if m else "unknown"
    if name == "sgl-dev":               # rocm/sgl-dev:sglang-0.5.7-rocm700-...
        m = re.search(r"sglang-(\d+\.\d+(?:\.\d+)?)", ver)
        return m.group(1) if m else "unknown"
    m = _VERSION.search(ver)
    return m.group(1) if m else "unknown"


def versioned_software(image: str, engine: str) -> str:
    """Whose version the image tag is: Dynamo's runtime images (ai-dynamo/...) number Dynamo, not the engine."""
    if "ai-dynamo" in image:
        return "dynamo"
    return engine


def _parse(i: int, r: dict) -> dict:
    f = f"{DATA} row {i + 2}"
    d = dict(r)
    try:
        for k in INTS:
            d[k] = int(r[k])
        for k in NUMBERS:
            d[k] = float(r[k]) if r[k] != "" else None
        for k in BOOLS:
            if r[k] not in ("true", "false"):
                raise ValueError(f"{k}={r[k]!r}")
            d[k] = r[k] == "true"
    except (KeyError, ValueError) as e:
        raise InputError(f, f"unreadable ({e})", "the columns benchmarks/rebuild_inferencex.py writes") from None
    for k in SOURCE:
        if not d.get(k):
            raise InputError(f"{f}.{k}", "missing", "every run carries its date, CI run and source file")
    if not _DATE.match(d["date"]):
        raise InputError(f"{f}.date", repr(d["date"]), "YYYY-MM-DD")
    return d


@cache
def _raw() -> bytes:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", DATA)
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            return fh.read()
    from importlib import resources
    return resources.files("tokenmath").joinpath("data", DATA).read_bytes()


def read_rows(raw: bytes | None = None) -> list[dict]:
    """The shipped file's rows (or `raw`, gzip'd CSV bytes), each parsed and checked."""
    text = gzip.decompress(_raw() if raw is None else raw).decode("utf-8")
    return [_parse(i, r) for i, r in enumerate(csv.DictReader(io.StringIO(text)))]


@cache
def _catalog_model(published: str) -> str | None:
    from tokenmath.specs.model_catalog import get_model
    mid = MODELS.get(published)
    if mid is None:
        return None
    try:
        get_model(mid)
    except InputError:
        return None
    return mid


def to_run(i: int, d: dict) -> Run:
    eng, orch = engine_and_orchestrator(d["framework"])
    return Run(i, d, eng, orch, engine_version(d["image"], eng, orch), versioned_software(d["image"], eng),
               PROFILES.get(eng, FALLBACK_PROFILE), _catalog_model(d["model"]), CHIPS.get(d["hardware"]))


@cache
def _shipped_runs() -> tuple[Run, ...]:
    return tuple(to_run(i, d) for i, d in enumerate(read_rows()))


def load_runs(rows: list[dict] | None = None) -> tuple[Run, ...]:
    """Every run (the shipped file's, or `rows` as read_rows returns them) with its reading."""
    if rows is None:
        return _shipped_runs()
    return tuple(to_run(i, d) for i, d in enumerate(rows))


def skip_reason(run: Run) -> str | None:
    """Why tokenmath cannot model a run, or None."""
    r = run.row
    if run.model_id is None:
        return f"model {r['model']!r} has no tokenmath catalog entry"
    if run.chip_id is None:
        return f"chip {r['hardware']!r} has no tokenmath catalog entry"
    if r["precision"] not in WEIGHT_DTYPES:
        return f"precision {r['precision']!r} has no tokenmath dtype"
    if r["tput_per_gpu"] is None or not math.isfinite(r["tput_per_gpu"]) or r["tput_per_gpu"] <= 0:
        return "no positive throughput per GPU published"
    if r["disagg"] and (r["prefill_num_workers"] < 1 or r["decode_num_workers"] < 1):
        return "disaggregated run without its prefill / decode worker counts"
    return None


def vendor(run: Run) -> str:
    return "amd" if run.row["hardware"].startswith("mi") else "nvidia"


def techniques(run: Run) -> tuple[str, ...]:
    """The techniques a run used (MTP, disaggregated, wide EP, FP4), or ("plain",)."""
    got = tuple(t for t, on in (("mtp", run.mtp), ("disaggregated", run.disagg), ("wide-ep", run.wide_ep),
                                ("fp4", run.fp4)) if on)
    return got or ("plain",)


def self_consistency(run: Run) -> float | None:
    """Published throughput per GPU / the throughput its own latencies imply (conc x (ISL + OSL) / median end-to-end
    latency / GPUs): about 1 for a sound row (0.85 median over the file: mean vs median latency); far from 1 the row
    contradicts itself, and its error says nothing about the model."""
    r = run.row
    if not r["median_e2el"] or r["median_e2el"] <= 0:
        return None
    implied = r["conc"] * (r["isl"] + r["osl"]) / r["median_e2el"] / r["gpus"]
    return r["tput_per_gpu"] / implied
