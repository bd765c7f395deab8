"""The part of an engine step's CPU work that grows with the running sequences (step_cpu_per_seq_s): added to the
fixed per-step CPU time, hidden behind the device with overlap scheduling, else added to it; bounded."""
from dataclasses import replace

import numpy as np
import pytest

from tokenmath.base.errors import InputError
from tokenmath.engine.static_batch import engine_step
from tokenmath.specs.serving_engines import STEP_CPU_PER_SEQ_BOUNDS_S, catalog, from_record, get_engine


def test_cpu_grows_with_sequences_by_hand():
    trt = replace(get_engine("tensorrt-llm"), step_cpu_s=1e-3, step_cpu_per_seq_s=20e-6)   # overlap scheduling
    # device 2 ms; 100 sequences: CPU 1 ms + 100 x 20 us = 3 ms > 2 ms -> the CPU sets the step (graphs replayed)
    step, _ = engine_step(trt, 2e-3, 500, 100, 5e-6)
    assert float(step) == pytest.approx(3e-3)
    # 25 sequences: CPU 1.5 ms, hidden behind the 2 ms device
    assert float(engine_step(trt, 2e-3, 500, 25, 5e-6)[0]) == pytest.approx(2e-3)
    vllm = replace(get_engine("vllm"), step_cpu_s=1e-3, step_cpu_per_seq_s=20e-6)          # serial: adds
    assert float(engine_step(vllm, 2e-3, 500, 100, 5e-6)[0]) == pytest.approx(5e-3)
    # prefill chunks count their prompts, not their tokens: 8 prompts of 1,000 tokens, no graph at 8,000 tokens, so
    # max(2 ms device, 500 kernels x 5 us = 2.5 ms launch) + 1 ms + 8 x 20 us = 3.66 ms
    assert float(engine_step(vllm, 2e-3, 500, 8000, 5e-6, cpu_seqs=8)[0]) == pytest.approx(3.66e-3, rel=1e-9)


def test_never_faster_with_more_per_sequence_cpu():
    base = get_engine("sglang")
    seqs = np.array([1, 16, 256, 2048], float)
    prev = None
    for c in STEP_CPU_PER_SEQ_BOUNDS_S:
        t = engine_step(replace(base, step_cpu_per_seq_s=c), 5e-3, 300, seqs, 5e-6)[0]
        if prev is not None:
            assert np.all(t >= prev)
        prev = t


def test_engine_file_bounds_name_the_field():
    rec = dict(catalog()["vllm"])
    assert from_record("x", {**rec, "step_cpu_per_seq_s": 10e-6}).step_cpu_per_seq_s == 10e-6
    with pytest.raises(InputError) as e:
        from_record("x", {**rec, "step_cpu_per_seq_s": 1e-3})
    assert e.value.field == "engine.step_cpu_per_seq_s"
