"""The shortcuts behind the issue-23 speed figures give the same answers as the plain paths they replace."""
import dataclasses
import sys

import numpy as np

import tokenmath as tm
from tokenmath.engine.forward import placed
from tokenmath.engine.pass_cost import CONTEXT_OPS
from tokenmath.mapping.layout import Layout
from tokenmath.mapping.placement import place


def test_placed_is_place_for_each_distinct_layout():
    # 72 chips a domain (NVL72): tp 16 over 144 chips puts the 5th group on chips 64-79, 8 in each rack, so the tp
    # groups span 2 domains with pieces of 8; tp 8 stays inside one domain. A cache keyed on the wrong thing (values
    # without shapes, or one degree left out) would hand one of these the other's placement.
    cases = [Layout(16, 1, 1, 9), Layout(8, 1, 1, 18), Layout(np.array([8.0, 16.0]), 1, 1, np.array([18.0, 9.0])),
             Layout(np.array([[8.0], [16.0]]), 1, 1, np.array([18.0, 9.0])), Layout(8, 2, 1, 9)]
    for lay in cases * 2:           # the second round answers from the cache
        got, want = placed(lay, 72), place(lay, 72)
        for kind in ("tp", "stage", "cp", "replica"):
            for f in dataclasses.fields(getattr(want, kind)):
                a, b = getattr(getattr(got, kind), f.name), getattr(getattr(want, kind), f.name)
                assert np.shape(a) == np.shape(b) and np.array_equal(a, b), (lay, kind, f.name)
    assert float(placed(Layout(16, 1, 1, 9), 72).tp.domains) == 2.0
    assert float(placed(Layout(8, 1, 1, 18), 72).tp.domains) == 1.0


def test_pass_sums_context_ops_last_in_every_sum():
    # llama-3.1-8b decode on one H100: the step is embed + attn_proj + norms + ffn + lm_head (context-independent,
    # in the order the engine adds them) and then attention; FLOPs, bytes and the bottleneck shares in that order too
    r = tm.infer("llama-3.1-8b", "h100-sxm", batch=8, input_len=1000, output_len=100, engine="none")
    d = r.decode
    first = [op for k, op in d.ops.items() if k not in CONTEXT_OPS]
    last = [d.ops[k] for k in CONTEXT_OPS if k in d.ops]
    assert [op.name for op in last] == ["attention"]
    t = 0.0
    for op in first + last:
        t = t + op.count * np.maximum(op.compute_s, op.memory_s)
    assert d.time_s == t
    f = 0.0
    for op in first + last:
        f = f + op.count * op.flops
    assert d.flops == f
    # the order changes nothing a reader sees: the engine's own dict order gives the same step to 1e-15
    t_dict = sum(op.count * max(float(op.compute_s), float(op.memory_s)) for op in d.ops.values())
    assert abs(float(d.time_s) - t_dict) <= 1e-15 * t_dict


def test_sweep_and_infer_agree_to_the_bit_on_a_blocked_sweep():
    # 1,200 configurations (> FLAT): the blocked, broadcast path inside kept_heap(); every row where it fits is
    # infer's own arithmetic (the same fixed order of sums), so equal, not merely close
    c = tm.sweep("llama-3.1-70b", "h100-sxm", batch=list(range(1, 61)), input_len=[512, 4096], output_len=[128, 1024],
                 tp=[2, 4, 8, 16, 32])
    assert len(c) == 1200
    for i in (0, 77, 599, 1111):
        d = tm.infer("llama-3.1-70b", "h100-sxm", tp=int(c["tp"][i]), batch=int(c["batch"][i]),
                     input_len=int(c["input_len"][i]), output_len=int(c["output_len"][i]), engine="none").to_dict()
        assert bool(c["fits"][i]) == d["fits"]
        if d["fits"]:
            for k in ("decode_step_s", "ttft_s", "decode_floor_s", "output_tokens_per_s_per_user"):
                assert c[k][i] == d[k], k
        else:
            assert np.isnan(c["decode_step_s"][i]) and np.isnan(c["output_tokens_per_s_per_user"][i])


def test_dataclasses_on_the_infer_path_have_their_own_docstrings():
    """@dataclass fills a missing __doc__ from inspect.signature: ~0.14 ms per field at import (8 ms for Model's
    59 fields on the issue-23 machine), paid by every `tokenmath infer`. Checked in a fresh interpreter that imports
    what `infer` and `sweep` import, and nothing that other tests happened to load."""
    import subprocess
    code = """
import dataclasses, sys
import tokenmath.faces.commands.infer, tokenmath.analyses.serving.infer, tokenmath.analyses.serving.sweep
for name, mod in list(sys.modules.items()):
    if name.startswith("tokenmath"):
        for k, v in vars(mod).items():
            if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == name:
                doc = v.__dict__.get("__doc__") or ""
                if not doc or doc.startswith(v.__name__ + "("):
                    print(name + "." + k)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not out, out
