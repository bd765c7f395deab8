"""The memory-bound ops of quantized and MoE layers (engine/activation_ops.py), byte for byte on a tiny model.

TINY_MOE: 2 layers, d = 64, 4 heads of 16, 4 experts, top-2, expert width 32. A decode step of 8 sequences on one
chip: T = 8 tokens, T_st = 8, routed rows T k = 16. FP8 activations: 1 + 4/16384 B per value (specs/dtypes.py fp8).
"""
import numpy as np
import pytest

from tokenmath.engine import activation_ops as aq
from tokenmath.engine.forward import Precision, forward_pass
from tokenmath.engine.train_overheads import fp8_cast_bytes, fp8_gemm_widths
from tokenmath.engine.train_step import LAYER_OPS_EXCLUDED
from tokenmath.mapping.layout import Layout
from tokenmath.specs.dtypes import get_dtype
from tokenmath.specs.efficiency import DEFAULT, PEAK
from tokenmath.specs.hardware import get_hardware
from tokenmath.specs.model import Model

TINY_MOE = Model(id="tiny-moe", name="tiny-moe", n_layers=2, d_model=64, n_heads=4, vocab_size=100,
                 ffn_intermediate=128, n_experts=4, experts_per_token=2, moe_intermediate=32)
FP8 = 1.0 + 4.0 / 16384


def decode(chip="b200", weight="fp8", expert=None, ep=1, eff=PEAK, seqs=8):
    prec = Precision(get_dtype(weight), get_dtype(expert or weight), get_dtype("bf16"))
    return forward_pass(TINY_MOE, get_hardware(chip), Layout(1, 1, ep, 1), prec, eff, phase="decode", seqs=seqs,
                        new_tokens=1, pairs_full=100, pairs_sliding=0, kv_read_full=100, kv_read_sliding=0)


def nbytes(p, name):
    return float(np.asarray(p.ops[name].bytes))


def test_fp8_quantize_bytes_by_hand():
    p = decode()
    # attention output before the o projection: T x heads x head_dim = 8 x 64 values, read 2 B, write 1 + 4/16384
    assert nbytes(p, "act_quant") == pytest.approx(8 * 64 * (2 + FP8))          # 1536.125
    assert p.ops["act_quant"].count == 2                                          # one per attention layer
    # experts' input T x d = 512 values; their down input T k x F_e = 16 x 32 = 512 values
    assert nbytes(p, "moe_quant") == pytest.approx(8 * 64 * (2 + FP8))                # 1536.125
    assert nbytes(p, "moe_down_quant") == pytest.approx(16 * 32 * (2 + FP8))          # 1536.125
    assert float(np.asarray(p.ops["act_quant"].flops)) == 0.0                     # no matmul FLOPs


def test_permute_unpermute_topk_bytes_by_hand():
    p = decode()
    # permute: 16 routed rows of 64 values, read and written, in FP8 (the input was quantized first)
    assert nbytes(p, "moe_permute") == pytest.approx(2 * 16 * 64 * FP8)          # 2048.5
    # unpermute: read 16 x 64 bf16 outputs + 16 fp32 weights, write 8 tokens x 64 bf16
    assert nbytes(p, "moe_unpermute") == pytest.approx(16 * 64 * 2 + 16 * 4 + 8 * 64 * 2)   # 3136
    # top-k: read 8 x 4 bf16 logits, write 2 int32 ids + 2 fp32 weights per token
    assert nbytes(p, "topk") == pytest.approx(8 * (4 * 2 + 2 * 8))                # 192
    # bf16 weights: nothing to quantize, the permute moves bf16
    b = decode(weight="bf16")
    assert "act_quant" not in b.ops and "moe_quant" not in b.ops
    assert nbytes(b, "moe_permute") == pytest.approx(2 * 16 * 64 * 2)            # 4096


def test_expert_parallel_rank_moves_its_share_of_rows():
    # ep = 2 (4 experts, 2 per rank): stage tokens 2 x 8 = 16, rows 16 x 2 x 1/2 = 16 per rank, tokens per rank 8
    p = decode(ep=2)
    assert nbytes(p, "moe_permute") == pytest.approx(2 * 16 * 64 * FP8)
    assert nbytes(p, "moe_quant") == pytest.approx(8 * 64 * (2 + FP8))
    assert nbytes(p, "moe_down_quant") == pytest.approx(16 * 32 * (2 + FP8))


def test_format_follows_the_compute_path():
    # mxfp4 experts: MXFP8 activations on Blackwell (1 + 1/32 B), bf16 on Hopper (W4A16: no quantize)
    bw = decode(weight="bf16", expert="mxfp4")
    assert "act_quant" not in bw.ops
    assert nbytes(bw, "moe_quant") == pytest.approx(512 * (2 + 1 + 1 / 32))       # 1552
    assert nbytes(bw, "moe_down_quant") == pytest.approx(512 * (2 + 1 + 1 / 32))  # not fused: no source
    assert "moe_quant" not in decode(chip="h200", weight="bf16", expert="mxfp4").ops
    # nvfp4 W4A4: activations in NVFP4 (0.5 + 1/16); the grouped GEMM writes its intermediate in FP4 (fused)
    f4 = decode(weight="nvfp4")
    assert nbytes(f4, "act_quant") == pytest.approx(512 * (2 + 0.5 + 1 / 16))     # 1312
    assert nbytes(f4, "moe_permute") == pytest.approx(2 * 16 * 64 * (0.5 + 1 / 16))   # 1152
    assert "moe_down_quant" not in f4.ops
    # fp8 weights on a chip without fp8 (A100): W8A16, nothing to quantize
    assert "act_quant" not in decode(chip="a100-80gb", weight="fp8").ops
    # int4 at the int8 rate: llama.cpp's q8_1 activations, 36 B per 32 values
    assert nbytes(decode(weight="int4"), "act_quant") == pytest.approx(512 * (2 + 36 / 32))     # 1600


def test_kernel_counts_moved_not_added_for_bf16_moe():
    # top-k, align/permute and combine were counted under router and experts: a bf16 MoE layer still launches
    # 3 GEMMs (gate, 2 grouped) and 4 small kernels (top-k, permute, activation, combine)
    p = decode(weight="bf16", eff=DEFAULT)
    names = ("router", "topk", "moe_permute", "experts", "moe_unpermute")
    assert sum(p.ops[n].kernels for n in names) == 3 + 4
    # FP8 adds the stand-alone quantizes: 1 per attention layer, 2 per MoE layer (input, down input)
    assert decode(eff=DEFAULT).kernels - p.kernels == 2 * 1 + 2 * 2
    # W4A4: the down input is written quantized by the grouped GEMM, 1 per MoE layer
    assert decode(weight="nvfp4", eff=DEFAULT).kernels - p.kernels == 2 * 1 + 2 * 1


def test_new_ops_only_add_time_and_are_bandwidth_bound():
    f8 = decode(eff=DEFAULT)
    for name in ("act_quant", "moe_quant", "moe_down_quant", "moe_permute", "moe_unpermute", "topk"):
        op = f8.ops[name]
        hw = get_hardware("b200")
        # never faster than its bytes at peak bandwidth; a fixed time per kernel on top
        assert float(np.asarray(op.time_s)) >= nbytes(f8, name) / hw.memory_bw
        assert float(np.asarray(op.fixed_s)) > 0
    # more sequences: every byte term grows linearly (per-token work)
    big = decode(seqs=16)
    assert nbytes(big, "moe_permute") == pytest.approx(2 * nbytes(decode(), "moe_permute"))


def test_training_fp8_casts_share_the_formula_and_are_not_counted_twice():
    # cast-transpose: read 2 B, write 1 B twice = 4 B per GEMM input element (Transformer Engine)
    dense = Model(id="d", name="d", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=128)
    w_in, w_out = fp8_gemm_widths(dense)
    assert w_in == 64 + 64 + 64 + 128          # qkv input d, o input 4 x 16, gate_up input d, down input F
    f, b = fp8_cast_bytes(dense, 10, 1)
    assert f == pytest.approx(4.0 * w_in * 10 * 2) and b == pytest.approx(4.0 * w_out * 10 * 2)
    assert aq.quantize_bytes(1, 1.0, transpose=True) == 4.0
    # the serving quantizes are replaced in training by those casts
    assert {"act_quant", "moe_quant", "moe_down_quant"} <= set(LAYER_OPS_EXCLUDED)


def test_quantize_time_between_its_roofline_and_vllms_measured_overhead():
    # vLLM PR 18778 (B200, bench_fp8_gemm.py, Llama-3.1-8B N=6144 K=4096, batch 1024): FP8 GEMM with its dynamic
    # per-tensor activation quantize 1778.95 TFLOP/s, without it ("noquant") 2207.50 TFLOP/s:
    # quantize = 2 x 1024 x 6144 x 4096 x (1/1778.95e12 - 1/2207.50e12) = 5.62 us, launched without a CUDA graph
    # (and a per-tensor scale needs an extra read for the absmax), so an upper bound for the graphed kernel.
    flops = 2 * 1024 * 6144 * 4096
    measured = flops * (1 / 1778.95e12 - 1 / 2207.50e12)
    assert measured == pytest.approx(5.62e-6, rel=0.01)
    from tokenmath.engine.kernels import op_rates
    from tokenmath.specs.kernels import kernel_model
    hw = get_hardware("b200")
    nb = aq.quantize_bytes(1024 * 4096, aq.activation_bytes(get_dtype("fp8"), hw))   # 12.58 MB
    _, bw, t0 = op_rates(kernel_model(hw), hw, "act_quant", "prefill", "stream")
    t = t0 + nb / bw                       # 0.9 us + 12.58 MB / (7.672 TB/s x 0.90) = 2.72 us
    assert nb / hw.memory_bw < t < measured
    assert t == pytest.approx(0.9e-6 + 1024 * 4096 * (3 + 4 / 16384) / (7.672e12 * 0.90), rel=1e-6)


def test_o_projection_width_averages_full_and_local_head_sizes():
    # Gemma-4-like: one sliding layer of 4 x 16 and one full layer of 4 x 32 -> (64 + 128) / 2 = 96 values per token
    g = Model(id="g", name="g", n_layers=2, d_model=64, n_heads=4, vocab_size=100, ffn_intermediate=128,
              attention_pattern=("sliding", "full"), sliding_window=128, head_dim=16, full_head_dim=32)
    assert aq.o_proj_input_width(g, 1) == 96.0
    assert aq.o_proj_input_width(g, 2) == 48.0          # row-parallel: each of 2 TP ranks holds half the heads
    assert aq.attn_quant_bytes(g, 8, 1, 1.0) == 8 * 96 * 3.0
