"""Verify tokenmath against a real transformer on this machine: measured vs predicted decode step per batch size.

The model is Hugging Face transformers' own implementation (AutoModelForCausalLM.from_config: nothing on this
project wrote it), with random weights (nothing is downloaded: from_config, never from_pretrained, and
HF_HUB_OFFLINE=1). For each batch size it prefills `context` tokens, then times single cached greedy decode steps
(the model's forward with the KV cache, then argmax) and takes the median after a warm-up.

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

import copy
import importlib.util
import inspect
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from tokenmath.base.errors import InputError

INSTALL_HINT = "pip install 'tokenmath[verify]'"
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_CONTEXT = 256
MAX_BATCH = 4096

# A Llama-style decoder sized for a 2-core machine: 12 layers of width 1024 with GQA (16 query heads, 4 KV heads),
# SwiGLU 2816, vocab 32000, untied: 201M parameters, 0.80 GB in fp32. A decode step reads all of it, tens of ms at
# a CPU's 20-30 GB/s; fp32 matmuls on two cores (~0.1 TFLOP/s) turn compute-bound within the batches 1-64.
DEFAULT_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "torch_dtype": "float32",
}
# on a GPU the same code at Llama-2-7B widths (layers chosen to fit a quarter of the memory)
GPU_WIDTHS = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 8}

# keys that shrink a config to its tiny overhead probe (the same layers, next to no FLOPs or bytes)
PROBE_SIZES = {"hidden_size": 64, "intermediate_size": 128, "vocab_size": 256, "head_dim": 16,
               "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "q_lora_rank": 16,
               "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "n_embd": 64,
               "n_inner": 128}


def missing_packages() -> list[str]:
    """Which of torch and transformers cannot be imported (checked without importing them)."""
    return [p for p in ("torch", "transformers") if importlib.util.find_spec(p) is None]


def require_packages() -> None:
    miss = missing_packages()
    if miss:
        raise InputError("verify", f"needs {' and '.join(miss)}, which {'is' if len(miss) == 1 else 'are'} not installed",
                         f"{INSTALL_HINT} (a CPU build of torch is enough)")


def _noop(msg: str) -> None:
    pass


# ---- configs ---------------------------------------------------------------------------------------------------
def default_config(device: str = "cpu", memory_bytes: float | None = None) -> dict:
    """The built-in config, sized to the device: the 201M-parameter model on a CPU (fewer layers when memory is
    short), Llama-2-7B widths on a GPU with as many layers (up to 32) as fit a quarter of its memory in fp32."""
    cfg = dict(DEFAULT_CONFIG)
    if device == "cuda":
        cfg.update(GPU_WIDTHS)
        per_layer = 4 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 11008)
        emb = 4 * 2 * 4096 * 32000
        budget = (memory_bytes or 80e9) / 4
        cfg["num_hidden_layers"] = int(max(2, min(32, (budget - emb) // per_layer)))
    elif memory_bytes:
        per_layer = 4 * (2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 2816)
        emb = 4 * 2 * 1024 * 32000
        fit = int((memory_bytes / 4 - emb) // per_layer)
        cfg["num_hidden_layers"] = int(max(2, min(12, fit)))
    return cfg


def load_config(path: str | os.PathLike) -> dict:
    from tokenmath.specs.catalog import read_user_file
    data = read_user_file(path, "config")
    return data


def probe_config(cfg: dict) -> dict:
    """The same architecture with tiny widths: its decode step is all framework overhead."""
    p = dict(cfg)
    for k, v in PROBE_SIZES.items():
        if k in p and p[k] is not None:
            p[k] = v
    heads = int(p.get("num_attention_heads") or p.get("n_head") or 4)
    kv = int(p.get("num_key_value_heads") or heads)
    if "num_attention_heads" in p:
        p["num_attention_heads"] = 4
        if "num_key_value_heads" in p:
            p["num_key_value_heads"] = 1 if kv < heads else 4
    if "n_head" in p:
        p["n_head"] = 4
    if p.get("head_dim") is not None:
        p["head_dim"] = 16
    if "text_config" in p and isinstance(p["text_config"], dict):
        p["text_config"] = probe_config(p["text_config"])
    return p


# ---- torch side ------------------------------------------------------------------------------------------------
def _device(device: str):
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "no CUDA device is visible to torch", "--device cpu")
    return torch.device(device)


def build_model(cfg: dict, device: str):
    """transformers' own causal LM from a config dict, random weights, fp32, eval mode. Never downloads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    d = {k: v for k, v in cfg.items() if k not in ("auto_map", "quantization_config", "_name_or_path")}
    mt = d.pop("model_type", None)
    if not mt:
        raise InputError("config.model_type", "missing", "a Hugging Face config.json with model_type")
    try:
        hf_cfg = AutoConfig.for_model(mt, **d)
    except (ValueError, KeyError, TypeError) as e:
        raise InputError("config", f"transformers cannot build a {mt!r} config: {e}", "a config.json transformers knows") from None
    torch.manual_seed(0)
    try:
        model = AutoModelForCausalLM.from_config(hf_cfg)
    except (ValueError, KeyError) as e:
        raise InputError("config", f"transformers has no causal LM for {mt!r}: {e}", "a causal LM config") from None
    return model.to(dtype=torch.float32, device=_device(device)).eval()


def _forward_kwargs(model) -> tuple[str, str | None]:
    """(the cache keyword, the keep-only-last-logits keyword) of this transformers version's forward."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    keep = "logits_to_keep" if "logits_to_keep" in params else ("num_logits_to_keep" if "num_logits_to_keep" in params else None)
    return cache_kw, keep


def _new_cache():
    from transformers import DynamicCache
    return DynamicCache()


@dataclass
class Timing:
    batch: int
    steps_s: list[float]
    cached_tokens_mean: float

    @property
    def median_s(self) -> float:
        return statistics.median(self.steps_s)

    @property
    def min_s(self) -> float:
        return min(self.steps_s)


def time_decode(model, device: str, batches, context: int, warmup: int, steps: int,
                say: Callable[[str], None] = _noop, label: str = "") -> list[Timing]:
    """Prefill `context` tokens once (batch 1), repeat that KV cache over each batch size (identical prompts: the
    bytes a step reads are those of distinct ones), then run decode steps round-robin over the batch sizes,
    `warmup` untimed rounds and `steps` timed ones; a step is the forward with the cache plus the greedy argmax
    (synchronised on CUDA). Round-robin spreads any drift in the machine's load over every batch size alike."""
    import torch
    dev = _device(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    cache_kw, keep_kw = _forward_kwargs(model)
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    vocab = int(cfg.vocab_size)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, context), generator=g).to(dev)
    with torch.inference_mode():
        cache = _new_cache()
        kw = {cache_kw: cache, "use_cache": True}
        if keep_kw:
            kw[keep_kw] = 1
        t0 = time.perf_counter()
        o = model(input_ids=ids, **kw)
        sync()
        say(f"{label}prefill of {context} tokens: {time.perf_counter() - t0:.2f} s")
        first = o.logits[:, -1:].argmax(-1)
        state = {}
        for b in batches:
            c = copy.deepcopy(cache)
            if b > 1:
                c.batch_repeat_interleave(b)
            state[b] = [c, first.repeat_interleave(b, dim=0)]
        del cache, o
        times: dict[int, list[float]] = {b: [] for b in batches}
        for r in range(warmup + steps):
            for b in batches:
                c, tok = state[b]
                sync()
                t0 = time.perf_counter()
                o = model(input_ids=tok, **{cache_kw: c, "use_cache": True})
                tok = o.logits[:, -1:].argmax(-1)
                sync()
                dt = time.perf_counter() - t0
                state[b][1] = tok
                if r >= warmup:
                    times[b].append(dt)
            if r >= warmup and (r - warmup + 1) % max(1, steps // 2) == 0:
                say(f"{label}round {r - warmup + 1}/{steps}: "
                    + ", ".join(f"B={b} {statistics.median(times[b]) * 1e3:.3g} ms" for b in batches))
        del state
    return [Timing(int(b), times[b], context + warmup + (steps - 1) / 2) for b in batches]


# ---- the comparison --------------------------------------------------------------------------------------------
@dataclass
class Row:
    batch: int
    measured_step_s: float
    measured_min_s: float
    measured_steps_s: list[float]
    predicted_step_s: float
    predicted_roofline_s: float      # the engine's per-op roofline at the measured figures, without overhead
    predicted_overhead_s: float      # n_layers x layer_overhead_s
    bottleneck: str
    weight_bytes: float
    kv_bytes: float
    flops: float
    kernel_efficiency: float | None = None     # decode-shaped matmul's fraction of the roofline at this batch
    predicted_kernel_step_s: float | None = None

    @property
    def error(self) -> float:
        return (self.predicted_step_s - self.measured_step_s) / self.measured_step_s

    @property
    def kernel_error(self) -> float | None:
        if self.predicted_kernel_step_s is None:
            return None
        return (self.predicted_kernel_step_s - self.measured_step_s) / self.measured_step_s

    def to_dict(self) -> dict:
        return {"batch": self.batch, "measured_step_s": self.measured_step_s,
                "predicted_step_s": self.predicted_step_s, "error": self.error,
                "measured_min_step_s": self.measured_min_s, "measured_steps_s": self.measured_steps_s,
                "predicted_roofline_s": self.predicted_roofline_s, "predicted_overhead_s": self.predicted_overhead_s,
                "measured_per_token_s": self.measured_step_s / self.batch,
                "predicted_per_token_s": self.predicted_step_s / self.batch,
                "kernel_efficiency": self.kernel_efficiency,
                "predicted_kernel_step_s": self.predicted_kernel_step_s, "kernel_error": self.kernel_error,
                "bottleneck": self.bottleneck, "weight_bytes_read": self.weight_bytes,
                "kv_bytes_read": self.kv_bytes, "flops": self.flops}


def knee_batch(batches, steps) -> float | None:
    """Where the hyperbola flattens: per-token time ~ step(1)/B + floor, with the floor read off the largest batch
    (step(Bmax)/Bmax); the 1/B term equals the floor at B = step(1) x Bmax / step(Bmax). None without batch 1."""
    b = list(batches)
    if 1 not in b or len(b) < 2:
        return None
    s1 = steps[b.index(1)]
    i = int(np.argmax(b))
    return float(s1 * b[i] / steps[i])


@dataclass
class Verification:
    config: dict
    model_name: str
    params_total: float
    weights_bytes: float
    kv_bytes_per_token: float
    n_layers: int
    device: str
    context: int
    warmup: int
    steps: int
    hardware: object                 # tokenmath Hardware used for the prediction
    hardware_source: str
    efficiency: object
    probe_steps_s: dict              # batch -> median probe step
    rows: list[Row]
    critical_batch: int | None
    versions: dict
    threads: int
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def overhead_per_layer_s(self) -> float:
        return float(self.efficiency.layer_overhead_s)

    @property
    def measured_knee(self):
        return knee_batch([r.batch for r in self.rows], [r.measured_step_s for r in self.rows])

    @property
    def predicted_knee(self):
        return knee_batch([r.batch for r in self.rows], [r.predicted_step_s for r in self.rows])

    def summary(self) -> dict:
        errs = [abs(r.error) for r in self.rows]
        mk, pk = self.measured_knee, self.predicted_knee
        out = {"median_abs_error": statistics.median(errs), "max_abs_error": max(errs),
               "within_25pct": sum(e <= 0.25 for e in errs), "rows": len(errs),
               "measured_knee_batch": mk, "predicted_knee_batch": pk,
               "knee_ratio": (pk / mk) if mk and pk else None}
        kerr = [abs(r.kernel_error) for r in self.rows if r.kernel_error is not None]
        if kerr and len(kerr) == len(self.rows):
            kk = knee_batch([r.batch for r in self.rows], [r.predicted_kernel_step_s for r in self.rows])
            out.update(kernel_median_abs_error=statistics.median(kerr), kernel_max_abs_error=max(kerr),
                       kernel_within_25pct=sum(e <= 0.25 for e in kerr), kernel_knee_batch=kk,
                       kernel_knee_ratio=(kk / mk) if mk and kk else None)
        return out

    def to_dict(self) -> dict:
        hw = self.hardware
        return {
            "model": {"name": self.model_name, "params_total": self.params_total, "weights_bytes": self.weights_bytes,
                      "kv_bytes_per_token": self.kv_bytes_per_token, "n_layers": self.n_layers,
                      "dtype": "fp32", "config": self.config},
            "device": self.device, "context": self.context, "warmup_steps": self.warmup, "timed_steps": self.steps,
            "hardware": {"id": hw.id, "name": hw.name, "source": self.hardware_source,
                         "memory_bw_bytes_per_s": hw.memory_bw, "flops_per_s": dict(hw.flops),
                         "memory_bytes": hw.memory_bytes},
            "efficiency": {"flops": self.efficiency.flops, "memory_bw": self.efficiency.memory_bw,
                           "link_bw": self.efficiency.link_bw, "layer_overhead_s": self.overhead_per_layer_s,
                           "source": self.efficiency.source},
            "overhead_probe_step_s": {str(k): v for k, v in self.probe_steps_s.items()},
            "rows": [r.to_dict() for r in self.rows],
            "critical_batch": self.critical_batch,
            "summary": self.summary(),
            "versions": self.versions, "threads": self.threads, "seconds": self.seconds, "notes": self.notes,
        }

    def explain(self) -> str:
        hw, L = self.hardware, []
        L.append(f"Verify: {self.model_name} ({self.params_total / 1e6:,.0f}M params, {self.weights_bytes / 1e9:.3g} GB "
                 f"fp32) decoding on {self.device}, context {self.context} tokens")
        L.append(f"  hardware ({self.hardware_source}): {hw.memory_bw / 1e9:.3g} GB/s, "
                 + ", ".join(f"{k} {v / 1e9:.3g} GFLOP/s" for k, v in hw.flops.items()) + ", used at 100%")
        L.append(f"  weight read per step = {self.weights_bytes / 1e9:.3g} GB / {hw.memory_bw / 1e9:.3g} GB/s = "
                 f"{self.weights_bytes / hw.memory_bw * 1e3:.3g} ms; FLOPs per token = "
                 f"{self.rows[0].flops / self.rows[0].batch / 1e9:.3g} GFLOP at {hw.peak_flops('fp32') / 1e9:.3g} GFLOP/s")
        L.append(f"  overhead: {self.overhead_per_layer_s * 1e6:.0f} us per layer x {self.n_layers} layers = "
                 f"{self.overhead_per_layer_s * self.n_layers * 1e3:.3g} ms per step (tiny-width probe of the same model)")
        for r in self.rows:
            L.append(f"  B={r.batch:<4d} predicted {r.predicted_roofline_s * 1e3:8.2f} ms roofline "
                     f"(weights {r.weight_bytes / 1e6:,.0f} MB, KV {r.kv_bytes / 1e6:,.1f} MB, {r.flops / 1e9:,.1f} GFLOP) "
                     f"+ {r.predicted_overhead_s * 1e3:.2f} ms overhead = {r.predicted_step_s * 1e3:8.2f} ms "
                     f"({r.bottleneck}); measured {r.measured_step_s * 1e3:8.2f} ms; error {r.error:+.0%}")
            if r.predicted_kernel_step_s is not None:
                L.append(f"         with the decode-shaped matmul reaching {r.kernel_efficiency:.0%} of the roofline at "
                         f"{r.batch} rows: {r.predicted_kernel_step_s * 1e3:8.2f} ms; error {r.kernel_error:+.0%}")
        for n in self.notes:
            L.append(f"  note: {n}")
        return "\n".join(L)


def _versions() -> dict:
    import platform

    import torch
    import transformers

    from tokenmath import __version__
    return {"tokenmath": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__, "python": platform.python_version()}


def _fp32_hardware(hw):
    """The model runs every matmul (attention included) in fp32: predict with the fp32 figure alone, so the
    engine's bf16 key for attention falls back to it (a CPU's bf16 matmul can be 100x slower, and is not used)."""
    if hw.flops.get("fp32"):
        return hw.replace(flops=MappingProxyType({"fp32": hw.flops["fp32"]}))
    return hw


def parse_batches(spec) -> list[int]:
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
        if not 1 <= v <= MAX_BATCH:
            raise InputError("batches", f"{v} is out of range", f"batch sizes from 1 to {MAX_BATCH}")
        out.append(v)
    if not out:
        raise InputError("batches", "empty", "a comma-separated list such as 1,2,4,8")
    return sorted(set(out))


def model_from_config(cfg: dict, name: str):
    """tokenmath's Model of the config as the verify run builds it (fp32, whatever the checkpoint's dtype)."""
    from tokenmath.specs.hf_config import model_from_hf_config
    return model_from_hf_config({**cfg, "torch_dtype": "float32"}, name=name)


def check_inputs(config=None, batches=DEFAULT_BATCHES, context=DEFAULT_CONTEXT, device="cpu", hardware=None,
                 warmup=2, steps=8, threads=None) -> dict:
    """Every input checked before anything slow (and before torch is looked for): InputError names the field."""
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.base.validators import int_arg
    device = str(device).lower()
    if device not in ("cpu", "cuda"):
        raise InputError("device", f"unknown device {device!r}", "cpu or cuda")
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
    say = progress or _noop
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


def _verify(ins: dict, quick_measure: bool, say, t_start: float) -> Verification:
    import torch

    from tokenmath.specs.efficiency import Efficiency
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.kv_cache import kv_bytes_per_token
    from tokenmath.specs.params import count_params
    from tokenmath.analyses.serving.infer import infer
    device, batches, context, warmup, steps = ins["device"], ins["batches"], ins["context"], ins["warmup"], ins["steps"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tokenmath.local.measure import machine_busy
    busy = machine_busy()
    notes: list[str] = [busy] if busy else []
    # hardware first: measured unless given
    hardware = ins["hardware"]
    if hardware is None:
        from tokenmath.local.measure import measure
        say("no --hardware file: measuring this machine first" + (" (quick)" if quick_measure else ""))
        meas = measure(device=device, quick=quick_measure, progress=lambda m: say(f"measure: {m}"))
        hw = get_hardware(_record_hardware(meas.record()))
        hw_source = f"measured now ({'quick' if quick_measure else 'full'} tokenmath measure)"
        decode_table = meas.decode_matmul
    else:
        hw = get_hardware(hardware)
        hw_source = hardware if isinstance(hardware, str) else hw.id
        decode_table = _decode_table(hardware)
        if hw.kind != "cpu" and device == "cpu" or hw.kind == "cpu" and device == "cuda":
            notes.append(f"hardware {hw.id} is a {hw.kind}, the model runs on {device}")

    # config
    if ins["config"] is None:
        cfg = default_config(device, hw.memory_bytes)
        name = f"built-in Llama-style ({cfg['num_hidden_layers']} layers, d={cfg['hidden_size']})"
        m = model_from_config(cfg, name)
    else:
        cfg, name, m = ins["config"], ins["name"], ins["model"]
    P = count_params(m)
    wbytes = 4.0 * P.total
    from tokenmath.local.measure import meminfo
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
    timings = time_decode(model, device, batches, context, warmup, steps, say)
    del model

    # per-layer framework overhead: the same layers at tiny widths
    say("overhead probe: the same architecture at hidden 64, vocab 256")
    pcfg = probe_config(cfg)
    try:
        probe = build_model(pcfg, device)
        pb = sorted({batches[0], batches[-1]})
        pt = time_decode(probe, device, pb, context, warmup, 2 * steps, say, label="probe ")
        probe_steps = {t.batch: t.median_s for t in pt}
        per_layer = min(probe_steps.values()) / m.n_layers
        del probe
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - an architecture whose widths cannot shrink this way: no overhead term
        probe_steps = {}
        per_layer = 0.0
        notes.append(f"overhead probe failed ({type(e).__name__}: {e}); predicted without a per-layer overhead")
    eff = Efficiency(1.0, 1.0, 1.0, source=f"measured on this machine ({hw_source}) at 100%; layer overhead from a "
                     f"tiny-width probe of the same model ({per_layer * 1e6:.0f} us per layer)",
                     layer_overhead_s=min(per_layer, 0.999))

    hw_pred = _fp32_hardware(hw)
    from tokenmath.local.measure import decode_efficiency, efficiency_at
    kern = decode_efficiency(decode_table, hw_pred.memory_bw, hw_pred.peak_flops("fp32")) if decode_table else {}
    if not kern:
        notes.append("the hardware file has no decode-shaped matmul figures (measured.decode_matmul): "
                     "no kernel-efficiency prediction")
    rows = []
    for t in timings:
        inp = max(1, round(t.cached_tokens_mean))
        r = infer(m, hw_pred, batch=t.batch, input_len=inp, output_len=1, weight_dtype="fp32", kv_dtype="fp32",
                  efficiency=eff)
        e = efficiency_at(kern, t.batch)
        rk = None
        if e:
            ek = Efficiency(e, e, 1.0, source=f"decode-shaped matmul at {t.batch} rows reaches {e:.0%} of the "
                            "hardware file's roofline (tokenmath measure)", layer_overhead_s=eff.layer_overhead_s)
            rk = infer(m, hw_pred, batch=t.batch, input_len=inp, output_len=1, weight_dtype="fp32", kv_dtype="fp32",
                       efficiency=ek)
        if not r.fits:
            raise InputError("batches", f"batch {t.batch} at context {inp} does not fit in {hw.memory_bytes / 1e9:.3g} GB "
                             "by tokenmath's count", "smaller batches or a shorter --context")
        dec = r.decode
        overhead = m.n_layers * eff.layer_overhead_s
        rows.append(Row(t.batch, t.median_s, t.min_s, t.steps_s, float(r.decode_step_s),
                        float(r.decode_step_s) - overhead, overhead, str(dec.bottleneck),
                        float(np.asarray(dec.weight_bytes)), float(np.asarray(dec.kv_bytes)),
                        float(np.asarray(dec.flops)), e,
                        float(rk.decode_step_s) if rk is not None and rk.fits else None))

    kvt = float(kv_bytes_per_token(m, 4.0))
    big = max(timings, key=lambda t: t.batch)
    copy_bytes = 2.0 * big.batch * big.cached_tokens_mean * kvt
    notes.append(f"transformers' DynamicCache grows by torch.cat: every step copies each layer's whole KV cache "
                 f"(read + write, {copy_bytes / 1e6:,.0f} MB at batch {big.batch}, "
                 f"{copy_bytes / hw_pred.memory_bw * 1e3:.3g} ms at {hw_pred.memory_bw / 1e9:.3g} GB/s), which the "
                 "engine, modelling an in-place (paged) cache as serving engines keep, does not count")
    crit = None
    try:
        from tokenmath.analyses.serving.hyperbola import hyperbola
        h = hyperbola(m, hw_pred, context=context, weight_dtype="fp32", kv_dtype="fp32", efficiency=eff, max_points=64)
        crit = h.critical_batch
    except InputError:
        pass
    v = Verification(cfg, m.name, P.total, wbytes, kvt, m.n_layers, device, context,
                     warmup, steps, hw_pred, hw_source, eff, probe_steps, rows, crit, _versions(),
                     torch.get_num_threads(), notes=notes)
    v.seconds = time.perf_counter() - t_start
    return v


def _decode_table(hardware) -> dict:
    """measured.decode_matmul of a hardware file written by `tokenmath measure` ({} for anything else)."""
    if not isinstance(hardware, str):
        return {}
    from tokenmath.specs.catalog import looks_like_path, read_user_file
    if not looks_like_path(hardware):
        return {}
    data = read_user_file(hardware, "hardware")
    if "memory_gb" not in data and len(data) == 1 and isinstance(next(iter(data.values())), dict):
        data = next(iter(data.values()))
    meas = data.get("measured")
    table = meas.get("decode_matmul") if isinstance(meas, dict) else None
    return table if isinstance(table, dict) else {}


def _record_hardware(rec: dict):
    from tokenmath.specs.hardware import from_record
    return from_record(rec["id"], rec)


def result_json(v: Verification) -> str:
    return json.dumps(v.to_dict(), indent=2, allow_nan=False, default=float)


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)
