"""The prefix-cache hit rate follows from a trace's block hashes and the cache's capacity (LRU over blocks)."""
import gzip
import json
from collections import OrderedDict

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from tokenmath.analyses.serving.block_trace import read_block_trace
from tokenmath.analyses.serving.kv_offload import kv_offload
from tokenmath.analyses.serving.kv_reuse import reuse_curve, stack_distances
from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli

FIX = "tests/fixtures/mooncake/"    # kvcache-ai/Mooncake FAST25-release/traces (Apache-2.0), commit 3b5a594, gzip'd


def _write(tmp_path, rows, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows))
    return p


def _req(t, n_tokens, ids):
    return {"timestamp": t, "input_length": n_tokens, "output_length": 10, "hash_ids": ids}


def test_hit_rate_by_hand_on_three_requests(tmp_path):
    # blocks of 512 tokens. r0: [1, 2] (1,000 tokens), r1: [1, 3] (1,024), r2: [1, 2] (600: its 2nd block holds 88)
    tr = read_block_trace(_write(tmp_path, [_req(0, 1000, [1, 2]), _req(5, 1024, [1, 3]), _req(9, 600, [1, 2])]))
    c = reuse_curve(tr)
    total = 1000 + 1024 + 600
    # unbounded: r1 finds block 1 (512), r2 finds 1 and 2 (512 + 88) -> 1,112 of 2,624 tokens
    assert c.hit_rate(np.inf) == pytest.approx((512 + 600) / total)
    # one block of cache: each request touches its blocks last first, so block 1 is the most recent: r1 finds it;
    # r2 finds block 1 but block 2 was evicted (2 blocks were touched since) -> 512 + 512
    assert c.hit_rate(512) == pytest.approx(1024 / total)
    # block 2 was last used by r0; since then r1 touched 3 and 1: distance 2, so 3 blocks hold it
    assert c.hit_rate(2 * 512) == pytest.approx(1024 / total)
    assert c.hit_rate(3 * 512) == pytest.approx((512 + 600) / total)
    assert list(stack_distances(tr)) == [np.inf, np.inf, 0, np.inf, 0, 2]


def _brute_lru(tr, cap_blocks):
    cache, hit = OrderedDict(), 0
    sizes = tr.block_sizes()
    for r in range(tr.requests):
        a, b = tr.offsets[r], tr.offsets[r + 1]
        ids = tr.hashes[a:b].tolist()
        k = 0
        while k < len(ids) and ids[k] in cache:
            k += 1
        hit += int(sizes[a:a + k].sum())
        for h in reversed(ids):        # the last block first: the head stays most recent
            cache.pop(h, None)
            cache[h] = True
            while len(cache) > cap_blocks:
                cache.popitem(last=False)
    return hit / tr.input_tokens.sum()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=25),
       st.integers(1, 20))
def test_every_capacity_matches_a_brute_force_lru(tmp_path_factory, prompts, cap):
    rows = [_req(i, 512 * len(p), list(dict.fromkeys(p))) for i, p in enumerate(prompts)]
    tr = read_block_trace(_write(tmp_path_factory.mktemp("t"), rows))
    c = reuse_curve(tr)
    assert c.hit_rate(cap * 512) == pytest.approx(_brute_lru(tr, cap))
    # more capacity never serves less
    assert np.all(np.diff(c.hit_rate([512 * k for k in range(1, 25)])) >= -1e-12)


def _implied(tr):
    """The trace's own reuse: each prompt's leading blocks seen in any earlier prompt (an unbounded cache)."""
    seen, hit, sizes = set(), 0, tr.block_sizes()
    for r in range(tr.requests):
        a, b = tr.offsets[r], tr.offsets[r + 1]
        ids, k = tr.hashes[a:b].tolist(), 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        hit += int(sizes[a:a + k].sum())
        seen.update(ids)
    return hit / tr.input_tokens.sum()


@pytest.mark.parametrize("name,paper_max", [("synthetic", 0.75), ("conversation", 0.41)])
def test_mooncake_traces_reproduce_the_papers_capacity_figures(name, paper_max):
    # Mooncake FAST'25 paper (FAST25-release/Mooncake-FAST25.pdf), Figure 9 and Sec. 5.3.1: an unbounded cache
    # reaches 41% (conversation), 46% (tool & agent), 75% (synthetic), 48% (all: 0.41, 0.46, 0.75 weighted by the
    # three traces' tokens gives 0.486); "a local cache with a 3M token capacity does not achieve 50% of the
    # theoretical maximum hit rate in most scenarios"; "a cache capacity of 50M tokens nearly reaches" it
    tr = read_block_trace(FIX + f"{name}_trace.jsonl.gz")
    c = reuse_curve(tr)
    top = float(c.hit_rate(np.inf))
    assert top == pytest.approx(_implied(tr), abs=1e-9)          # the trace's own hash ids, exactly
    assert abs(top - paper_max) <= 0.10                          # synthetic 65.1% vs 75%; conversation 37.4% vs 41%
    assert c.hit_rate(3e6) < 0.5 * top
    assert c.hit_rate(50e6) >= 0.95 * top


def test_offload_tiers_stack_and_their_reload_load_follows_the_trace():
    r = kv_offload("llama-3.1-70b", "h100-sxm", FIX + "synthetic_trace.jsonl.gz", chips=8)
    d = r.to_dict()
    hits = [w["hit_rate"] for w in d["what_ifs"]]
    assert hits == sorted(hits) and hits[-1] <= d["unbounded_hit_rate"] + 1e-12       # each tier adds, never past
    dram = next(s for s in d["what_ifs"][1]["served"] if s["tier"] == "host_dram")
    # link load = hit tokens/s x 327,680 B of KV per token / 8 chips / 55 GB/s per chip's link
    tok_s = dram["share_of_input"] * d["trace"]["input_tokens"] / d["trace"]["duration_s"]
    assert dram["reload_link_load"] == pytest.approx(tok_s * 327_680 / 8 / 55e9)
    assert all(w["recomputed"] == pytest.approx(1 - w["hit_rate"]) for w in d["what_ifs"])


def test_bad_traces_are_refused_with_the_line(tmp_path):
    bad = _write(tmp_path, [_req(0, 100, [1]), {"timestamp": 1, "input_length": 100, "output_length": 1,
                                                 "hash_ids": ["x"]}])
    with pytest.raises(InputError, match="line 2"):
        read_block_trace(bad)
    with pytest.raises(InputError, match="3 blocks for 1,000 input tokens"):
        read_block_trace(_write(tmp_path, [_req(0, 1000, [1, 2, 3])], "b.jsonl"))
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(b"not json\n"))
    r = CliRunner().invoke(cli, ["kvcache", "--trace", str(gz)])
    assert r.exit_code == 2 and "line 1" in r.output and "Traceback" not in r.output
