"""Kubernetes manifests (analyses/benchmarks/k8s_manifests.py): Dynamo's DynamoGraphDeployment and the
llm-d-modelservice chart's values for an aggregated Llama-3.1-70B and a disaggregated DeepSeek-V3, each checked with
jsonschema against the shipped schema; the expected fields are written out by hand, where the pinned examples put
them (ai-dynamo/dynamo @ 2a6da14c8 examples/backends/*/deploy/{agg,disagg,disagg-multinode}.yaml;
llm-d-incubation/llm-d-modelservice @ 3051935eb examples/values-pd.yaml, values-xpu.yaml)."""
import copy
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

from tokenmath.analyses.benchmarks import k8s_manifests as km
from tokenmath.analyses.benchmarks.k8s_manifests import (Pool, dynamo_graph_deployment, llmd_modelservice_values,
                                                         to_yaml, validate)
from tokenmath.base.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
LLAMA, DSV3 = "meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3"
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
DGD = "dynamographdeployment"
MS = "llm-d-modelservice"
TP8 = ["--tensor-parallel-size", "8"]
DEP8 = ["--tensor-parallel-size", "1", "--data-parallel-size", "8", "--enable-expert-parallel"]
DEP16 = ["--tensor-parallel-size", "1", "--data-parallel-size", "16", "--enable-expert-parallel"]
AGG = [Pool("both", 1, 8, 1, TP8)]
DISAGG = [Pool("prefill", 1, 8, 1, TP8 + ["--enable-expert-parallel"]), Pool("decode", 1, 8, 1, DEP8)]
DISAGG_2NODE = [Pool("prefill", 1, 8, 1, TP8 + ["--enable-expert-parallel"]), Pool("decode", 1, 16, 2, DEP16)]


def comps(doc):
    return {c["name"]: c for c in doc["spec"]["components"]}


def main(comp):
    (c,) = comp["podTemplate"]["spec"]["containers"]
    return c


def test_dynamo_aggregated_llama_vllm():
    doc = dynamo_graph_deployment("llama-70b", LLAMA, "vllm", AGG)
    validate(doc, DGD)
    assert doc["apiVersion"] == "nvidia.com/v1beta1" and doc["kind"] == "DynamoGraphDeployment"
    assert doc["metadata"] == {"name": "llama-70b"} and doc["spec"]["backendFramework"] == "vllm"
    c = comps(doc)
    assert list(c) == ["Frontend", "VllmDecodeWorker"]         # vllm/deploy/agg.yaml's names
    assert c["Frontend"] == {"name": "Frontend", "type": "frontend", "replicas": 1, "podTemplate": {"spec": {
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"}]}}}
    w = c["VllmDecodeWorker"]
    assert (w["type"], w["replicas"], "multinode" in w) == ("worker", 1, False)
    assert main(w) == {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                       "command": ["python3", "-m", "dynamo.vllm"],
                       "args": ["--model", LLAMA, "--tensor-parallel-size", "8"],
                       "envFrom": [{"secretRef": {"name": "hf-token-secret", "optional": True}}],
                       "resources": {"limits": {"nvidia.com/gpu": "8"}}}


def test_dynamo_aggregated_llama_sglang():
    doc = dynamo_graph_deployment("llama-70b", LLAMA, "sglang", [Pool("both", 2, 8, 1, ["--tp", "8"])])
    validate(doc, DGD)
    w = comps(doc)["decode"]                                   # sglang/deploy/agg.yaml names its worker "decode"
    assert (w["type"], w["replicas"]) == ("worker", 2)
    assert main(w)["command"] == ["python3", "-m", "dynamo.sglang"]
    assert main(w)["args"] == ["--model-path", LLAMA, "--served-model-name", LLAMA, "--tp", "8"]
    assert main(w)["image"] == "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.4.0"


def test_dynamo_disaggregated_deepseek_vllm():
    doc = dynamo_graph_deployment("dsv3", DSV3, "vllm", DISAGG)
    validate(doc, DGD)
    c = comps(doc)
    assert list(c) == ["Frontend", "VllmPrefillWorker", "VllmDecodeWorker"]     # vllm/deploy/disagg.yaml
    p, d = c["VllmPrefillWorker"], c["VllmDecodeWorker"]
    assert (p["type"], p["replicas"], d["type"], d["replicas"]) == ("prefill", 1, "decode", 1)
    assert main(p)["args"] == ["--model", DSV3, "--tensor-parallel-size", "8", "--enable-expert-parallel",
                               "--disaggregation-mode", "prefill", "--kv-transfer-config", NIXL]
    assert main(d)["args"] == ["--model", DSV3, "--tensor-parallel-size", "1", "--data-parallel-size", "8",
                               "--enable-expert-parallel", "--disaggregation-mode", "decode",
                               "--kv-transfer-config", NIXL]
    assert main(p)["resources"] == main(d)["resources"] == {"limits": {"nvidia.com/gpu": "8"}}


def test_dynamo_disaggregated_deepseek_sglang_and_trtllm():
    doc = dynamo_graph_deployment("dsv3", DSV3, "sglang", [Pool("prefill", 1, 8, 1, ["--tp", "8"]),
                                                           Pool("decode", 1, 8, 1, ["--tp", "8", "--dp", "8"])])
    validate(doc, DGD)
    c = comps(doc)
    assert [(n, x["type"]) for n, x in c.items()] == [("Frontend", "frontend"), ("prefill", "prefill"),
                                                      ("decode", "decode")]     # sglang/deploy/disagg.yaml
    assert main(c["prefill"])["args"] == [
        "--model-path", DSV3, "--served-model-name", DSV3, "--tp", "8", "--disaggregation-mode", "prefill",
        "--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port", "12345", "--host", "0.0.0.0"]
    assert main(c["decode"])["args"][4:9] == ["--tp", "8", "--dp", "8", "--disaggregation-mode"]
    trt = dynamo_graph_deployment("dsv3", DSV3, "trtllm", [Pool("prefill", 1, 8, 1, ["--tensor-parallel-size", "8"]),
                                                          Pool("decode", 1, 8, 1, ["--tensor-parallel-size", "8"])])
    validate(trt, DGD)
    t = comps(trt)
    assert main(t["prefill"])["command"] == ["python3", "-m", "dynamo.trtllm"]
    assert main(t["prefill"])["args"] == [
        "--model-path", DSV3, "--served-model-name", DSV3, "--tensor-parallel-size", "8",
        "--disaggregation-mode", "prefill", "--trtllm.cache_transceiver_config.backend", "DEFAULT",
        "--trtllm.disable_overlap_scheduler", "true"]
    assert main(t["decode"])["args"][-4:] == ["--disaggregation-mode", "decode",
                                              "--trtllm.cache_transceiver_config.backend", "DEFAULT"]
    assert main(t["decode"])["image"] == "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.4.0"


def test_dynamo_two_node_decode():
    """One 16-GPU decode instance over 2 nodes: multinode.nodeCount 2 and 8 GPUs per pod (disagg-multinode.yaml)."""
    doc = dynamo_graph_deployment("dsv3", DSV3, "vllm", DISAGG_2NODE)
    validate(doc, DGD)
    d = comps(doc)["VllmDecodeWorker"]
    assert (d["replicas"], d["multinode"]) == (1, {"nodeCount": 2})
    assert main(d)["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert main(d)["args"][3:6] == ["1", "--data-parallel-size", "16"]
    assert "multinode" not in comps(doc)["VllmPrefillWorker"]
    trt = dynamo_graph_deployment("dsv3", DSV3, "trtllm", DISAGG_2NODE)
    validate(trt, DGD)
    assert trt["spec"]["env"] == [{"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"},
                                  {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"}]


def test_dynamo_role_flags_the_caller_wrote_are_not_repeated():
    own = '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda"}'
    doc = dynamo_graph_deployment("dsv3", DSV3, "vllm", [Pool("prefill", 1, 8, 1, TP8 + ["--kv-transfer-config", own]),
                                                         Pool("decode", 1, 8, 1, TP8)])
    args = main(comps(doc)["VllmPrefillWorker"])["args"]
    assert args.count("--kv-transfer-config") == 1 and args[args.index("--kv-transfer-config") + 1] == own


def test_llmd_aggregated_llama():
    v = llmd_modelservice_values("llama-70b", LLAMA, AGG)
    validate(v, MS)
    assert v["fullnameOverride"] == "llama-70b" and v["multinode"] is False
    assert v["modelArtifacts"] == {"name": LLAMA, "uri": f"hf://{LLAMA}", "labels": {
        "llm-d.ai/inference-serving": "true", "llm-d.ai/model": "meta-llama-llama-3.1-70b-instruct"}}
    assert v["routing"] == {"servicePort": 8000, "proxy": {"enabled": False, "secure": False}}   # values-xpu.yaml
    assert v["prefill"] == {"create": False}
    d = v["decode"]
    assert (d["create"], d["replicas"]) == (True, 1)
    assert d["parallelism"] == {"tensor": 8, "data": 1, "dataLocal": 1, "workers": 1}
    (c,) = d["containers"]
    assert c["modelCommand"] == "vllmServe" and c["args"] == []     # the chart writes --tensor-parallel-size 8
    assert c["image"] == "ghcr.io/llm-d/llm-d-cuda:latest"
    assert c["resources"] == {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    assert c["ports"] == [{"containerPort": 8000, "protocol": "TCP"}]
    assert c["mountModelVolume"] is False and "size" not in v["modelArtifacts"]


def test_llmd_disaggregated_deepseek():
    v = llmd_modelservice_values("dsv3", DSV3, DISAGG, model_gib=700)
    validate(v, MS)
    assert v["multinode"] is False and v["routing"]["proxy"] == {"enabled": True, "secure": False}
    assert v["modelArtifacts"]["size"] == "700Gi"
    p, d = v["prefill"], v["decode"]
    assert (p["replicas"], d["replicas"]) == (1, 1)
    assert p["parallelism"] == {"tensor": 8, "data": 1, "dataLocal": 1, "workers": 1}
    assert d["parallelism"] == {"tensor": 1, "data": 8, "dataLocal": 8, "workers": 1}
    (pc,), (dc,) = p["containers"], d["containers"]
    assert pc["args"] == dc["args"] == ["--enable-expert-parallel", "--kv-transfer-config", NIXL]   # values-pd.yaml
    assert [x["containerPort"] for x in pc["ports"]] == [8000, 5600]      # prefill serves routing.servicePort
    assert [x["containerPort"] for x in dc["ports"]] == [8200, 5600]      # decode: behind the proxy's targetPort
    assert dc["env"][1:] == [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}]
    assert pc["resources"]["limits"] == dc["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert pc["mountModelVolume"] is dc["mountModelVolume"] is True


def test_llmd_two_node_decode():
    v = llmd_modelservice_values("dsv3", DSV3, DISAGG_2NODE)
    validate(v, MS)
    assert v["multinode"] is True
    d = v["decode"]
    assert d["parallelism"] == {"tensor": 1, "data": 16, "dataLocal": 8, "workers": 2}
    (c,) = d["containers"]
    assert (c["modelCommand"], c["command"]) == ("custom", ["/bin/sh", "-c"])
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert c["args"] == [
        "START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))\n"
        f"exec vllm serve {DSV3} --port 8200 --served-model-name {DSV3} --enable-expert-parallel "
        f"--kv-transfer-config '{NIXL}' --data-parallel-hybrid-lb --data-parallel-size $DP_SIZE "
        "--data-parallel-size-local $DP_SIZE_LOCAL --data-parallel-address $LWS_LEADER_ADDRESS "
        "--data-parallel-rpc-port 5555 --data-parallel-start-rank $START_RANK\n"]
    assert v["prefill"]["containers"][0]["modelCommand"] == "vllmServe"
    assert v["prefill"]["parallelism"]["workers"] == 1


def test_llmd_refuses_tensor_parallelism_across_nodes():
    with pytest.raises(InputError) as e:
        llmd_modelservice_values("dsv3", DSV3, [Pool("both", 1, 16, 2, ["--tensor-parallel-size", "16"])])
    assert e.value.field == "both.nodes_per_replica"
    validate(dynamo_graph_deployment("dsv3", DSV3, "vllm", [Pool("both", 1, 16, 2, ["--tensor-parallel-size", "16"])]),
             DGD)       # Dynamo's operator launches it (its vLLM multinode path); the manifest is the same shape


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d["spec"]["components"][1].__setitem__("replicas", "two"), "spec.components[1].replicas",
     "'two' is not of type 'integer'"),
    (lambda d: d["spec"]["components"][1].pop("name"), "spec.components[1]", "'name' is a required property"),
    (lambda d: d["spec"]["components"][1].__setitem__("replica", 1), "spec.components[1]", "'replica' was unexpected"),
    (lambda d: d["spec"]["components"][1].__setitem__("type", "prefil"), "spec.components[1].type", "is not one of"),
    (lambda d: d.__setitem__("apiVersion", "nvidia.com/v1alpha1"), "apiVersion", "'nvidia.com/v1beta1' was expected"),
    (lambda d: d["metadata"].pop("name"), "metadata", "'name' is a required property"),
])
def test_dynamo_broken_documents_are_refused_by_path(mutate, field, words):
    doc = dynamo_graph_deployment("dsv3", DSV3, "vllm", DISAGG)
    mutate(doc)
    with pytest.raises(InputError) as e:
        validate(doc, DGD)
    assert e.value.field == field and words in e.value.problem
    assert "2a6da14c8361" in e.value.valid


@pytest.mark.parametrize("mutate, field, words", [
    (lambda v: v["decode"].__setitem__("replicas", "two"), "decode.replicas", "'two' is not of type 'integer'"),
    (lambda v: v["decode"]["parallelism"].__setitem__("tensr", 8), "decode.parallelism", "'tensr' was unexpected"),
    (lambda v: v.__setitem__("multinode", "yes"), "multinode", "'yes' is not of type 'boolean'"),
])
def test_llmd_broken_values_are_refused_by_path(mutate, field, words):
    v = llmd_modelservice_values("dsv3", DSV3, DISAGG)
    mutate(v)
    with pytest.raises(InputError) as e:
        validate(v, MS)
    assert e.value.field == field and words in e.value.problem


@pytest.mark.parametrize("make", [
    lambda: dynamo_graph_deployment("llama-70b", LLAMA, "vllm", AGG),
    lambda: dynamo_graph_deployment("dsv3", DSV3, "sglang", DISAGG_2NODE),
    lambda: llmd_modelservice_values("llama-70b", LLAMA, AGG),
    lambda: llmd_modelservice_values("dsv3", DSV3, DISAGG_2NODE, model_gib=700),
])
def test_yaml_round_trips(make):
    doc = make()
    text = to_yaml(doc)
    assert yaml.safe_load(text) == doc
    assert text.startswith(next(iter(doc)) + ":")        # keys in the order written, not sorted


def test_scripts_are_literal_blocks():
    text = to_yaml(llmd_modelservice_values("dsv3", DSV3, DISAGG_2NODE))
    assert "- |\n      START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))\n      exec vllm serve" in text


@pytest.mark.parametrize("call, field", [
    (lambda: dynamo_graph_deployment("Llama_70B", LLAMA, "vllm", AGG), "name"),
    (lambda: dynamo_graph_deployment("x", "", "vllm", AGG), "model"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vlm", AGG), "engine"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", []), "pools"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", [DISAGG[0]]), "pools"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", AGG + DISAGG), "pools"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", [Pool("colocated", 1, 8, 1, TP8)]), "pools"),
    (lambda: validate([], DGD), ""),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", [Pool("both", 0, 8, 1, TP8)]), "both.replicas"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", [Pool("both", 1, 12, 8, TP8)]), "both.chips_per_replica"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", [Pool("both", 1, 8, 1, "--tp 8")]), "both.engine_args"),
    (lambda: dynamo_graph_deployment("x", LLAMA, "vllm", AGG, image="my-registry/vllm-runtime:my-tag"), "image"),
    (lambda: llmd_modelservice_values("x", LLAMA, AGG, model_gib=0), "model_gib"),
    (lambda: llmd_modelservice_values("x", LLAMA, [Pool("both", 1, 8, 1, ["-tp", "eight"])]), "both.engine_args"),
    (lambda: validate({}, "helm"), "schema"),
])
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(InputError) as e:
        call()
    assert e.value.field == (field or "document")


def test_a_versioned_image_of_the_callers_is_kept():
    doc = dynamo_graph_deployment("x", LLAMA, "vllm", AGG, image="registry.example/dynamo/vllm:1.4.0-patched@sha256:ab")
    assert main(comps(doc)["VllmDecodeWorker"])["image"] == "registry.example/dynamo/vllm:1.4.0-patched@sha256:ab"


def test_structural_schema_conversion():
    """The CRD's Kubernetes schema as JSON Schema, by hand: closed objects unless preserve-unknown-fields,
    int-or-string as anyOf, nullable as a null type; the rest (descriptions, x- keys) kept."""
    crd = {"type": "object", "properties": {
        "a": {"type": "object", "description": "d", "properties": {"b": {"type": "integer", "nullable": True}}},
        "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"e": {"type": "string"}}},
        "q": {"x-kubernetes-int-or-string": True},
        "l": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"k": {"type": "string"}}}}}}
    assert km.from_structural(crd) == {"type": "object", "additionalProperties": False, "properties": {
        "a": {"type": "object", "description": "d", "additionalProperties": False,
              "properties": {"b": {"type": ["integer", "null"], "nullable": True}}},
        "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"e": {"type": "string"}}},
        "q": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "l": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                         "properties": {"n": {"type": "string"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": False,
                                                         "properties": {"k": {"type": "string"}}}}}}


def test_shipped_schemas_and_their_sources():
    folder = ROOT / "src" / "tokenmath" / "data" / "schemas"
    src = tomllib.loads((folder / "SOURCES.toml").read_text())
    assert set(src) == {DGD, MS}
    for name, s in src.items():
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"]) and re.fullmatch(r"\d{4}-\d\d-\d\d", s["read"])
        assert s["repo"] and s["path"] and (folder / s["file"]).stat().st_size < 1_500_000
        Draft7Validator.check_schema(km.schema(name))           # each, as validate() uses it, is a valid schema
    crd = json.loads((folder / src[DGD]["file"]).read_text())
    assert crd["properties"]["spec"]["properties"]["components"]["items"]["properties"]["type"]["enum"] == [
        "frontend", "worker", "prefill", "decode", "planner", "epp"]
    assert "additionalProperties" not in crd["properties"]["spec"]     # shipped as published; closed at load
    assert km.schema(DGD)["properties"]["spec"]["additionalProperties"] is False
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["tokenmath"]
    assert {"data/schemas/*.json", "data/schemas/*.toml"} <= set(globs)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {"jsonschema>=4.20", "pyyaml>=6.0"} <= set(deps)


def test_validate_does_not_change_the_document():
    doc = dynamo_graph_deployment("dsv3", DSV3, "vllm", DISAGG_2NODE)
    before = copy.deepcopy(doc)
    validate(doc, DGD)
    assert doc == before
