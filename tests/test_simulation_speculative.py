"""Speculative decoding in the simulator (issue 18 item 1 in `simulate`): each decode verifies k + 1 tokens a step
after the draft's k steps and gains E = (1 - a^(k+1)) / (1 - a) tokens (Leviathan et al. 2023, eq. 1)."""
import math

import numpy as np
import pytest

import tokenmath
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.serving.simulation.step_cost import StepCost, chunk_geometry
from tokenmath.analyses.serving.speculative import Speculation, resolve_draft, speculation
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.forward import forward_pass
from tokenmath.engine.speculative import expected_tokens, speculative_step
from tokenmath.specs.efficiency import DEFAULT, PEAK

simulate = tokenmath.simulate
DRAFT = speculation("llama-3.2-1b", 4, 0.7)      # the pair: Llama 3.1 70B (or 8B) with a Llama 3.2 1B draft


def tables(model, hw, spec, chips=None, engine="none", efficiency=PEAK, size=4096, **lay):
    su = setup(model, hw, chips=chips, engine=engine, efficiency=efficiency, **lay)
    return su, StepCost(su, size, resolve_draft(spec, su.model, su.precision), max_context=20_000)


def test_a_verification_step_by_hand():
    """Llama 3.1 8B on one H100 at the pure roofline, no serving engine, 2 sequences at 100 keys each, k = 3:
    the step is one decode-form pass of k + 1 = 4 tokens per sequence, i.e. 8 tokens through every GEMM, where the
    i-th query (i = 1..4) attends the 99 cached tokens + i: 4 x 99 + (1 + 2 + 3 + 4) = 406 pairs per sequence per
    layer, 4 x 32 heads x 128 x 406 x 2 sequences = 13,303,808 attention FLOPs per layer; plus the draft's 3 decode
    steps of 2 sequences at the same context (engine/speculative.speculative_step)."""
    spec = speculation("llama-3.2-1b", 3, 0.7)
    su, cost = tables("llama-3.1-8b", "h100-sxm", spec)
    d = resolve_draft(spec, su.model, su.precision)
    t, verify = cost.direct(2, 200)
    assert verify.ops["attention"].flops == pytest.approx(4 * 32 * 128 * 406 * 2)
    assert verify.ops["attn_proj"].flops == pytest.approx(2 * 41_943_040 * 8)        # q, k, v, o over 8 tokens
    by_hand = forward_pass(su.model, su.hardware, su.layout, su.precision, su.efficiency, phase="decode", seqs=2,
                           new_tokens=4, pairs_full=406, pairs_sliding=406, kv_read_full=99, kv_read_sliding=99)
    draft = forward_pass(d.model, su.hardware, su.layout, d.precision, su.efficiency, phase="decode", seqs=2,
                         new_tokens=1, pairs_full=100, pairs_sliding=100, kv_read_full=99, kv_read_sliding=99)
    expect = by_hand.time_s + by_hand.overhead_s + 3 * (draft.time_s + draft.overhead_s)
    assert t == pytest.approx(float(expect), rel=1e-9)
    assert cost.step_s(2, 200) == pytest.approx(float(expect), rel=1e-6)
    # the same step as engine/speculative.py prices it for `infer --draft` (one engine)
    st = speculative_step(su.model, d.model, su.hardware, su.layout, su.precision, d.precision, su.efficiency, 2,
                          99, 1, 3, 0.7)
    assert cost.step_s(2, 200) == pytest.approx(float(st.step_s), rel=1e-6)


def test_a_mixed_step_runs_its_gemms_over_every_token():
    """2 verifying decodes (k = 3) mixed with a 64-token prompt chunk: the GEMMs see 2 x 4 + 64 = 72 tokens (the
    mixed batch's prefill pass), lm_head 2 x 4 + 1 = 9 rows, each attention kernel apart; fast path = reference."""
    su, cost = tables("llama-3.1-8b", "h100-sxm", speculation("llama-3.2-1b", 3, 0.7))
    g = chunk_geometry(0, 64)
    t, base = cost.direct(2, 200, 64, 1, *g)
    assert base.ops["attn_proj"].flops == pytest.approx(2 * 41_943_040 * 72)
    assert cost.step_s(2, 200, 64, 1, *g) == pytest.approx(t, rel=1e-6)


CASES = [  # model, hardware, chips, layout, engine, efficiency, speculation
    ("llama-3.1-8b", "h100-sxm", 1, {}, "vllm", None, DRAFT),
    ("llama-3.1-70b", "h100-sxm", 8, {}, "sglang", DEFAULT, DRAFT),      # the shape-aware kernel model
    ("deepseek-v3", "h200", 8, {}, "vllm", None, speculation(mtp=1)),    # MLA, MoE, ep = 8 groups, the MTP head
    ("gpt-oss-120b", "h100-sxm", 2, {}, "tensorrt-llm", DEFAULT, speculation(mtp=2, acceptance=0.6)),   # windows
]


@pytest.mark.parametrize("model,hw,chips,lay,engine,eff,spec", CASES)
def test_fast_path_matches_the_engine_with_speculation(model, hw, chips, lay, engine, eff, spec):
    su, cost = tables(model, hw, spec, chips=chips, engine=engine, efficiency=eff, size=10_000, **lay)
    rng = np.random.default_rng(11)
    errs = []
    for _ in range(60):
        n_d = int(rng.integers(1, 600))
        keys = n_d * float(rng.integers(2, 9000))
        agg = [0.0] * 6
        if rng.random() < 0.5:
            n = int(rng.integers(1, 4000))
            agg = [float(x) for x in (n, 1, *chunk_geometry(float(rng.integers(0, 8000)), n, cost.window))]
        errs.append(abs(cost.step_s(n_d, keys, *agg) / cost.direct(n_d, keys, *agg)[0] - 1))
    assert max(errs) < 0.01, max(errs)


def test_k0_is_todays_simulation_exactly():
    kw = dict(concurrency=24, requests=300, input_len="uniform:200-2000", output_len="uniform:20-300", seed=4)
    plain = simulate("llama-3.1-8b", "h100-sxm", **kw)
    zero = simulate("llama-3.1-8b", "h100-sxm", speculation=Speculation("llama-3.2-1b", 0, 0.7, False, "given"),
                    **kw)
    assert zero.to_dict() == plain.to_dict()


@pytest.mark.parametrize("spec", [speculation("llama-3.2-1b", 4, 0.0), speculation(mtp=2, acceptance=0.0)])
def test_acceptance_zero_is_never_better(spec):
    """a = 0: E = 1 token a step, while every step also runs the draft and verifies k + 1 tokens."""
    kw = dict(concurrency=16, requests=200, input_len=1024, output_len=128)
    plain = simulate("llama-3.1-8b", "h100-sxm", **kw)
    s = simulate("llama-3.1-8b", "h100-sxm", speculation=spec, **kw)
    assert s.speculation["tokens_per_step"] == 1.0
    assert s.output_tokens_per_s < plain.output_tokens_per_s
    assert s.tpot_s.mean > plain.tpot_s.mean and s.e2e_s.mean > plain.e2e_s.mean


def test_one_user_decodes_in_ceil_r_over_e_steps():
    """Concurrency 1, 1,000 in / 50 out, draft k = 4 at a = 0.7: E = (1 - 0.7^5) / 0.3 = 2.7731, so the 49 tokens
    after the first take ceil(49 / 2.7731) = 18 verification steps, the j-th attending 1,001 + j E keys."""
    e = (1 - 0.7 ** 5) / 0.3
    assert float(expected_tokens(0.7, 4)) == pytest.approx(e) and math.ceil(49 / e) == 18
    r = simulate("llama-3.1-8b", "h100-sxm", concurrency=1, requests=3, input_len=1000, output_len=50,
                 speculation=DRAFT)
    su = setup("llama-3.1-8b", "h100-sxm", engine="vllm")
    rep = make_replica(su, resolve_draft(DRAFT, su.model, su.precision))
    cost = rep.cost(1050, 3)
    ttft = cost.step_s(0, 0, 1000, 1, *chunk_geometry(0, 1000))
    decode = sum(cost.step_s(1, 1001 + j * e) for j in range(18))
    assert r.ttft_s.mean == pytest.approx(ttft, rel=1e-9)
    assert r.e2e_s.mean == pytest.approx(ttft + decode, rel=1e-6)
    assert r.tpot_s.mean == pytest.approx(decode / 49, rel=1e-6)
    assert r.output_tokens == 150


def test_speculation_pays_at_small_batch_and_not_when_compute_bound():
    small = dict(concurrency=4, requests=100, input_len=1024, output_len=256)
    plain, spec = simulate("llama-3.1-70b", "h100-sxm", chips=8, **small), simulate(
        "llama-3.1-70b", "h100-sxm", chips=8, speculation=DRAFT, **small)
    assert spec.tpot_s.mean < 0.75 * plain.tpot_s.mean
    big = dict(concurrency=512, requests=1500, input_len=512, output_len=128)
    plain, spec = simulate("llama-3.1-8b", "h100-sxm", **big), simulate("llama-3.1-8b", "h100-sxm",
                                                                         speculation=DRAFT, **big)
    assert spec.output_tokens_per_s < plain.output_tokens_per_s


def test_the_draft_takes_kv_capacity():
    """Llama 3.1 70B on 8 H100 (tp = 8): a token's KV is 80 layers x 8 heads x 128 x 2 x 2 B / 8 = 40,960 B per
    chip; the 1B draft adds 16 x 8 x 64 x 2 x 2 B / 8 = 4,096 B, and its 1.236 B bf16 weights 309 MB per chip."""
    plain = make_replica(setup("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")).kv_tokens
    su = setup("llama-3.1-70b", "h100-sxm", chips=8, engine="vllm")
    with_draft = make_replica(su, resolve_draft(DRAFT, su.model, su.precision)).kv_tokens
    free = plain * 40_960
    assert with_draft == pytest.approx((free - 1.236e9 * 2 / 8) / (40_960 + 4_096), rel=2e-3)


def test_refused_where_not_modelled():
    with pytest.raises(InputError) as e:
        simulate("llama-3.1-70b", "h100-sxm", chips=8, pp=2, requests=20, speculation=DRAFT)
    assert e.value.field == "pp"
    with pytest.raises(InputError):
        simulate("llama-3.1-8b", "h100-sxm", requests=20, speculation=speculation("llama-3.2-1b", 4, 1.5))


def test_cli_simulate_with_speculation_and_a_kept_prefix_cache():
    import json
    from click.testing import CliRunner
    from tokenmath.faces.cli import cli
    run = CliRunner().invoke
    r = run(cli, ["simulate", "--requests", "60", "--draft", "llama-3.2-1b", "--spec-k", "4", "--acceptance", "0.7",
                  "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["speculation"]["tokens_per_step"] == pytest.approx((1 - 0.7 ** 5) / 0.3, rel=1e-4)
    r = run(cli, ["simulate", "--requests", "60", "--mtp", "1", "--explain"])
    assert r.exit_code == 0 and "tokens per verification step" in r.output
    r = run(cli, ["simulate", "--requests", "60", "--prefix-hit", "0.5", "--prefix-cache-share", "0.3"])
    assert r.exit_code == 0 and "prefix cache (" in r.output
    for bad in (["--spec-k", "3"], ["--draft", "llama-3.2-1b"], ["--mtp", "1", "--pp", "2", "--chips", "2"],
                ["--prefix-cache-share", "0.3"]):
        r = run(cli, ["simulate", "--requests", "20", *bad])
        assert r.exit_code == 2 and "Traceback" not in r.output, (bad, r.output)
