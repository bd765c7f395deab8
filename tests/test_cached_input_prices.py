"""Issue 15 item 7: `prices`.

- A cached input token is charged the cheaper of holding its KV until reuse, in the cheapest tier that can reload it
  before the prefill it replaces would finish (HBM, host DRAM, local NVMe SSD: data/kv_tiers.toml), and recomputing
  it. Before the fix it was always held in HBM at the chip's full price for 300 s: Llama 3.1 70B on 8 x H100 paid
  $1.02/Mtok for a cached input token against $0.33 for an uncached one.
- The "why" line follows the computed bottlenecks (at the largest batch decode is compute-bound, not memory-bound).
- --min-tokens-per-s-per-user picks the batch, so the output/input ratio at an interactive speed is one flag away.
"""
import pytest
from click.testing import CliRunner

from tokenmath.analyses.serving.input_vs_output import prices
from tokenmath.faces.cli import cli
from tokenmath.faces.explain_serving import explain_prices
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.base.errors import InputError
import tokenmath as tm

GIB_HOUR = 2.0 ** 30 * 3600        # byte-seconds in a GiB-hour


@pytest.mark.parametrize("mid,hw,kw", [
    ("llama-3.1-70b", "h100-sxm", dict(chips=8)),
    ("llama-3.1-70b", "h100-sxm", dict(chips=8, cache_ttl_s=3600, batch=16)),
    ("deepseek-v3", "h200", dict(chips=8, batch=16)),
    ("llama-3.1-8b", "h100-sxm", dict(min_tokens_per_s_per_user=100)),
    ("qwen3-30b-a3b", "mi300x", dict()),
    ("llama-3.1-8b", "rtx-4090", dict(weight_dtype="int4", cache_ttl_s=86400)),    # unpriced: chip-seconds
])
def test_cached_input_never_costs_more_than_uncached(mid, hw, kw):
    p = prices(mid, hw, **kw)
    rows = [r for r in p.rows if r["fits"]]
    assert rows
    for r in rows:
        assert r["cost_per_mtok_cached_input"] <= r["cost_per_mtok_input"] * (1 + 1e-12)
        held = [o for o in r["cached_input_options"] if o["eligible"]]
        assert r["cost_per_mtok_cached_input"] == pytest.approx(
            min(r["cost_per_mtok_input"], min(o["cost_per_mtok"] for o in held)), rel=1e-12)


def test_cached_input_by_hand_70b():
    # Llama 3.1 70B on 8 x H100 SXM (tp 8), 1,024-token prompts, batch 64, KV held 300 s
    p = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[1024], batch=64)
    r = p.rows[0]
    kvb = 2 * 8 * 128 * 80 * 2          # 327,680 B of bf16 KV per token (8 KV heads of 128, 80 layers)
    byte_s = kvb * 300                  # 98,304,000 byte-seconds per cached token
    hbm = get_hardware("h100-sxm")
    opts = {o["tier"]: o for o in r["cached_input_options"]}
    # HBM: the chip's $2.99/h shared by its HBM bytes (8 KV heads over tp 8: one copy in all)
    assert opts["hbm"]["cost_per_mtok"] == pytest.approx(byte_s * 2.99 / 3600 / hbm.memory_bytes * 1e6, rel=1e-9)
    # host DRAM at $0.004237 per GiB-hour: $0.1077/Mtok; local SSD at $0.08 per GiB-month: $0.002787/Mtok
    assert opts["host_dram"]["holding_cost_per_mtok"] == pytest.approx(byte_s * 0.004237 / GIB_HOUR * 1e6, rel=1e-9)
    assert opts["local_nvme"]["holding_cost_per_mtok"] == pytest.approx(byte_s * 0.08 / 730 / GIB_HOUR * 1e6, rel=1e-5)
    # reload: each chip holds 64 prompts x 1,024 tokens x 327,680 B / 8 = 2.68 GB of KV; from one NVMe drive per GPU
    # at 6.25 GB/s that is 0.43 s, well inside the batch's prefill (TTFT), so the SSD qualifies and is cheapest
    per_chip = 64 * 1024 * kvb / 8
    assert opts["local_nvme"]["reload_s"] == pytest.approx(per_chip / 6.25e9, rel=1e-9)
    assert opts["local_nvme"]["reload_s"] < r["ttft_s"] and opts["local_nvme"]["eligible"]
    assert r["cached_input_tier"] == "local_nvme"
    # writing the KV once and reloading it once each keep the drive busy 327,680 B / 6.25 GB/s = 52.4 us, priced at the
    # whole drive's $/s (3.84 TB at $0.08 per GiB-month = $0.392/h): $0.00571/Mtok each; tp 8 over 8 KV heads holds one
    # copy in all, so the reload moves the same bytes as the write
    drive_usd_s = 3840e9 * 0.08 / 730 / GIB_HOUR
    move = kvb / 6.25e9 * drive_usd_s * 1e6
    assert move == pytest.approx(0.00571, rel=1e-3)
    assert opts["local_nvme"]["write_cost_per_mtok"] == pytest.approx(move, rel=1e-5)
    assert opts["local_nvme"]["reload_cost_per_mtok"] == pytest.approx(move, rel=1e-5)
    assert opts["hbm"]["write_cost_per_mtok"] == opts["hbm"]["reload_cost_per_mtok"] == 0    # in place: nothing moves
    hold = byte_s * 0.08 / 730 / GIB_HOUR * 1e6                                              # $0.002787/Mtok
    assert r["cost_per_mtok_cached_input"] == pytest.approx(hold + 2 * move, rel=1e-5)       # $0.0142/Mtok
    # the provider's floor for a hit is 4.5% of the input cost ($0.3188/Mtok): below every list ratio (10-80%)
    assert 0.03 < r["cached_share_of_input"] < 0.06
    assert r["cached_share_of_input"] == pytest.approx(r["cost_per_mtok_cached_input"] / r["cost_per_mtok_input"])


def test_slow_tier_is_refused_and_recomputing_wins():
    # Llama 2 7B is MHA: 2 x 32 heads x 128 x 32 layers x 2 B = 524,288 B of KV per token, a lot for its 6.7 B
    # params. Batch 8 of 1,024-token prompts on one H100: 8 x 1,024 x 524,288 B = 4.29 GB to reload, 0.69 s from an
    # NVMe drive at 6.25 GB/s, longer than prefilling them again (TTFT ~0.23 s): the SSD does not qualify
    r = prices("llama-2-7b", "h100-sxm", contexts=[1024], batch=8).rows[0]
    opts = {o["tier"]: o for o in r["cached_input_options"]}
    assert opts["local_nvme"]["reload_s"] == pytest.approx(8 * 1024 * 524_288 / 6.25e9, rel=1e-9)
    assert opts["local_nvme"]["reload_s"] > r["ttft_s"] and not opts["local_nvme"]["eligible"]
    # host DRAM reloads in time (4.29 GB / 55 GB/s = 78 ms) but 300 s of it costs more than the prefill it saves:
    # 524,288 B x 300 s x $0.004237 / GiB-h = $0.17/Mtok against ~$0.02/Mtok to recompute
    assert opts["host_dram"]["eligible"]
    assert opts["host_dram"]["holding_cost_per_mtok"] == pytest.approx(524_288 * 300 * 0.004237 / GIB_HOUR * 1e6, rel=1e-9)
    assert r["cached_input_tier"] == "recompute"
    assert r["cost_per_mtok_cached_input"] == r["cost_per_mtok_input"]
    for o in r["cached_input_options"]:
        assert o["eligible"] == (o["fits_batch_prompts"] and o["reload_s"] <= r["ttft_s"])


def test_why_follows_the_computed_bottlenecks():
    p = prices("llama-3.1-70b", "h100-sxm", chips=8)       # largest batch: decode compute-bound at short contexts
    text = explain_prices(p)
    why = text[text.index("why"):]
    pairs = {(r["bottleneck_prefill"], r["bottleneck_decode"]) for r in p.rows if r["fits"]}
    for pre, dec in pairs:
        assert f"decode is {dec}-bound" in why and f"prefill is {pre}-bound" in why
    if all(dec != "memory" for _, dec in pairs):
        assert "decode is memory-bound" not in why


def test_speed_per_user_picks_the_batch_and_the_ratio_follows():
    m = get_model("llama-3.1-70b")
    n_matmul = count_params(m).total - count_params(m).embedding      # the embedding is gathered, not multiplied
    ratios = []
    for target in (20, 50):
        p = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[8192], min_tokens_per_s_per_user=target)
        r = p.rows[0]
        B, step = r["batch"], r["decode_step_s"]
        # the largest batch that gives the speed: batch B does, batch B + 1 does not
        assert 1 / step >= target
        nxt = tm.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=B + 1, input_len=8192, output_len=256)
        assert not nxt.fits or 1 / nxt.decode_step_s < target
        # output / input = (prompt tokens/s of prefill) / (output tokens/s of decode), by definition of the two costs
        prefill_rate, decode_rate = B * 8192 / r["ttft_s"], B / step
        assert r["output_input_ratio"] == pytest.approx(prefill_rate / decode_rate, rel=1e-9)
        # physics brackets it: prefill cannot beat its matmul FLOPs at peak (8 x 989 TFLOP/s over 2 N_matmul per
        # token), and a decode step cannot beat one read of each chip's weights (141 GB / 8 at 3.35 TB/s)
        upper = 8 * 989e12 / (2 * n_matmul) / decode_rate
        lower = n_matmul * 2 / 8 / 3.35e12 * prefill_rate / B
        assert lower <= r["output_input_ratio"] <= upper
        assert r["bottleneck_decode"] != "compute"        # an interactive batch is not compute-bound
        ratios.append(r["output_input_ratio"])
    # a faster user means a smaller batch sharing each weight read: the output token costs relatively more
    assert ratios[1] > ratios[0] > 1


def test_speed_target_errors():
    with pytest.raises(InputError) as e:
        prices("llama-3.1-70b", "h100-sxm", chips=8, batch=8, min_tokens_per_s_per_user=20)
    assert e.value.field == "min_tokens_per_s_per_user"
    p = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[1024], min_tokens_per_s_per_user=10_000)
    assert not p.rows[0]["fits"] and "below 10000" in p.rows[0]["reason"]
    r = CliRunner().invoke(cli, "prices --model llama-3.1-70b --hardware h100-sxm --chips 8 --contexts 1024 "
                                "--min-tokens-per-s-per-user 50 --json".split())
    assert r.exit_code == 0, r.output


def test_cached_floor_is_set_beside_the_models_list_prices():
    # data/api_prices.toml: DeepSeek lists V3 at $0.07 cached vs $0.27 input (2025-02, 26%), R1 $0.14 vs $0.55 (25%),
    # DeepInfra V3.1 at
    # $0.216 vs $0.27 (80%); the computed floor for a hit is far below both, and the answer says it is a floor
    p = prices("deepseek-v3", "h200", chips=8, contexts=[4096], min_tokens_per_s_per_user=20)
    listed = {(x["provider"], x["cached_input_usd_per_mtok"]) for x in p.to_dict()["list_cached_input"]}
    assert ("DeepSeek", 0.07) in listed and ("DeepInfra", 0.216) in listed
    ds = next(x for x in p.list_cached if x["cached_input_usd_per_mtok"] == 0.07)
    assert ds["cached_share_of_input"] == pytest.approx(0.07 / 0.27)
    r = p.rows[0]
    assert r["cached_share_of_input"] < min(x["cached_share_of_input"] for x in p.list_cached)
    note = next(n for n in p.notes if n.startswith("cached input is the provider's cost floor"))
    assert "25%-80% of their input price" in note and "not a price" in note
    # a model no provider lists a cached price for says so rather than leaving the floor to read as a prediction
    q = prices("llama-3.1-70b", "h100-sxm", chips=8, contexts=[1024])
    assert q.list_cached == ()
    assert any("no provider in data/api_prices.toml lists a cached price" in n for n in q.notes)
