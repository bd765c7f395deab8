"""Verify tokenmath against a real transformer on this machine: measured vs predicted decode step per batch size.

The model is Hugging Face transformers' own implementation (AutoModelForCausalLM.from_config: nothing on this
project wrote it), with random weights (nothing is downloaded: from_config, never from_pretrained, and
HF_HUB_OFFLINE=1). For each batch size it prefills `context` tokens, then times single cached greedy decode steps
(the model's forward with the KV cache, then argmax) and takes the median after a warm-up
(tokenmath.local.transformers_model).

The prediction is tokenmath's engine (tokenmath.infer) on the measured hardware file (`tokenmath measure`) at
100% of the measured figures (they are sustained figures, not datasheet peaks), in fp32 as the model runs, plus
the framework's per-call overhead as Efficiency.layer_overhead_s. That overhead is measured, not fitted: the same
architecture is built again with tiny widths (hidden 64, vocab 256), so its decode step holds no FLOPs or bytes
to speak of, and its step time over the layer count is what eager PyTorch and transformers add per layer
(the embedding, final norm, lm_head call and argmax are spread over the layers with it).

A second prediction, reported beside the first and never in its place: the same engine with its FLOP/s and
bandwidth scaled, at each batch, by the fraction of the roofline that a decode-shaped fp32 matmul (that many rows
times weights far larger than the caches) reached in `tokenmath measure` (measured.decode_matmul). On a CPU,
torch's small-M matmul streams weights far below STREAM bandwidth; this column shows how much of the error that
kernel accounts for. What neither prediction counts is listed in the notes (transformers' DynamicCache copies the
whole KV cache every step).

Requires torch and transformers (pip install 'tokenmath[verify]'); they are imported only inside the functions.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import numpy as np

from tokenmath.analyses.serving.hyperbola import hyperbola
from tokenmath.analyses.serving.infer import infer
from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg
from tokenmath.local.decode_matmul import DecodeTable, decode_efficiency, efficiency_at
from tokenmath.local.machine import check_device, machine_busy, meminfo, model_versions
from tokenmath.local.measure import measure
from tokenmath.local.model_configs import default_config, load_config, model_from_config, probe_config
from tokenmath.local.transformers_model import Timing, build_model, require_packages, time_decode
from tokenmath.local.verify_result import Row, Verification
from tokenmath.specs.catalog import looks_like_path, read_user_file
from tokenmath.specs.efficiency import Efficiency
from tokenmath.specs.hardware import Hardware, from_record, get_hardware
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
    require_packages()
    import torch
    prev_threads = torch.get_num_threads()
    if ins["threads"] is not None:
        torch.set_num_threads(ins["threads"])
    try:
        return _verify(ins, quick_measure, say, t_start)
    finally:
        torch.set_num_threads(prev_threads)


def _hardware(hardware, device: str, quick_measure: bool, say: Callable[[str], None],
              notes: list[str]) -> tuple[Hardware, str, DecodeTable]:
    """(the Hardware to predict on, where it came from, its decode-shaped matmul table): measured now unless given."""
    if hardware is None:
        say("no --hardware file: measuring this machine first" + (" (quick)" if quick_measure else ""))
        meas = measure(device=device, quick=quick_measure, progress=lambda m: say(f"measure: {m}"))
        rec = meas.record()
        hw = get_hardware(from_record(rec["id"], rec))
        return hw, f"measured now ({'quick' if quick_measure else 'full'} tokenmath measure)", meas.decode_matmul
    hw = get_hardware(hardware)
    if hw.kind != "cpu" and device == "cpu" or hw.kind == "cpu" and device == "cuda":
        notes.append(f"hardware {hw.id} is a {hw.kind}, the model runs on {device}")
    return hw, hardware if isinstance(hardware, str) else hw.id, _decode_table(hardware)


def _decode_table(hardware) -> DecodeTable:
    """measured.decode_matmul of a hardware file written by `tokenmath measure` ({} for anything else)."""
    if not isinstance(hardware, str) or not looks_like_path(hardware):
        return {}
    data = read_user_file(hardware, "hardware")
    if "memory_gb" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
        data = next(iter(data.values()))
    meas = data.get("measured")
    table = meas.get("decode_matmul") if isinstance(meas, dict) else None
    return table if isinstance(table, dict) else {}


def _fp32_hardware(hw: Hardware) -> Hardware:
    """The model runs every matmul (attention included) in fp32: predict with the fp32 figure alone, so the
    engine's bf16 key for attention falls back to it (a CPU's bf16 matmul can be 100x slower, and is not used)."""
    if hw.flops.get("fp32"):
        return hw.replace(flops=MappingProxyType({"fp32": hw.flops["fp32"]}))
    return hw


def _overhead_probe(cfg: dict, m: Model, ins: dict, say: Callable[[str], None],
                    notes: list[str]) -> tuple[dict[int, float], float]:
    """(batch -> median probe step s, framework overhead per layer s) from the same architecture at tiny widths."""
    say("overhead probe: the same architecture at hidden 64, vocab 256")
    batches = ins["batches"]
    try:
        probe = build_model(probe_config(cfg), ins["device"])
        pb = sorted({batches[0], batches[-1]})
        pt = time_decode(probe, ins["device"], pb, ins["context"], ins["warmup"], 2 * ins["steps"], say, label="probe ")
        probe_steps = {t.batch: t.median_s for t in pt}
        del probe
        return probe_steps, min(probe_steps.values()) / m.n_layers
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - an architecture whose widths cannot shrink this way: no overhead term
        notes.append(f"overhead probe failed ({type(e).__name__}: {e}); predicted without a per-layer overhead")
        return {}, 0.0


def _row(m: Model, hw: Hardware, t: Timing, eff: Efficiency, kern: dict[int, float]) -> Row:
    """The engine's prediction for one timed batch size, at 100% and with the decode-shaped matmul's fraction."""
    inp = max(1, round(t.cached_tokens_mean))
    r = infer(m, hw, batch=t.batch, input_len=inp, output_len=1, weight_dtype="fp32", kv_dtype="fp32",
              efficiency=eff)
    e = efficiency_at(kern, t.batch)
    rk = None
    if e:
        ek = Efficiency(e, e, 1.0, source=f"decode-shaped matmul at {t.batch} rows reaches {e:.0%} of the "
                        "hardware file's roofline (tokenmath measure)", layer_overhead_s=eff.layer_overhead_s)
        rk = infer(m, hw, batch=t.batch, input_len=inp, output_len=1, weight_dtype="fp32", kv_dtype="fp32",
                   efficiency=ek)
    if not r.fits:
        raise InputError("batches", f"batch {t.batch} at context {inp} does not fit in {hw.memory_bytes / 1e9:.3g} GB "
                         "by tokenmath's count", "smaller batches or a shorter --context")
    dec = r.decode
    overhead = m.n_layers * eff.layer_overhead_s
    return Row(t.batch, t.median_s, t.min_s, t.steps_s, float(r.decode_step_s),
               float(r.decode_step_s) - overhead, overhead, str(dec.bottleneck),
               float(np.asarray(dec.weight_bytes)), float(np.asarray(dec.kv_bytes)),
               float(np.asarray(dec.flops)), e,
               float(rk.decode_step_s) if rk is not None and rk.fits else None)


def _verify(ins: dict, quick_measure: bool, say: Callable[[str], None], t_start: float) -> Verification:
    import torch
    device, batches, context = ins["device"], ins["batches"], ins["context"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    busy = machine_busy()
    notes: list[str] = [busy] if busy else []
    hw, hw_source, decode_table = _hardware(ins["hardware"], device, quick_measure, say, notes)

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
    timings = time_decode(model, device, batches, context, ins["warmup"], ins["steps"], say)
    del model

    # per-layer framework overhead: the same layers at tiny widths
    probe_steps, per_layer = _overhead_probe(cfg, m, ins, say, notes)
    eff = Efficiency(1.0, 1.0, 1.0, source=f"measured on this machine ({hw_source}) at 100%; layer overhead from a "
                     f"tiny-width probe of the same model ({per_layer * 1e6:.0f} us per layer)",
                     layer_overhead_s=min(per_layer, 0.999))

    hw_pred = _fp32_hardware(hw)
    kern = decode_efficiency(decode_table, hw_pred.memory_bw, hw_pred.peak_flops("fp32")) if decode_table else {}
    if not kern:
        notes.append("the hardware file has no decode-shaped matmul figures (measured.decode_matmul): "
                     "no kernel-efficiency prediction")
    rows = tuple(_row(m, hw_pred, t, eff, kern) for t in timings)

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
                        seconds=time.perf_counter() - t_start, notes=tuple(notes))
