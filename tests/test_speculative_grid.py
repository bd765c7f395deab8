"""Speculation in the grid questions (pareto, plan, fleet, slowmode) and the MTP head's weights in memory.

The grid reads engine/speculative.speculative_decode on the batch static_batch.serve_batch already served; these
tests pin it to the same hand-computed case as tests/test_speculative.py and to the invariants of the model."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.grid import evaluate
from tokenmath.analyses.serving.pareto import pareto
from tokenmath.analyses.serving.plan import plan
from tokenmath.analyses.serving.speculative import resolve_draft, speculation, speculative
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError
from tokenmath.engine.memory import max_batch
from tokenmath.engine.speculative import draft_weights_per_chip, max_batch_with_draft, mtp_head
from tokenmath.faces.cli import cli
from tokenmath.mapping.layout import Layout
from tokenmath.specs.efficiency import PEAK
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params

DRAFT = speculation("llama-3.2-1b", 4, 0.7)


def _grid(model, hw, lays, batches, spec, **kw):
    su = setup(model, hw, **kw)
    return (evaluate(su, lays, batches, 1024, 256),
            evaluate(su, lays, batches, 1024, 256, draft=resolve_draft(spec, su.model, su.precision)))


def test_grid_hand_computed_small_case():
    # Llama 3.1 8B + Llama 3.2 1B on one H100, batch 1, pure roofline, no engine (arithmetic in test_speculative.py):
    # plain step 4.5256 ms; draft step 2,509,344,768 B / 3.35e12 B/s = 0.7491 ms; verify ~ plain (memory-bound);
    # per token = (4 x 0.7491 + 4.5256) / 2.7731 = 2.7125 ms  -> 368.7 tokens/s per user (plain 221.0)
    g0, g1 = _grid("llama-3.1-8b", "h100-sxm", [(1, 1, 1, 1)], [1], DRAFT, efficiency=PEAK, engine="none")
    assert g0.step_s[0, 0] == pytest.approx(4.5256e-3, rel=2e-3)
    assert g1.step_s[0, 0] == pytest.approx((4 * 0.7491e-3 + 4.5256e-3) / 2.7731, rel=5e-3)
    assert g1.tokens_per_s_per_user[0, 0] == pytest.approx(368.7, rel=5e-3)
    assert g1.ttft_s[0, 0] == g0.ttft_s[0, 0]               # the draft's own prefill is left out


def test_grid_is_the_one_engine_of_infer_draft():
    """The grid and `infer --draft` give the same per-token time at the same layout and batch (no engine terms)."""
    bs = [1, 8, 64, 512]
    _, g1 = _grid("llama-3.1-70b", "h100-sxm", [(8, 1, 1, 1)], bs, DRAFT, engine="none")
    r = speculative("llama-3.1-70b", "h100-sxm", DRAFT, batches=bs, chips=8, engine="none")
    np.testing.assert_allclose(g1.step_s[0], r.per_token_s, rtol=1e-12)
    assert list(g1.bottleneck[0]) == list(r.verify_bottleneck)


@pytest.mark.parametrize("engine", ["none", "vllm"])
def test_acceptance_zero_never_helps_and_compute_bound_never_helps(engine):
    lays = [(8, 1, 1, 1), (4, 1, 1, 2), (2, 1, 1, 4)]
    # batch 512: under the default (the chip's kernel model with its fitted residuals) the plain step's compute leg
    # overtakes its memory leg between 256 and 512 sequences at tp = 8 and 4 (under the flat per-family fit, by 256
    # at tp = 8), and at 1,024 the draft's weights and KV no longer fit beside the batch: 512 is where a plain step
    # is compute-bound and both fit
    bs = [1, 4, 16, 64, 256, 512, 1024]
    g0, gz = _grid("llama-3.1-70b", "h100-sxm", lays, bs, speculation("llama-3.2-1b", 4, 0.0), engine=engine)
    both = np.asarray(g0.fits) & np.asarray(gz.fits)
    assert both.any()
    assert np.all(gz.step_s[both] >= g0.step_s[both])       # E = 1: k draft steps are pure cost
    _, g7 = _grid("llama-3.1-70b", "h100-sxm", lays, bs, DRAFT, engine=engine)
    cb = both & (g0.bottleneck == "compute")                 # the plain step already compute-bound
    assert cb.any()
    assert np.all(g7.step_s[cb] > g0.step_s[cb])             # ~(k + 1) x the FLOPs for E = 2.77 < 5 tokens
    small = both & (np.asarray(g0.batch) == 1)
    assert np.all(g7.step_s[small] < g0.step_s[small])       # memory/overhead-bound: speculation pays


def test_mtp_head_weights_deepseek_v3():
    m = get_model("deepseek-v3")
    h = mtp_head(m)
    P = count_params(h)
    # one MoE block of DeepSeek-V3 (tokenmath's count) + the d x 2d projection 2 x 7168^2 = 102,760,448
    block = P.total - P.embedding - P.lm_head
    assert block == pytest.approx(11.507e9, rel=1e-3)
    one = Layout(1, 1, 1, 1)
    from tokenmath.analyses.setup import resolve_precision
    prec = resolve_precision(m, None, None)     # fp8 with 128x128 fp32 block scales: 1 + 4/16384 bytes per parameter
    assert prec.weight.bytes == prec.expert.bytes == pytest.approx(1 + 4 / 16384)
    w = draft_weights_per_chip(h, m, one, prec, mtp=True)
    assert w == pytest.approx((block + 2 * 7168 ** 2) * (1 + 4 / 16384), rel=1e-6)
    # DeepSeek-V3 README (huggingface.co/deepseek-ai/DeepSeek-V3): "14B of the Multi-Token Prediction (MTP) Module
    # weights"; that checkpoint stores its own copy of the embedding and head (2 x 0.927 B), held once in serving
    assert (w + P.embedding + P.lm_head) / 14e9 == pytest.approx(1.0, abs=0.05)


def test_draft_memory_lowers_the_max_batch():
    su = setup("deepseek-v3", "gb200-nvl72", engine="none")
    lay = Layout(1, 1, 72, 1)
    d = resolve_draft(speculation(mtp=1), su.model, su.precision)
    ctx = 1280
    b0 = int(max_batch(su.model, su.hardware.memory_bytes, lay, su.precision.weight.bytes,
                       su.precision.expert.bytes, su.precision.kv.bytes, ctx, su.reserve))
    b1 = int(max_batch_with_draft(su.model, d.model, su.hardware.memory_bytes, lay, su.precision, d.precision, ctx,
                                  su.reserve, True))
    # the head holds one of 62 layers' KV (61 + 1) per sequence, and its weights: fewer sequences fit, not many fewer
    assert b0 * 0.95 < b1 < b0
    g = evaluate(su, [(1, 1, 72, 1)], [b1, b0], 1024, 256, draft=d)
    assert bool(g.fits[0, 0]) and not bool(g.fits[0, 1])


def test_pareto_and_plan_with_speculation():
    p0 = pareto("llama-3.1-70b", "h100-sxm", chips=8, engine="none")
    p1 = pareto("llama-3.1-70b", "h100-sxm", chips=8, engine="none", speculation=DRAFT)
    # the most interactive point: faster per user with the draft (batch 1 is memory/overhead-bound)
    assert p1.frontier[0]["output_tokens_per_s_per_user"] > 1.5 * p0.frontier[0]["output_tokens_per_s_per_user"]
    d = p1.to_dict()
    assert d["speculation"]["tokens_per_step"] == pytest.approx(2.7731) and "speculative" in d["notes"][-1]
    assert "speculation" not in p0.to_dict()                 # unchanged without it
    pl = plan("llama-3.1-70b", "hgx-h100", chips=8, min_tokens_per_s_per_user=100, engine="none",
              speculation=DRAFT)
    assert pl.best["output_tokens_per_s_per_user"] >= 100 and pl.best["pp"] == 1
    with pytest.raises(InputError) as e:                     # plain decoding cannot reach 100 tok/s/user on 8 H100
        plan("llama-3.1-70b", "hgx-h100", chips=8, min_tokens_per_s_per_user=100, engine="none")
    assert e.value.field == "min_tokens_per_s_per_user"
    with pytest.raises(InputError) as e:
        plan("deepseek-v3", "gb200-nvl72", disaggregated=True, speculation=speculation(mtp=1))
    assert e.value.field == "disaggregated"


@pytest.mark.parametrize("cmd", [
    ["pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--chips", "1"],
    ["plan", "-m", "llama-3.1-8b", "-S", "hgx-h100", "--chips", "2"],
    ["fleet", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--demand", "10000", "--max-chips", "2"],
    ["slowmode", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--max-chips", "2"],
])
def test_cli_grid_commands_take_the_draft(cmd):
    r = CliRunner().invoke(cli, [*cmd, "--draft", "llama-3.2-1b", "--acceptance", "0.7", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["speculation"]["draft_model"] == "llama-3.2-1b" and d["speculation"]["k"] == 4
    r = CliRunner().invoke(cli, [*cmd, "--draft", "llama-3.2-1b"])
    assert r.exit_code == 2 and "acceptance" in r.output
    r = CliRunner().invoke(cli, [*cmd, "--mtp", "1"])
    assert r.exit_code == 0 and "speculative decoding" in r.output
