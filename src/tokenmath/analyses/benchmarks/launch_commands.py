"""The command that starts one engine server as tokenmath laid it out, for vLLM (`vllm serve`), SGLang
(`python -m sglang.launch_server`) and TensorRT-LLM (`trtllm-serve`), with the files it reads and notes on what a
single command cannot say (the other nodes of a multi-node server, the router of a disaggregated pair, the copies of
a server).

Every flag, JSON key and YAML key written is one of data/engine_flags.toml's, each list read off the engine's own
argument parser or config class at a pinned commit; LaunchCommand.sources names them. A ServerSpec field an engine
cannot express is refused (InputError: field, problem, what would work) or said in a note, never dropped: an
expert-parallel setting (launch_base.OPTION_FIELDS) an engine has no pinned flag for is listed in
LaunchCommand.unwritten and named, with the reason, by unwritten.py. The mappings themselves: launch_vllm.py,
launch_sglang.py, launch_trtllm.py.
"""
from __future__ import annotations

from tokenmath.analyses.benchmarks import launch_sglang, launch_trtllm, launch_vllm
from tokenmath.analyses.benchmarks.launch_base import Command, LaunchCommand, ServerSpec, check, options_set, source
from tokenmath.analyses.benchmarks.unwritten import spec_notes
from tokenmath.base.errors import InputError, show

__all__ = ["ENGINES", "LaunchCommand", "ServerSpec", "engine_args", "launch"]

ENGINES = {"vllm": launch_vllm, "sglang": launch_sglang, "trtllm": launch_trtllm}


def _command(engine: str, spec: ServerSpec) -> Command:
    if engine not in ENGINES:
        raise InputError("engine", f"{show(engine)} is not an engine tokenmath writes launch commands for",
                         ", ".join(ENGINES))
    if not isinstance(spec, ServerSpec):
        raise InputError("spec", f"{show(spec)} is not a ServerSpec", "a ServerSpec")
    check(spec)
    return ENGINES[engine].command(spec)


def launch(engine: str, spec: ServerSpec, *, name_unwritten: bool = True) -> LaunchCommand:
    """The command that starts `spec` on `engine` ("vllm", "sglang" or "trtllm"): argv, the files it reads (by the
    name argv gives them), notes, the pinned source of every flag list used, and the expert-parallel settings it does
    not carry (`unwritten`), each named in the notes with why. name_unwritten False: the caller names them itself
    (export.py, which also says what each changed in its figures)."""
    cmd = _command(engine, spec)
    unwritten = tuple(n for n in options_set(spec) if n not in cmd.honoured)
    notes = list(cmd.notes) + (spec_notes(engine, spec, unwritten) if name_unwritten else [])
    return LaunchCommand(engine=engine, argv=cmd.argv(), files=dict(cmd.files), notes=notes,
                         sources={t: source(t) for t in cmd.tools}, unwritten=unwritten)


def engine_args(engine: str, spec: ServerSpec) -> list[str]:
    """The engine's flags after the model, without the server's own (--port): what a wrapper that runs the engine
    itself passes through (NVIDIA Dynamo's `python -m dynamo.vllm` and `dynamo.sglang` take vLLM's and SGLang's engine
    flags; for TensorRT-LLM these are trtllm-serve's flags, which a wrapper may name differently). A file a flag
    names (TensorRT-LLM's --extra_llm_api_options) is in launch(engine, spec).files."""
    return list(_command(engine, spec).engine)
