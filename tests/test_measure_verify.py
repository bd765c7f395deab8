"""`tokenmath measure` (this machine's figures -> a hardware file) and `tokenmath verify` (a real transformers model
against the prediction). Sanity only: timings on a shared CI machine are noisy, so no accuracy is asserted here
(the accuracy run is `tokenmath verify`, reported in the README)."""
from __future__ import annotations

import importlib.util
import json
import math
import tomllib

import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import cli, main
from tokenmath.faces.explain_verify import explain as verify_text
from tokenmath.base.install import install_hint
from tokenmath.engine import kernels as K
from tokenmath.local.decode_matmul import curve_efficiency
from tokenmath.local.hardware_file import to_toml
from tokenmath.local.measurement import Measurement
from tokenmath.local.model_configs import default_config, probe_config
from tokenmath.local.verify import parse_batches, verify
from tokenmath.local.verify_result import knee_batch
from tokenmath.specs.hardware import from_record, get_hardware

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 688,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
        "max_position_embeddings": 512, "tie_word_embeddings": False, "torch_dtype": "float32"}


def run_main(args):
    """The console entry point in-process: (exit code, stdout, stderr)."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return code, out.getvalue().decode(), err.getvalue().decode()


def _curve_seconds(m, e, k=1024, n=1024, bw=20e9, peak=0.08e12, t0=0.6e-6, matrices=2):
    """Median seconds of `matrices` calls of m x k @ k x n (fp32) that reach e of their roofline after t0 each."""
    roof = max(2 * m * k * n / peak, 4 * (k * n + m * (k + n)) / bw)
    return matrices * (t0 + roof / e)


def fake_measurement(**kw) -> Measurement:
    base = {"device": "cpu", "name": 'Test "CPU", 2 cores', "memory_bytes": 16e9,
            "bandwidth": {"numpy_copy": {"best": 30.0, "median": 25.0, "reps": 3, "array_bytes": 1, "traffic_bytes": 2,
                                         "kernel": "copy"},
                          "numpy_triad": {"best": 20.0, "median": 18.0, "reps": 3, "array_bytes": 1,
                                          "traffic_bytes": 5, "kernel": "triad"}},
            "matmul": {"numpy_fp32": {"best": 0.08, "median": 0.07, "n": 1024, "dtype": "fp32"},
                       "torch_bf16": {"best": 0.001, "median": 0.001, "n": 512, "dtype": "bf16"},
                       "torch_fp16": {"best": 0.00001, "median": 0.00001, "n": 256, "dtype": "fp16"}},
            "overhead": {"numpy": {"best_us": 0.5, "median_us": 0.6, "calls": 10, "op": "np.add"}},
            # one 1024 x 1024 fp32 shape, 2 matrices per call; at 20 GB/s a matrix and its rows stream in
            # 4 x (1048576 + 2048) / 20e9 = 210.1 us (1 row) and 4 x (1048576 + 8192) / 20e9 = 211.4 us (4 rows),
            # above their FLOPs at 80 GFLOP/s (26 and 105 us): taking 0.6 us + 262.7 us reaches 80%, 0.6 us +
            # 528.4 us 40% (median seconds per call)
            "gemm_curve": {"1024x1024": {"k": 1024, "n": 1024, "rows": [1, 4], "matrices": [2, 2],
                                         # the best half the median: the curve reads the median
                                         "best_s": [_curve_seconds(1, 0.8) / 2, _curve_seconds(4, 0.4) / 2],
                                         "median_s": [_curve_seconds(1, 0.8), _curve_seconds(4, 0.4)],
                                         "reps": [3, 3], "impl": "numpy matmul"}},
            "cache_bytes": 32 << 20, "threads": 2, "date": "2026-01-01T00:00:00+00:00", "versions": {"numpy": "2"},
            "quick": True}
    base.update(kw)
    return Measurement(**base)


# ---- measure ---------------------------------------------------------------------------------------------------
def test_record_round_trips_through_toml_and_json(tmp_path):
    m = fake_measurement()
    for ext in ("toml", "json"):
        p = m.write(tmp_path / f"hw.{ext}")
        hw = get_hardware(str(p))
        assert hw.memory_bw == pytest.approx(20e9)           # the best triad, not the faster copy
        assert hw.flops["fp32"] == pytest.approx(0.08e12)
        assert hw.flops["bf16"] == pytest.approx(0.001e12)
        assert "fp16" not in hw.flops                         # below the schema's floor: left out, with a note
        assert hw.memory_bytes == pytest.approx(16e9) and hw.scaleup_domain == 1 and hw.kind == "cpu"
        assert hw.name.startswith('Test "CPU"')
    rec = tomllib.loads((tmp_path / "hw.toml").read_text())
    assert rec["measured"]["bandwidth_gbs"]["numpy_triad"]["median"] == 18.0
    assert rec["measured"]["date"] == "2026-01-01T00:00:00+00:00"
    assert rec["sources"]["bandwidth"]
    assert rec["measured"]["gemm_curve"]["1024x1024"]["matrices"] == [2, 2]
    ks = rec["kernels"]
    assert ks["rows"] == [1, 4] and ks["weight_elements"] == [1024 * 1024]
    assert ks["efficiency"] == [[pytest.approx(0.8)], [pytest.approx(0.4)]]
    assert ks["stream_gbs"] == pytest.approx(20.0) and ks["gemm_peak_tflops"] == pytest.approx(0.08)
    assert ks["per_call_s"] == pytest.approx(0.6e-6)                   # numpy's median (no torch in the fake)


def test_measured_curve_round_trips_into_the_kernel_model(tmp_path):
    """The [kernels] section loads into the kernel model, whose time for a measured call is that call's median
    seconds per matrix (per-call t0 + roofline / e): the curve reproduces what was measured."""
    m = fake_measurement()
    assert curve_efficiency(m.gemm_curve, 20e9, 0.08e12, 0.6e-6) == ((1, 4), (1024 * 1024,),
                                                                      [[pytest.approx(0.8)], [pytest.approx(0.4)]])
    # a call faster than its roofline (timer noise) counts as the roofline, never above it
    fast = {"1024x1024": {**m.gemm_curve["1024x1024"], "median_s": [1e-6, 1e-6]}}
    assert curve_efficiency(fast, 20e9, 0.08e12, 0.6e-6)[2] == [[1.0], [1.0]]
    m.write(tmp_path / "x.toml")
    hw = from_record("me", tomllib.loads((tmp_path / "x.toml").read_text()))
    assert hw.kernels.curve_efficiency == ((pytest.approx(0.8),), (pytest.approx(0.4),))
    r = m.gemm_curve["1024x1024"]
    for i, rows in enumerate((1, 4)):
        t = K.gemm_time(hw.kernels, rows, 1024, 1024, hw.flops["fp32"], hw.memory_bw, "fp32", w_bytes=4.0, a_bytes=4.0)
        assert float(t) == pytest.approx(r["median_s"][i] / r["matrices"][i], rel=1e-3)


def test_write_refuses_other_suffixes(tmp_path):
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError):
        fake_measurement().write(tmp_path / "hw.txt")


def test_measure_quick_cli_writes_a_loadable_hardware_file(tmp_path, monkeypatch):
    out = tmp_path / "me.toml"
    monkeypatch.setenv("TOKENMATH_PROGRESS", "1")   # progress is shown on a terminal only; ask for it here
    # --accept-noisy: a loaded test machine must not refuse the file (the refusal: tests/test_measure_noise.py)
    code, stdout, err = run_main(["measure", "--quick", "--accept-noisy", "--out", str(out), "--json"])
    assert code == 0, err
    d = json.loads(stdout)
    assert d["written"] == str(out)
    hw = get_hardware(str(out))
    assert 1e9 <= hw.memory_bw <= 10e12                     # 1 GB/s .. 10 TB/s
    assert hw.memory_bytes > 1e8 and math.isfinite(hw.memory_bytes)
    for v in hw.flops.values():
        assert v > 0 and math.isfinite(v)
    assert hw.flops.get("fp32", 0) > 1e8                     # a CPU does more than 0.1 GFLOP/s in fp32
    rec = tomllib.loads(out.read_text())
    for k in ("name", "kind", "memory_gb", "memory_bw_tbs", "tflops", "scaleup_domain", "notes", "measured", "kernels"):
        assert k in rec
    ks = rec["kernels"]
    assert ks["rows"][:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256] and len(ks["weight_elements"]) >= 3
    assert all(0 < e <= 1 for row in ks["efficiency"] for e in row)
    assert hw.kernels is not None and hw.kernels.stream_bw == pytest.approx(1.0)   # the triad is memory_bw
    meas = rec["measured"]
    assert meas["quick"] is True and meas["versions"]["numpy"]
    for r in meas["bandwidth_gbs"].values():
        assert r["best"] >= r["median"] > 0
    assert meas["per_call_overhead_s"] > 0
    assert meas["noise"]["spread_limit"] == 0.25 and set(meas["noise"]["spread"]) >= {"gemm_curve"}
    # progress was shown on stderr
    assert "bandwidth" in err and "matmul" in err
    # and the file works where --hardware FILE is taken
    r = CliRunner().invoke(cli, ["infer", "--model", "llama-3.1-8b", "--hardware", str(out), "--batch", "1",
                                 "--input-len", "128", "--output-len", "8", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["decode_step_s"] > 0 and "measured kernel model" in d["efficiency"]["source"]   # the default


def test_measure_cuda_without_a_gpu_is_a_named_error():
    if importlib.util.find_spec("torch") is not None:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    code, out, _ = run_main(["measure", "--device", "cuda", "--json"])
    assert code == 2
    assert json.loads(out)["error"]["field"] == "device"


def test_toml_writer_escapes():
    text = to_toml({"name": 'a "quoted" \\ name\n', "tflops": {"fp32": 1.5}, "sub": {"k-1": 2, "x y": True}})
    back = tomllib.loads(text)
    assert back == {"name": 'a "quoted" \\ name\n', "tflops": {"fp32": 1.5}, "sub": {"k-1": 2, "x y": True}}


# ---- verify: what runs without torch ---------------------------------------------------------------------------
def test_verify_without_torch_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *a, **k):
        return None if name in ("torch", "transformers") else real(name, *a, **k)
    monkeypatch.setattr(importlib.util, "find_spec", fake)
    code, out, err = run_main(["verify"])
    assert code == 2
    assert install_hint("verify") in " ".join(err.split())      # torch's CPU build, then the extra from this checkout
    assert "download.pytorch.org/whl/cpu" in install_hint("verify")
    code, out, err = run_main(["verify", "--json"])
    assert code == 2
    e = json.loads(out)["error"]
    assert e["valid"] == install_hint("verify") and "torch" in e["problem"]


def test_verify_checks_inputs_before_looking_for_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    for args, field in ((["--context", "0"], "context"), (["--steps", "0"], "steps"), (["--warmup", "0"], "warmup"),
                        (["--batches", "1,x"], "batches"), (["--batches", "0"], "batches"),
                        (["--hardware", "no-such-chip"], "hardware"), (["--threads", "0"], "threads"),
                        (["--config", str(tmp_path / "missing.json")], "config"),
                        (["--plot", str(tmp_path / "chart.gif")], "plot")):
        code, out, _ = run_main(["verify", *args, "--json"])
        assert code == 2, args
        assert field in json.loads(out)["error"]["field"], (args, out)


def test_parse_batches_and_knee():
    assert parse_batches("4,1, 2,2") == [1, 2, 4]
    assert parse_batches([8, 1]) == [1, 8]
    # flat at 10 ms, then compute-bound at 1 ms per token: the knee sits at 10
    b = [1, 2, 4, 8, 16, 32, 64]
    steps = [max(0.010, 0.001 * x) for x in b]
    assert knee_batch(b, steps) == pytest.approx(10.0)
    assert knee_batch([2, 4], [1.0, 2.0]) is None


def test_probe_config_shrinks_widths_and_keeps_layers():
    p = probe_config({**TINY, "num_hidden_layers": 7})
    assert p["num_hidden_layers"] == 7 and p["hidden_size"] == 64 and p["vocab_size"] == 256
    assert p["num_key_value_heads"] < p["num_attention_heads"]          # GQA stays GQA
    assert default_config("cpu", 16e9)["num_hidden_layers"] == 12
    assert default_config("cpu", 2e9)["num_hidden_layers"] < 12         # sized to a small machine


# ---- verify with torch and transformers ------------------------------------------------------------------------
def need_torch_and_transformers():
    for mod in ("torch", "transformers"):
        pytest.importorskip(mod, reason=f"{mod} is not installed: the real-model check needs the verify extra "
                                        f"({install_hint('verify')})")


def test_verify_tiny_config_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_PROGRESS", "1")   # progress is shown on a terminal only; ask for it here
    need_torch_and_transformers()
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    hw = fake_measurement().write(tmp_path / "hw.toml")
    plot = tmp_path / "verify.png"
    code, out, err = run_main(["verify", "--config", str(cfg), "--batches", "1,2,4", "--context", "16",
                               "--hardware", str(hw), "--warmup", "1", "--steps", "3", "--threads", "1",
                               "--plot", str(plot), "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert [r["batch"] for r in d["rows"]] == [1, 2, 4]
    for r in d["rows"]:
        for k in ("measured_step_s", "predicted_step_s", "predicted_roofline_s", "predicted_overhead_s"):
            assert math.isfinite(r[k]) and r[k] > 0, (k, r)
        assert r["error"] == pytest.approx((r["predicted_step_s"] - r["measured_step_s"]) / r["measured_step_s"])
        assert abs(r["error"]) < 10
        assert r["predicted_step_s"] == pytest.approx(r["predicted_roofline_s"] + r["predicted_overhead_s"])
        # the fake file's one-shape curve: 80% at 1 row, 40% at 4, 60% at 2 (halfway in log rows), every GEMM
        assert r["gemm_efficiency"] == pytest.approx({1: 0.8, 2: 0.6, 4: 0.4}[r["batch"]])
        assert r["flat_step_s"] > 0 and math.isfinite(r["flat_error"])
    assert d["efficiency"]["kernels"]["curve_rows"] == [1, 4] and d["efficiency"]["layer_overhead_s"] >= 0
    assert d["flat_efficiency"]["layer_overhead_s"] > 0
    assert "flat_median_abs_error" in d["summary"]
    assert d["model"]["n_layers"] == 2 and d["model"]["params_total"] > 1e6
    assert d["versions"]["transformers"] and d["summary"]["median_abs_error"] >= 0
    assert plot.stat().st_size > 1000
    assert "batch 1" in err or "B=1" in err          # progress on stderr


def test_verify_python_api_measures_when_no_hardware_is_given():
    need_torch_and_transformers()
    v = verify(TINY, batches=[1, 2], context=8, warmup=1, steps=2, threads=1, quick_measure=True)
    assert v.hardware_source.startswith("measured now")
    assert [r.batch for r in v.rows] == [1, 2]
    assert all(r.measured_step_s > 0 and r.predicted_step_s > 0 for r in v.rows)
    assert "Verify:" in verify_text(v)
