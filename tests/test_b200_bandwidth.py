"""The HGX B200's HBM bandwidth is what its memory bus gives, not the datasheet's round 8 TB/s: the device reports a
7,680-bit bus at 3,996 MHz (pytorch/ao pull 4002: cudaDeviceProp Memory Bus Width 7680, nvidia-smi clocks.max.memory
3996 MHz), double data rate: 7,680 / 8 x 3.996e9 x 2 = 7.672e12 B/s. GB200 NVL72 keeps NVIDIA's 576 TB/s / 72."""
import pytest

from tokenmath.specs.hardware import get_hardware


def test_b200_bandwidth_is_its_bus_width_times_its_memory_clock():
    b200 = get_hardware("b200")
    assert b200.memory_bw == pytest.approx(7680 / 8 * 3.996e9 * 2, rel=1e-4)        # 7.672e12 B/s
    assert "pull/4002" in b200.sources["memory"] and "7.672" in b200.notes
    assert get_hardware("gb200-nvl72").memory_bw == pytest.approx(576e12 / 72)


def test_a_memory_bound_b200_decode_step_moves_with_it():
    # Llama 3.1 8B in bf16 at batch 1 reads its ~16 GB of weights per token: the step is memory-bound, so its time
    # scales as 8 / 7.672 against a B200 at the datasheet's 8 TB/s (`--set memory_bw_tbs=8`)
    from tokenmath import infer
    now = infer("llama-3.1-8b", "b200", chips=1, batch=1)
    sheet = infer("llama-3.1-8b", "b200", chips=1, batch=1, what_if=(("memory_bw_tbs", 8.0),))
    assert now.decode_step_s > sheet.decode_step_s
    assert now.decode_step_s / sheet.decode_step_s == pytest.approx(8 / 7.672, rel=0.03)
