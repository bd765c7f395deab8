"""`tokenmath validate` on the shipped measurements (issue 16, items 5 and 6): the merged rows keep the file's schema,
every row gets exactly one regime, no prediction is faster than the pure roofline, and the held-out tables, the
chart and the calibration file carry what the README says."""
from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from tokenmath.analyses.calibration.labels import (LOADS, REGIMES, VENDORS, engine_of, labels_of, regime_of,
                                                   vendor_of)
from tokenmath.analyses.calibration.predict import predict_inference
from tokenmath.analyses.calibration.validate import validate, write_calibration
from tokenmath.base.errors import InputError
from tokenmath.specs.catalog import shipped


@pytest.fixture(scope="module")
def data():
    return shipped("measurements.toml")


@pytest.fixture(scope="module")
def v():
    return validate()


# ---- the merged file ------------------------------------------------------------------------------------------------

def test_every_row_states_its_load_and_the_header_documents_the_new_fields(data):
    from importlib.resources import files
    header = files("tokenmath.data").joinpath("measurements.toml").read_text().split("\n[[inference]]\n")[0]
    for field in ("load ", "concurrency ", "lengths_are_caps", "static ", "max ", "primary regime"):
        assert field in header, field
    ids = [r["id"] for k in ("inference", "training") for r in data[k]]
    assert len(ids) == len(set(ids))
    for r in data["inference"]:
        assert r["load"] in LOADS, r["id"]
        if r["load"] == "concurrency" and r["batch"] != "unstated":
            assert isinstance(r["concurrency"], int) and r["concurrency"] == r["batch"], r["id"]
        assert isinstance(r.get("lengths_are_caps", False), bool)


def test_every_value_appears_in_its_quote(data):
    """A transcription check: the value as published (or in ms / in thousands where the quote says so) is in the
    quoted cell, so a mistyped digit fails here."""
    def forms(v):
        out = {repr(v), f"{v:g}", str(v), f"{v * 1000:g}", f"{round(v * 1000, 6):g}", f"{v / 1000:g}k",
               f"{v * 1000:.12g}"}      # ms written as s: the decimal point moved, every digit kept
        return out | ({str(int(v))} if float(v).is_integer() else set())
    for kind in ("inference", "training"):
        for r in data[kind]:
            q = r["quote"].replace(",", "").lower()
            assert any(f.lower() in q for f in forms(r["value"])), (r["id"], r["value"], r["quote"])


def test_new_rows_are_in_with_the_published_precision(data):
    rows = {r["id"]: r for r in data["inference"]}
    assert len(rows) == 75 + 52 + 49      # + 49 rows at a concurrency (dstack DeepSeek-R1 curves, TRT-LLM blog, NIM)
    # a mean TPOT published in ms, written in seconds with every digit kept
    assert rows["dstack-dsr1-8xmi300x-vllm-fp8-c4-3200-800-tpot"]["value"] == 0.04620285759
    # the Neuron p50 lines as printed in the tutorial, not rounded
    assert rows["nxdi-llama33-70b-trn2-bf16-bs1-10000-1500-ttft"]["value"] == 0.5756837059743702
    assert rows["nxdi-llama31-405b-trn2-bf16-bs1-10000-1500-itl"]["value"] == 0.037929154633788834
    r = rows["amdblog-llama31-405b-8xmi300x-fp8-bs128-128-2048-e2e"]
    assert r["value"] == 116.139 and "116139" in r["quote"] and r["load"] == "static"


def test_closed_loop_metrics_by_littles_law():
    """A row measured at a concurrency is read through the closed loop: B running, N users, static-batch TTFT t of
    the B prompts and decode step s. By hand, B = 4, Lo = 10, t = 2 s, s = 0.1 s: one cycle = 2 + 10 x 0.1 = 3 s;
    4 x 10 / 3 = 13.33 output tokens/s; ITL 3 / 10 = 0.3 s; TTFT 2 / 4 + 0.1 = 0.6 s; end-to-end 3 s. With N = 8
    users and the same 4 running, the other 4 queue one cycle: TTFT 0.6 + 3 = 3.6 s, end-to-end 8 x 3 / 4 = 6 s."""
    from types import SimpleNamespace
    from tokenmath.analyses.calibration.predict import metric_function
    r = SimpleNamespace(batch=4, input_len=100, output_len=10, chips=1, layout=SimpleNamespace(tp=1, pp=1, ep=1, dp=1))
    row = {"load": "concurrency", "concurrency": 4}
    f = lambda metric, n=4: metric_function(r, {**row, "metric": metric, "concurrency": n})(2.0, 0.1)   # noqa: E731
    assert f("output_tokens_per_s") == pytest.approx(40 / 3)
    assert f("decode_step_s") == pytest.approx(0.3)
    assert f("ttft_s") == pytest.approx(0.6)
    assert f("e2e_latency_s") == pytest.approx(3.0)
    assert f("ttft_s", 8) == pytest.approx(3.6)
    assert f("e2e_latency_s", 8) == pytest.approx(6.0)
    # a static batch of the same rows reads the whole batch's prefill as its TTFT
    assert metric_function(r, {"metric": "ttft_s", "load": "static"})(2.0, 0.1) == 2.0


# ---- regimes and labels ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row,kind,want", [
    ({"metric": "ttft_s", "batch": 1, "load": "concurrency", "concurrency": 1}, "inference", "prefill"),
    ({"metric": "prefill_tokens_per_s", "batch": "max"}, "inference", "prefill"),
    ({"metric": "output_tokens_per_s", "batch": "max"}, "inference", "max-load"),            # no load: the old rows
    ({"metric": "output_tokens_per_s", "batch": 128, "load": "max"}, "inference", "max-load"),
    ({"metric": "output_tokens_per_s", "batch": 50, "load": "concurrency", "concurrency": 50}, "inference",
     "concurrency"),
    ({"metric": "decode_step_s", "batch": 1, "load": "concurrency", "concurrency": 1}, "inference", "batch-1-decode"),
    ({"metric": "e2e_latency_s", "batch": 1, "load": "static"}, "inference", "batch-1-decode"),
    ({"metric": "e2e_latency_s", "batch": 8, "load": "static"}, "inference", "static-batch"),
    ({"metric": "output_tokens_per_s", "batch": "unstated", "load": "concurrency"}, "inference", "concurrency"),
    ({"metric": "mfu"}, "training", "training"),
])
def test_one_regime_per_row(row, kind, want):
    assert regime_of(row, kind) == want


def test_unknown_load_is_an_input_error():
    with pytest.raises(InputError):
        regime_of({"id": "x", "metric": "ttft_s", "load": "burst"}, "inference")


def test_vendor_and_engine_labels():
    assert [vendor_of(h) for h in ("h100-sxm", "mi300x", "tpu-v5e", "gaudi3", "trn2", "apple-m2-ultra")] == \
        ["nvidia", "amd", "google", "intel", "aws", "apple"]
    assert engine_of({"engine": "NVIDIA NIM 1.8.0 for Llama-3.3-70B-Instruct (TensorRT-LLM)"}) == "tensorrt-llm"
    # vLLM before 0.8.0 (V1 engine the default from 2025-03-18) is its own group: the vllm profile describes V1
    assert engine_of({"engine": "vLLM 0.6.7.dev (rocm/vllm-dev:20250112 image)"}) == "vllm-v0"
    assert engine_of({"engine": "vLLM 0.7.4.dev181+gf35f8e22 (nightly)"}) == "vllm-v0"
    assert engine_of({"engine": "vLLM (benchmark_latency.py)", "date": "2024"}) == "vllm-v0"
    assert engine_of({"engine": "vLLM 0.10.1 (V1)", "date": "2025-08-01"}) == "vllm"
    assert engine_of({"engine": "vLLM", "date": "2025-06-01"}) == "vllm"
    assert engine_of({"engine": "NxD Inference + Neuron vLLM fork"}) == "neuron"      # not vLLM on a GPU
    assert engine_of({"engine": "llama.cpp (Metal)"}) == "llama.cpp"
    assert engine_of({"source": "Narayanan et al. 2021, arXiv 2104.04473"}) == "megatron"


def test_every_regime_and_vendor_has_scored_rows(data, v):
    labels = [labels_of(r, k) for k in ("inference", "training") for r in data[k]]
    assert {x.regime for x in labels} == set(REGIMES)
    assert {x.vendor for x in labels} == set(VENDORS)
    c = v.counts()
    assert all(c["regime"][g]["scored"] >= 5 for g in REGIMES), c["regime"]
    assert all(c["vendor"][g]["scored"] >= 2 for g in VENDORS), c["vendor"]
    assert sum(n["rows"] for n in c["regime"].values()) == len(labels)


# ---- predictions ----------------------------------------------------------------------------------------------------

def test_pure_roofline_of_a_bandwidth_bound_row_by_hand(v):
    # Llama 2 7B, bf16, batch 1 on an A100-80GB (2.039 TB/s): each step reads every weight but the input embedding
    # (6,738,415,616 - 32,000 x 4,096 = 6,607,343,616 params x 2 B = 13.215 GB) and the KV cache of the context so
    # far (5..204 tokens, mean 104.5 x 32 layers x 2 x 4,096 x 2 B = 54.8 MB): 2.039e12 / 13.269e9 = 153.66 tok/s.
    p = next(p for p in v.preds if p.id == "gptfast-llama2-7b-a100-bs1-bf16")
    assert p.predicted_peak == pytest.approx(2.039e12 / (13.214687e9 + 104.5 * 32 * 2 * 4096 * 2), rel=2e-3)
    # the roofline defaults (sourced kernel constants) are slower than the pure roofline, never faster
    assert 0.5 < p.predicted_default / p.predicted_peak < 1.0


def test_no_prediction_is_faster_than_the_pure_roofline(v):
    s = v.summary()
    assert s["faster_than_pure_roofline"] == {"count": 0, "rows": []}
    n = 0
    for d in v.rows():
        if "skipped" in d:
            continue
        bound = d["predicted_pure_roofline"]
        for x in (d["predicted_roofline"], d["predicted_calibrated"], *d["predicted_heldout"].values()):
            if x is None:
                continue
            n += 1
            thr = d["metric"] in ("output_tokens_per_s", "output_tokens_per_s_per_user", "decode_tokens_per_s",
                                  "prefill_tokens_per_s", "tokens_per_s_per_chip", "tflops_per_chip", "mfu",
                                  "tokens_per_s")
            assert (x <= bound * (1 + 1e-9)) if thr else (x >= bound * (1 - 1e-9)), (d["id"], x, bound)
    assert n > 6 * 120


def test_a_concurrency_above_what_fits_is_predicted_at_the_batch_that_fits(data):
    from tokenmath.analyses.serving.infer import infer
    row = next(r for r in data["inference"] if r["id"] == "nim180-llama33-70b-2xh100-fp8-c250-5000-500-tput")
    p = predict_inference(row)
    most = infer("llama-3.1-70b", "h100-sxm", chips=2, tp=2, pp=1, ep=1, dp=1, batch="max", input_len=5000,
                 output_len=500, weight_dtype="fp8", kv_dtype="fp8")
    assert p.usable and 1 <= most.batch < 250 and any(f"fits, {most.batch}" in n for n in p.notes)
    static = predict_inference({**row, "load": "static", "id": "same-but-static"})
    assert static.skipped and "does not fit" in static.skipped


def test_rows_whose_lengths_are_caps_are_predicted_but_not_scored(v):
    caps = [p for p in v.preds if p.row.get("lengths_are_caps")]
    assert len(caps) == 3
    s = v.summary()
    assert s["rows"]["scored"] == sum(p.usable for p in v.preds) - sum(p.usable for p in caps)
    assert s["median_ape"]["loso"]["all"]["rows"] == s["rows"]["scored"]
    d = next(d for d in v.rows() if d["id"] == caps[0].id and "skipped" not in d)
    assert "not_scored" in d


def test_held_out_tables_cover_every_scheme_and_grouping(v):
    med = v.summary()["median_ape"]
    for scheme in ("pure_roofline", "roofline_defaults", "in_sample", "loso", "loro", "lovo", "lomo"):
        assert set(med[scheme]) == {"all", "regime", "moe", "vendor", "engine"}
        assert set(med[scheme]["regime"]) == set(REGIMES)
        assert set(med[scheme]["moe"]) == {"moe", "dense"}
    # what the fit adds must show up held out: better than the uncalibrated kernel ceilings overall
    assert med["loso"]["all"]["median_ape"] < med["roofline_defaults"]["all"]["median_ape"]


# ---- the command and its files --------------------------------------------------------------------------------------

def test_cli_json_plot_and_text(tmp_path, monkeypatch):
    import tokenmath.analyses.calibration.validate as mod
    from tokenmath.faces.cli import cli
    png = tmp_path / "v.png"
    res = CliRunner().invoke(cli, ["validate", "--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert {"summary", "parameters", "calibration", "declared", "counts", "rows", "flat", "worst"} <= set(d)
    assert d["summary"]["model"] == "physics" and d["flat"]["summary"]["model"] == "flat"
    assert d["summary"]["faster_than_pure_roofline"]["count"] == 0
    assert {p["name"] for p in d["declared"]} >= {"compute_scale", "bw_scale", "layer_overhead_s", "step_cpu_s",
                                                  "train_flops"}
    assert {p["name"] for p in d["flat"]["declared"]} >= {"flops", "memory_bw", "layer_overhead_s", "train_flops"}
    assert all(("physics_missing" in p) == bool(p["at_edge"]) for p in d["parameters"])
    assert png.stat().st_size > 10_000
    # the flat set it is compared with: the same summary, and never faster than the pure roofline
    assert d["flat"]["summary"]["faster_than_pure_roofline"]["count"] == 0
    monkeypatch.setattr(mod, "validate_flat", lambda rows=None: mod.validate(rows))   # one model's text is enough
    res = CliRunner().invoke(cli, ["validate"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for text in ("LORO", "LOVO", "by regime", "by chip vendor", "MoE / dense",
                 "predictions faster than the pure roofline: 0", "measurements furthest off"):
        assert text in res.output, text


def test_write_calibration_keeps_what_specs_efficiency_reads(tmp_path, v):
    from tokenmath.analyses.calibration.validate import validate_flat
    from tokenmath.specs.efficiency import PHYSICS_SCOPES
    flat = validate_flat()
    path = tmp_path / "cal.toml"
    write_calibration(v, str(path), flat=flat)
    cal = tomllib.loads(path.read_text())
    assert "tokenmath validate" in path.read_text().splitlines()[0]
    for key in ("rows", "fitted", "heldout_median_ape", "roofline_median_ape", "flat_heldout_median_ape"):
        assert key in cal
    assert cal["model"] == "physics"
    assert cal["family"]["_all"].keys() == {"flops", "memory_bw", "layer_overhead_s"}
    assert cal["family"] == flat.calibration_table()
    # the physics records specs.efficiency.physics_values reads: every fitted inference value, scopes as declared
    names = {p["name"] for p in cal["physics"]}
    assert names >= set(PHYSICS_SCOPES) and {(p["name"], p["group"]) for p in cal["physics"]} == \
        {(d["name"], d["group"]) for d in v.parameters()}
    for p in cal["parameter"] + cal["physics"]:
        assert p["bounds"][0] <= p["value"] <= p["bounds"][1] and p["provenance"] == "fitted"
        assert (p["at_edge"] != "no") == (p["value"] in p["bounds"])
    assert set(cal["heldout"]) == {"loso", "loro", "lovo", "lomo"}
    assert cal["heldout_median_ape"] == pytest.approx(v.summary()["median_ape"]["loso"]["all"]["median_ape"], abs=1e-4)


def test_shipped_physics_values_are_this_fit(v):
    """data/calibration.toml ships what `tokenmath validate --write-calibration` fits on the shipped rows: a change
    to the rows, the engine or the declared parameters that moves a fitted value must re-write the file."""
    shipped_cal = shipped("calibration.toml")
    assert shipped_cal["model"] == v.model.name == "physics"
    got = {(p["name"], p["group"]): p["value"] for p in shipped_cal["physics"]}
    want = {(d["name"], d["group"]): d["value"] for d in v.parameters()}
    assert got == pytest.approx(want, rel=1e-12)


# ---- the worst rows and the term that explains each (issue 35) -------------------------------------------------------

def test_row_term_reads_the_phase_the_metric_measures():
    from tokenmath.analyses.calibration.predict import row_term
    from tokenmath.analyses.serving.infer import infer
    # Llama 3.1 70B on 8 x H100, batch 1, 2,048 in / 128 out: a decode step reads ~70.6 GB of weights over 8 chips
    # (8.8 GB each at 3.35 TB/s: ~2.6 ms at full bandwidth, against 2 x 70.6e9 / 8 = 17.6 GFLOP each: ~18 us at
    # peak): memory-bound. The prompt's 2,048 tokens are 2,048 x 17.6 GFLOP = 36 TFLOP per chip against 4.5 GB of
    # weights per chip read once: compute-bound.
    r = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, input_len=2048, output_len=128)
    assert row_term(r, {"metric": "ttft_s"}) == "prefill: compute"
    assert row_term(r, {"metric": "decode_step_s"}) == "decode: memory"
    # a whole request: 128 decode steps of ~12 ms (~1.5 s) outlast one ~0.1 s prefill
    assert row_term(r, {"metric": "e2e_latency_s"}) == "decode: memory"
    # ... until the prompt is long enough to take longer than the decode: 64K tokens and 2 output tokens
    r = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=1, input_len=65536, output_len=2)
    assert row_term(r, {"metric": "e2e_latency_s"}) == "prefill: compute"


def test_worst_rows_are_the_largest_held_out_errors_each_with_its_term(v):
    from tokenmath.analyses.calibration.heldout import ape
    w = v.worst()
    assert len(w) == 20
    apes = [d["ape"] for d in w]
    assert apes == sorted(apes, reverse=True)
    held = v.heldout["loso"]
    scored = [ape(held[p.id], p.measured) for p in v.preds if p.usable and p.labels.scored and p.id in held]
    assert apes[-1] >= sorted(scored, reverse=True)[19] - 1e-12       # nothing left out is further off
    phases = ("prefill: ", "decode: ", "training step: ")
    for d in w:
        assert d["term"].startswith(phases), d
        assert d["ratio"] == pytest.approx(d["predicted_loso"] / d["measured"])
        p = next(p for p in v.preds if p.id == d["id"])
        assert d["optimistic"] == p.faster_than(d["predicted_loso"], d["measured"])
        # every residual named at a bound is a fitted value of this row's on an edge of its declared range
        for text in d["at_bound"]:
            name, group, value, _ = text.split(" ", 3)
            fv = v.fit.values[(name, group)]
            assert fv.edge and f"{fv.value:g}" == value
    assert "worst" in v.to_dict()
