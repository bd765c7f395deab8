#!/usr/bin/env python
"""Fuzz tokenmath's input loaders: every input must load or raise InputError naming a field.

    python benchmarks/fuzz_loaders.py                 # 10,000 generated inputs per loader, seed 0
    python benchmarks/fuzz_loaders.py -n 50000 --seed 7 --save /tmp/crashes --cli 60

Loaders under test (issue 11, part 2):
  hf_config      tokenmath.specs.hf_config.model_from_hf_config(dict)
  model_file     tokenmath.specs.model_catalog.get_model(path)        (config.json / .toml files)
  hardware_file  tokenmath.specs.hardware.get_hardware(path)  (hardware .toml / .json files)

Inputs start from real data (tests/fixtures/*.json, a few synthesized configs for the other supported families,
and every record of the hardware catalog) and are mutated: keys deleted, types changed, numbers scaled to absurd
magnitudes (1e30 layers, negative sizes, NaN, Infinity, 10**400), model_type swapped across families; files are
also truncated, byte-corrupted, re-encoded (non-UTF-8, UTF-16, BOM), wrapped in arrays, nested deeply, emptied
or padded past the size limit.

An outcome is
  loaded    the loader returned; then the loaded spec must serve a question (tokenmath.infer on a reference
            partner) that either answers with JSON-safe numbers (no NaN/inf) or raises InputError;
  rejected  InputError with a non-empty field and problem;
  crash     anything else: another exception, an InputError without a field, a hang (> --timeout s), or NaN in
            the answer. The run exits 1 when any input crashes.

With --cli N, N of the rejected files also go through the command line (`tokenmath infer --model FILE --json`
or `--hardware FILE`): each must exit 2 and print one JSON {"error": {...}} object, and no traceback.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

from tokenmath.specs.catalog import MAX_FILE_BYTES
from tokenmath.base.errors import InputError
from tokenmath.specs.hardware import FLOP_KEYS, KNOWN_KEYS, get_hardware
from tokenmath.specs.hf_config import SUPPORTED, model_from_hf_config
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model

LOADERS = ("hf_config", "model_file", "hardware_file")

# Crash kinds found earlier and fixed (regression tests in tests/test_fuzz_loaders.py). A recurrence still counts
# as a crash; the summary only labels it so that a new kind stands out.
KNOWN = {
    "B1 unhashable architectures[0]": re.compile(r"TypeError: .*unhashable type.*\[hf_config\.py"),
    "B2 integer literal over 4300 digits in a file": re.compile(r"ValueError: Exceeds the limit.*\[catalog\.py"),
    "B3 deeply nested TOML": re.compile(r"RecursionError.*\[catalog\.py"),
    "B4 error message prints an int over 4300 digits": re.compile(
        r"ValueError: Exceeds the limit.*\[(hf_config|model|hardware)\.py"),
    "B5 a TOML file just under the 2 MB limit takes seconds to parse": re.compile(r"^Hang: .*\(TOML\)"),
}


# ---- seeds ------------------------------------------------------------------------------------------------------
SYNTHETIC_HF = [
    {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024},
    {"model_type": "gemma2", "hidden_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 8,
     "head_dim": 256, "num_hidden_layers": 42, "vocab_size": 256000, "intermediate_size": 14336,
     "sliding_window": 4096, "hidden_activation": "gelu_pytorch_tanh", "torch_dtype": "bfloat16"},
    {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "torch_dtype": "bfloat16",
     "text_config": {"hidden_size": 5376, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                     "num_hidden_layers": 62, "vocab_size": 262208, "intermediate_size": 21504,
                     "sliding_window": 1024, "sliding_window_pattern": 6}},
    {"model_type": "phi3", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 10,
     "num_hidden_layers": 40, "vocab_size": 100352, "intermediate_size": 17920, "max_position_embeddings": 16384},
    {"model_type": "qwen2_moe", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16,
     "num_hidden_layers": 24, "vocab_size": 151936, "intermediate_size": 5632, "moe_intermediate_size": 1408,
     "num_experts": 60, "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632,
     "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False, "sliding_window": 32768},
    {"model_type": "deepseek_v2", "hidden_size": 5120, "num_attention_heads": 128, "num_hidden_layers": 60,
     "vocab_size": 102400, "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160,
     "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1, "q_lora_rank": 1536,
     "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
     "quantization_config": {"quant_method": "fp8"}},
    {"architectures": ["MistralForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
     "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 14336,
     "sliding_window": 4096, "quantization_config": {"quant_method": "awq", "bits": 4}},
]

HF_KEYS = sorted({"model_type", "architectures", "hidden_size", "num_attention_heads", "num_key_value_heads",
                  "num_hidden_layers", "vocab_size", "intermediate_size", "head_dim", "max_position_embeddings",
                  "tie_word_embeddings", "attention_bias", "mlp_bias", "num_local_experts", "num_experts",
                  "num_experts_per_tok", "experts_per_token", "moe_intermediate_size", "decoder_sparse_step",
                  "mlp_only_layers", "shared_expert_intermediate_size", "q_lora_rank", "kv_lora_rank",
                  "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts",
                  "first_k_dense_replace", "moe_layer_freq", "topk_method", "sliding_window", "use_sliding_window",
                  "layer_types", "sliding_window_pattern", "_sliding_window_pattern", "text_config",
                  "quantization_config", "torch_dtype", "dtype", "hidden_act", "hidden_activation", "n_embd",
                  "n_layer", "n_head", "n_inner", "n_positions"})
HW_KEYS = list(KNOWN_KEYS) + ["memory_bw_tb", "tflop", "memory", "bf16"]


def hf_seeds() -> list[dict]:
    out = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]
    return out + [json.loads(json.dumps(d)) for d in SYNTHETIC_HF]


def hw_seeds() -> list[dict]:
    from importlib import resources
    cat = tomllib.loads(resources.files("tokenmath").joinpath("data", "hardware.toml").read_text("utf-8"))
    return [dict(rec) for rec in cat.values()]


# ---- mutations --------------------------------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
ABSURD = [None, True, False, 0, -1, 1, 2, 3, 7, -7, 10**9, -10**9, 10**30, 1e30, -1e30, 1e-30, 1e308, NAN, INF, -INF,
          0.5, 1.5, -0.0, 2**63, 2**64, 10**400, "", "x", "4096", "nan", "Infinity", "bfloat16", [], [1, 2], [None],
          {}, {"a": 1}, [[]], [[1]], [{}], "a" * 5000]
PY_ONLY = [10**5000, -(10**5000)]      # beyond what a JSON or TOML file can carry (their parsers refuse it first)
MODEL_TYPES = list(SUPPORTED) + ["gemma4", "llama4", "mistral3", "bert", "", "LLAMA", "gpt-2"]
NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)?([eE][+-]?\d+)?")
NUMBER_SWAPS = ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e30", "-5", "0", "0x10", "1_000",
                "+5", "01", ".5", "5.", "1e", "--1", "true", "null", '"7"', "[1]", "{}", "4.0", "1e-400"]


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _paths(d, prefix=()):
    """Every (path, value) inside nested dicts and lists."""
    yield prefix, d
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d[:64]):
            yield from _paths(v, prefix + (i,))


def _set(root, path, value):
    if not path:
        return value
    cur = root
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return root


def _delete(root, path):
    cur = root
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return root


def _random_value(rng: random.Random, py_only: bool):
    r = rng.random()
    if r < 0.6:
        pool = ABSURD + (PY_ONLY if py_only else [])
        return rng.choice(pool)
    if r < 0.8:
        return rng.choice([rng.randint(-10, 10), rng.randint(1, 1 << 20), rng.uniform(-1e6, 1e6),
                           10.0 ** rng.randint(-40, 40), rng.randint(1, 10) * 10 ** rng.randint(1, 60)])
    if r < 0.9:
        return rng.choice([[rng.choice(["sliding_attention", "full_attention", "x", 1, None])
                            for _ in range(rng.randint(0, 130))],
                           [rng.randint(-3, 100) for _ in range(rng.randint(0, 70))]])
    return {"quant_method": rng.choice(["fp8", "mxfp4", "gptq", "awq", 1, None, [], "FP8"]),
            "bits": rng.choice([4, 8, "4", None, 4.0, [4]])}


def mutate_dict(seed: dict, rng: random.Random, keys: list[str], py_only: bool, extra_seeds: list[dict] = ()):
    """A copy of `seed` with 1-5 random mutations; occasionally not a dict at all."""
    d = json.loads(json.dumps(seed))
    for _ in range(rng.randint(1, 5)):
        if not isinstance(d, dict):
            break
        paths = [p for p, _ in _paths(d) if p]
        op = rng.random()
        try:
            if op < 0.18 and paths:                                      # delete a key or list item
                _delete(d, rng.choice(paths))
            elif op < 0.40:                                              # a known key gets an absurd value
                k = rng.choice(keys)
                target = d
                if "text_config" in d and isinstance(d["text_config"], dict) and rng.random() < 0.5:
                    target = d["text_config"]
                target[k] = _random_value(rng, py_only)
            elif op < 0.55 and paths:                                    # any leaf gets an absurd value
                d = _set(d, rng.choice(paths), _random_value(rng, py_only))
            elif op < 0.70:                                              # scale a number
                nums = [p for p, v in _paths(d) if p and _numeric(v)]
                if nums:
                    p = rng.choice(nums)
                    cur = d
                    for q in p[:-1]:
                        cur = cur[q]
                    v = cur[p[-1]]
                    factor = rng.choice([0, -1, 1e-9, 0.5, 1.5, 2, 1e3, 1e6, 1e30, 1e300, NAN, INF])
                    try:
                        cur[p[-1]] = v * factor if rng.random() < 0.7 else int(v * factor)
                    except (OverflowError, ValueError):
                        cur[p[-1]] = INF
            elif op < 0.80 and paths:                                    # change a value's type
                p = rng.choice(paths)
                cur = d
                for q in p[:-1]:
                    cur = cur[q]
                v = cur[p[-1]]
                cur[p[-1]] = rng.choice([str(v), [v], {"value": v}, float(v) if _numeric(v) else v,
                                         bool(v) if not isinstance(v, (dict, list)) else v, None])
            elif op < 0.87 and "model_type" in keys:                     # cross the families
                d["model_type"] = rng.choice(MODEL_TYPES + [1, None, ["llama"]])
                if rng.random() < 0.3:
                    d.pop("model_type", None)
                    d["architectures"] = rng.choice([["LlamaForCausalLM"], ["GPT2LMHeadModel"], ["Nope"], [],
                                                     "LlamaForCausalLM", [["x"]], [{}], [1], None])
            elif op < 0.92 and extra_seeds:                              # graft keys from another seed
                other = rng.choice(extra_seeds)
                for k in rng.sample(list(other), min(len(other), rng.randint(1, 6))):
                    d[k] = json.loads(json.dumps(other[k]))
            elif op < 0.96:                                              # nest a value
                if paths:
                    p = rng.choice(paths)
                    cur = d
                    for q in p[:-1]:
                        cur = cur[q]
                    v = cur[p[-1]]
                    for _ in range(rng.choice([1, 2, 5, 40])):
                        v = rng.choice([[v], {"x": v}])
                    cur[p[-1]] = v
            else:                                                        # not an object at all
                d = rng.choice([[d], list(d.items())[:3], "model_type: llama", None, 42, [], "config"])
        except (KeyError, IndexError, TypeError, ValueError, OverflowError):
            pass
    return d


def to_toml(d) -> str:
    """A tiny TOML writer for fuzzing (inline tables and arrays; strings escaped as JSON strings)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return "nan" if math.isnan(v) else ("inf" if v == INF else "-inf" if v == -INF else repr(v))
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v if x is not None) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(str(k))} = {val(x)}" for k, x in v.items() if x is not None) + " }"
        return '""'
    if not isinstance(d, dict):
        return f"value = {val(d)}\n"
    return "".join(f"{json.dumps(str(k))} = {val(v)}\n" for k, v in d.items() if v is not None)


def mutate_text(text: str, rng: random.Random, toml: bool, slow_ok: bool = True) -> bytes:
    r = rng.random()
    if r < 0.45:
        return text.encode()
    if r < 0.55:                                                           # truncated
        return text.encode()[: rng.randint(0, len(text))]
    if r < 0.65:                                                           # a number literal swapped
        nums = list(NUMBER.finditer(text))
        if nums:
            m = rng.choice(nums)
            swap = rng.choice(NUMBER_SWAPS + ["1" + "0" * rng.choice([20, 400, 4299, 4300, 5000])])
            return (text[:m.start()] + swap + text[m.end():]).encode()
        return text.encode()
    if r < 0.72:                                                           # bytes flipped, inserted, deleted
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 8)):
            if not b:
                break
            i = rng.randrange(len(b))
            k = rng.random()
            if k < 0.4:
                b[i] = rng.randrange(256)
            elif k < 0.7:
                b.insert(i, rng.choice(b'{}[]",:=\\\n\x00\xff\xfe'))
            else:
                del b[i]
        return bytes(b)
    if r < 0.78:                                                           # other encodings
        enc = rng.choice(["utf-16", "utf-32", "latin-1", "bom", "cp1252"])
        if enc == "bom":
            return b"\xef\xbb\xbf" + text.encode()
        t = text.replace('"', '"\u00e9', 1) if enc in ("latin-1", "cp1252") else text
        try:
            return t.encode(enc)
        except UnicodeEncodeError:
            return t.encode("utf-8", "replace")
    if r < 0.84:                                                           # not an object
        return rng.choice([b"", b" \n\t", b"null", b"[]", b"{}", b'"config"', b"42", b"true", b"[{}]", b"\x00" * 64,
                           ("[" + text + "]").encode(), (text + text).encode(), (text + "\ngarbage").encode()])
    if r < 0.93:                                                           # deeply nested
        depth = rng.choice([33, 100, 1000, 10_000, 100_000, 400_000])
        if toml:
            inner = rng.choice(["[" * depth + "]" * depth, "{a=" * depth + "1" + "}" * depth,
                                "[" * depth + "1" + "]" * depth])
            return (text + f"\nnested = {inner}\n").encode()
        inner = rng.choice(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth])
        if rng.random() < 0.5:
            return inner.encode()
        return (text.rstrip().rstrip("}") + f', "nested": {inner}}}').encode()
    if r < 0.97:                                                           # big but under the limit
        n = rng.choice([10_000, 50_000, 200_000])
        if rng.random() < (0.02 if toml else 0.3) and slow_ok:
            n = MAX_FILE_BYTES - len(text) - 64      # just under the limit (a TOML one takes seconds to parse: B5)
        if toml:
            return (text + "\npad = [" + "1," * (n // 2) + "1]\n").encode()
        return (text.rstrip().rstrip("}") + ', "pad": [' + "1," * (n // 2) + "1]}").encode()
    n = MAX_FILE_BYTES + rng.choice([1, 1000, 3_000_000])                  # over the limit
    return text.encode() + b" " * (n - len(text.encode()))


# ---- running one input ------------------------------------------------------------------------------------------
class Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise Hang()


@dataclass
class Outcome:
    kind: str                     # loaded | rejected | crash
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Tally:
    inputs: int = 0
    loaded: int = 0
    rejected: int = 0
    crashes: int = 0
    max_s: float = 0.0
    slowest: str = ""
    fields: collections.Counter = field(default_factory=collections.Counter)
    signatures: collections.Counter = field(default_factory=collections.Counter)
    examples: dict = field(default_factory=dict)


def _json_safe(d: dict) -> None:
    json.dumps(d, allow_nan=False)


def post_model(m: Model) -> None:
    """A loaded model must give an answer without NaN (or an InputError) on a reference chip."""
    from tokenmath.analyses.serving.infer import infer
    try:
        _json_safe(infer(m, "h100-sxm", batch=8, input_len=1024, output_len=128).to_dict())
    except InputError as e:
        _check_error(e)


def post_hardware(hw) -> None:
    from tokenmath.analyses.serving.infer import infer
    try:
        _json_safe(infer("llama-3.1-8b", hw, batch=8, input_len=1024, output_len=128).to_dict())
    except InputError as e:
        _check_error(e)


def _check_error(e: InputError) -> None:
    if not (isinstance(e.field, str) and e.field and isinstance(e.problem, str) and e.problem):
        raise AssertionError(f"InputError without a field or problem: {e!r}")
    json.dumps(e.to_dict(), allow_nan=False)


def attempt(fn, arg, post, timeout: float) -> Outcome:
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            got = fn(arg)
        except InputError as e:
            _check_error(e)
            return Outcome("rejected", e.field, time.perf_counter() - t0)
        post(got)
        return Outcome("loaded", "", time.perf_counter() - t0)
    except Hang:
        kind = " (TOML)" if isinstance(arg, str) and arg.lower().endswith(".toml") else ""
        return Outcome("crash", f"Hang: no answer within {timeout:g} s{kind}", time.perf_counter() - t0)
    except BaseException as e:      # the point is to catch everything
        if isinstance(e, KeyboardInterrupt):
            raise
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb) if "tokenmath" in fr.filename),
                     f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?")
        msg = str(e).splitlines()[0][:160] if str(e) else ""
        return Outcome("crash", f"{type(e).__name__}: {msg} [{where}]", time.perf_counter() - t0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def safe_repr(obj, n: int) -> str:
    """repr() that survives ints longer than Python's 4300-digit printing limit."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        r = repr(obj)
    finally:
        sys.set_int_max_str_digits(old)
    return r if len(r) <= n else r[:n] + f"... ({len(r):,} chars)"


def known_bug(detail: str) -> str | None:
    for name, pat in KNOWN.items():
        if pat.search(detail):
            return name
    return None


# ---- generators: one input per call, as (what the loader takes, bytes to save for a reproduction) --------------
class Generator:
    def __init__(self, seed: int, workdir: Path, slow_ok: bool = True):
        self.rng = random.Random(seed)
        self.slow_ok = slow_ok
        self.hf = hf_seeds()
        self.hw = hw_seeds()
        self.dir = workdir
        self.n = 0

    def hf_config(self):
        d = mutate_dict(self.rng.choice(self.hf), self.rng, HF_KEYS, py_only=True, extra_seeds=self.hf)
        return d, None

    def _file(self, d, toml_ok: bool):
        suffix = self.rng.choice([".json", ".json", ".json", ".toml", ".JSON", ".Toml", ""] if toml_ok else
                                 [".json", ".json", ".toml", ""])
        as_toml = suffix.lower() == ".toml" and self.rng.random() < 0.9 or (suffix == "" and self.rng.random() < 0.1)
        try:
            text = to_toml(d) if as_toml else json.dumps(d, indent=self.rng.choice([None, 2]))
        except ValueError:                                # e.g. an int json cannot print
            text = "{}"
        data = mutate_text(text, self.rng, as_toml, self.slow_ok)
        self.n += 1
        sub = self.dir / f"d{self.n % 7}"
        sub.mkdir(exist_ok=True)
        p = sub / f"case{suffix}"
        p.write_bytes(data)
        r = self.rng.random()
        if r < 0.01:
            return str(sub), None                          # a directory
        if r < 0.02:
            return str(sub / "missing.json"), None         # no such file
        if r < 0.025:
            return "bad\x00name.json", None
        return str(p), data

    def model_file(self):
        d = mutate_dict(self.rng.choice(self.hf), self.rng, HF_KEYS, py_only=False, extra_seeds=self.hf)
        return self._file(d, toml_ok=True)

    def hardware_file(self):
        seed = self.rng.choice(self.hw)
        d = mutate_dict(seed, self.rng, HW_KEYS + [f"tflops.{k}" for k in FLOP_KEYS], py_only=False,
                        extra_seeds=self.hw)
        if isinstance(d, dict):
            for k in [k for k in d if k.startswith("tflops.")]:     # "tflops.fp8" keys go inside the table
                v = d.pop(k)
                if isinstance(d.get("tflops"), dict):
                    d["tflops"][k.split(".", 1)[1]] = v
            if self.rng.random() < 0.15:                           # a file of one named table
                d = {self.rng.choice(["my-chip", "x", ""]): d}
        return self._file(d, toml_ok=True)


LOAD = {"hf_config": (model_from_hf_config, post_model), "model_file": (get_model, post_model),
        "hardware_file": (get_hardware, post_hardware)}


def fuzz(loader: str, n: int, seed: int, workdir: Path, timeout: float = 10.0, save: Path | None = None,
         keep_rejected: int = 0, slow_ok: bool = True) -> tuple[Tally, list[tuple[str, bytes | None]]]:
    """Run n generated inputs through one loader. Returns the tally and up to `keep_rejected` rejected file paths
    (their bytes) for a command-line check. slow_ok=False leaves out the near-limit TOML files (seconds each)."""
    gen = Generator(seed * 1000 + LOADERS.index(loader), workdir / loader, slow_ok)
    (workdir / loader).mkdir(parents=True, exist_ok=True)
    fn, post = LOAD[loader]
    make = getattr(gen, loader)
    t = Tally()
    kept: list[tuple[str, bytes | None]] = []
    for i in range(n):
        arg, raw = make()
        o = attempt(fn, arg, post, timeout)
        t.inputs += 1
        if o.seconds > t.max_s:
            t.max_s = o.seconds
            t.slowest = (f"{len(raw):,}-byte {Path(arg).suffix or 'suffix-less'} file starting {raw[:60]!r}"
                         if raw is not None else safe_repr(arg, 80)) + f" ({o.kind})"
        if o.kind == "loaded":
            t.loaded += 1
        elif o.kind == "rejected":
            t.rejected += 1
            t.fields[re.sub(r"\[[^\]]*\]", "[]", o.detail)] += 1
            if raw is not None and len(kept) < keep_rejected and gen.rng.random() < 0.2:
                keep = workdir / "cli" / f"{loader}-{i}{Path(arg).suffix}"
                keep.parent.mkdir(parents=True, exist_ok=True)
                keep.write_bytes(raw)
                kept.append((str(keep), raw))
        else:
            t.crashes += 1
            sig = re.sub(r"\d{3,}", "N", o.detail)[:200]
            t.signatures[sig] += 1
            if sig not in t.examples:
                rep = arg if raw is None else raw
                t.examples[sig] = (i, rep)
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    ext = Path(arg).suffix if raw is not None else ".py.txt"
                    body = raw if raw is not None else safe_repr(arg, MAX_FILE_BYTES).encode()
                    (save / f"{loader}-{len(t.examples)}{ext or '.bin'}").write_bytes(body[:MAX_FILE_BYTES + 10])
    return t, kept


# ---- the command line ---------------------------------------------------------------------------------------------
def tokenmath_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "tokenmath"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("tokenmath")
    return [found] if found else [sys.executable, "-m", "tokenmath.faces.cli"]


def cli_check(paths: list[tuple[str, str]], jobs: int = 4) -> list[str]:
    """(option, path) pairs through `tokenmath infer OPTION PATH --json`; returns the failures."""
    problems = []
    env = {**os.environ, "TOKENMATH_DEBUG": ""}
    env.pop("TOKENMATH_DEBUG")
    pending = list(paths)
    running: list = []
    while pending or running:
        while pending and len(running) < jobs:
            opt, p = pending.pop()
            proc = subprocess.Popen(tokenmath_cmd() + ["infer", opt, p, "--json"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env)
            running.append((opt, p, proc))
        opt, p, proc = running.pop(0)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            problems.append(f"{opt} {p}: hung")
            continue
        out_s, err_s = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        why = []
        if proc.returncode != 2:
            why.append(f"exit {proc.returncode}")
        if "Traceback" in out_s + err_s:
            why.append("traceback")
        try:
            e = json.loads(out_s)["error"]
            if not (isinstance(e, dict) and e.get("field") and e.get("problem")):
                why.append(f"error object without field/problem: {e!r}")
        except (ValueError, KeyError, TypeError):
            why.append(f"stdout is not a JSON error object: {out_s[:120]!r}")
        if why:
            problems.append(f"{opt} {p}: {', '.join(why)}; stderr {err_s.strip()[:160]!r}")
    return problems


# ---- main -------------------------------------------------------------------------------------------------------
def _limit_memory(gb: float) -> None:
    try:
        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        vm = 0
    limit = int(vm + gb * 1e9)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="generated inputs per loader (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loaders", default=",".join(LOADERS), help="comma-separated subset of " + ", ".join(LOADERS))
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one input may take before it is a hang")
    ap.add_argument("--memory-gb", type=float, default=2.0, help="address-space headroom; more is a blow-up")
    ap.add_argument("--save", type=Path, help="write one reproduction per crash signature here")
    ap.add_argument("--cli", type=int, default=40, help="rejected files to also run through `tokenmath infer`")
    a = ap.parse_args(argv)
    _limit_memory(a.memory_gb)
    loaders = [x for x in a.loaders.split(",") if x]
    crashes = 0
    t_start = time.perf_counter()
    print(f"tokenmath loader fuzz: seed {a.seed}, {a.n:,} generated inputs per loader, timeout {a.timeout:g} s, "
          f"address-space headroom {a.memory_gb:g} GB")
    print(f"{'loader':<15} {'inputs':>8} {'loaded':>8} {'rejected':>9} {'crashes':>8} {'slowest':>9}")
    cli_paths: list[tuple[str, str]] = []
    details = []
    with tempfile.TemporaryDirectory(prefix="tokenmath-fuzz-") as tmp:
        for loader in loaders:
            keep = a.cli // 2 if loader in ("model_file", "hardware_file") else 0
            t, kept = fuzz(loader, a.n, a.seed, Path(tmp), a.timeout, a.save, keep_rejected=keep)
            crashes += t.crashes
            print(f"{loader:<15} {t.inputs:>8,} {t.loaded:>8,} {t.rejected:>9,} {t.crashes:>8,} {t.max_s:>8.3f}s")
            opt = "--hardware" if loader == "hardware_file" else "--model"
            cli_paths += [(opt, p) for p, _ in kept]
            details.append((loader, t))
        print()
        for loader, t in details:
            top = ", ".join(f"{k} {v}" for k, v in t.fields.most_common(6))
            print(f"{loader}: rejections by field (top 6 of {len(t.fields)}): {top}")
            print(f"  slowest input ({t.max_s:.3f} s): {t.slowest}")
            for sig, count in t.signatures.most_common():
                i, rep = t.examples[sig]
                tag = known_bug(sig)
                print(f"  CRASH x{count}: {sig}" + (f"   <- known: {tag}" if tag else "   <- NEW"))
                shown = repr(rep[:200]) if isinstance(rep, bytes) else safe_repr(rep, 200)
                print(f"    first at input #{i}: {shown}")
        cli_problems = cli_check(cli_paths) if cli_paths else []
        if cli_paths:
            print(f"\ncommand line: {len(cli_paths)} rejected files through `tokenmath infer --model/--hardware FILE "
                  f"--json`: {len(cli_paths) - len(cli_problems)} exit 2 with a JSON error object, "
                  f"{len(cli_problems)} did not")
            for p in cli_problems[:10]:
                print("  " + p)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total = a.n * len(loaders)
    print(f"\ntotal: {total:,} inputs, crashes={crashes}, command-line failures={len(cli_problems)}, "
          f"{time.perf_counter() - t_start:.1f} s, peak RSS {rss:.0f} MB")
    return 1 if crashes or cli_problems else 0


if __name__ == "__main__":
    sys.exit(main())
