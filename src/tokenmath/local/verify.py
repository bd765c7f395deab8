"""Verify tokenmath against a real transformer on this machine: measured vs predicted decode step per batch size.

The model is Hugging Face transformers' own implementation (AutoModelForCausalLM.from_config: nothing on this
project wrote it), with random weights (nothing is downloaded: from_config, never from_pretrained, and
HF_HUB_OFFLINE=1). For each batch size it prefills `context` tokens, then times single cached greedy decode steps
(the model's forward with the KV cache, then argmax) and takes the median after a warm-up
(tokenmath.local.transformers_model).

The prediction is tokenmath's engine (tokenmath.infer) on the measured hardware file (`tokenmath measure`), in fp32
as the model runs, with the file's own kernel model (its [kernels] section, specs.kernels_measured.measured_model): every
GEMM at the share of the roofline that this machine's fp32 matmuls of that many rows on that weight shape reached
(engine/kernels.measured_share), streaming at the measured triad, and the measured per-call overhead as each
kernel's fixed time. What eager PyTorch and transformers add beyond those kernels is measured, not fitted: the same
architecture is built again with tiny widths (hidden 64, vocab 256), so its decode step holds no FLOPs or bytes to
speak of, and timed in the same rounds as the model (a burst of load falls on both); its step time minus the engine's prediction of that tiny model, over the layer count, is the
Efficiency.layer_overhead_s of the prediction (the embedding, final norm, lm_head call and argmax spread over the
layers with it), probed at the smallest and the largest batch and linear in batch between them.

A second prediction stands beside it for comparison (the one verify made before the curve existed): 100% of the
file's headline figures (Efficiency(1, 1, 1), no kernel model) plus the probe's whole step over the layers. A file
without a [kernels] section gets that one alone. What neither counts is listed in the notes (transformers'
DynamicCache copies the whole KV cache every step).

Requires torch and transformers (the verify extra; tokenmath.base.install.install_hint('verify') says how to install
it); they are imported only inside the functions.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import numpy as np

from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.infer import infer
from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg
from tokenmath.local.machine import check_device, machine_busy, meminfo, model_versions
from tokenmath.local.measure import measure
from tokenmath.local.model_configs import default_config, load_config, model_from_config, probe_config
from tokenmath.local.transformers_model import Timing, build_model, require_packages, time_decode_together
from tokenmath.local.verify_result import Row, Verification
from tokenmath.specs.efficiency import Efficiency, kernel_default_for
from tokenmath.specs.hardware import Hardware, from_record, get_hardware, noise_caveats
from tokenmath.specs.kv_cache import kv_bytes_per_token
from tokenmath.specs.model import Model
from tokenmath.specs.params import count_params

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_CONTEXT = 256
MAX_VERIFY_BATCH = 4096    # a real model on this machine; far below base.validators.MAX_BATCH (a typo guard)


def parse_batches(spec: str | list[int] | tuple[int, ...]) -> list[int]:
    """"4,1,2" or [4, 1, 2] -> the sorted distinct batch sizes; InputError("batches") otherwise."""
    if isinstance(spec, (list, tuple)):
        items = list(spec)
    else:
        items = [s for s in str(spec).replace(" ", "").split(",") if s]
    out = []
    for s in items:
        try:
            v = int(s)
        except (TypeError, ValueError):
            raise InputError("batches", f"{s!r} is not a whole number", "a comma-separated list such as 1,2,4,8") from None
        if not 1 <= v <= MAX_VERIFY_BATCH:
            raise InputError("batches", f"{v} is out of range", f"batch sizes from 1 to {MAX_VERIFY_BATCH}")
        out.append(v)
    if not out:
        raise InputError("batches", "empty", "a comma-separated list such as 1,2,4,8")
    return sorted(set(out))


def check_inputs(config=None, batches=DEFAULT_BATCHES, context=DEFAULT_CONTEXT, device="cpu", hardware=None,
                 warmup=2, steps=8, threads=None) -> dict:
    """Every input checked before anything slow (and before torch is looked for): InputError names the field."""
    device = check_device(device)
    out = {"device": device, "batches": parse_batches(batches), "context": int_arg(context, "context", 1, 1_000_000),
           "warmup": int_arg(warmup, "warmup", 1, 1000), "steps": int_arg(steps, "steps", 1, 1000),
           "threads": None if threads is None else int_arg(threads, "threads", 1, 4096), "hardware": hardware,
           "config": None, "name": None, "model": None}
    if hardware is not None:
        get_hardware(hardware)
    if config is not None:
        if isinstance(config, dict):
            cfg, name = dict(config), "config"
        else:
            cfg, name = load_config(config), Path(str(config)).name
        out.update(config=cfg, name=name, model=model_from_config(cfg, name))
    return out


def verify(config: dict | str | None = None, batches=DEFAULT_BATCHES, context: int = DEFAULT_CONTEXT,
           device: str = "cpu", hardware=None, warmup: int = 2, steps: int = 8, threads: int | None = None,
           quick_measure: bool = False, progress: Callable[[str], None] | None = None) -> Verification:
    """Measure decode steps of a real transformers model and compare with tokenmath's prediction.

    config: a config dict, a config.json path, or None for the built-in one. hardware: a hardware file, catalog id or
    Hardware; None runs `measure` first. Times in seconds."""
    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    ins = check_inputs(config, batches, context, device, hardware, warmup, steps, threads)
    require_packages(gpu=ins["device"] == "cuda")
    import torch
    prev_threads = torch.get_num_threads()
    if ins["threads"] is not None:
        torch.set_num_threads(ins["threads"])
    try:
        return _verify(ins, quick_measure, say, t_start)
    finally:
        torch.set_num_threads(prev_threads)


def _hardware(hardware, device: str, quick_measure: bool, say: Callable[[str], None],
              notes: list[str]) -> tuple[Hardware, str]:
    """(the Hardware to predict on, where it came from): measured now unless given."""
    if hardware is None:
        say("no --hardware file: measuring this machine first" + (" (quick)" if quick_measure else ""))
        meas = measure(device=device, quick=quick_measure, progress=lambda m: say(f"measure: {m}"))
        rec = meas.record()
        hw = get_hardware(from_record(rec["id"], rec))
        return hw, f"measured now ({'quick' if quick_measure else 'full'} tokenmath measure)"
    hw = get_hardware(hardware)
    if hw.kind != "cpu" and device == "cpu" or hw.kind == "cpu" and device == "cuda":
        notes.append(f"hardware {hw.id} is a {hw.kind}, the model runs on {device}")
    return hw, hardware if isinstance(hardware, str) else hw.id


def _fp32_hardware(hw: Hardware) -> Hardware:
    """The model runs every matmul (attention included) in fp32: predict with the fp32 figure alone, so the
    engine's bf16 key for attention falls back to it (a CPU's bf16 matmul can be 100x slower, and is not used)."""
    if hw.flops.get("fp32"):
        return hw.replace(flops=MappingProxyType({"fp32": hw.flops["fp32"]}))
    return hw


def _probe(cfg: dict, device: str, say: Callable[[str], None], notes: list[str]):
    """The same architecture at tiny widths (what the framework adds, next to no work), or None."""
    say("overhead probe: the same architecture at hidden 64, vocab 256, timed in the same rounds as the model")
    try:
        return build_model(probe_config(cfg), device)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - an architecture whose widths cannot shrink this way: no overhead term
        notes.append(f"overhead probe failed ({type(e).__name__}: {e}); predicted without a per-layer overhead")
        return None


GEMM_OPS = ("attn_proj", "ffn", "router", "experts", "shared_experts", "lm_head")


def _gemm_share(dec, hw: Hardware) -> float | None:
    """The share of the pure roofline (max(FLOPs / peak, bytes / bandwidth) at the file's figures) that the decode
    pass's GEMMs run at, their fixed times left out: the measured curve as this model's shapes read it."""
    peak, bw = hw.peak_flops("fp32"), hw.memory_bw
    roof = busy = 0.0
    for name in GEMM_OPS:
        op = dec.ops.get(name)
        if op is not None:
            roof += op.count * float(np.max(np.maximum(op.flops / peak, op.bytes / bw)))
            busy += op.count * float(np.max(np.maximum(op.compute_s, op.memory_s) - op.fixed_s))
    return roof / busy if busy > 0 else None


def _predict(m: Model, hw: Hardware, batch: int, inp: int, eff: Efficiency):
    r = infer(m, hw, batch=batch, input_len=inp, output_len=1, weight_dtype="fp32", kv_dtype="fp32", efficiency=eff)
    if not r.fits:
        raise InputError("batches", f"batch {batch} at context {inp} does not fit in {hw.memory_bytes / 1e9:.3g} GB "
                         "by tokenmath's count", "smaller batches or a shorter --context")
    return r


def _row(m: Model, hw: Hardware, t: Timing, eff: Efficiency, flat: Efficiency | None) -> Row:
    """The engine's prediction for one timed batch size (and, beside it, the flat one at 100% of the figures)."""
    inp = max(1, round(t.cached_tokens_mean))
    r = _predict(m, hw, t.batch, inp, eff)
    rf = _predict(m, hw, t.batch, inp, flat) if flat is not None else None
    dec = r.decode
    overhead = m.n_layers * eff.layer_overhead_s
    return Row(t.batch, t.median_s, t.min_s, t.steps_s, float(r.decode_step_s),
               float(r.decode_step_s) - overhead, overhead, str(dec.bottleneck),
               float(np.asarray(dec.weight_bytes)), float(np.asarray(dec.kv_bytes)),
               float(np.asarray(dec.flops)), _gemm_share(dec, hw) if eff.kernels is not None else None,
               float(rf.decode_step_s) if rf is not None else None)


def _efficiencies(cfg: dict, m: Model, hw: Hardware, hw_source: str, probe_steps: dict[int, float], context: int,
                  notes: list[str]) -> tuple[Efficiency, Callable[[int], float], Efficiency | None]:
    """(the prediction's efficiency, batch -> its layer_overhead_s, the flat efficiency beside it or None).
    With the file's measured kernel model: that model plus, per layer, what the tiny-width probe's step takes beyond
    the engine's prediction of the probe, at each probed batch (the smallest and the largest), linear in batch
    between them (what eager PyTorch and transformers add grows with the batch: masks, cache copies, small ops).
    Without one: 100% of the figures plus the probe's fastest step per layer (and no second column)."""
    per_layer = min(probe_steps.values()) / m.n_layers if probe_steps else 0.0
    flat = Efficiency(1.0, 1.0, 1.0, source=f"measured on this machine ({hw_source}) at 100%; layer overhead from a "
                      f"tiny-width probe of the same model ({per_layer * 1e6:.0f} us per layer)",
                      layer_overhead_s=min(per_layer, 0.999))
    if hw.kernels is None:
        notes.append("the hardware file has no [kernels] section (this machine's measured kernel model, written by "
                     "`tokenmath measure`): predicted at 100% of its headline figures")
        return flat, lambda b: flat.layer_overhead_s, None
    base = kernel_default_for(hw)
    if not probe_steps:
        return base, lambda b: 0.0, flat
    probe = model_from_config(probe_config(cfg), "probe")
    bs = sorted(probe_steps)
    pred = {b: float(_predict(probe, hw, b, context, base).decode_step_s) for b in bs}
    per = [min(max(0.0, (probe_steps[b] - pred[b]) / m.n_layers), 0.999) for b in bs]

    def at(b: int) -> float:
        return float(np.interp(b, bs, per))
    eff = replace(base, layer_overhead_s=at(bs[0]),
                  source=f"{base.source}; + per layer, the tiny-width probe's step beyond the engine's prediction of "
                         "it: " + ", ".join(f"{x * 1e6:.0f} us at batch {b} ({probe_steps[b] * 1e3:.3g} ms vs "
                                            f"{pred[b] * 1e3:.3g} ms)" for b, x in zip(bs, per))
                         + " (linear in batch between), over " + f"{m.n_layers} layers")
    return eff, at, flat


def _verify(ins: dict, quick_measure: bool, say: Callable[[str], None], t_start: float) -> Verification:
    import torch
    device, batches, context = ins["device"], ins["batches"], ins["context"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    busy = machine_busy()
    notes: list[str] = [busy] if busy else []
    hw, hw_source = _hardware(ins["hardware"], device, quick_measure, say, notes)
    notes.extend(noise_caveats(hw))   # a reference measured under load (local.noise)

    # config
    if ins["config"] is None:
        cfg = default_config(device, hw.memory_bytes)
        name = f"built-in Llama-style ({cfg['num_hidden_layers']} layers, d={cfg['hidden_size']})"
        m = model_from_config(cfg, name)
    else:
        cfg, name, m = ins["config"], ins["name"], ins["model"]
    P = count_params(m)
    wbytes = 4.0 * P.total
    avail = meminfo().get("MemAvailable") if device == "cpu" else None
    if avail and wbytes > 0.6 * avail:
        raise InputError("config", f"{wbytes / 1e9:.3g} GB of fp32 weights do not fit in the "
                         f"{avail / 1e9:.3g} GB of free memory", "a smaller config (fewer layers or a narrower model)")

    # the real model
    say(f"building {name}: {P.total / 1e6:,.0f}M params, {wbytes / 1e9:.3g} GB in fp32 (random weights)")
    model = build_model(cfg, device)
    real_params = sum(p.numel() for p in model.parameters())
    if abs(real_params - P.total) > 0.01 * P.total:
        notes.append(f"transformers built {real_params / 1e6:,.1f}M parameters, tokenmath counts {P.total / 1e6:,.1f}M")
    probe = _probe(cfg, device, say, notes)
    pb = sorted({batches[0], batches[-1]})
    runs = [(model, batches, "")] + ([(probe, pb, "probe ")] if probe is not None else [])
    timed = time_decode_together(runs, device, context, ins["warmup"], ins["steps"], say)
    timings = timed[0]
    probe_steps = {t.batch: t.median_s for t in timed[1]} if probe is not None else {}   # framework overhead
    del model, probe, runs

    hw_pred = _fp32_hardware(hw)
    eff, overhead_at, flat = _efficiencies(cfg, m, hw_pred, hw_source, probe_steps, context, notes)
    rows = tuple(_row(m, hw_pred, t, replace(eff, layer_overhead_s=overhead_at(t.batch)), flat) for t in timings)

    kvt = float(kv_bytes_per_token(m, 4.0))
    big = max(timings, key=lambda t: t.batch)
    copy_bytes = 2.0 * big.batch * big.cached_tokens_mean * kvt
    notes.append(f"transformers' DynamicCache grows by torch.cat: every step copies each layer's whole KV cache "
                 f"(read + write, {copy_bytes / 1e6:,.0f} MB at batch {big.batch}, "
                 f"{copy_bytes / hw_pred.memory_bw * 1e3:.3g} ms at {hw_pred.memory_bw / 1e9:.3g} GB/s), which the "
                 "engine, modelling an in-place (paged) cache as serving engines keep, does not count")
    crit = None
    try:
        h = hyperbola(m, hw_pred, context=context, weight_dtype="fp32", kv_dtype="fp32", efficiency=eff, max_points=64)
        crit = h.critical_batch
    except InputError:
        pass
    vers = model_versions()
    threads = torch.get_num_threads()
    return Verification(cfg, m.name, P.total, wbytes, kvt, m.n_layers, device, context, ins["warmup"], ins["steps"],
                        hw_pred, hw_source, eff, probe_steps, rows, crit, vers, threads,
                        seconds=time.perf_counter() - t_start, notes=tuple(notes), flat_efficiency=flat)
