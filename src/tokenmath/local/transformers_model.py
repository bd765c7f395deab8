"""The real model `tokenmath verify` times: Hugging Face transformers' own causal LM built from a config dict
(AutoModelForCausalLM.from_config, random weights, fp32; never downloaded: HF_HUB_OFFLINE=1), and its cached greedy
decode steps timed per batch size. torch and transformers are imported only inside the functions."""
from __future__ import annotations

import copy
import importlib.util
import inspect
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenmath.base.errors import InputError
from tokenmath.base.install import install_hint
from tokenmath.local.timing import device_sync

if TYPE_CHECKING:   # torch stays unimported until a model is built
    import torch

def missing_packages() -> list[str]:
    """Which of torch and transformers cannot be imported (checked without importing them)."""
    return [p for p in ("torch", "transformers") if importlib.util.find_spec(p) is None]


def require_packages(gpu: bool = False) -> None:
    """InputError("verify") with the install line when torch or transformers is missing (torch's CPU build unless
    `gpu`)."""
    miss = missing_packages()
    if miss:
        raise InputError("verify", f"needs {' and '.join(miss)}, which {'is' if len(miss) == 1 else 'are'} not installed",
                         install_hint("verify", cpu_torch=not gpu))


def torch_device(device: str) -> torch.device:
    """torch's device; InputError("device") when CUDA is asked for and torch sees none."""
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "no CUDA device is visible to torch", "--device cpu")
    return torch.device(device)


def build_model(cfg: dict, device: str) -> torch.nn.Module:
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
    return model.to(dtype=torch.float32, device=torch_device(device)).eval()


def _forward_kwargs(model: torch.nn.Module) -> tuple[str, str | None]:
    """(the cache keyword, the keep-only-last-logits keyword) of this transformers version's forward."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    keep = "logits_to_keep" if "logits_to_keep" in params else ("num_logits_to_keep" if "num_logits_to_keep" in params else None)
    return cache_kw, keep


@dataclass(frozen=True)
class Timing:
    """The timed decode steps of one batch size, in seconds."""
    batch: int
    steps_s: tuple[float, ...]
    cached_tokens_mean: float        # KV-cache length averaged over the timed steps (tokens)

    @property
    def median_s(self) -> float:
        return statistics.median(self.steps_s)

    @property
    def min_s(self) -> float:
        return min(self.steps_s)


def time_decode_together(runs: list[tuple[torch.nn.Module, list[int], str]], device: str, context: int, warmup: int,
                         steps: int, say: Callable[[str], None] | None = None) -> list[list[Timing]]:
    """For each (model, batch sizes, label): prefill `context` tokens once (batch 1), repeat that KV cache over each
    batch size (identical prompts: the bytes a step reads are those of distinct ones), then run decode steps
    round-robin over every model's batch sizes, `warmup` untimed rounds and `steps` timed ones; a step is the forward
    with the cache plus the greedy argmax (synchronised on CUDA). Round-robin spreads any drift in the machine's load
    over every batch size, and every model, alike (verify's tiny-width probe is timed in the same rounds as the
    model it is the overhead of)."""
    import torch
    from transformers import DynamicCache
    say = say or (lambda msg: None)
    dev = torch_device(device)
    sync = device_sync(device)
    slots = []                                   # (run index, batch, model, cache keyword, [cache, token])
    with torch.inference_mode():
        for ri, (model, batches, label) in enumerate(runs):
            cache_kw, keep_kw = _forward_kwargs(model)
            cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(0, int(cfg.vocab_size), (1, context), generator=g).to(dev)
            cache = DynamicCache()
            kw = {cache_kw: cache, "use_cache": True}
            if keep_kw:
                kw[keep_kw] = 1
            t0 = time.perf_counter()
            o = model(input_ids=ids, **kw)
            sync()
            say(f"{label}prefill of {context} tokens: {time.perf_counter() - t0:.2f} s")
            first = o.logits[:, -1:].argmax(-1)
            for b in batches:
                c = copy.deepcopy(cache)
                if b > 1:
                    c.batch_repeat_interleave(b)
                slots.append((ri, b, model, cache_kw, [c, first.repeat_interleave(b, dim=0)]))
            del cache, o
        times: list[list[float]] = [[] for _ in slots]
        for r in range(warmup + steps):
            for i, (_, _, model, cache_kw, st) in enumerate(slots):
                c, tok = st
                sync()
                t0 = time.perf_counter()
                o = model(input_ids=tok, **{cache_kw: c, "use_cache": True})
                tok = o.logits[:, -1:].argmax(-1)
                sync()
                dt = time.perf_counter() - t0
                st[1] = tok
                if r >= warmup:
                    times[i].append(dt)
            if r >= warmup and (r - warmup + 1) % max(1, steps // 2) == 0:
                for ri, (_, _, label) in enumerate(runs):
                    say(f"{label}round {r - warmup + 1}/{steps}: "
                        + ", ".join(f"B={b} {statistics.median(times[i]) * 1e3:.3g} ms"
                                    for i, (rj, b, *_) in enumerate(slots) if rj == ri))
        keys = [(ri, b) for ri, b, *_ in slots]
        del slots
    cached = context + warmup + (steps - 1) / 2
    return [[Timing(int(b), tuple(t), cached) for (rj, b), t in zip(keys, times) if rj == ri]
            for ri in range(len(runs))]
