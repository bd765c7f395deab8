"""Each InferenceX run configured as its recipe ran it (analyses/calibration/inferencex_recipe.py): the KV dtype,
the EP transport and SGLang's memory fraction read from the recipe, and the predictor using them."""
from tokenmath.analyses.calibration.inferencex import load_runs
from tokenmath.analyses.calibration.inferencex_predict import predict_runs
from tokenmath.analyses.calibration.inferencex_recipe import ep_comm, kv_dtype, mem_fraction, plain, recipe


def test_kv_dtype_from_the_recipes():
    assert kv_dtype("sglang", "b200")[0] == "fp8" and kv_dtype("sglang", "mi355x")[0] == "fp8"
    assert kv_dtype("sglang", "h200")[0] is None                 # dsr1_fp8_h200.sh sets none: BF16
    assert kv_dtype("dynamo-sglang", "h100")[0] is None and kv_dtype("dynamo-sglang", "gb200")[0] == "fp8"
    for eng in ("trt", "dynamo-trt", "atom", "mori-sglang"):
        kv, src = kv_dtype(eng, "b200" if "trt" in eng else "mi355x")
        assert kv == "fp8" and src.startswith("https://github.com/SemiAnalysisAI/InferenceX/")


def test_transport_only_where_the_recipe_sets_it():
    assert ep_comm("dynamo-sglang", "gb200", "fp4", "decode", 48, True)[0] == "deepep"
    assert ep_comm("dynamo-sglang", "gb200", "fp8", "prefill", 8, True)[0] == "deepep"
    assert ep_comm("dynamo-sglang", "gb200", "fp4", "prefill", 4, True)[0] == "bf16"   # no a2a backend at FP4
    assert ep_comm("dynamo-sglang", "b200", "fp4", "decode", 8, True)[0] == "bf16"      # flashinfer, no DeepEP
    assert ep_comm("dynamo-trt", "gb200", "fp4", "decode", 32, True)[0] == "fp8"
    assert ep_comm("dynamo-trt", "b200", "fp8", "decode", 8, True)[0] == "bf16"
    assert ep_comm("mori-sglang", "mi355x", "fp8", "decode", 16, True)[0] == "bf16"
    assert ep_comm("dynamo-sglang", "gb200", "fp8", "decode", 8, False)[0] == "bf16"   # EP inside TP: no a2a
    assert mem_fraction("dynamo-sglang", "gb200", "fp8", 4)[0] == 0.95
    assert mem_fraction("sglang", "b200", "fp8", 8)[0] is None


def test_runs_predicted_as_run():
    runs = [r for r in load_runs() if r.row["framework"] == "dynamo-sglang" and r.row["hardware"] == "gb200"
            and r.row["decode_ep"] > 8][:2]
    assert runs
    rc = recipe(runs[0], "decode")
    assert rc.kv_dtype == "fp8" and rc.ep_comm == "deepep" and rc.sources
    assert plain(runs[0], "decode").ep_comm == "bf16"
    now, before = predict_runs(runs), predict_runs(runs, recipes=False)
    for p, q in zip(now, before):
        assert p.skipped is None and any("recipe: KV fp8, EP all-to-all deepep" in n for n in p.notes)
        assert not any("recipe" in n for n in q.notes) and p.tput_per_gpu != q.tput_per_gpu
        assert p.limit in ("users", "kv")


def test_mtp_draft_length_from_the_recipes():
    from tokenmath.analyses.calibration.inferencex_recipe import mtp_tokens
    assert mtp_tokens("sglang", "b200", "fp8", 1024, False)[0] == 2          # SPECULATIVE_NUM_STEPS=2
    assert mtp_tokens("dynamo-sglang", "h200", "fp8", 8192, False)[0] == 2
    assert mtp_tokens("dynamo-sglang", "b200", "fp4", 8192, False)[0] is None  # 8k1k files mix 2 and 3
    assert mtp_tokens("trt", "b200", "fp8", 1024, True)[0] == 1               # MTP=1 with DP attention
    assert mtp_tokens("trt", "h200", "fp8", 1024, False)[0] == 3
    assert mtp_tokens("dynamo-trt", "gb200", "fp4", 1024, True)[0] is None    # 1, 2 or 3 by file
    assert mtp_tokens("sglang", "mi355x", "fp8", 1024, False)[0] is None      # AMD: the default, 3


def test_mtp_runs_use_their_draft_length():
    from tokenmath.engine.speculative import tokens_per_step
    # hand-computed chain: rates 0.875 and 0.875 x 0.717/0.920 = 0.682 -> E = 1 + 0.875 + 0.875 x 0.682 = 2.472
    assert abs(tokens_per_step(0.875, 2, mtp=True) - 2.472) < 2e-3
    runs = [r for r in load_runs() if r.row["framework"] == "sglang" and r.row["hardware"] == "b200" and r.mtp][:1]
    assert runs and recipe(runs[0], "aggregated").mtp_tokens == 2
    p = predict_runs(runs)[0]
    assert p.skipped is None and any("MTP 2 draft tokens" in n for n in p.notes)
    assert recipe(runs[0], "prefill").mtp_tokens is None                     # a prefill worker drafts nothing


def test_tensorrt_llm_attention_dp_runs_balance_their_groups_as_the_recipe_sets():
    """dsr1_fp8_h200_trt.sh (InferenceX 8eec0d4e) appends attention_dp_config enable_balance: true when
    DP_ATTENTION=true. Read unbalanced, the H200 8K/1K runs at 64 users were predicted at 0.58x of their measured
    1,313-1,333 tok/s per GPU (one group prefilling an 8K prompt while seven waited) and their TTFT at 0.3x (1.0 s
    against 3.4 s); read balanced, 1.21x and 0.73x (the coordinated wait). Held here as a band."""
    from tokenmath.analyses.calibration.inferencex_recipe import adp_balance
    assert adp_balance("trt", "fp8", "h200", "aggregated", True)[0]
    assert not adp_balance("trt", "fp8", "h200", "aggregated", False)[0]
    assert not adp_balance("sglang", "fp8", "h200", "aggregated", True)[0]      # SGLang's prefill delayer is off
    assert not adp_balance("dynamo-trt", "fp8", "b200", "decode", True)[0]      # a decode worker holds no prompts
    runs = [r for r in load_runs() if r.row["framework"] == "trt" and r.row["hardware"] == "h200"
            and r.row["decode_dp_attention"] and r.row["isl"] == 8192 and not r.mtp][:2]
    assert runs and recipe(runs[0], "aggregated").adp_balance
    now, before = predict_runs(runs), predict_runs(runs, recipes=False)
    for p, q in zip(now, before):
        assert 0.45 <= q.ratio <= 0.7 and 1.0 <= p.ratio <= 1.4, (q.ratio, p.ratio)
        assert p.ttft_s > 2 * q.ttft_s
        assert any("attention-DP balance" in n for n in p.notes)


def test_sglang_mtp_recipes_without_a_cap_run_at_sglangs_48():
    """dsr1_fp8_mi325x_mtp.sh and dsr1_fp4_mi355x_mtp.sh (InferenceX 843c6254) set no --max-running-requests, and
    SGLang speculating then holds at most 48 requests (speculative_hook.py @d9ccf6a7). Their 64-user runs were
    predicted 1.29x and 1.44x (MI325X 1K/1K, 8K/1K) and 1.27x (MI355X 1K/1K) of their measured 440, 1,028 and 846
    tok/s per GPU with all 64 running; with 48 running, 1.05x, 1.27x and 1.05x. A run at 32 users does not move."""
    from tokenmath.analyses.calibration.inferencex_recipe import max_running
    assert max_running("sglang", "mi325x", "fp8", True, "aggregated")[0] == 48
    assert max_running("sglang", "mi355x", "fp8", True, "aggregated")[0] is None    # its recipe sets the cap
    assert max_running("sglang", "mi325x", "fp8", False, "aggregated")[0] is None   # no speculation, no reset
    runs = [r for r in load_runs() if r.row["framework"] == "sglang" and r.row["hardware"] == "mi325x" and r.mtp
            and r.row["isl"] == 1024 and r.row["conc"] in (32, 64)]
    by = {r.row["conc"]: r for r in runs}
    now = {p.run.row["conc"]: p for p in predict_runs(list(by.values()))}
    before = {p.run.row["conc"]: p for p in predict_runs(list(by.values()), recipes=False)}
    assert now[64].limit == "max_running" and before[64].limit == "users"
    assert now[64].tput_per_gpu < before[64].tput_per_gpu * 0.9
    assert 0.9 < now[64].tput_per_gpu / now[64].measured < 1.15
    assert now[32].limit == "users"
