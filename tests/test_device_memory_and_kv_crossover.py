"""Issue 15, item 10: memory capacities as the device has them, contexts beyond the model's positions, and the
KV = weights crossover in closed form."""
import pytest

from tokenmath.analyses.serving.context import context
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.kv_cache import context_holding, kv_bytes_per_sequence
from tokenmath.specs.model_catalog import get_model

MiB = 2 ** 20


@pytest.mark.parametrize("hid, expect, before", [
    ("h100-sxm", 81_559 * MiB, 80e9),          # nvidia-smi 81,559 MiB (NVIDIA/nccl#1264): 85.52e9 B
    ("a100-80gb", 81_920 * MiB, 80e9),         # 81,920 MiB = 80 GiB = 85.90e9 B
    ("a100-40gb", 40_960 * MiB, 40e9),         # 40 GiB = 42.95e9 B
    ("h200", 143_771 * MiB, 141e9),            # 150.75e9 B (sglang#3196)
    ("b200", 183_359 * MiB, 180e9),            # 192.27e9 B (TensorRT-LLM#10278)
    ("h20", 97_871 * MiB, 96e9),               # 102.6e9 B (nvtrust#128)
    ("l40s", 46_068 * MiB, 48e9),              # 48.31e9 B with ECC on (GDDR6: its '48 GB' is nearly decimal)
    ("mi300x", 8 * 25_767_706_624, 192e9),     # 8 CPX partitions (ROCm#4750): 206.14e9 B
    ("tpu-v5p", 95 * 2 ** 30, 95e9),           # Google states 95 GiB
    ("trn2", 96 * 2 ** 30, 96e9),              # AWS states 96 GiB
])
def test_catalog_memory_is_what_the_device_has(hid, expect, before):
    got = get_hardware(hid).memory_bytes
    assert got == pytest.approx(expect, rel=2e-6)        # the toml keeps 4 decimals of GB
    assert got > before                                  # the decimal figure understated it (HBM parts by 4-7.5%)


def test_chips_kept_decimal_say_so():
    for hid in ("h100-pcie", "b300", "gb200-nvl72", "mi355x", "tpu-v5e"):
        assert "DECIMAL" in get_hardware(hid).notes, hid


def test_context_holding_inverts_kv_bytes_per_sequence_by_hand():
    """Gemma 2 27B: 46 layers, 23 of them sliding over 4,096 tokens, 16 KV heads x 128 in bf16 =
    2 x 16 x 128 x 2 B = 8,192 B per token and layer. At 10,000 tokens one sequence holds
    8,192 x (23 x 10,000 + 23 x 4,096) B; below the window every layer grows: 8,192 x 46 x 1,000 B at 1,000 tokens."""
    m = get_model("gemma-2-27b")
    assert (m.n_full_layers, m.n_sliding_layers, m.sliding_window) == (23, 23, 4096)
    assert context_holding(m, 8192 * (23 * 10_000 + 23 * 4096), 2.0) == pytest.approx(10_000)
    assert context_holding(m, 8192 * 46 * 1000, 2.0) == pytest.approx(1000)
    for c in (1, 4095, 4096, 4097, 123_456):
        assert context_holding(m, float(kv_bytes_per_sequence(m, c, 2.0)), 2.0) == pytest.approx(c)


def test_crossover_in_closed_form_by_hand():
    """Llama 3.1 70B on 8 H100 (tp 8), batch 1. Weights read per decode step (all chips), bf16:
      attention 2 x 8,192^2 + 2 x 8,192 x 1,024 = 150,994,944 and FFN 3 x 8,192 x 28,672 = 704,643,072 per layer,
      x 80 layers = 68,451,041,280, + lm_head 128,256 x 8,192 = 1,050,673,152 -> 69,501,714,432 x 2 B
      = 139,003,428,864 B (the embedding is gathered, one 16 KiB row per chip per token).
    KV per token 2 x 8 x 128 x 80 x 2 B = 327,680 B; a step at context c reads c + 1 tokens of it, so
      c + 1 = 139,003,428,864 / 327,680 = 424,205.4 -> c = 424,204.
    Before: 484,300, read off a 48-point grid (14% high) and printed to 5 digits."""
    c = context("llama-3.1-70b", "h100-sxm", chips=8)
    hand = 139_003_428_864 / 327_680 - 1
    assert c.crossover_context == pytest.approx(hand, rel=1e-5)
    # the engine agrees: at that context the KV read per step equals the weight read
    from tokenmath.engine.static_batch import serve_batch
    su = c.setup
    sv = serve_batch(su.model, su.hardware, su.layout, su.precision, su.efficiency, 1, c.crossover_context, 1, su.reserve)
    assert float(sv.decode.kv_bytes) == pytest.approx(float(sv.decode.weight_bytes), rel=1e-5)


def test_crossover_never_where_every_layer_is_windowed():
    from tokenmath.specs.model import Model
    m = Model(id="swa", name="swa", n_layers=4, d_model=256, n_heads=4, vocab_size=1000, ffn_intermediate=512,
              sliding_window=64, attention_pattern=("sliding",), max_context=4096)
    assert context_holding(m, 1e12, 2.0) is None
    assert context(m, "h100-sxm", chips=1).crossover_context is None


def test_context_notes_beyond_max_position_embeddings():
    """Llama 3.1 70B has 131,072 positions; 8 H100 hold 1.3M tokens of its KV at batch 1 and its crossover sits at
    424k: each is reported, and each now says it lies beyond what the model can attend to."""
    d = context("llama-3.1-70b", "h100-sxm", chips=8).to_dict()
    assert d["crossover_context"] > 131_072 and d["max_context_at_batch"] > 131_072
    text = " ".join(d["notes"])
    assert "131,072" in text and "crossover" in text and "max_context_at_batch" in text
    d = context("llama-3.1-70b", "h100-sxm", chips=8, context=200_000).to_dict()
    assert any("200,000" in n and "max_position_embeddings" in n for n in d["notes"])
    d = context("llama-3.1-8b", "h100-sxm", chips=1, batch=64).to_dict()
    assert not any("max_position_embeddings" in n for n in d["notes"]), d["notes"]
