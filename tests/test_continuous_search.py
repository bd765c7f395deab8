"""One continuous-batching search (by_concurrency.cheapest_continuous) for plan, fleet and price: over every layout
that fits, so a wider option space never gives a costlier answer. Before, it traced the three layouts the static
search ranked best, and fleet for DeepSeek-V3 on H200 at 1e6 tokens/s answered 3,080 / 3,928 / 6,376 / 7,088
chips for --max-chips 8 / 16 / 32 / 64 (issue: serving economics under load)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokenmath.analyses.serving.by_concurrency import cheapest_continuous, continuous_bound, one_replica, trace
from tokenmath.analyses.serving.by_concurrency import DEFAULT_CONCURRENCY, reaching, targets_test
from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.grid import up_to
from tokenmath.analyses.setup import setup


def _chips_per_mtok(c):
    return c["chip_s_per_mtok_output"]


@pytest.fixture(scope="module")
def moe_grid():
    su = setup("qwen3-30b-a3b", "h100-sxm", engine="vllm")
    return su, up_to(su, 8, 1024, 256)


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_a_wider_set_of_layouts_never_gives_a_costlier_continuous_answer(moe_grid, data):
    su, g = moe_grid
    n = len(g.layouts)
    keep = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
    rank = np.where(np.asarray(g.fits, bool), g.chip_s_per_mtok_output(), np.inf)
    sub = rank.copy()
    sub[[i for i in range(n) if i not in keep]] = np.inf       # layouts outside the subset never fit
    g_sub = type(g)(**{**g.__dict__, "fits": np.where(np.isfinite(sub), g.fits, False)})
    narrow = cheapest_continuous(su, g_sub, sub, 20.0, 1024, 256)
    wide = cheapest_continuous(su, g, rank, 20.0, 1024, 256)
    assert wide is not None
    if narrow is not None:
        assert _chips_per_mtok(wide) <= _chips_per_mtok(narrow) * (1 + 1e-12)


def test_the_bound_is_never_below_what_a_layout_reaches(moe_grid):
    """Branch and bound is exact only if continuous_bound bounds every layout's traced steady state from above."""
    su, g = moe_grid
    bound = continuous_bound(g, 20.0, 1024, 256)
    cs = reaching(DEFAULT_CONCURRENCY, int(np.max(g.max_batch)))
    for i, t in enumerate(g.layouts):
        if not np.asarray(g.fits[i]).any():
            continue
        pts, _ = trace(su, one_replica([t]), cs, 1024, 256, meets=targets_test(None, 20.0))
        ok = [p["output_tokens_per_s_per_chip"] for p in pts
              if p["output_tokens_per_s_per_user"] and p["output_tokens_per_s_per_user"] >= 20.0]
        if ok:
            assert max(ok) <= bound[i] * (1 + 1e-9), (t, max(ok), bound[i])


@pytest.mark.slow
def test_fleet_continuous_chips_never_rise_with_max_chips():
    chips = [fleet("deepseek-v3", "h200", demand=1e6, max_chips=m, engine="vllm").to_dict()
             ["continuously_batched"]["chips"] for m in (8, 16, 32)]
    assert all(b <= a for a, b in zip(chips, chips[1:]))


def test_dp_replicas_fold_into_one():
    # dp independent replicas serve 1/dp of the users each: the same steady state per chip as dp = 1
    assert one_replica([(4, 1, 2, 2), (4, 1, 2, 1), (8, 1, 1, 4, 2)]) == [(4, 1, 2, 1), (8, 1, 1, 1, 2)]
