"""Parameter counts of catalog models against officially stated figures (source in each catalog entry)."""
import pytest

from tokenmath.specs.model_catalog import get_model, model_ids
from tokenmath.specs.params import count_params

# Official active counts that are stated rounded ("37B activated"): the tolerance is one unit of the last
# stated digit, since a rounded (or truncated) figure carries no more precision than that.
ROUNDED_ACTIVE = {"deepseek-v3": 1e9, "deepseek-v2": 1e9, "kimi-k2": 1e9, "qwen3-30b-a3b": 0.1e9,
                  "qwen3-235b-a22b": 1e9, "mixtral-8x22b": 1e9}
# OpenAI's gpt-oss model card, Table 1: "Unembedding parameters are counted towards active, but not embeddings."
ACTIVE_WITHOUT_INPUT_EMBEDDING = {"gpt-oss-20b", "gpt-oss-120b"}


@pytest.mark.parametrize("mid", model_ids())
def test_total_params_match_official_within_1pct(mid):
    m = get_model(mid)
    assert m.official_params_total, f"{mid} has no official total"
    assert m.params_source, f"{mid} has no source for its parameter count"
    got = count_params(m).total
    assert abs(got / m.official_params_total - 1) < 0.01, (mid, got, m.official_params_total)


@pytest.mark.parametrize("mid", [m for m in model_ids() if get_model(m).official_params_active])
def test_active_params_match_official(mid):
    m = get_model(mid)
    p = count_params(m)
    got = p.active - (p.embedding if mid in ACTIVE_WITHOUT_INPUT_EMBEDDING else 0)
    tol = max(0.01 * m.official_params_active, ROUNDED_ACTIVE.get(mid, 0))
    assert abs(got - m.official_params_active) <= tol, (mid, got, m.official_params_active)


def test_llama_31_8b_by_hand():
    # embeddings 128256 x 4096 = 525,336,576, untied so twice: 1,050,673,152
    # per layer: q 4096^2 + k,v 2 x 4096 x 1024 + o 4096^2 = 41,943,040; MLP 3 x 4096 x 14336 = 176,160,768;
    # 2 RMSNorms 8192 -> 218,112,000 x 32 = 6,979,584,000; final norm 4096
    p = count_params(get_model("llama-3.1-8b"))
    assert p.total == 1_050_673_152 + 6_979_584_000 + 4096 == 8_030_261_248


def test_mixtral_active_is_two_of_eight_experts():
    p = count_params(get_model("mixtral-8x7b"))
    # each expert 3 x 4096 x 14336 = 176,160,768; 6 unchosen experts x 32 layers drop out of the active count
    assert p.expert == 176_160_768
    assert p.total - p.active == 6 * 32 * 176_160_768


def test_deepseek_v3_layers_split_dense_and_moe():
    m = get_model("deepseek-v3")
    assert (m.n_dense_layers, m.n_moe_layers) == (3, 58)
