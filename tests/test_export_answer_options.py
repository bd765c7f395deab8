"""`tokenmath export --answer FILE` honours the deployment options a saved answer's "question" echo records
(specs/question/answer_schema.py) exactly as `tokenmath export` asked directly does: the echo is read back into the
typed Deployment and Workload and goes through the same mapping and the same writer (analyses/benchmarks/export.py),
so --moe-sharding ep, the EP transport, EPLB, ADP balance, speculation and --max-running reach the launch command, or
are named where the engine has no pinned flag (unwritten.py). An answer saved before answers carried their question
still exports, saying its options were not recorded; a bad echo is refused naming its key."""
import json

import pytest
from click.testing import CliRunner

import tokenmath
from tokenmath.faces.cli import cli

# Mixtral 8x7B on 8 H200 at 150 tok/s per user: the plan lays it out tp 8 (ep 1) on every engine, where
# --moe-sharding ep (whole experts over the TP ranks) is a launch setting of its own
MIXTRAL = ["--model", "mixtral-8x7b", "--hardware", "h200", "--chips", "8", "--min-tokens-per-s-per-user", "150",
           "--moe-sharding", "ep", "--max-running", "64"]
EP_FLAG = {"vllm": "--tensor-parallel-size 8 --enable-expert-parallel", "sglang": "--tp-size 8 --ep-size 8",
           "tensorrt-llm": "--tp_size 8 --ep_size 8"}
DSV3 = ["--model", "deepseek-v3", "--hardware", "h200", "--chips", "8"]


def _json(args, stdin=None):
    res = CliRunner().invoke(cli, args + ["--json"], input=stdin)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


_ANSWERS: dict = {}


def _answer(args) -> dict:
    """The `--json` answer to `args`, asked once per test run (a fresh copy each time)."""
    key = tuple(args)
    if key not in _ANSWERS:
        _ANSWERS[key] = json.dumps(_json(args))
    return json.loads(_ANSWERS[key])


def _saved(tmp_path, args, name="answer.json", edit=None):
    a = _answer(args)
    if edit is not None:
        edit(a)
    f = tmp_path / name
    f.write_text(json.dumps(a))
    return a, str(f)


def _text(e: dict) -> str:
    return "\n".join([p["serve_line"] for p in e["pools"]] + [t for p in e["pools"] for t in p["files"].values()])


def _named(e: dict, option: str) -> list[str]:
    return [n for n in e["notes"] if n.startswith(option + ":") or n.startswith(option + " ")]


@pytest.mark.parametrize("engine", list(EP_FLAG))
def test_a_plan_saved_with_moe_sharding_ep_exports_each_engines_expert_parallelism(tmp_path, engine):
    answer, f = _saved(tmp_path, ["plan", *MIXTRAL, "--engine", engine])
    assert answer["question"]["deployment"]["moe_sharding"] == "ep"
    c = answer["best_by_concurrency"]
    assert (c["tp"], c["ep"], c["pp"]) == (8, 1, 1)
    e = _json(["export", "--answer", f])
    assert EP_FLAG[engine] in _text(e)
    assert not _named(e, "--moe-sharding ep") and not any("not recorded" in n for n in e["notes"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_direct_export_and_export_answer_write_the_same_command_for_the_same_question(tmp_path, engine):
    """The plan's point (its layout and its users per server) asked of `tokenmath export` directly: the same launch
    command, flag for flag, --max-running 64 per scheduler both ways."""
    answer, f = _saved(tmp_path, ["plan", *MIXTRAL, "--engine", engine])
    c = answer["best_by_concurrency"]
    direct = _json(["export", *MIXTRAL[:6], "--moe-sharding", "ep", "--max-running", "64", "--engine", engine,
                    "--tp", str(c["tp"]), "--concurrency", str(c["concurrency"])])
    saved = _json(["export", "--answer", f])
    assert saved["serve"] == direct["serve"]
    assert [p["serve"] for p in saved["pools"]] == [p["serve"] for p in direct["pools"]]
    assert [p["files"] for p in saved["pools"]] == [p["files"] for p in direct["pools"]]


def test_a_saved_infer_answer_exports_exactly_as_export_asked_the_same_question(tmp_path):
    args = [*DSV3, "--ep", "8", "--concurrency", "64", "--engine", "sglang", "--ep-comm", "deepep", "--overlap-ep",
            "--adp-balance", "--ep-imbalance", "eplb", "--max-running", "32"]
    _, f = _saved(tmp_path, ["infer", *args])
    direct = _json(["export", *args])
    assert _json(["export", "--answer", f]) == direct
    assert "--moe-a2a-backend deepep --enable-two-batch-overlap" in direct["serve_line"]
    assert "--enable-eplb --ep-num-redundant-experts 8" in direct["serve_line"]
    assert _named(direct, "--adp-balance")                    # SGLang has no pinned setting for it: named
    res = CliRunner().invoke(cli, ["export", "--answer", f, "--disaggregated"])
    assert res.exit_code == 2 and "infer answer" in res.output


def test_max_running_is_per_scheduler_as_infer_counts_it():
    """--max-running caps one scheduler (one attention-DP rank); infer runs all 64 users on 8 ranks of 32, so the
    command runs 32 per rank (vLLM --max-num-seqs), not 32 over the whole server."""
    args = [*DSV3, "--ep", "8", "--concurrency", "64", "--max-running", "32"]
    assert _json(["infer", *args])["load"]["running"] == 64
    e = _json(["export", *args])
    serve = e["serve"]
    assert serve[serve.index("--max-num-seqs") + 1] == "32"
    assert e["pools"][0]["max_running"] == 256 and e["pools"][0]["max_running_per_rank"] == 32


def test_the_transport_eplb_and_adp_balance_of_a_plan_are_written_or_named(tmp_path):
    """DeepSeek-V3's plan on 8 H200 is ep 8 (tp 1): the DeepEP transport, its overlap and EPLB are vLLM flags; ADP
    balance has none and --moe-sharding ep has no TP group to act in: both named, with why."""
    answer, f = _saved(tmp_path, ["plan", *DSV3, "--moe-sharding", "ep", "--ep-comm", "deepep", "--overlap-ep",
                                  "--ep-imbalance", "eplb", "--adp-balance"])
    assert answer["best_by_concurrency"]["ep"] == 8
    e = _json(["export", "--answer", f])
    assert ("--all2all-backend deepep_high_throughput --enable-dbo --enable-eplb --eplb-config "
            "'{\"num_redundant_experts\":8}'") in e["serve_line"]
    assert "this layout has tp 1" in _named(e, "--moe-sharding ep")[0]
    assert "attention_dp_config.enable_balance" in _named(e, "--adp-balance")[0]


def test_speculation_the_echo_records_is_written(tmp_path):
    answer, f = _saved(tmp_path, ["plan", *DSV3, "--mtp", "2"])
    assert answer["speculation"]["k"] == 2
    e = _json(["export", "--answer", f])
    spec = json.loads(e["serve"][e["serve"].index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 2}


def test_an_answer_saved_without_its_question_exports_and_says_its_options_were_not_recorded(tmp_path):
    def old(a):
        del a["schema"], a["question"]
    _, f = _saved(tmp_path, ["plan", *MIXTRAL], edit=old)
    e = _json(["export", "--answer", f])
    assert "--enable-expert-parallel" not in e["serve_line"]
    assert any("not recorded" in n and "--moe-sharding" in n for n in e["notes"])
    # a speculative answer without its question cannot say which draft ran: refused as before, naming the fix
    _, g = _saved(tmp_path, ["plan", *DSV3, "--mtp", "1"], name="mtp.json", edit=old)
    res = CliRunner().invoke(cli, ["export", "--answer", g])
    assert res.exit_code == 2 and "speculation" in res.output and "Traceback" not in res.output


def _set(path, value):
    def edit(a):
        d = a
        for k in path[:-1]:
            d = d[k]
        if value is KeyError:
            del d[path[-1]]
        else:
            d[path[-1]] = value
    return edit


@pytest.mark.parametrize("path,value,field", [
    (("question",), [1], "question"),
    (("question", "deployment"), KeyError, "question.deployment"),
    (("question", "deployment", "moe_sharding"), "xp", "question.deployment.moe_sharding"),
    (("question", "deployment", "moe_shardin"), "ep", "question.deployment.moe_shardin"),
    (("question", "deployment", "max_running"), -3, "question.deployment.max_running"),
    (("question", "workload", "input_len"), "many", "question.workload.input_len"),
    (("question", "extra"), {}, "question.extra"),
    (("schema",), "tokenmath.plan/9", "schema"),
    (("schema",), "tokenmath.simulate/1", "schema"),
    (("schema",), "tokenmath.fleet/1", "schema"),
    (("schema",), 7, "schema"),
])
def test_a_bad_schema_or_question_echo_is_refused_naming_its_key(tmp_path, path, value, field):
    _, f = _saved(tmp_path, ["plan", *MIXTRAL], edit=_set(path, value))
    res = CliRunner().invoke(cli, ["export", "--answer", f, "--json"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert json.loads(res.stdout)["error"]["field"] == field


def test_an_echo_that_contradicts_its_answer_is_refused(tmp_path):
    _, f = _saved(tmp_path, ["plan", *DSV3, "--mtp", "2"], edit=_set(("question", "deployment", "mtp"), KeyError))
    res = CliRunner().invoke(cli, ["export", "--answer", f, "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["field"] == "question.deployment.mtp"
    _, g = _saved(tmp_path, ["plan", *MIXTRAL], name="g.json",
                  edit=_set(("question", "deployment", "model"), "llama-3.1-8b"))
    res = CliRunner().invoke(cli, ["export", "--answer", g, "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["field"] == "question.deployment.model"
    _, h = _saved(tmp_path, ["plan", *MIXTRAL], name="h.json", edit=_set(("question", "deployment", "kv_dtype"), "fp8"))
    res = CliRunner().invoke(cli, ["export", "--answer", h, "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["field"] == "question.deployment.kv_dtype"


def test_python_results_remember_their_question_as_the_saved_answer_does(tmp_path):
    r = tokenmath.plan("mixtral-8x7b", "h200", chips=8, min_tokens_per_s_per_user=150, moe_sharding="ep",
                       max_running=64)
    _, f = _saved(tmp_path, ["plan", *MIXTRAL])
    assert json.loads(json.dumps(tokenmath.export(r))) == _json(["export", "--answer", f])
    assert "--enable-expert-parallel" in tokenmath.export(r)["serve_line"]
