"""MTP on and off, same everything else: the InferenceX runs that differ only in speculative decoding, and what
their speedup says about tokenmath's MTP model (engine/speculative.py). Nothing is fitted to these rows.

A pair is two predicted runs with the same engine, chip, precision, Docker image (a run without an image has no
pair: its software is not known to match), layout, input / output lengths, concurrency and GPUs, one with MTP and
one without. Per pair:
- measured speedup: tok/s per user with MTP / without (InferenceX's median interactivity);
- predicted speedup: the same ratio of tokenmath's predictions. Both sides share the base step model (weights, KV,
  kernels, the engine profile), so this ratio isolates what the MTP model adds: tokens per verification step E,
  the draft passes, the verification pass over k + 1 tokens;
- implied tokens per step: tokenmath's E x measured / predicted speedup, the E at which tokenmath's step costs give
  the measured speedup (E itself is not published for any of these runs).
By engine: the medians of the three and tokenmath's own E. Where the medians agree the MTP model carries over;
where the measured speedup is far below the predicted one, the runs reached fewer tokens per step than tokenmath
assumes (MTP_ACCEPTANCE and its fall by position), or paid a step cost tokenmath leaves out: the pairs cannot tell
which.

What the shipped pairs show (issue 35), and the step costs checked against SGLang's own code before blaming the
acceptance:
- SGLang on NVIDIA (8 pairs: H200 FP8 and B200 FP4 at sglang v0.5.12): 1.08x measured, 1.61x predicted; implied
  1.6 tokens per step against the 2.47 tokenmath assumes for 2 drafts (a first-position rate near 0.45, where
  DeepSeek reports 0.85-0.90). TensorRT-LLM on NVIDIA (7 pairs): 1.61x measured, 1.50x predicted, implied 2.8.
  SGLang on AMD (9 pairs, 3 drafts): 1.31x measured, 1.56x predicted, implied 2.2.
- SGLang's EAGLE step with top-k 1 (python/sglang/srt/speculative/eagle_worker_v2.py at sgl-project/sglang
  006b0e3d): k - 1 draft decode passes ("we get 1 token from draft prefill and (#spec steps - 1) tokens here"), the
  target over k + 1 tokens a sequence, then a draft extend over k + 1 tokens a sequence (num_tokens_per_req =
  speculative_num_steps + 1). tokenmath prices k one-token draft passes: the extend's extra tokens add 0.3-0.8% to
  the time per token (H200 and B200 FP8, TP 8, 4-512 sequences); not modelled.
- The draft extend is replayed from a CUDA graph only with the Triton and TRT-LLM MLA backends (same file,
  init_cuda_graphs): H200's FlashInfer recipe launches one MTP layer eagerly, an estimated 0.2 ms of launches (some
  40 kernels at specs/serving_engines.LAUNCH_CPU_S) under a GPU pass of 0.3-1 ms; not modelled.
- dsr1_fp8_b200_mtp.sh and dsr1_fp8_b300_mtp.sh (InferenceX 843c6254) assign SGLANG_ENABLE_SPEC_V2=1 without
  `export`, so those servers ran EAGLE v1, which turns the overlap scheduler off; the H200 and B200 FP4 recipes
  export it. Overlap is worth 5-10% to speculative decoding (sgl-project/sglang pull 9588), and SGLang's per-step
  CPU time is not known (data/calibration.toml fits it at 0 behind the overlap), so it is not priced.
- Running-request and CUDA-graph caps: every NVIDIA single-node SGLang MTP recipe sets --max-running-requests and
  --cuda-graph-max-bs at or above its concurrency (512 / 512; H200 8K/1K 256 / 256): no cap binds.
None of these comes near the 1.5x the pairs show on NVIDIA. The acceptance SGLang reached on InferenceX's prompts
(random tokens through the chat template, temperature 0 in utils/bench_serving/backend_request_func.py) is not
published, and tokenmath does not fit one.
"""
from __future__ import annotations

import numpy as np

from tokenmath.analyses.calibration.inferencex import MTP_TOKENS
from tokenmath.analyses.calibration.inferencex_predict import RunPrediction
from tokenmath.analyses.calibration.inferencex_recipe import recipe
from tokenmath.engine.speculative import MTP_ACCEPTANCE, tokens_per_step


def _key(p: RunPrediction) -> tuple | None:
    r = p.run.row
    if p.per_user is None or not r["median_intvty"] or not r["image"]:
        return None
    return (r["framework"], r["hardware"], r["precision"], r["image"], p.layout, r["isl"], r["osl"], r["conc"],
            r["gpus"])


def tokens_assumed(p: RunPrediction) -> float:
    """tokenmath's E for an MTP run: the MTP head drafting its recipe's k tokens (inferencex_recipe.mtp_tokens, else
    MTP_TOKENS) at the default per-position acceptance."""
    k = recipe(p.run, "decode" if p.run.disagg else "aggregated").mtp_tokens or MTP_TOKENS
    return tokens_per_step(MTP_ACCEPTANCE, k, mtp=True)


def mtp_pairs(preds) -> list[dict]:
    """Every pair (module docstring), a key's several runs on one side taken at their median, in key order."""
    sides: dict[tuple, tuple[list, list]] = {}
    for p in preds:
        k = _key(p)
        if k is not None:
            sides.setdefault(k, ([], []))[int(p.run.mtp)].append(p)
    out = []
    for k in sorted(sides, key=str):
        off, on = sides[k]
        if not off or not on:
            continue
        med = lambda ps, f: float(np.median([f(p) for p in ps]))          # noqa: E731
        meas = med(on, lambda p: p.run.row["median_intvty"]) / med(off, lambda p: p.run.row["median_intvty"])
        pred = med(on, lambda p: p.per_user) / med(off, lambda p: p.per_user)
        e = med(on, tokens_assumed)
        out.append({"engine": k[0], "hardware": k[1], "precision": k[2], "image": k[3], "layout": k[4],
                    "isl": k[5], "osl": k[6], "conc": k[7], "gpus": k[8], "runs": [len(off), len(on)],
                    "measured_speedup": meas, "predicted_speedup": pred, "tokens_per_step_assumed": e,
                    "tokens_per_step_implied": e * meas / pred})
    return out


def mtp_summary(pairs: list[dict]) -> dict[str, dict]:
    """Per engine and vendor ("sglang on nvidia"): pairs, and the medians of measured and predicted speedup,
    tokenmath's E and the implied E."""
    by: dict[str, list] = {}
    for x in pairs:
        by.setdefault(f"{x['engine']} on {'amd' if x['hardware'].startswith('mi') else 'nvidia'}", []).append(x)
    med = lambda xs, f: float(np.median([x[f] for x in xs]))              # noqa: E731
    return {eng: {"pairs": len(xs), **{f: med(xs, f) for f in ("measured_speedup", "predicted_speedup",
                                                                 "tokens_per_step_assumed",
                                                                 "tokens_per_step_implied")}}
            for eng, xs in sorted(by.items())}
