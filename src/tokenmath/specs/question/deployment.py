"""What runs: the model, the chips, how it is laid over them, in which precision, under which serving engine, with
which speculation and expert-parallel transport, at which price. Declared once (DEPLOYMENT_FIELDS: unit, bounds,
default, help and the questions that use each field); the CLI options, the web page's parameters and the JSON schema
are generated from it, and `Deployment.of` validates once, at the boundary.

A field the question does not use is never dropped silently: specs/question/applies.py says why, in the answer's notes.
To add a field: declare it here, give it a home where it acts (analyses/setup.py for most), list the questions that
use it, and test it (tests/test_question_fields.py walks every question against every field).
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields

from tokenmath.base.errors import InputError
from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES
from tokenmath.specs.question.fields import Field, as_overrides, coerce_basic

MAX_LAYOUT = 100_000               # chips or a parallel degree: beyond it, a typo
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_ENGINE = "vllm"            # the one default serving engine: Python, the CLI and the web page alike

# the serving questions (commands); the training and inverse questions take their own inputs
SERVING = ("infer", "simulate", "hyperbola", "pareto", "plan", "fleet", "price", "prices", "slowmode", "context",
           "moe", "sensitivity", "agents")
ONE_LAYOUT = ("infer", "simulate", "hyperbola", "prices", "context", "sensitivity")   # the layout is given
SEARCHED = ("pareto", "plan", "fleet", "price", "slowmode", "moe")                     # the layout is searched
STEP = tuple(q for q in SERVING if q != "context")        # questions that price a step (context: bytes only)
CONTINUOUS = ("infer", "simulate", "pareto", "plan", "fleet", "price", "agents")                 # run under continuous batching

LAYOUT_WHY = "this question searches the layout itself (its answer names the layout it chose)"

DEPLOYMENT_FIELDS: tuple[Field, ...] = (
    Field("model", "text", DEFAULT_MODEL, "catalog id (tokenmath models) or a config.json path", questions=SERVING,
          short="-m"),
    Field("hardware", "text", DEFAULT_HARDWARE, "chip catalog id (tokenmath hardware), system id (tokenmath systems) "
          "or a hardware file (.toml/.json)", questions=tuple(q for q in SERVING if q != "agents"), short="-H",
          why_not="it compares the systems of --systems"),
    Field("chips", "int", None, "total chips = tp x pp x ep x dp x cp (left out with dp: the fewest that fit)", 1, MAX_LAYOUT, unit="chips",
          questions=ONE_LAYOUT + ("plan", "moe", "pareto"), why_not="it sizes replicas itself: --max-chips bounds one"),
    Field("tp", "int", None, "tensor-parallel degree (default: the chips the others leave)", 1, MAX_LAYOUT,
          questions=ONE_LAYOUT, why_not=LAYOUT_WHY),
    Field("pp", "int", None, "pipeline stages", 1, MAX_LAYOUT, questions=ONE_LAYOUT, why_not=LAYOUT_WHY),
    Field("ep", "int", None, "expert-parallel degree (MoE; attention data-parallel over the ep groups)", 1,
          MAX_LAYOUT, questions=ONE_LAYOUT, why_not=LAYOUT_WHY),
    Field("dp", "int", None, "independent replicas", 1, MAX_LAYOUT, questions=ONE_LAYOUT, why_not=LAYOUT_WHY),
    Field("cp", "int", None, "context-parallel degree: each prompt split over cp chips (ring attention)", 1,
          MAX_LAYOUT, questions=("infer",), why_not="context parallelism is priced for one static batch (infer) only"),
    Field("attention_sharding", "choice", None, "attention inside a TP group: heads (KV split by KV head), batch "
          "(Pope et al. 2022: KV and attention sharded over the batch), dp (data-parallel attention); any: search all "
          "three (searching questions; their default)", choices=("heads", "batch", "dp", "any"),
          questions=("infer", "simulate", "hyperbola", "pareto", "plan", "fleet", "price", "slowmode", "prices",
                     "sensitivity"),
          why_not="its memory and KV figures follow the layout's default heads sharding"),
    Field("weight_dtype", "choice", None, "weight dtype (default: the checkpoint's)",
          choices=tuple(WEIGHT_DTYPES), questions=SERVING),
    Field("kv_dtype", "choice", None, "KV-cache dtype (default bf16)", choices=tuple(KV_DTYPES), questions=SERVING),
    Field("engine", "text", DEFAULT_ENGINE, "serving engine profile: vllm, sglang, tensorrt-llm, llama.cpp, mlx, an "
          "engine file (.toml/.json) or none (the engine-free step: no scheduler limits, launch or CPU costs); "
          "NAME@RELEASE (sglang@0.5, vllm@0.11, tensorrt-llm@1.3) names the release the answer assumes, one the "
          "profile covers",
          questions=SERVING),
    Field("max_running", "int", None, "the serving engine's most sequences running at once per scheduler "
          "(default: the profile's, e.g. vLLM 1,024; SGLang sets it from memory)", 1, 10_000_000, unit="sequences",
          questions=SERVING, why_not=""),
    Field("adp_balance", "bool", False, "the scheduler balances attention-data-parallel groups (TensorRT-LLM's ADP "
          "balance: a prompt waits until every group has one, up to 50 steps), so a step's prompt chunks split "
          "evenly over the ep groups instead of one group prefilling while the others wait; TTFT gains the wait",
          flag="--adp-balance", questions=CONTINUOUS,
          why_not="a static batch's prompts already split evenly over the attention groups"),
    Field("efficiency", "choice", "calibrated", "achievable fractions of peak: calibrated (fitted on published "
          "measurements), kernels (kernel microbenchmarks) or peak (100% of every peak)",
          choices=("calibrated", "kernels", "peak"), questions=SERVING),
    Field("profile", "text", None, "a calibration profile fitted on your own benchmark runs (tokenmath calibrate "
          "FILES --profile NAME): its fitted efficiencies and engine CPU time instead of the shipped calibration, for "
          "the chip and engine it was fitted on", questions=SERVING),
    Field("what_if", "overrides", (), "what-if hardware: override a chip/system figure (hardware-file field names, "
          "humane units: memory_bw_tbs=6.7, memory_gb=288, tflops.fp8=5000, scaleup_domain=576, scaleup_gbs, "
          "scaleout_gbs, tdp_w, price_usd_per_hour; '2x' = twice the catalog figure). Repeatable; the answer's JSON "
          "lists the changed figures under what_if", flag="--set", questions=SERVING),
    Field("price_usd_per_hour", "float", None, "price of one chip-hour (default: the catalog's)", 1e-6, 1e6,
          unit="$/chip-hour", questions=tuple(q for q in STEP if q != "simulate"),
          why_not="it answers in bytes, tokens and seconds, not dollars"),
    Field("draft", "text", None, "speculative decoding with this draft model (same tokenizer as the model)",
          questions=("infer", "hyperbola", "simulate", "pareto", "plan", "fleet", "price", "slowmode"),
          why_not="speculative decoding is not modelled for this question"),
    Field("spec_k", "int", None, "tokens the draft proposes per verification step (default 4)", 1, 16,
          unit="tokens", questions=("infer", "hyperbola", "simulate", "pareto", "plan", "fleet", "price", "slowmode"),
          why_not="speculative decoding is not modelled for this question"),
    Field("acceptance", "float", None, "chance a drafted token is accepted, 0-1 (required with a draft, the "
          "same at every position; with MTP the first drafted position's rate, DeepSeek-V3's 0.875 by default, later "
          "positions falling as NVIDIA measured: engine/speculative.py)", 0.0, 1.0, questions=("infer", "hyperbola", "simulate", "pareto", "plan",
                                                                   "fleet", "price", "slowmode"),
          why_not="speculative decoding is not modelled for this question"),
    Field("mtp", "int", None, "self-speculation with the model's multi-token-prediction head, K tokens per step", 1,
          8, unit="tokens", questions=("infer", "hyperbola", "simulate", "pareto", "plan", "fleet", "price", "slowmode"),
          why_not="speculative decoding is not modelled for this question"),
    Field("ep_comm", "choice", "bf16", "EP all-to-all: bf16 both ways; fp8 dispatch + bf16 combine (DeepEP "
          "low-latency); deepep: fp8 dispatch, one copy per remote domain (DeepEP normal)",
          choices=("bf16", "fp8", "deepep"), questions=STEP, why_not="it prices no expert-parallel step"),
    Field("ep_overlap", "bool", False, "overlap the EP all-to-all with compute (two micro-batches)", flag="--overlap-ep",
          questions=STEP, why_not="it prices no expert-parallel step"),
    Field("moe_sharding", "choice", "tp", "a TP group's routed experts: tp (each expert split over the group's "
          "ranks) or ep (whole experts spread over them: SGLang's --ep-size or TensorRT-LLM's --ep_size equal to the "
          "TP size without attention DP; each rank reads whole experts and the step waits on the rank the batch "
          "touched most)", choices=("tp", "ep"), questions=STEP, why_not="it prices no expert-parallel step"),
    Field("ep_imbalance", "imbalance", 1.0, "busiest expert-parallel rank's routed tokens / the mean: a number >= 1, "
          "'routing' (DeepSeek-R1's measured skew) or 'eplb' (with redundant experts)", questions=STEP,
          why_not="it prices no expert-parallel step"),
)
_BY_NAME = {f.name: f for f in DEPLOYMENT_FIELDS}
SPECULATION_FIELDS = ("draft", "spec_k", "acceptance", "mtp")
TRANSPORT_FIELDS = ("ep_comm", "ep_overlap", "ep_imbalance")
# the fields the setup applies as they are (analyses.setup.with_deployment_knobs): every serving analysis passes
# them through unnamed (**knobs), so a new one is declared here and acts there, and no question in between changes
KNOB_FIELDS = (*TRANSPORT_FIELDS, "moe_sharding", "adp_balance", "max_running", "price_usd_per_hour", "what_if")
LAYOUT_FIELDS = ("chips", "tp", "pp", "ep", "dp", "cp")


@dataclass(frozen=True)
class Deployment:
    """What runs (validated; see DEPLOYMENT_FIELDS for each field's unit, bounds and meaning). model and hardware are
    names or paths (or already-resolved Model / Hardware objects from Python)."""
    model: object = DEFAULT_MODEL
    hardware: object = DEFAULT_HARDWARE
    chips: int | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    dp: int | None = None
    cp: int | None = None
    attention_sharding: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    engine: object = DEFAULT_ENGINE
    max_running: int | None = None
    efficiency: str = "calibrated"
    profile: str | None = None
    what_if: tuple[tuple[str, str], ...] = ()      # (hardware field, value text) pairs, applied by analyses/setup.py
    price_usd_per_hour: float | None = None
    draft: str | None = None
    spec_k: int | None = None
    acceptance: float | None = None
    mtp: int | None = None
    ep_comm: str = "bf16"
    ep_overlap: bool = False
    ep_imbalance: object = 1.0
    adp_balance: bool = False
    moe_sharding: str = "tp"

    @classmethod
    def of(cls, **raw) -> Deployment:
        """Validate raw values (strings from a command line or a query string, JSON or Python values) once; an
        unknown key is refused naming the closest fields."""
        return cls(**validated(raw, _BY_NAME, "deployment"))

    def set_fields(self) -> dict:
        """The fields that differ from their defaults (what the user asked for)."""
        return {f.name: getattr(self, f.name) for f in DEPLOYMENT_FIELDS if getattr(self, f.name) != f.default}

    def to_dict(self) -> dict:
        d = {f.name: _plain(getattr(self, f.name)) for f in dc_fields(self)}
        d["what_if"] = [f"{k}={v}" for k, v in self.what_if]       # as --set takes them
        return d

    @property
    def speculating(self) -> bool:
        return any(getattr(self, n) is not None for n in SPECULATION_FIELDS)


def _plain(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return getattr(v, "id", str(v))


def validated(raw: dict, declared: dict, what: str) -> dict:
    out = {}
    for k, v in raw.items():
        f = declared.get(k)
        if f is None:
            from tokenmath.base.errors import unknown_name
            raise unknown_name(k, k, declared)
        if (f.kind == "text" or f.name == "efficiency") and v is not None and not isinstance(v, str):
            out[k] = v                  # a resolved object from Python (Model, Hardware, EngineProfile)
        elif f.kind == "length":
            out[k] = v                  # a count or a distribution's spec: workload._length checks it
        elif f.kind == "overrides":
            out[k] = () if v is None else as_overrides(v, f)
        else:
            out[k] = coerce_basic(f, v)
    if not out:
        return out
    if out.get("price_usd_per_hour") is not None and "price_usd_per_hour" in dict(out.get("what_if") or ()):
        raise InputError("set.price_usd_per_hour", "also given as --price-usd-per-hour", "one of the two")
    lay = [n for n in LAYOUT_FIELDS if out.get(n) is not None]
    if out.get("chips") is not None and len(lay) > 1:
        prod = 1
        for n in lay:
            if n != "chips":
                prod *= out[n]
        if all(out.get(n) is not None for n in ("tp", "pp", "ep", "dp")) and prod != out["chips"]:
            raise InputError("chips", f"{out['chips']} is not tp x pp x ep x dp x cp = {prod}",
                             "chips equal to the product of the degrees, or leave one degree out")
    return out


def field(name: str) -> Field:
    """The declaration of one Deployment field."""
    return _BY_NAME[name]
