"""What a saved plan / fleet answer deploys (analyses/benchmarks/answer_pools.py): its pools, servers and the figures
one benchmark of it should print, on small hand-made answers whose arithmetic is written out, and on real answers."""
import json

import pytest

from tokenmath.analyses.benchmarks.answer_pools import pools_of
from tokenmath.base.errors import InputError


def _fleet(**over):
    """A fleet answer with round numbers: 1,000 in / 250 out, decode instances of 8 chips (ep 8) giving 10,000
    output tok/s each at 20 tok/s/user, prefill instances of 8 chips giving 20,000 prompt tok/s each."""
    a = {"model": "deepseek-v3", "hardware": "h200", "engine": {"id": "vllm"}, "weight_dtype": "fp8",
         "kv_dtype": "fp8", "demand_output_tokens_per_s": 9000.0, "input_len": 1000, "output_len": 250,
         "continuously_batched": {"layout": "tp=4 pp=1 ep=2 dp=1", "tp": 4, "pp": 1, "ep": 2, "dp": 1,
                                  "concurrency": 150, "ttft_s": 0.1, "tpot_s": 0.05, "tokens_per_s_per_user": 20.0,
                                  "replica_chips": 8, "replica_output_tokens_per_s": 3000.0, "replicas": 3},
         "disaggregated": {"decode": {"tp": 1, "pp": 1, "ep": 8, "dp": 1, "batch": 500, "tokens_per_s_per_user": 20.0,
                                      "instance_chips": 8, "instance_output_tokens_per_s": 10000.0, "instances": 1},
                           "prefill": {"tp": 1, "pp": 1, "ep": 8, "dp": 1, "batch": 32, "ttft_s": 0.5,
                                       "instance_chips": 8, "instance_prompt_tokens_per_s": 20000.0,
                                       "instances": 2}}}
    a.update(over)
    return a


def test_a_fleets_continuous_servers_are_its_replicas_with_one_servers_load():
    d = pools_of(_fleet())
    (p,) = d.pools
    assert (p.role, p.tp, p.ep, p.replicas, p.max_running, p.chips_per_server) == ("both", 4, 2, 3, 150, 8)
    # one server's benchmark: 150 users, 3,000 output tok/s (the replica's), TTFT 100 ms, TPOT 50 ms
    assert d.expected == {"concurrency": 150, "ttft_s": 0.1, "tpot_s": 0.05, "output_tokens_per_s": 3000.0}
    assert d.chips == 24 and not d.disaggregated


def test_disaggregated_pools_serve_what_the_tighter_pool_allows_by_littles_law():
    d = pools_of(_fleet(), disaggregated=True)
    pre, dec = d.pools
    assert (pre.role, pre.replicas, pre.max_running, dec.role, dec.replicas, dec.max_running) == \
        ("prefill", 2, 32, "decode", 1, 500)
    # decode: 1 x 10,000 = 10,000 output tok/s; prefill: 2 x 20,000 prompt tok/s x 250 / 1,000 = 10,000 as well
    assert d.expected["output_tokens_per_s"] == pytest.approx(10_000.0)
    # TPOT = 1 / 20 tok/s = 50 ms; a request lasts 0.5 + 250 x 0.05 = 13 s; users = 10,000 x 13 / 250 = 520
    assert d.expected["tpot_s"] == pytest.approx(0.05) and d.expected["concurrency"] == 520
    assert not d.notes                                          # neither pool binds harder than the other


def test_a_prefill_pool_that_binds_lowers_the_expected_throughput_and_says_so():
    a = _fleet()
    a["disaggregated"]["prefill"]["instances"] = 1              # 20,000 x 250 / 1,000 = 5,000 < decode's 10,000
    d = pools_of(a, disaggregated=True)
    assert d.expected["output_tokens_per_s"] == pytest.approx(5_000.0)
    assert any("prefill pool binds" in n for n in d.notes)


def test_an_answer_without_an_engine_or_with_batch_sharded_attention_is_refused():
    with pytest.raises(InputError, match="no serving engine"):
        pools_of(_fleet(engine=None))
    a = _fleet()
    a["continuously_batched"]["attention_sharding"] = "batch"
    with pytest.raises(InputError, match="continuously_batched.attention_sharding"):
        pools_of(a)


@pytest.mark.parametrize("key,value,match", [("input_len", -3, "input_len"), ("input_len", float("nan"), "input_len"),
                                             ("engine", {"id": "tgi"}, "engine")])
def test_a_bad_key_in_a_saved_answer_is_refused_naming_it(key, value, match):
    with pytest.raises(InputError, match=match):
        pools_of(_fleet(**{key: value}))


def test_something_that_is_no_answer_is_refused():
    with pytest.raises(InputError, match="not a plan, fleet or infer answer"):
        pools_of({"model": "x"})
    with pytest.raises(InputError, match="not an object"):
        pools_of([1, 2])


def test_a_real_plan_answer_deploys_its_continuous_point_and_its_pools(tmp_path):
    from tokenmath.analyses.ask import plan, split
    dep, wl, _ = split(model="llama-3.1-8b", hardware="hgx-h100", chips=2, min_tokens_per_s_per_user=30)
    r = json.loads(json.dumps(plan(dep, wl, disaggregated=True).to_dict()))
    c = r["best_by_concurrency"]
    d = pools_of(r, disaggregated=False)
    (p,) = d.pools
    assert (p.tp, p.pp, p.replicas) == (c["tp"], c["pp"], c["dp"])
    assert d.expected["output_tokens_per_s"] == pytest.approx(c["output_tokens_per_s"] / c["dp"])
    dd = pools_of(r)                                            # the plan's own choice: its disaggregated pools
    assert dd.disaggregated and [q.role for q in dd.pools] == ["prefill", "decode"]
    # the prefill pool holds at least the chips the plan sized, in whole servers
    pre = dd.pools[0]
    assert pre.chips >= r["disaggregated"]["prefill_chips"] - 1e-9


@pytest.mark.parametrize("path,value", [(("disaggregated", "decode", "instances"), 1e300),
                                        (("continuously_batched", "concurrency"), 10 ** 12),
                                        (("input_len",), 10 ** 12), (("continuously_batched", "replicas"), 10 ** 9),
                                        (("continuously_batched", "ttft_s"), float("inf"))])
def test_an_edited_answer_beyond_what_tokenmath_writes_is_refused(path, value):
    a = _fleet()
    d = a
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    with pytest.raises(InputError, match=path[-1]):
        pools_of(a, disaggregated=path[0] == "disaggregated")
