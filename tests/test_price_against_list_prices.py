"""`price` set beside what providers bill, and its continuously batched server decoding with speculation.

A list price bills input and output apiece; the cost `price` computes is a whole request (its prefill and its decode)
per output token, so the list price is put in the same measure: output price + input price x input / output."""
from __future__ import annotations

import pytest

from tokenmath.analyses.ask import ask, split
from tokenmath.specs.list_prices import list_prices, request_list_prices


def _price(**kw):
    dep, wl, own = split("deepseek-v3", "h200", **kw)
    return ask("price", dep, wl, **own).to_dict()


def test_a_list_price_billed_per_request_adds_the_prompt_at_its_share_of_the_output():
    azure = next(p for p in list_prices("deepseek-v3") if p.provider == "Microsoft Azure AI")
    # Azure AI Foundry DeepSeek-V3: $1.14 in, $4.56 out (data/api_prices.toml, LiteLLM 1.77.7):
    # a 2,000-in / 500-out request per output token = 4.56 + 1.14 x 2000 / 500 = 4.56 + 4.56 = $9.12
    assert azure.request_usd_per_mtok_output(2000, 500) == pytest.approx(9.12)
    lp = request_list_prices("deepseek-v3", 2000, 500)
    values = [r["request_usd_per_mtok_output"] for r in lp["rows"]]
    assert values == sorted(values) and lp["lowest_usd_per_mtok_output"] == values[0]
    assert lp["highest_usd_per_mtok_output"] == values[-1]
    # DeepInfra DeepSeek-V3-0324, $0.25 in / $0.88 out: 0.88 + 0.25 x 4 = $1.88, the lowest
    assert values[0] == pytest.approx(1.88)
    assert request_list_prices("no-such-model", 2000, 500) is None


def test_price_answers_beside_the_list_prices_of_the_same_request():
    d = _price(input_len=2000, output_len=500)
    assert d["list_prices"] == request_list_prices("deepseek-v3", 2000, 500)


def test_a_useful_draft_lowers_the_continuously_batched_price_and_a_useless_one_never_does():
    plain = _price()["continuously_batched"]["price_per_mtok_output_request_usd"]
    mtp = _price(mtp=1)
    assert mtp["speculation"]["mtp"] == 1
    assert mtp["continuously_batched"]["price_per_mtok_output_request_usd"] < 0.7 * plain
    useless = _price(mtp=1, acceptance=0.0001)["continuously_batched"]["price_per_mtok_output_request_usd"]
    assert useless >= plain


def test_deepseek_v3_continuously_batched_on_8_h200_with_its_mtp_head_prices_below_its_highest_v3_list_price():
    """DeepSeek-V3 ships one multi-token-prediction module and its report serves with it (DeepSeek-V3 Technical
    Report, arXiv:2412.19437, section 5.4.3: 85-90% acceptance of the second token). On one 8 x H200 server at 20
    tokens/s per user, 2,000 in / 500 out, vLLM, the catalog's $/chip-hour, 60% utilization and a 50% margin: priced
    $7.98 per Mtok output (cost $2.40). The V3 checkpoints' list prices billed for the same request run $1.88
    (DeepInfra) to $16.50 (SambaNova, $3 in / $4.50 out, served on its own SN40L chips); on GPU clouds the highest is
    $9.12 (Azure AI Foundry: $1.14 in, $4.56 out). Without the MTP head the same server prices $14.27: under
    SambaNova's, over every GPU cloud's, so the GPU clouds' lists are met with speculation (or wider expert
    parallelism), not without."""
    d = _price(mtp=1, input_len=2000, output_len=500)
    v3 = {r["provider"]: r["request_usd_per_mtok_output"] for r in d["list_prices"]["rows"]
          if "r1" not in r["model"].lower() and "reasoner" not in r["model"]}
    assert max(v3.values()) == pytest.approx(16.5) == v3["SambaNova"]
    highest_gpu = max(v for p, v in v3.items() if p != "SambaNova")
    assert highest_gpu == pytest.approx(9.12) == v3["Microsoft Azure AI"]
    c = d["continuously_batched"]
    assert c["chips"] == 8
    assert c["tokens_per_s_per_user"] >= 20.0 * (1 - 1e-9)
    assert c["price_per_mtok_output_request_usd"] < highest_gpu
    # without the head: under SambaNova's list, over the GPU clouds' (the gap the issue measured, kept visible)
    plain = _price(input_len=2000, output_len=500)["continuously_batched"]["price_per_mtok_output_request_usd"]
    assert highest_gpu < plain < max(v3.values())
