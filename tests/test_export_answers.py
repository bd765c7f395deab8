"""`tokenmath export --answer FILE`: a saved plan or fleet answer deployed exactly as the user saw it, the same through
the command line (a file or standard input) and Python (tokenmath.export(result))."""
import json

import pytest
from click.testing import CliRunner

import tokenmath
from tokenmath.faces.cli import cli

DSV3_FLEET = ["fleet", "--model", "deepseek-v3", "--hardware", "h200", "--demand", "15000"]
LLAMA_PLAN = ["plan", "--model", "llama-3.1-70b", "--system", "hgx-h100", "--chips", "8",
              "--min-tokens-per-s-per-user", "30"]


def _json(args, stdin=None):
    res = CliRunner().invoke(cli, args + ["--json"], input=stdin)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


@pytest.fixture(scope="module")
def fleet_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("answers") / "fleet.json"
    p.write_text(json.dumps(_json(DSV3_FLEET)))
    return str(p)


def test_a_plan_answer_is_deployed_at_its_continuously_batched_point(tmp_path):
    answer = _json(LLAMA_PLAN)
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(answer))
    e = _json(["export", "--answer", str(f)])
    c = answer["best_by_concurrency"]
    assert _value(e["serve"], "--tensor-parallel-size") == str(c["tp"]) and e["pools"][0]["replicas"] == c["dp"]
    # one server's benchmark: the point's users, TTFT, TPOT and its share of the output
    assert _value(e["bench"], "--max-concurrency") == str(c["concurrency"] // c["dp"])
    assert e["expected"]["mean_tpot_s"] == pytest.approx(c["tpot_s"])
    assert e["expected"]["output_tokens_per_s"] == pytest.approx(c["output_tokens_per_s"] / c["dp"])
    assert _value(e["serve"], "--max-num-seqs") == str(c["concurrency"] // c["dp"])


def test_deepseek_v3_disaggregated_on_two_h200_nodes(fleet_file):
    """15,000 output tok/s of 1,024-in / 256-out: one decode instance of 8 H200 (ep 8) serves up to ~25,700 output
    tok/s, one prefill instance ~63,000 prompt tok/s = ~15,800 output tok/s of prompts: one node each."""
    e = _json(["export", "--answer", fleet_file, "--disaggregated"])
    assert [(p["role"], p["replicas"], p["chips_per_server"], p["nodes_per_server"]) for p in e["pools"]] == \
        [("prefill", 1, 8, 1), ("decode", 1, 8, 1)]
    assert e["chips"] == 16 and e["disaggregated"] and e["calibrate_line"] is None
    for p in e["pools"]:
        assert "--enable-expert-parallel" in p["serve"] and _value(p["serve"], "--data-parallel-size") == "8"
        assert json.loads(_value(p["serve"], "--kv-transfer-config"))["kv_connector"] == "NixlConnector"
    # the whole deployment is benchmarked; it serves what the tighter pool allows
    answer = json.loads(open(fleet_file).read())["disaggregated"]
    dec = answer["decode"]["instance_output_tokens_per_s"]
    pre = answer["prefill"]["instance_prompt_tokens_per_s"] * 256 / 1024
    assert e["expected"]["output_tokens_per_s"] == pytest.approx(min(dec, pre))


def test_standard_input_and_python_give_the_same_export(fleet_file):
    text = open(fleet_file).read()
    via_stdin = _json(["export", "--answer", "-"], stdin=text)
    via_file = _json(["export", "--answer", fleet_file])
    assert via_stdin == via_file
    r = tokenmath.fleet("deepseek-v3", "h200", demand=15000)
    via_python = tokenmath.export(r)
    assert json.loads(json.dumps(via_python)) == via_file


def test_question_options_with_a_saved_answer_are_refused_not_ignored(fleet_file):
    res = CliRunner().invoke(cli, ["export", "--answer", fleet_file, "--chips", "16"])
    assert res.exit_code != 0 and "--chips" in res.output and "would be ignored" in res.output
    res = CliRunner().invoke(cli, ["export", "--model", "llama-3.1-8b", "--disaggregated"])
    assert res.exit_code != 0 and "--answer" in res.output
    with pytest.raises(tokenmath.InputError, match="would be ignored"):
        tokenmath.export(json.loads(open(fleet_file).read()), chips=4)


@pytest.mark.parametrize("text,match", [("{not json", "not JSON"), ("[1, 2]", "not an object"),
                                        ('{"model": "x"}', "not a plan, fleet or infer answer")])
def test_a_file_that_is_no_answer_is_refused_by_name(tmp_path, text, match):
    f = tmp_path / "a.json"
    f.write_text(text)
    res = CliRunner().invoke(cli, ["export", "--answer", str(f)])
    assert res.exit_code == 2 and match in res.output and "Traceback" not in res.output


def test_a_plan_without_disaggregated_pools_refuses_them(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(_json(LLAMA_PLAN)))
    res = CliRunner().invoke(cli, ["export", "--answer", str(f), "--disaggregated"])
    assert res.exit_code == 2 and "plan --disaggregated" in res.output


def test_the_disaggregated_pools_become_a_dynamo_graph_that_validates(fleet_file):
    from tokenmath.analyses.benchmarks.k8s_manifests import validate
    e = _json(["export", "--answer", fleet_file, "--disaggregated", "--stack", "dynamo"])
    m = e["manifest"]
    validate(m["document"], "dynamographdeployment")            # what export already checked, checked again
    comps = {c["name"]: c for c in m["document"]["spec"]["components"]}
    assert set(comps) == {"Frontend", "VllmPrefillWorker", "VllmDecodeWorker"}
    for name, pool in zip(("VllmPrefillWorker", "VllmDecodeWorker"), e["pools"]):
        c = comps[name]
        main = c["podTemplate"]["spec"]["containers"][0]
        assert c["replicas"] == pool["replicas"] and main["resources"]["limits"]["nvidia.com/gpu"] == "8"
        # the worker runs the same engine flags as the bare command (the model and the port aside)
        flags = [a for a in main["args"] if a.startswith("--")]
        assert _value(main["args"], "--max-num-seqs") == _value(pool["serve"], "--max-num-seqs")
        assert "--disaggregation-mode" in flags and "--enable-expert-parallel" in flags
    assert not any("is not written" in n for n in e["notes"])    # the frontend is the router


def test_a_plan_becomes_llm_d_values_with_a_model_volume_sized_to_its_weights(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(_json(LLAMA_PLAN)))
    e = _json(["export", "--answer", str(f), "--stack", "llm-d"])
    v = e["manifest"]["document"]
    assert v["decode"]["parallelism"]["tensor"] == 8 and v["prefill"] == {"create": False}
    # Llama 3.1 70B at bf16: 70.6e9 params x 2 bytes = 141 GB = 131.5 GiB, rounded up with a GiB to spare: 133Gi
    assert v["modelArtifacts"]["size"] == "133Gi"


def test_stacks_that_cannot_run_the_answers_engine_are_refused():
    res = CliRunner().invoke(cli, ["export", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "sglang",
                                   "--concurrency", "8", "--stack", "llm-d"])
    assert res.exit_code == 2 and "llm-d's modelservice chart runs vLLM" in res.output
    res = CliRunner().invoke(cli, ["export", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "tensorrt-llm",
                                   "--concurrency", "8", "--stack", "dynamo"])
    assert res.exit_code == 2 and "Dynamo's TensorRT-LLM worker" in res.output
