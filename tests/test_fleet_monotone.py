"""A wider search never gives a fleet more chips, static and disaggregated too (issue 34: "a wider option space never
gives a costlier answer"). Before: DeepSeek-V3 on H200 at 1e6 output tok/s, --max-chips 8 / 16 / 32 / 64, sized
its static fleet at 888 / 896 / 880 / 896 chips and its disaggregated one at 880 / 880 / 880 / 896, for two reasons:
one batch axis shared by every layout (up to the largest batch any holds), so more layouts sampled each one more
coarsely; and the most tokens/s per chip picked, where whole replicas (a ceil) can make it cost more chips."""
from __future__ import annotations

import numpy as np
import pytest

from tokenmath.analyses.serving.fleet import fleet
from tokenmath.analyses.serving.grid import fewest_whole, over_batches
from tokenmath.analyses.setup import setup
from tokenmath.mapping.candidates import layouts_for


def test_whole_instances_pick_the_fewest_chips_not_the_most_per_chip():
    # 1 chip at 100 tok/s (100 per chip) or 8 chips at 1,000 (125 per chip), for a demand of 1,050 tok/s:
    # ceil(1050 / 100) x 1 = 11 chips against ceil(1050 / 1000) x 8 = 16: the smaller instance wins
    rate, chips = np.array([[100.0], [1000.0]]), np.array([[1.0], [8.0]])
    ok = np.ones((2, 1), bool)
    assert fewest_whole(rate, chips, ok, 1050.0, rate / chips) == (0, 0)
    # for 2,000 tok/s: 20 x 1 = 20 chips against 2 x 8 = 16: the larger
    assert fewest_whole(rate, chips, ok, 2000.0, rate / chips) == (1, 0)
    # a tie on chips (8 x 1 = 8 against 1 x 8 = 8 for 800 tok/s) goes to the most per chip
    assert fewest_whole(rate, chips, ok, 800.0, rate / chips) == (1, 0)
    # a point outside `ok` is never chosen
    assert fewest_whole(rate, chips, np.array([[True], [False]]), 2000.0, rate / chips) == (0, 0)


def test_each_layouts_batch_axis_is_its_own():
    su = setup("deepseek-v3", "h200", engine="vllm")
    eight = layouts_for(su.model, 8, max_tp=8)
    wide = eight + layouts_for(su.model, 64, max_tp=8)
    a, b = over_batches(su, eight, 1024, 256, 128), over_batches(su, wide, 1024, 256, 128)
    n = len(eight)
    np.testing.assert_array_equal(a.batch, b.batch[:n, :a.batch.shape[1]])
    # the wider grid's extra columns only repeat each 8-chip layout's own largest batch
    assert (b.batch[:n, a.batch.shape[1]:] == a.batch[:, -1:]).all()
    np.testing.assert_array_equal(a.step_s, b.step_s[:n, :a.batch.shape[1]])


@pytest.mark.parametrize("model,hw,demand", [("deepseek-v3", "h200", 1e6), ("llama-3.1-70b", "h100-sxm", 1e5)])
def test_static_and_disaggregated_fleets_never_grow_with_max_chips(model, hw, demand):
    static, disagg = [], []
    for m in (8, 16, 32, 64):
        d = fleet(model, hw, demand=demand, max_chips=m).to_dict()     # no engine: the static and disaggregated
        static.append(d["chips"])
        disagg.append(d["disaggregated"]["chips"])
    assert all(b <= a for a, b in zip(static, static[1:])), static
    assert all(b <= a for a, b in zip(disagg, disagg[1:])), disagg
