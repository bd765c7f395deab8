"""Issue 37: every option that shapes infer's expected figures reaches `tokenmath export`'s answer. Each of the eight
(--adp-balance, --attention-sharding, --ep-comm, --ep-imbalance, --overlap-ep, --min-tokens-per-s-per-user,
--price-usd-per-hour, --ttft-ms) is written into the launch command of the engine the answer assumed, where a flag or
key pinned in data/engine_flags.toml carries it, or named in the notes with what it changed and why it is not
written. The flags themselves are checked against the text each engine's pinned source was read to have."""
import json

import pytest
from click.testing import CliRunner

from tokenmath.analyses.ask import infer, split
from tokenmath.analyses.benchmarks.export import _redundant, export
from tokenmath.analyses.benchmarks.launch_base import table
from tokenmath.analyses.benchmarks.launch_commands import ENGINES, ServerSpec, launch
from tokenmath.analyses.serving.steady_state import ADP_TIMEOUT_STEPS
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

DSV3 = dict(model="deepseek-v3", hardware="h200", chips=8, ep=8, concurrency=64)
EIGHT = dict(adp_balance=True, attention_sharding="batch", ep_comm="deepep", ep_imbalance=2, ep_overlap=True,
             min_tokens_per_s_per_user=20, price_usd_per_hour=3, ttft_ms=500)
OPTION = {"adp_balance": "--adp-balance", "attention_sharding": "--attention-sharding batch",
          "ep_comm": "--ep-comm deepep", "ep_imbalance": "--ep-imbalance 2", "ep_overlap": "--overlap-ep",
          "min_tokens_per_s_per_user": "--min-tokens-per-s-per-user 20", "price_usd_per_hour": "--price-usd-per-hour 3",
          "ttft_ms": "--ttft-ms 500"}
# what each engine writes for them (the rest it names): the flag or YAML key, exactly as the command carries it
WRITTEN = {
    "vllm": {"ep_comm": "--all2all-backend deepep_high_throughput", "ep_overlap": "--enable-dbo"},
    "sglang": {"ep_comm": "--moe-a2a-backend deepep", "ep_overlap": "--enable-two-batch-overlap"},
    "tensorrt-llm": {"adp_balance": "attention_dp_config:\n  enable_balance: true"},
}
EP8 = ServerSpec(model="deepseek-ai/DeepSeek-V3", ep=8, max_model_len=4096)


def _text(e: dict) -> str:
    """Everything a user runs: the launch lines and the files they read."""
    return "\n".join([p["serve_line"] for p in e["pools"]] + [t for p in e["pools"] for t in p["files"].values()])


def _named(e: dict, option: str) -> list[str]:
    return [n for n in e["notes"] if n.startswith(option + ":") or n.startswith(option + " ")]


@pytest.mark.parametrize("engine", list(WRITTEN))
def test_each_of_the_eight_options_is_written_or_named(engine):
    e = export(*split(**DSV3, engine=engine, **EIGHT)[:2])
    text = _text(e)
    for name, option in OPTION.items():
        flag = WRITTEN[engine].get(name)
        if flag is not None:
            assert flag in text, (engine, name)
            assert not _named(e, option), (engine, name)        # written: not also called unwritten
        else:
            notes = _named(e, option)
            assert len(notes) == 1 and "not written: " in notes[0], (engine, name, e["notes"])


@pytest.mark.parametrize("name", list(OPTION))
def test_one_option_alone_on_sglang_is_written_or_named(name):
    """The issue's engine, each option on its own: nothing else in the answer can stand in for it."""
    e = export(*split(**DSV3, engine="sglang", **{name: EIGHT[name]})[:2])
    flag = WRITTEN["sglang"].get(name)
    assert (flag in _text(e)) if flag else len(_named(e, OPTION[name])) == 1


def test_the_issue_example_now_writes_the_transport_and_overlap_and_names_the_rest():
    args = ["export", "-m", "deepseek-v3", "-H", "h200", "--chips", "8", "--ep", "8", "--concurrency", "64",
            "--engine", "sglang", "--ep-comm", "deepep", "--overlap-ep", "--adp-balance", "--ep-imbalance", "2"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    serve = next(line for line in res.output.splitlines() if line.startswith("python -m sglang.launch_server"))
    assert "--moe-a2a-backend deepep --enable-two-batch-overlap" in serve
    notes = [line for line in res.output.splitlines() if line.startswith("# note: ")]
    assert any(n.startswith("# note: --adp-balance: without it tokenmath would expect") for n in notes)
    assert any(n.startswith("# note: --ep-imbalance 2: without it") and "not a server setting" in n for n in notes)
    # the transport is written, and the note says how SGLang's per-batch DeepEP mode differs from the one priced
    assert any("--deepep-mode auto" in n for n in notes)
    assert not any("is not written" in n and "--moe-a2a-backend" in n for n in notes)


def test_what_an_unwritten_option_changed_is_infers_own_answer_without_it():
    dep, wl = split(**DSV3, engine="sglang", adp_balance=True)[:2]
    e = export(dep, wl)
    off = infer(*split(**DSV3, engine="sglang")[:2]).load
    note = _named(e, "--adp-balance")[0]
    assert f"{off.output_tokens_per_s:,.0f} tok/s, TTFT {off.ttft_s * 1e3:,.1f} ms" in note
    assert "attention_dp_config.enable_balance" in note and "--enable-prefill-delayer" in note
    # targets and prices are not server settings: the figures do not move, and the note says whether they are met
    t = export(*split(**DSV3, engine="sglang", ttft_ms=1, price_usd_per_hour=2)[:2])
    assert "the expected figures are the same without it" in _named(t, "--ttft-ms 1")[0]
    assert "misses it" in _named(t, "--ttft-ms 1")[0]
    assert "not a server setting" in _named(t, "--price-usd-per-hour 2")[0]


def test_attention_sharding_inside_a_tensor_parallel_group():
    llama = dict(model="llama-3.1-70b", hardware="h100-sxm", chips=8, concurrency=64)
    batch = export(*split(**llama, attention_sharding="batch")[:2])
    assert "shards it over the batch" in _named(batch, "--attention-sharding batch")[0]
    heads = export(*split(**llama, attention_sharding="heads")[:2])
    assert "written as the command's tensor parallelism" in _named(heads, "--attention-sharding heads")[0]
    # data-parallel attention of a MoE over tp 2 x ep 8 is written as the engines' DP attention over 16 ranks
    dp = export(*split(model="deepseek-v3", hardware="h200", chips=16, tp=2, ep=8, concurrency=64,
                       attention_sharding="dp")[:2])
    assert "--data-parallel-size 16" in dp["serve_line"] and len(_named(dp, "--attention-sharding dp")) == 1


def test_eplb_is_one_redundant_expert_per_rank_split_evenly():
    assert _redundant(256, 8) == 8 and _redundant(256, 16) == 16 and _redundant(60, 8) == 12    # 72 = 8 x 9
    v = export(*split(**DSV3, ep_imbalance="eplb")[:2])
    assert "--enable-eplb --eplb-config '{\"num_redundant_experts\":8}'" in v["serve_line"]
    s = export(*split(**DSV3, engine="sglang", ep_imbalance="eplb")[:2])
    assert "--enable-eplb --ep-num-redundant-experts 8" in s["serve_line"]
    t = export(*split(**DSV3, engine="tensorrt-llm", ep_imbalance="eplb")[:2])
    assert "load_balancer" not in _text(t) and "moe_config.load_balancer" in _named(t, "--ep-imbalance eplb")[0]
    # without expert parallelism there is nothing to balance: named, not dropped
    for kw in (dict(model="llama-3.1-70b", hardware="h100-sxm", chips=8), dict(DSV3, ep=1, tp=8)):
        e = export(*split(**{**kw, "concurrency": 64, "ep_imbalance": "eplb"})[:2])
        assert "--enable-eplb" not in e["serve_line"] and "no expert parallelism" in _named(e, "--ep-imbalance eplb")[0]


# the launch commands themselves: every flag exactly as written for each engine, and absent where it has none

ALL = ServerSpec(**{**EP8.__dict__, "ep_comm": "fp8", "ep_overlap": True, "eplb_redundant": 8, "adp_balance": True})


def test_vllm_writes_the_deepep_backend_dual_batch_overlap_and_eplb():
    c = launch("vllm", ALL)
    i = c.argv.index("--all2all-backend")
    assert c.argv[i:i + 6] == ["--all2all-backend", "deepep_low_latency", "--enable-dbo", "--enable-eplb",
                               "--eplb-config", '{"num_redundant_experts":8}']
    normal = launch("vllm", ServerSpec(**{**EP8.__dict__, "ep_comm": "deepep"})).argv
    assert normal[normal.index("--all2all-backend") + 1] == "deepep_high_throughput"
    assert c.unwritten == ("adp_balance",) and any(n.startswith("--adp-balance is not written") for n in c.notes)
    # dual-batch overlap runs only on a DeepEP backend in vLLM: over the default transport it is named, not written
    bf16 = launch("vllm", ServerSpec(**{**EP8.__dict__, "ep_overlap": True}))
    assert "--enable-dbo" not in bf16.argv and bf16.unwritten == ("ep_overlap",)
    assert any("vllm/config/vllm.py" in n for n in bf16.notes)


def test_sglang_writes_deepep_two_batch_overlap_and_eplb():
    c = launch("sglang", ALL)
    i = c.argv.index("--moe-a2a-backend")
    assert c.argv[i:i + 6] == ["--moe-a2a-backend", "deepep", "--enable-two-batch-overlap", "--enable-eplb",
                               "--ep-num-redundant-experts", "8"]
    assert c.unwritten == ("adp_balance",)
    # the overlap needs no DeepEP here: SGLang accepts it beside --enable-dp-attention, which is written with it
    tbo = launch("sglang", ServerSpec(**{**EP8.__dict__, "ep_overlap": True})).argv
    assert "--enable-two-batch-overlap" in tbo and "--enable-dp-attention" in tbo and "--moe-a2a-backend" not in tbo


def test_trtllm_writes_adp_balance_and_names_what_it_has_no_key_for():
    yaml = pytest.importorskip("yaml")
    c = launch("trtllm", ALL)
    opts = yaml.safe_load(c.files["extra_llm_api_options.yaml"])
    assert opts["attention_dp_config"] == {"enable_balance": True, "timeout_iters": ADP_TIMEOUT_STEPS,
                                           "batching_wait_iters": 0}
    assert c.unwritten == ("ep_comm", "ep_overlap", "eplb_redundant")
    assert not any(f in c.argv for f in ("--all2all-backend", "--moe-a2a-backend", "--enable-dbo", "--enable-eplb"))
    assert len([n for n in c.notes if " is not written: " in n]) == 3


@pytest.mark.parametrize("engine", list(ENGINES))
def test_nothing_is_written_without_expert_parallelism_and_each_option_is_named(engine):
    dense = ServerSpec(model="meta-llama/Meta-Llama-3.1-70B", tp=8, ep_comm="fp8", ep_overlap=True,
                       eplb_redundant=8, adp_balance=True)
    c = launch(engine, dense)
    assert c.unwritten == ("ep_comm", "ep_overlap", "eplb_redundant", "adp_balance")
    assert not ({"--all2all-backend", "--enable-dbo", "--enable-eplb", "--moe-a2a-backend",
                 "--enable-two-batch-overlap"} & set(c.argv)) and "attention_dp_config" not in str(c.files)
    assert len([n for n in c.notes if "no expert parallelism" in n]) == 4
    assert not any("is not written" in n for n in launch(engine, dense, name_unwritten=False).notes)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_new_flag_key_and_value_is_in_its_pinned_table(engine):
    c = launch(engine, ALL)
    flags = {f for t in c.sources for f in table(t).get("flags", ())}
    assert {a for a in c.argv if a.startswith("--")} <= flags
    keys = {k for t in c.sources for k in table(t).get("keys", ())}
    if "--eplb-config" in c.argv:
        assert set(json.loads(c.argv[c.argv.index("--eplb-config") + 1])) <= keys
    for t in c.sources:
        for flag, allowed in table(t).get("values", {}).items():
            if flag in c.argv:
                assert c.argv[c.argv.index(flag) + 1] in allowed
    for text in c.files.values():
        assert "attention_dp_config" not in text or {"attention_dp_config.enable_balance",
                                                     "attention_dp_config.timeout_iters",
                                                     "attention_dp_config.batching_wait_iters"} <= keys


def test_a_spec_option_out_of_range_is_refused_naming_the_field():
    for bad, field in ((dict(ep_comm="nvshmem"), "ep_comm"), (dict(eplb_redundant=0), "eplb_redundant"),
                       (dict(ep_overlap="yes"), "ep_overlap")):
        with pytest.raises(InputError) as e:
            launch("vllm", ServerSpec(**{**EP8.__dict__, **bad}))
        assert e.value.field == field and e.value.valid


@pytest.mark.parametrize("engine,flag", [("vllm", "--tensor-parallel-size 8 --enable-expert-parallel"),
                                         ("sglang", "--tp-size 8 --ep-size 8"),
                                         ("tensorrt-llm", "--tp_size 8 --ep_size 8")])
def test_moe_sharding_ep_on_tp_is_written_as_each_engines_expert_parallelism(engine, flag):
    """--moe-sharding ep on a TP layout (EP inside TP, no attention DP): vLLM's --enable-expert-parallel without
    --data-parallel-size, SGLang's --ep-size and TensorRT-LLM's --ep_size equal to the TP size (flags of the pinned
    tables in data/engine_flags.toml); with the default split, none of them."""
    kw = dict(model="deepseek-v3", hardware="h200", chips=8, tp=8, concurrency=16, engine=engine)
    whole = export(*split(**kw, moe_sharding="ep")[:2])
    assert flag in _text(whole) and not _named(whole, "--moe-sharding ep")
    plain = _text(export(*split(**kw)[:2]))
    assert "--enable-expert-parallel" not in plain and "--ep-size" not in plain and "--ep_size" not in plain


def test_moe_sharding_ep_with_nothing_to_place_is_named():
    e = export(*split(**DSV3, moe_sharding="ep")[:2])          # tp 1: no TP group to place experts in
    notes = _named(e, "--moe-sharding ep")
    assert len(notes) == 1 and "this layout has tp 1" in notes[0]
