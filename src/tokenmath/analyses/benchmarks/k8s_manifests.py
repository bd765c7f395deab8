"""Kubernetes manifests for a serving plan, checked offline against the published schemas.

Two stacks, one shape: a plan is a list of pools (one colocated pool, or a prefill pool and a decode pool), each
with its replicas, the GPUs and nodes one server instance takes, and the engine flags that instance runs with (the
caller's, e.g. launch_commands.engine_args; written after the model exactly as given).

NVIDIA Dynamo: a DynamoGraphDeployment (apiVersion nvidia.com/v1beta1), shaped as ai-dynamo/dynamo @ 2a6da14c8
(2026-08-21) writes examples/backends/{vllm,sglang,trtllm}/deploy/{agg,disagg,disagg-multinode}.yaml: a
`Frontend` component (type frontend) and one component per pool, type worker / prefill / decode, named as those
examples name them; its `main` container runs `python3 -m dynamo.<engine>` with the model, the engine flags, and the
role flags below; `nvidia.com/gpu` limits are per pod, so an instance over N nodes is `multinode.nodeCount: N` with
GPUs / N per pod (disagg-multinode.yaml: tp 8 on 2 nodes, 4 GPUs each). The role flags, each read at that commit:
- vLLM: --disaggregation-mode prefill|decode (components/src/dynamo/vllm/backend_args.py; --is-prefill-worker is
  deprecated, docs/fern/pages/reference/general/releases/deprecations.mdx) and --kv-transfer-config NixlConnector,
  which a prefill worker must be given (components/src/dynamo/vllm/args.py) and disagg.yaml gives both.
- SGLang: --disaggregation-mode, --disaggregation-transfer-backend nixl, --disaggregation-bootstrap-port 12345 and
  --host 0.0.0.0, SGLang's own server flags as examples/backends/sglang/deploy/disagg.yaml passes them through.
- TensorRT-LLM: --disaggregation-mode (components/src/dynamo/trtllm/backend_args.py) and, for what
  engine_configs/qwen3/{prefill,decode}.yaml set, the dynamic flags --trtllm.cache_transceiver_config.backend DEFAULT
  (+ --trtllm.disable_overlap_scheduler true on prefill) (components/src/dynamo/trtllm/dynamic_flags.py); dynamo.trtllm
  takes its own flags (--tensor-parallel-size, --expert-parallel-size, ...), not trtllm-serve's.
A flag the caller already wrote is not written again. The image defaults to nvcr.io/nvidia/ai-dynamo/<engine>-runtime
at the current release, 1.4.0 (docs/fern/pages/reference/general/release-artifacts.mdx; the examples write
my-registry/...:my-tag); a caller's image must carry a MAJOR.MINOR.PATCH tag, as Dynamo's admission reads the
runtime version from it (deploy/operator/internal/runtimeversion/runtimeversion.go). The Hugging Face token comes
from the secret hf-token-secret as the examples name it, optional here so public models need none.

llm-d: values for the llm-d-modelservice Helm chart (llm-d-incubation/llm-d-modelservice @ 3051935eb, chart v0.4.12):
vLLM only (modelCommand vllmServe: the chart writes `vllm serve <model> --port --served-model-name` and the tensor /
data-parallel flags from `parallelism`, so those are taken out of the engine flags and put there;
templates/_helpers.tpl). Colocated: decode only, prefill.create false, routing proxy off (examples/values-xpu.yaml);
disaggregated: both sections with NixlConnector and the NIXL side channel (examples/values-pd.yaml). An instance over
N nodes sets `multinode: true` (LeaderWorkerSet; for every pool, the chart has one switch) with parallelism.workers N,
and runs vLLM's multi-node data-parallel launch by hand (modelCommand custom), as llm-d/llm-d's
guides/wide-ep-lws/manifests/modelserver/base/decode.yaml does; tensor or pipeline parallelism across nodes is not
written (refused). GPUs per pod are written into resources explicitly (the chart then keeps them).

Validation (validate): the real jsonschema library against data/schemas (sources in data/schemas/SOURCES.toml).
The chart's values.schema.json is draft-07 and used as is. The CRD's openAPIV3Schema is a Kubernetes structural
schema, turned into the JSON Schema that means the same at load time (from_structural), the shipped file untouched:
- an object schema with `properties` and no `x-kubernetes-preserve-unknown-fields: true` gets
  `additionalProperties: false`: the API server prunes unknown fields there, and kubectl's default strict field
  validation refuses them, so a misspelt field is an error here too; preserve-unknown-fields objects stay open;
- `x-kubernetes-int-or-string: true` means anyOf integer / string (added where the CRD does not write it already);
  `nullable: true` adds "null" to the type;
- the root requires apiVersion (= nvidia.com/v1beta1), kind (= DynamoGraphDeployment) and metadata.name, as the API
  server does before it applies the CRD's schema.
Not checked: the CEL rules (x-kubernetes-validations, e.g. component names unique case-insensitively), list-map key
uniqueness (x-kubernetes-list-type: map), integer formats (int32 ranges), and the admission webhooks.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shlex
from dataclasses import dataclass

from tokenmath.base.errors import InputError, show, unknown_name

ROLES = ("both", "prefill", "decode")
GPU = "nvidia.com/gpu"
HF_SECRET = "hf-token-secret"
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
DYNAMO_API, DYNAMO_KIND, DYNAMO_RELEASE = "nvidia.com/v1beta1", "DynamoGraphDeployment", "1.4.0"
LLMD_IMAGE = "ghcr.io/llm-d/llm-d-cuda:latest"      # what examples/values-pd.yaml runs (a moving tag: pass image=)
LLMD_PORT, LLMD_PROXY_PORT, NIXL_PORT, DP_RPC_PORT = 8000, 8200, 5600, 5555   # values.yaml, values-pd, wide-ep guide
SCHEMAS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", "schemas")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")          # an RFC 1123 label: DNS names of the objects made
# the image tag Dynamo's admission parses (runtimeversion.go imageTagPattern)
_SEMVER = re.compile(r"[vV]?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")

# engine -> (module, model flags, component name per role, role flags per disaggregated role), from the pinned examples
_DYNAMO = {
    "vllm": ("dynamo.vllm", ("--model",),
             {"both": "VllmDecodeWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"},
             lambda role: [("--disaggregation-mode", role), ("--kv-transfer-config", NIXL)]),
    "sglang": ("dynamo.sglang", ("--model-path", "--served-model-name"),
               {"both": "decode", "prefill": "prefill", "decode": "decode"},
               lambda role: [("--disaggregation-mode", role), ("--disaggregation-transfer-backend", "nixl"),
                             ("--disaggregation-bootstrap-port", "12345"), ("--host", "0.0.0.0")]),
    "trtllm": ("dynamo.trtllm", ("--model-path", "--served-model-name"),
               {"both": "TRTLLMWorker", "prefill": "prefill", "decode": "decode"},
               lambda role: [("--disaggregation-mode", role), ("--trtllm.cache_transceiver_config.backend", "DEFAULT")]
               + ([("--trtllm.disable_overlap_scheduler", "true")] if role == "prefill" else [])),
}
DYNAMO_IMAGES = {"vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime", "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime",
                 "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime"}


@dataclass(frozen=True)
class Pool:
    role: str               # "both" (colocated) | "prefill" | "decode"
    replicas: int           # server instances in this pool
    chips_per_replica: int  # GPUs one instance uses
    nodes_per_replica: int  # nodes one instance spans (1 if it fits one node)
    engine_args: list[str]  # the engine flags after the model, as the engine parses them


def _check(name: str, model: str, pools) -> list[Pool]:
    if not isinstance(name, str) or len(name) > 63 or not _NAME.fullmatch(name):
        raise InputError("name", f"{show(name)} is not a Kubernetes object name",
                         "lower-case letters, digits and '-', starting and ending with a letter or digit, 63 at most")
    if not isinstance(model, str) or not model.strip():
        raise InputError("model", f"{show(model)} is not a model to serve", "a Hugging Face id, e.g. org/name")
    pools = list(pools) if isinstance(pools, (list, tuple)) else []
    if not pools or not all(isinstance(p, Pool) for p in pools):
        raise InputError("pools", "needs a list of Pool", "one Pool('both', ...), or a prefill and a decode Pool")
    roles = sorted(str(p.role) for p in pools)
    if roles not in (["both"], ["decode", "prefill"]):
        raise InputError("pools", f"roles {roles} are not a deployment", f"roles are {', '.join(ROLES)}: one pool "
                         "of role 'both', or one 'prefill' and one 'decode'")
    for p in pools:
        for field in ("replicas", "chips_per_replica", "nodes_per_replica"):
            v = getattr(p, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{p.role}.{field}", f"{show(v)} is not a count", "an integer >= 1")
        if p.chips_per_replica % p.nodes_per_replica:
            raise InputError(f"{p.role}.chips_per_replica", f"{p.chips_per_replica} GPUs do not split evenly over "
                             f"{p.nodes_per_replica} nodes", "a multiple of nodes_per_replica")
        if not isinstance(p.engine_args, (list, tuple)) or not all(isinstance(a, str) for a in p.engine_args):
            raise InputError(f"{p.role}.engine_args", "needs a list of strings", "e.g. ['--tensor-parallel-size', '8']")
    return pools


def _has(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _with_role_flags(args: list[str], extra: list[tuple[str, str]]) -> list[str]:
    """args + each (flag, value) of extra whose flag args does not already set."""
    out = list(args)
    for flag, value in extra:
        if not _has(args, flag):
            out += [flag, value]
    return out


def _dynamo_image(engine: str, image: str | None) -> str:
    if image is None:
        return f"{DYNAMO_IMAGES[engine]}:{DYNAMO_RELEASE}"
    ref = image.split("@", 1)[0] if isinstance(image, str) else ""
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else ""
    if not _SEMVER.fullmatch(tag.strip()):
        raise InputError("image", f"{show(image)} has no MAJOR.MINOR.PATCH tag: Dynamo's admission reads the runtime "
                         "version from it (or from runtimeVersionOverride, which export does not guess)",
                         f"an image tagged with its Dynamo release, e.g. {DYNAMO_IMAGES[engine]}:{DYNAMO_RELEASE}")
    return image


def dynamo_graph_deployment(name: str, model: str, engine: str, pools: list[Pool], image: str | None = None) -> dict:
    """A DynamoGraphDeployment (nvidia.com/v1beta1) serving `model` with `engine` over `pools` (module docstring)."""
    if engine not in _DYNAMO:
        raise unknown_name("engine", str(engine), _DYNAMO)
    pools = _check(name, model, pools)
    image = _dynamo_image(engine, image)
    module, model_flags, names, role_flags = _DYNAMO[engine]
    frontend = {"name": "Frontend", "type": "frontend", "replicas": 1,
                "podTemplate": {"spec": {"containers": [{"name": "main", "image": image}]}}}
    components = [frontend]
    for p in pools:
        args = [x for flag in model_flags for x in (flag, model)] + list(p.engine_args)
        if p.role != "both":
            extra = role_flags(p.role)
            if engine == "trtllm" and _has(args, "--override-engine-args"):   # exclusive with --trtllm.* (args.py)
                extra = extra[:1]
            args = _with_role_flags(args, extra)
        container = {"name": "main", "image": image, "command": ["python3", "-m", module], "args": args,
                     "envFrom": [{"secretRef": {"name": HF_SECRET, "optional": True}}],
                     "resources": {"limits": {GPU: str(p.chips_per_replica // p.nodes_per_replica)}}}
        comp = {"name": names[p.role], "type": "worker" if p.role == "both" else p.role, "replicas": p.replicas}
        if p.nodes_per_replica > 1:
            comp["multinode"] = {"nodeCount": p.nodes_per_replica}
        comp["podTemplate"] = {"spec": {"containers": [container]}}
        components.append(comp)
    spec = {"backendFramework": engine, "components": components}
    if engine == "trtllm" and any(p.nodes_per_replica > 1 for p in pools):   # MPI in the image runs as root
        spec["env"] = [{"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"},
                       {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"}]   # trtllm disagg-multinode.yaml
    return {"apiVersion": DYNAMO_API, "kind": DYNAMO_KIND, "metadata": {"name": name}, "spec": spec}


_PARALLEL = {"tensor": ("--tensor-parallel-size", "-tp"), "data": ("--data-parallel-size", "-dp"),
             "dataLocal": ("--data-parallel-size-local", "-dpl")}


def _split_parallel(args: list[str], role: str) -> tuple[dict, list[str]]:
    """vLLM's tensor / data-parallel sizes out of args (the chart writes them from `parallelism`), and the rest."""
    found, rest, i = {}, [], 0
    flags = {f: key for key, fs in _PARALLEL.items() for f in fs}
    while i < len(args):
        a = args[i]
        flag, eq, value = a.partition("=")
        if flag in flags:
            if not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            if not value.isdigit() or int(value) < 1:
                raise InputError(f"{role}.engine_args", f"{flag} {show(value)} is not a size", f"{flag} N, N >= 1")
            found[flags[flag]] = int(value)
        else:
            rest.append(a)
        i += 1
    return found, rest


def _llmd_section(p: Pool, model: str, image: str, disagg: bool, model_gib: int | None) -> dict:
    sizes, rest = _split_parallel(list(p.engine_args), p.role)
    tp, dp, nodes = sizes.get("tensor", 1), sizes.get("data", 1), p.nodes_per_replica
    if dp % nodes:
        raise InputError(f"{p.role}.nodes_per_replica", f"one instance spans {nodes} nodes with data parallelism "
                         f"{dp}: llm-d-modelservice's LeaderWorkerSet runs one vLLM data-parallel group per node, and "
                         "tensor or pipeline parallelism across nodes is not written",
                         f"--data-parallel-size a multiple of {nodes}, or the Dynamo manifest")
    per_node = p.chips_per_replica // nodes
    port = LLMD_PROXY_PORT if disagg and p.role == "decode" else LLMD_PORT
    token = {"secretKeyRef": {"name": HF_SECRET, "key": "HF_TOKEN", "optional": True}}
    env = [{"name": "HF_TOKEN", "valueFrom": token}]
    ports = [{"containerPort": port, "protocol": "TCP"}]
    if disagg:
        rest = _with_role_flags(rest, [("--kv-transfer-config", NIXL)])
        env += [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_PORT)}]
        ports.append({"containerPort": NIXL_PORT, "protocol": "TCP"})
    run = {"modelCommand": "vllmServe", "args": rest}
    if nodes > 1:     # vLLM's multi-node data-parallel launch, one node per pod (the chart sets DP_SIZE(_LOCAL))
        serve = ["vllm", "serve", model, "--port", str(port), "--served-model-name", model, *rest]
        script = ("START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))\n" + f"exec {shlex.join(serve)} "
                  "--data-parallel-hybrid-lb --data-parallel-size $DP_SIZE --data-parallel-size-local $DP_SIZE_LOCAL "
                  f"--data-parallel-address $LWS_LEADER_ADDRESS --data-parallel-rpc-port {DP_RPC_PORT} "
                  "--data-parallel-start-rank $START_RANK\n")
        run = {"modelCommand": "custom", "command": ["/bin/sh", "-c"], "args": [script]}
    container = {"name": "vllm", "image": image, **run, "env": env, "ports": ports,
                 "resources": {"limits": {GPU: str(per_node)}, "requests": {GPU: str(per_node)}},
                 "mountModelVolume": model_gib is not None}
    return {"create": True, "replicas": p.replicas,
            "parallelism": {"tensor": tp, "data": dp, "dataLocal": dp // nodes, "workers": nodes},
            "containers": [container]}


def _label(model: str) -> str:
    """A Kubernetes label value for the model (as values-pd.yaml's facebook/opt-125m -> facebook-opt-125m)."""
    return re.sub(r"[^a-z0-9._-]+", "-", model.lower())[:63].strip("-._") or "model"


def llmd_modelservice_values(name: str, model: str, pools: list[Pool], image: str | None = None,
                             model_gib: int | None = None) -> dict:
    """Values for the llm-d-modelservice chart serving `model` with vLLM over `pools` (module docstring).
    model_gib: the model volume's size (an emptyDir the weights download into); None: no model volume, the
    weights download into the container's own file system (the chart's default volume is 5Mi)."""
    pools = _check(name, model, pools)
    if model_gib is not None and (isinstance(model_gib, bool) or not isinstance(model_gib, int) or model_gib < 1):
        raise InputError("model_gib", f"{show(model_gib)} is not a size in GiB", "an integer >= 1, or None")
    image = LLMD_IMAGE if image is None else image
    disagg = pools[0].role != "both"
    artifacts = {"name": model, "uri": f"hf://{model}",
                 "labels": {"llm-d.ai/inference-serving": "true", "llm-d.ai/model": _label(model)}}
    if model_gib is not None:
        artifacts["size"] = f"{model_gib}Gi"
    values = {"fullnameOverride": name, "multinode": any(p.nodes_per_replica > 1 for p in pools),
              "modelArtifacts": artifacts,
              "routing": {"servicePort": LLMD_PORT, "proxy": {"enabled": disagg, "secure": False}}}
    by_role = {("decode" if p.role == "both" else p.role): p for p in pools}
    for role in ("decode", "prefill"):
        p = by_role.get(role)
        values[role] = _llmd_section(p, model, image, disagg, model_gib) if p else {"create": False}
    return values


def to_yaml(doc: dict) -> str:
    """The document as YAML: yaml.safe_dump's safe types, keys in the order written (sort_keys=False), no line
    folding, multi-line strings (scripts) as literal blocks."""
    import yaml    # only when YAML is written
    return yaml.dump(doc, Dumper=_dumper(), sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 16)


@functools.cache
def _dumper():
    import yaml

    class Dumper(yaml.SafeDumper):
        pass
    Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s,
                                                                 style="|" if "\n" in s else None))
    return Dumper


def sources() -> dict:
    """data/schemas/SOURCES.toml: schema name -> where its file comes from."""
    import tomllib
    with open(os.path.join(SCHEMAS, "SOURCES.toml"), "rb") as fh:
        return tomllib.load(fh)


def from_structural(s: dict) -> dict:
    """A Kubernetes structural schema node as the JSON Schema that accepts the same (module docstring)."""
    out = dict(s)
    if "properties" in s:
        out["properties"] = {k: from_structural(v) for k, v in s["properties"].items()}
        if "additionalProperties" not in s and not s.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties", "not"):
        if isinstance(s.get(key), dict):
            out[key] = from_structural(s[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in s:
            out[key] = [from_structural(x) for x in s[key]]
    if s.get("x-kubernetes-int-or-string") and "anyOf" not in s:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if s.get("nullable") and isinstance(s.get("type"), str):
        out["type"] = [s["type"], "null"]
    return out


@functools.cache
def schema(schema_name: str) -> dict:
    """The JSON Schema validate() checks `schema_name` against (the CRD's converted as the module docstring says)."""
    src = sources()
    if schema_name not in src:
        raise unknown_name("schema", str(schema_name), src)
    with open(os.path.join(SCHEMAS, src[schema_name]["file"]), encoding="utf-8") as fh:
        s = json.load(fh)
    if "kind" in src[schema_name]:          # a CRD's openAPIV3Schema
        s = from_structural(s)
        s["$schema"] = "http://json-schema.org/draft-07/schema#"
        s["required"] = sorted(set(s.get("required", [])) | {"apiVersion", "kind", "metadata"})
        s["properties"]["apiVersion"] = dict(s["properties"]["apiVersion"], const=src[schema_name]["apiVersion"])
        s["properties"]["kind"] = dict(s["properties"]["kind"], const=src[schema_name]["kind"])
        s["properties"]["metadata"] = dict(s["properties"]["metadata"], required=["name"])
    return s


@functools.cache
def _validator(schema_name: str):
    from jsonschema.validators import validator_for    # only when a manifest is checked
    s = schema(schema_name)
    return validator_for(s)(s)


def validate(doc: dict, schema_name: str) -> None:
    """Refuse `doc` unless it validates against `schema_name`'s shipped schema; the InputError's field is the JSON
    path of the error jsonschema ranks first (best_match), e.g. spec.components[1].replicas."""
    from jsonschema.exceptions import best_match
    err = best_match(_validator(schema_name).iter_errors(doc))
    if err is None:
        return
    path = err.json_path[2:] if err.json_path.startswith("$.") else err.json_path.removeprefix("$")
    src = sources()[schema_name]
    msg = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    raise InputError(path or "document", f"does not validate against the {schema_name} schema: {msg}",
                     f"{src['repo']} {src['path']} @ {src['commit'][:12]}")
