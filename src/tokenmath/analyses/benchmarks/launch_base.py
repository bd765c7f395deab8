"""What every engine's launch command shares: the server tokenmath laid out (ServerSpec), the command that starts it
(LaunchCommand), the checks on a spec that hold for every engine, and the guard that writes a flag, a key or a value
only when data/engine_flags.toml lists it for that tool (each list read off the engine's own source at a pinned
commit). The engines' own mappings live in launch_vllm.py, launch_sglang.py and launch_trtllm.py; launch_commands.py
is the entry point."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from tokenmath.base.errors import InputError, show
from tokenmath.engine.expert_parallel import EP_COMM as EP_COMMS    # the all-to-alls priced, as --ep-comm names them

KV_DTYPES = ("bf16", "fp16", "fp8")
WEIGHT_QUANTS = ("fp8",)
# the expert-parallel settings a spec may ask for beyond its layout: each engine writes those it has a pinned flag or
# key for and records it (Command.honour); launch_commands names the rest (unwritten.py), never drops them
OPTION_FIELDS = ("ep_comm", "ep_overlap", "eplb_redundant", "adp_balance", "experts_whole")
ROLES = ("both", "prefill", "decode")
HEAD = "HEAD_NODE_IP"          # stands for the first node's address in a multi-node command; notes say to replace it


@dataclass(frozen=True)
class ServerSpec:
    """One engine server (one instance) as tokenmath laid it out.

    max_running and max_batched_tokens are per engine step, as vLLM's --max-num-seqs and --max-num-batched-tokens
    count them: per data-parallel rank when the server runs several (ep > 1 or dp > 1). An engine that counts them
    per server instead (SGLang under DP attention) is written the server-wide total, with a note."""
    model: str                     # Hugging Face id or path
    tp: int = 1
    pp: int = 1
    ep: int = 1                    # MoE: expert-parallel group count; attention is data-parallel over the ep ranks
                                   # (DP attention), experts sharded over ep x tp ranks; 1 = no expert parallelism
    dp: int = 1                    # dense: independent replicas inside one server (vLLM --data-parallel-size)
    max_running: int | None = None  # most sequences running at once
    max_batched_tokens: int | None = None  # token budget per step / prefill chunk
    kv_dtype: str = "bf16"         # tokenmath's names: bf16, fp16, fp8
    weight_quant: str | None = None  # "fp8": quantize a 16-bit checkpoint at load; None: serve the checkpoint as is
    max_model_len: int = 4096
    draft_model: str | None = None  # draft-model speculation (HF id)
    mtp_tokens: int | None = None  # MTP / NextN speculation depth (DeepSeek-V3 style), None: off
    spec_tokens: int | None = None  # draft tokens per step for draft_model
    role: str = "both"             # "both" (colocated) | "prefill" | "decode" (disaggregated pools)
    nodes: int = 1                 # nodes one server spans (chips per server / scale-up domain, rounded up)
    port: int = 8000
    ep_comm: str = "bf16"          # the EP all-to-all priced: bf16; fp8 (DeepEP low-latency); deepep (DeepEP normal)
    ep_overlap: bool = False       # the EP all-to-all overlapped with compute over two micro-batches
    eplb_redundant: int | None = None  # EPLB with this many redundant experts; None: no EPLB
    adp_balance: bool = False      # the scheduler balances prompts over the attention-DP groups (a coordinated wait)
    experts_whole: bool = False    # ep 1, tp > 1: the routed experts whole over the TP ranks (--moe-sharding ep)

    @property
    def replicas(self) -> int:
        """Data-parallel ranks inside the server: the ep attention groups of a MoE, else the dp replicas."""
        return self.ep if self.ep > 1 else self.dp

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.replicas


@dataclass(frozen=True)
class LaunchCommand:
    engine: str                    # "vllm" | "sglang" | "trtllm"
    argv: list[str]                # the command (per node where it must be started on each node: say so in notes)
    files: dict[str, str]          # extra files the command reads (e.g. TRT-LLM's --extra_llm_api_options YAML)
    notes: list[str]
    sources: dict                  # {tool name: {repo, commit, path}} of every flag list used
    unwritten: tuple[str, ...] = ()  # OPTION_FIELDS the spec set that this engine's command does not carry


def table(tool: str) -> dict:
    from tokenmath.specs.catalog import shipped
    return shipped("engine_flags.toml")[tool]


def source(tool: str) -> dict:
    t = table(tool)
    return {k: t[k] for k in ("repo", "commit", "path")}


def _listed(tool: str, kind: str, name: str, value=None) -> None:
    t = table(tool)
    if name not in t.get(kind, ()):
        raise AssertionError(f"{name} is not among the {kind} of data/engine_flags.toml [{tool}]")
    allowed = t.get("values", {}).get(name)
    if allowed is not None and value not in allowed:
        raise AssertionError(f"{name} {value!r} is not among the values data/engine_flags.toml [{tool}] lists")


@dataclass
class Command:
    """A command being written: flags go in only when the pinned table lists them (and the value, where it lists
    values); `tools` records every table read, for LaunchCommand.sources. `engine` holds the flags an engine wrapper
    (NVIDIA Dynamo's dynamo.vllm / dynamo.sglang) passes through; `frontend` holds the server's own (the port)."""
    head: list[str]
    engine: list[str] = field(default_factory=list)
    frontend: list[str] = field(default_factory=list)
    files: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    honoured: list[str] = field(default_factory=list)    # OPTION_FIELDS the flags written carry

    def honour(self, name: str) -> None:
        if name not in OPTION_FIELDS:
            raise AssertionError(f"{name} is not one of launch_base.OPTION_FIELDS")
        if name not in self.honoured:
            self.honoured.append(name)

    def use(self, tool: str) -> None:
        if tool not in self.tools:
            self.tools.append(tool)

    def flag(self, tool: str, name: str, value=None, frontend: bool = False) -> None:
        _listed(tool, "flags", name, value)
        self.use(tool)
        out = self.frontend if frontend else self.engine
        out.append(name)
        if value is not None:
            out.append(str(value))

    def json_value(self, tool: str, value: dict) -> str:
        """A JSON object whose every key (and enumerated value) the table `tool` lists."""
        for key, v in value.items():
            _listed(tool, "keys", key, v if key in table(tool).get("values", {}) else None)
        self.use(tool)
        return json.dumps(value, separators=(",", ":"))

    def argv(self) -> list[str]:
        return self.head + self.engine + self.frontend


def yaml_text(tool: str, value: dict, cmd: Command, prefix: str = "") -> str:
    """A small YAML mapping (dicts of str / int / bool) with every dotted key checked against the table `tool`.
    Strings are written as JSON strings, which YAML reads as double-quoted scalars."""
    lines = []
    for key, v in value.items():
        dotted = prefix + key
        enumerated = dotted in table(tool).get("values", {})
        _listed(tool, "keys", dotted, v if enumerated else None)
        indent = "  " * prefix.count(".")
        if isinstance(v, dict):
            lines.append(f"{indent}{key}:")
            lines.append(yaml_text(tool, v, cmd, dotted + ".").rstrip("\n"))
        else:
            text = ("true" if v else "false") if isinstance(v, bool) else str(v) if isinstance(v, int) else \
                json.dumps(str(v))
            lines.append(f"{indent}{key}: {text}")
    cmd.use(tool)
    return "\n".join(lines) + "\n"


def _whole(name: str, v, least: int, most: int | None = None, none_ok: bool = False) -> None:
    if v is None and none_ok:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < least or (most is not None and v > most):
        span = f"a whole number from {least}" + (f" to {most}" if most is not None else " up")
        raise InputError(name, f"{show(v)} is not {span}", span + (", or None" if none_ok else ""))


def check(spec: ServerSpec) -> None:
    """Refuse a spec no engine could be started with (each engine refuses, in its own module, what only it cannot
    express)."""
    if not isinstance(spec.model, str) or not spec.model.strip():
        raise InputError("model", f"{show(spec.model)} is not a model name", "a Hugging Face id or a path")
    for name in ("tp", "pp", "ep", "dp", "nodes", "max_model_len"):
        _whole(name, getattr(spec, name), 1)
    _whole("port", spec.port, 1, 65535)
    for name in ("max_running", "max_batched_tokens", "mtp_tokens", "spec_tokens", "eplb_redundant"):
        _whole(name, getattr(spec, name), 1, none_ok=True)
    if spec.ep_comm not in EP_COMMS:
        raise InputError("ep_comm", f"{show(spec.ep_comm)} is not an EP all-to-all tokenmath prices",
                         ", ".join(EP_COMMS))
    for name in ("ep_overlap", "adp_balance"):
        if not isinstance(getattr(spec, name), bool):
            raise InputError(name, f"{show(getattr(spec, name))} is not True or False", "True or False")
    if spec.kv_dtype not in KV_DTYPES:
        raise InputError("kv_dtype", f"{show(spec.kv_dtype)} is not a KV cache dtype tokenmath writes",
                         ", ".join(KV_DTYPES))
    if spec.weight_quant is not None and spec.weight_quant not in WEIGHT_QUANTS:
        raise InputError("weight_quant", f"{show(spec.weight_quant)} is not a load-time quantization tokenmath writes",
                         "fp8, or None to serve the checkpoint as it is")
    if spec.role not in ROLES:
        raise InputError("role", f"{show(spec.role)} is not a server role", ", ".join(ROLES))
    if spec.draft_model is not None and (not isinstance(spec.draft_model, str) or not spec.draft_model.strip()):
        raise InputError("draft_model", f"{show(spec.draft_model)} is not a model name", "a Hugging Face id, or None")
    if spec.draft_model is not None and spec.mtp_tokens is not None:
        raise InputError("mtp_tokens", "a server speculates with a draft model or with MTP, not both",
                         "draft_model or mtp_tokens, not both")
    if spec.spec_tokens is not None and spec.draft_model is None:
        raise InputError("spec_tokens", "draft tokens per step need a draft model", "set draft_model, or leave "
                         "spec_tokens None (MTP's depth is mtp_tokens)")
    if spec.nodes > spec.chips:
        raise InputError("nodes", f"{spec.nodes} nodes for a server of {spec.chips} chips",
                         f"at most {spec.chips} nodes")


def options_set(spec: ServerSpec) -> tuple[str, ...]:
    """The OPTION_FIELDS `spec` sets away from their defaults (what its command must carry or name)."""
    defaults = {f: ServerSpec.__dataclass_fields__[f].default for f in OPTION_FIELDS}
    return tuple(f for f in OPTION_FIELDS if getattr(spec, f) != defaults[f])


def draft_tokens(spec: ServerSpec, cmd: Command) -> int:
    """The draft tokens per step of draft-model speculation; 4 (export's default) when spec_tokens is unset, said in
    a note."""
    if spec.spec_tokens is None:
        cmd.notes.append("spec_tokens unset: 4 draft tokens per step")
        return 4
    return spec.spec_tokens


def shared_notes(spec: ServerSpec, cmd: Command) -> None:
    """Notes every engine writes the same way."""
    if spec.ep > 1 and spec.dp > 1:
        cmd.notes.append(f"run {spec.dp} copies of this server ({spec.tp * spec.pp * spec.ep} chips each) behind a "
                         "load balancer, each on its own port or node: the command is one copy's")
