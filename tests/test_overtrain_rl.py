"""The RL phase in the over-training optimum (issue 19 item 4): terms by hand, invariants, errors."""
import pytest

from tokenmath.analyses.training.overtrain import overtrain
from tokenmath.analyses.training.rl_cost import RLRecipe, rl_usd_per_token
from tokenmath.base.errors import InputError


def test_rl_terms_by_hand():
    r = RLRecipe()                                        # DeepSeek-R1: G 16, Lp 2048, Lr 32768, reference, no RM
    t = rl_usd_per_token(1e9, 1e-7, 1e-8, 1e-18, r)
    seq = (2048 + 32768) / 32768                          # 1.0625 tokens per rollout token in a training pass
    assert float(t["generation"]) == pytest.approx(1e-7)
    assert float(t["prompts"]) == pytest.approx(1e-8 * 2048 / (16 * 32768))       # shared by the group
    assert float(t["reference"]) == pytest.approx(2e9 * seq * 1e-18)              # 2.125e-9
    assert float(t["reward"]) == 0.0
    assert float(t["update"]) == pytest.approx(6e9 * seq * 1e-18)                 # 6.375e-9
    assert float(t["total"]) == pytest.approx(1e-7 + 1e-8 / 256 + 8.5e-9)
    rm = rl_usd_per_token(1e9, 0.0, 0.0, 1e-18, RLRecipe(reward_params=7e9, reference=False, epochs=2))
    assert float(rm["reward"]) == pytest.approx(2 * 7e9 * seq * 1e-18)
    assert float(rm["reference"]) == 0.0 and float(rm["update"]) == pytest.approx(12e9 * seq * 1e-18)


def test_flop_only_rl_phase_at_the_optimum():
    D_rl = 1e11
    r = overtrain(target_loss=2.3, inference_tokens=1e12, rl_rollout_tokens=D_rl, rl=True, flop_only=True)
    o = r.optimum
    f, N = r.usd_per_flop, o.params
    seq = (2048 + 32768) / 32768
    # FLOP-only: generation 2N, prompts 2N Lp/(G Lr), reference 2N seq, update 6N seq FLOPs per rollout token
    per_token = 2 * N * f * (1 + 2048 / (16 * 32768) + seq + 3 * seq)
    assert o.rl_usd == pytest.approx(D_rl * per_token, rel=1e-9)
    assert o.total_usd == pytest.approx(o.training_usd + o.inference_usd + o.rl_usd)
    assert 0 < r.to_dict()["optimum"]["rl_share"] < 1
    # the RL phase only adds cost that grows with N: the optimum never moves to a larger model
    base = overtrain(target_loss=2.3, inference_tokens=1e12, flop_only=True)
    assert o.params <= base.optimum.params * (1 + 1e-9)
    # no rollout tokens: the recipe changes nothing
    zero = overtrain(target_loss=2.3, inference_tokens=1e12, rl_rollout_tokens=0, rl=True, flop_only=True)
    assert zero.optimum.total_usd == pytest.approx(base.optimum.total_usd)


def test_bad_recipe_is_a_clear_error():
    with pytest.raises(InputError) as e:
        RLRecipe(group_size=0)
    assert "group_size" in str(e.value)
    with pytest.raises(InputError):
        RLRecipe(epochs=float("nan"))


def test_engine_rl_phase_closing_figure():
    """The closing figure of issue 19: 1e13 inference tokens at loss 2.2 on H100, with and without 1e11 rollout
    tokens. Rollouts of 2,048 + 32,768 tokens hold far fewer sequences than 512 + 512 chat requests, so a generated
    rollout token costs more than a served output token of the same model."""
    base = overtrain(target_loss=2.2, inference_tokens=1e13, hardware="h100-sxm")
    r = overtrain(target_loss=2.2, inference_tokens=1e13, rl_rollout_tokens=1e11, rl=True, hardware="h100-sxm")
    o = r.optimum
    assert o.rl_serving.feasible and o.rl_serving.batch < o.serving.batch
    assert o.rl_terms["generation"] / 1e11 > o.serving.usd_per_output_token
    assert o.rl_usd == pytest.approx(sum(o.rl_terms.values()))
    assert o.total_usd == pytest.approx(o.training_usd + o.inference_usd + o.rl_usd)
    assert o.params <= base.optimum.params and o.total_usd > base.optimum.total_usd
