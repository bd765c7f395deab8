"""analyses/benchmarks/launch_commands: the command that starts one server tokenmath laid out, on vLLM, SGLang and
TensorRT-LLM. The expected commands are written out by hand from each engine's pinned parser
(data/engine_flags.toml); every flag, JSON key and YAML key written must be one of those lists."""
import json
import re

import pytest

from tokenmath.analyses.benchmarks.launch_base import table
from tokenmath.analyses.benchmarks.launch_commands import ENGINES, LaunchCommand, ServerSpec, engine_args, launch
from tokenmath.base.errors import InputError

LLAMA = ServerSpec(model="meta-llama/Meta-Llama-3.1-70B", tp=8, max_running=1024, max_batched_tokens=8192,
                   max_model_len=2048)
# DeepSeek-V3 on one 8-GPU node: 8 attention-DP groups of one rank, experts over all 8, FP8 KV cache, one MTP token
DSV3 = ServerSpec(model="deepseek-ai/DeepSeek-V3", ep=8, kv_dtype="fp8", mtp_tokens=1, max_running=256,
                  max_batched_tokens=2048, max_model_len=4096)
DSV3_PREFILL = ServerSpec(**{**DSV3.__dict__, "role": "prefill", "max_running": 16, "max_batched_tokens": 16384})
DSV3_DECODE = ServerSpec(**{**DSV3.__dict__, "role": "decode"})
SPECS = {"llama-70b-tp8": LLAMA, "dsv3-ep8": DSV3, "dsv3-prefill": DSV3_PREFILL, "dsv3-decode": DSV3_DECODE}

MTP1_JSON = '{"method":"mtp","num_speculative_tokens":1}'
NIXL_JSON = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
VLLM_DSV3 = ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "1", "--data-parallel-size", "8",
             "--enable-expert-parallel"]
SGL_DSV3 = ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp-size", "8",
            "--dp-size", "8", "--enable-dp-attention", "--ep-size", "8"]
SGL_MTP1 = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "2"]
TRT_DSV3 = ["trtllm-serve", "deepseek-ai/DeepSeek-V3", "--tp_size", "8", "--ep_size", "8"]
YAML_OPT = ["--extra_llm_api_options", "extra_llm_api_options.yaml"]
PORT = ["--port", "8000"]

EXPECTED = {
    ("vllm", "llama-70b-tp8"): ["vllm", "serve", "meta-llama/Meta-Llama-3.1-70B", "--tensor-parallel-size", "8",
                                "--max-num-seqs", "1024", "--max-num-batched-tokens", "8192", "--kv-cache-dtype",
                                "auto", "--max-model-len", "2048"] + PORT,
    ("vllm", "dsv3-ep8"): VLLM_DSV3 + ["--max-num-seqs", "256", "--max-num-batched-tokens", "2048", "--kv-cache-dtype",
                                       "fp8", "--max-model-len", "4096", "--speculative-config", MTP1_JSON] + PORT,
    ("vllm", "dsv3-prefill"): VLLM_DSV3 + ["--max-num-seqs", "16", "--max-num-batched-tokens", "16384",
                                           "--kv-cache-dtype", "fp8", "--max-model-len", "4096", "--speculative-config",
                                           MTP1_JSON, "--kv-transfer-config", NIXL_JSON] + PORT,
    ("vllm", "dsv3-decode"): VLLM_DSV3 + ["--max-num-seqs", "256", "--max-num-batched-tokens", "2048",
                                          "--kv-cache-dtype", "fp8", "--max-model-len", "4096", "--speculative-config",
                                          MTP1_JSON, "--kv-transfer-config", NIXL_JSON] + PORT,
    # SGLang counts --max-running-requests and --chunked-prefill-size for the whole server under DP attention and
    # divides them by --dp-size: 8 x 256 = 2048 and 8 x 2048 = 16384 give each rank tokenmath's 256 and 2048
    ("sglang", "llama-70b-tp8"): ["python", "-m", "sglang.launch_server", "--model-path",
                                  "meta-llama/Meta-Llama-3.1-70B", "--tp-size", "8", "--max-running-requests", "1024",
                                  "--chunked-prefill-size", "8192", "--kv-cache-dtype", "auto", "--context-length",
                                  "2048"] + PORT,
    ("sglang", "dsv3-ep8"): SGL_DSV3 + ["--max-running-requests", "2048", "--chunked-prefill-size", "16384",
                                        "--kv-cache-dtype", "fp8_e4m3", "--context-length", "4096"] + SGL_MTP1 + PORT,
    ("sglang", "dsv3-prefill"): SGL_DSV3 + ["--max-running-requests", "128", "--chunked-prefill-size", "131072",
                                            "--kv-cache-dtype", "fp8_e4m3", "--context-length", "4096"] + SGL_MTP1
    + ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"] + PORT,
    ("sglang", "dsv3-decode"): SGL_DSV3 + ["--max-running-requests", "2048", "--chunked-prefill-size", "16384",
                                           "--kv-cache-dtype", "fp8_e4m3", "--context-length", "4096"] + SGL_MTP1
    + ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"] + PORT,
    # 8192 tokens a step cover a 2048-token context: no chunked prefill needed
    ("trtllm", "llama-70b-tp8"): ["trtllm-serve", "meta-llama/Meta-Llama-3.1-70B", "--tp_size", "8",
                                  "--max_batch_size", "1024", "--max_num_tokens", "8192", "--max_seq_len",
                                  "2048"] + PORT,
    ("trtllm", "dsv3-ep8"): TRT_DSV3 + ["--max_batch_size", "256", "--max_num_tokens", "2048", "--max_seq_len", "4096",
                                        "--enable_chunked_prefill"] + YAML_OPT + PORT,
    ("trtllm", "dsv3-prefill"): TRT_DSV3 + ["--max_batch_size", "16", "--max_num_tokens", "16384", "--max_seq_len",
                                            "4096"] + YAML_OPT + PORT,
    ("trtllm", "dsv3-decode"): TRT_DSV3 + ["--max_batch_size", "256", "--max_num_tokens", "2048", "--max_seq_len",
                                           "4096", "--enable_chunked_prefill"] + YAML_OPT + PORT,
}
YAML_DSV3 = ('enable_attention_dp: true\nkv_cache_config:\n  dtype: "fp8"\n'
             'speculative_config:\n  decoding_type: "MTP"\n  max_draft_len: 1\n')
YAML_PD = YAML_DSV3 + 'cache_transceiver_config:\n  backend: "DEFAULT"\n'
YAMLS = {"dsv3-ep8": YAML_DSV3, "dsv3-prefill": YAML_PD, "dsv3-decode": YAML_PD}
CASES = sorted(EXPECTED)


def _dotted(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for k, v in d.items():
        out += _dotted(v, prefix + k + ".") if isinstance(v, dict) else [(prefix + k, v)]
        if isinstance(v, dict):
            out.append((prefix + k, None))
    return out


def _yaml(text: str) -> dict:
    yaml = pytest.importorskip("yaml")       # PyYAML comes with the test extra's mkdocs
    return yaml.safe_load(text)


@pytest.mark.parametrize("engine,name", CASES, ids=[f"{e}-{n}" for e, n in CASES])
def test_hand_checked_commands(engine, name):
    c = launch(engine, SPECS[name])
    assert isinstance(c, LaunchCommand) and c.engine == engine
    assert c.argv == EXPECTED[engine, name]
    if engine == "trtllm":
        assert c.files == ({"extra_llm_api_options.yaml": YAMLS[name]} if name in YAMLS else {})
    else:
        assert c.files == {}


@pytest.mark.parametrize("engine,name", CASES, ids=[f"{e}-{n}" for e, n in CASES])
def test_every_flag_and_key_written_is_in_its_pinned_table(engine, name):
    c = launch(engine, SPECS[name])
    for tool, src in c.sources.items():          # each list used names its repository, full commit and file
        assert src == {k: table(tool)[k] for k in ("repo", "commit", "path")}
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["path"].endswith(".py")
    flags = {f for t in c.sources for f in table(t).get("flags", ())}
    written = [a for a in c.argv if a.startswith("--")]
    assert written and set(written) <= flags
    keys = {k for t in c.sources for k in table(t).get("keys", ())}
    for flag in ("--speculative-config", "--kv-transfer-config"):
        if flag in c.argv:
            assert set(json.loads(c.argv[c.argv.index(flag) + 1])) <= keys
    for text in c.files.values():
        assert {k for k, _ in _dotted(_yaml(text))} <= keys
    # an enumerated value is one the table lists
    for t in c.sources:
        for name_, allowed in table(t).get("values", {}).items():
            if name_ in c.argv:
                assert c.argv[c.argv.index(name_) + 1] in allowed


def test_the_yaml_is_what_trtllm_serve_reads():
    text = launch("trtllm", DSV3_DECODE).files["extra_llm_api_options.yaml"]
    assert _yaml(text) == {"enable_attention_dp": True, "kv_cache_config": {"dtype": "fp8"},
                           "speculative_config": {"decoding_type": "MTP", "max_draft_len": 1},
                           "cache_transceiver_config": {"backend": "DEFAULT"}}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_engine_args_are_the_flags_after_the_model_without_the_port(engine):
    c = launch(engine, DSV3_DECODE)
    head = {"vllm": 3, "sglang": 5, "trtllm": 2}[engine]
    assert engine_args(engine, DSV3_DECODE) == c.argv[head:-2] and c.argv[-2:] == PORT
    assert "deepseek-ai/DeepSeek-V3" not in engine_args(engine, DSV3_DECODE)


def test_disaggregated_roles_say_the_router_is_not_written():
    for engine in ENGINES:
        for spec in (DSV3_PREFILL, DSV3_DECODE):
            assert any("not written" in n and spec.role in n for n in launch(engine, spec).notes), engine
    assert not any("disaggregated" in n for e in ENGINES for n in launch(e, DSV3).notes)


def test_two_node_expert_parallel_server():
    spec = ServerSpec(model="deepseek-ai/DeepSeek-V3", ep=16, kv_dtype="fp8", nodes=2, port=8100)
    v = launch("vllm", spec)
    assert v.argv[-6:] == ["--data-parallel-size-local", "8", "--data-parallel-address", "HEAD_NODE_IP",
                           "--port", "8100"]
    assert v.argv[v.argv.index("--data-parallel-size") + 1] == "16"
    assert v.argv[v.argv.index("--data-parallel-size-local") + 1] == "8"
    assert v.argv[v.argv.index("--data-parallel-address") + 1] == "HEAD_NODE_IP"
    assert "--headless" not in v.argv
    assert any("--data-parallel-start-rank 8 --headless" in n for n in v.notes)
    s = launch("sglang", spec)
    assert s.argv[-8:] == ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "HEAD_NODE_IP:20000",
                           "--port", "8100"]
    assert any("--node-rank k" in n for n in s.notes)
    t = launch("trtllm", spec)
    assert t.argv[:6] == ["trtllm-serve", "deepseek-ai/DeepSeek-V3", "--tp_size", "16", "--ep_size", "16"]
    assert any("mpirun" in n and "16 ranks" in n for n in t.notes)


def test_tensor_parallel_over_two_nodes_on_vllm_uses_ray():
    c = launch("vllm", ServerSpec(model="meta-llama/Meta-Llama-3.1-405B", tp=16, nodes=2))
    assert c.argv[c.argv.index("--distributed-executor-backend") + 1] == "ray"
    assert any("ray start" in n for n in c.notes)
    with pytest.raises(InputError, match="do not split evenly"):
        launch("vllm", ServerSpec(model="m", ep=3, nodes=2))


def test_draft_models_and_dense_replicas():
    spec = ServerSpec(model="meta-llama/Meta-Llama-3.1-70B", tp=4, dp=2, draft_model="meta-llama/Llama-3.2-1B",
                      spec_tokens=3, weight_quant="fp8")
    v = launch("vllm", spec).argv
    assert v[v.index("--data-parallel-size") + 1] == "2" and v[v.index("--quantization") + 1] == "fp8"
    assert json.loads(v[v.index("--speculative-config") + 1]) == {"model": "meta-llama/Llama-3.2-1B",
                                                                  "num_speculative_tokens": 3}
    s = launch("sglang", spec).argv
    assert s[s.index("--dp-size") + 1] == "2" and "--enable-dp-attention" not in s
    assert s[s.index("--speculative-algorithm") + 1] == "STANDALONE"
    assert s[s.index("--speculative-draft-model-path") + 1] == "meta-llama/Llama-3.2-1B"
    assert s[s.index("--speculative-num-draft-tokens") + 1] == "4"
    t = launch("trtllm", spec)
    assert t.argv[t.argv.index("--tp_size") + 1] == "4" and "--ep_size" not in t.argv
    assert _yaml(t.files["extra_llm_api_options.yaml"]) == {"speculative_config": {
        "decoding_type": "Draft_Target", "max_draft_len": 3, "speculative_model": "meta-llama/Llama-3.2-1B"}}
    assert any("2 copies" in n for n in t.notes) and any("FP8 checkpoint" in n for n in t.notes)
    eagle = ServerSpec(model="meta-llama/Llama-3.1-8B-Instruct", draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert "EAGLE3" in launch("sglang", eagle).argv
    assert "Eagle3" in launch("trtllm", eagle).files["extra_llm_api_options.yaml"]
    assert any("4 draft tokens" in n for n in launch("vllm", eagle).notes)     # the default said, not hidden


def test_copies_of_an_expert_parallel_server_are_a_note():
    spec = ServerSpec(model="deepseek-ai/DeepSeek-V3", ep=8, dp=2)
    for engine in ENGINES:
        assert any("run 2 copies" in n for n in launch(engine, spec).notes), engine


@pytest.mark.parametrize("engine,spec,field,text", [
    ("tgi", LLAMA, "engine", "not an engine"),
    ("trtllm", ServerSpec(model="m", ep=4, tp=2), "tp", "attention DP"),
    ("trtllm", ServerSpec(model="m", ep=4, pp=2), "pp", "pipeline"),
    ("sglang", ServerSpec(model="m", ep=4, pp=2), "pp", "pipeline"),
    ("vllm", ServerSpec(model="m", kv_dtype="int4"), "kv_dtype", "int4"),
    ("vllm", ServerSpec(model="m", weight_quant="awq"), "weight_quant", "awq"),
    ("vllm", ServerSpec(model="m", role="encode"), "role", "encode"),
    ("sglang", ServerSpec(model="m", draft_model="d", mtp_tokens=1), "mtp_tokens", "not both"),
    ("trtllm", ServerSpec(model="m", spec_tokens=2), "spec_tokens", "draft model"),
    ("vllm", ServerSpec(model="m", tp=True), "tp", "True"),
    ("vllm", ServerSpec(model="m", port=70000), "port", "70000"),
    ("sglang", ServerSpec(model=""), "model", "not a model name"),
    ("vllm", ServerSpec(model="m", tp=2, nodes=3), "nodes", "3 nodes"),
])
def test_what_an_engine_cannot_express_is_refused_naming_the_field(engine, spec, field, text):
    with pytest.raises(InputError) as e:
        launch(engine, spec)
    assert e.value.field == field and text in str(e.value) and e.value.valid
    with pytest.raises(InputError):
        engine_args(engine, spec)
