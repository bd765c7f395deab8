"""The prefix cache's capacity in the simulator (issue 18 item 4 in `simulate`): shared prefixes held once in HBM,
idle ones evicted least recently used first, an optional share of the KV cache kept for them, and the hit rate
actually achieved."""
import pytest

import tokenmath
from tokenmath.analyses.serving.simulation.prefix_store import PrefixStore
from tokenmath.analyses.serving.simulation.replica import make_replica
from tokenmath.analyses.setup import setup
from tokenmath.base.errors import InputError

simulate = tokenmath.simulate
PREFIX = 180_000         # three of them overfill Llama 3.1 8B's KV cache on one H100 (~454,000 tokens), two fit


def trace(tmp_path, groups):
    """One request every 1,000 s (each completes long before the next): prefix PREFIX + 10 own tokens, 10 out."""
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,input_tokens,output_tokens,prefix_id,prefix_tokens\n" + "".join(
        f"{1000 * j},{PREFIX + 10},10,{g},{PREFIX}\n" for j, g in enumerate(groups)))
    return str(f)


def test_lru_eviction_by_hand(tmp_path):
    """KV for two prefixes, not three. A B C A B C: C evicts A (least recently used), A evicts B, ... every
    request misses. A A B B C C: each second request finds its prefix: 3 hits of 6, 3 x 180,000 tokens cached over
    6 x 180,010 prompt tokens; B's arrival leaves A idle beside it, C's evicts A."""
    kv = make_replica(setup("llama-3.1-8b", "h100-sxm", engine="vllm")).kv_tokens
    assert 2 * (PREFIX + 20) < kv < 3 * PREFIX
    thrash = simulate("llama-3.1-8b", "h100-sxm", trace=trace(tmp_path, "ABCABC")).prefix_cache
    assert thrash["hits"] == 0 and thrash["evictions"] == 4 and thrash["resident_prefixes_at_end"] == 2
    reuse = simulate("llama-3.1-8b", "h100-sxm", trace=trace(tmp_path, "AABBCC")).prefix_cache
    assert reuse["hits"] == 3 and reuse["evictions"] == 1
    assert reuse["hit_rate_requests"] == 0.5
    assert reuse["hit_rate_tokens"] == pytest.approx(3 * PREFIX / (6 * (PREFIX + 10)))
    assert reuse["peak_tokens"] == 2 * PREFIX and reuse["peak_fraction"] == pytest.approx(2 * PREFIX / kv)


def test_a_reserved_cache_keeps_what_fits():
    """A reserve of 500 tokens: a 300-token prefix is kept, a second evicts it once idle, one of 600 never fits."""
    s = PrefixStore(500)
    assert s.insert(0, 300, 0.0) and s.lookup(0, 300, 310) == 300
    assert not s.insert(1, 300, 1.0)              # the first is in use (its creator and one hit): no room
    s.release(0, 2.0)
    s.release(0, 2.0)
    assert s.insert(1, 300, 3.0) and s.evictions == 1 and s.resident == 300
    assert not s.insert(2, 600, 4.0)
    assert s.peek(1, 1000) == 300 and s.peek(0, 300) == 0


KV_BOUND = dict(concurrency=400, requests=1200, input_len=4096, output_len=256, prefix_hit=0.5)


def test_sharing_raises_and_a_cache_that_fills_hbm_lowers_the_running_sequences():
    """Llama 3.1 8B on one H100 with 400 users of 4,096-token prompts (half of each one shared prefix): KV bounds
    the running requests. Held once, the shared half frees room: more run at once than when every request holds
    its own copy (no prefix); a cache kept at 60% of the KV cache leaves the running requests 40% of it: fewer."""
    none = simulate("llama-3.1-8b", "h100-sxm", **{**KV_BOUND, "prefix_hit": None})
    shared = simulate("llama-3.1-8b", "h100-sxm", **KV_BOUND)
    kept = simulate("llama-3.1-8b", "h100-sxm", prefix_cache_share=0.6, **KV_BOUND)
    top = [max(r.series["running"]) for r in (none, shared, kept)]
    assert top[1] > 1.5 * top[0] and top[2] < 0.6 * top[1]
    # own tokens per running request ~ 2,048 + 10 + 256 / 2 (+ half a block): the reserve's share by hand
    per = 2048 + 1 + 256 / 2
    assert top[2] == pytest.approx(0.4 * kept.kv_capacity_tokens / per, rel=0.1)
    assert kept.prefix_cache["reserve_tokens"] == int(0.6 * kept.kv_capacity_tokens)
    assert shared.prefix_cache["hit_rate_tokens"] == pytest.approx(0.5, abs=0.01)


def test_prefix_cache_share_is_checked():
    for bad in (1.5, -0.1, "x"):
        with pytest.raises(InputError):
            simulate(requests=20, prefix_hit=0.5, prefix_cache_share=bad)
    with pytest.raises(InputError):
        simulate(requests=20, prefix_cache_share=0.3)                # no shared prefixes to keep
    assert "prefix_cache" not in simulate(requests=20).to_dict()      # without prefixes: today's output
