"""The JSON API behind `tokenmath serve`: parameters in, an analysis' own `to_dict()` (+ its --explain text) out.

Every endpoint mirrors one Python function (tokenmath.analyses.*) with the same parameter names. This module only
coerces strings from a query string (or values from a JSON body) into the types those functions take, refuses what a
web page must never pass on (file paths: a model is a catalog id or an uploaded config, hardware is a catalog id),
and adds what a chart needs when the analysis' dict leaves it out. No physics here.

Bad input raises tokenmath.base.errors.InputError naming the field; the server answers it with HTTP 422.
"""
from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from types import MappingProxyType
from typing import Any

import numpy as np

from tokenmath.base.errors import InputError, closest, unknown_name

UPLOAD_MAX_BYTES = 256 * 1024      # a config.json is a few kB; refuse more before reading the body
PARAMS_MAX_BYTES = 64 * 1024       # a JSON body of parameters
UPLOAD_PREFIX = "upload:"
MAX_UPLOADS = 128                  # uploaded models kept in memory (least recently used dropped)
CACHE_ENTRIES = 1024               # responses kept (least recently used dropped)
MAX_DEDUCE_SAMPLES = 400_000
MAX_LAYOUT = 100_000               # chips or a parallel degree: beyond it, a typo
CURVE_POINTS = 160                 # points of a long array kept for a chart


# ---- parameters -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # model | hardware | int | float | batch | bool | choice | range | hwlist | intlist
    default: Any = None
    help: str = ""
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()

    def describe(self) -> dict:
        d = {"name": self.name, "type": self.kind, "default": self.default, "help": self.help}
        if self.choices:
            d["choices"] = list(self.choices)
        if self.lo is not None:
            d["min"] = self.lo
        if self.hi is not None:
            d["max"] = self.hi
        return d


def _blank(v) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "")


def _as_int(v, p: Param) -> int:
    lo = int(p.lo) if p.lo is not None else -(2 ** 62)
    hi = int(p.hi) if p.hi is not None else 2 ** 62
    valid = f"an integer from {lo:,} to {hi:,}"
    if isinstance(v, bool):
        raise InputError(p.name, f"{v!r} is not a whole number", valid)
    try:
        f = float(str(v).strip().replace("_", "")) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        raise InputError(p.name, f"{v!r} is not a whole number", valid) from None
    if not math.isfinite(f) or f != int(f):
        raise InputError(p.name, f"{v!r} is not a whole number", valid)
    if not lo <= f <= hi:
        raise InputError(p.name, f"{int(f):,} is out of range", valid)
    return int(f)


def _as_float(v, p: Param) -> float:
    valid = "a number" + (f" from {p.lo:g}" if p.lo is not None else "") + (f" to {p.hi:g}" if p.hi is not None else "")
    if isinstance(v, bool):
        raise InputError(p.name, f"{v!r} is not a number", valid)
    try:
        f = float(str(v).strip().replace("_", "")) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        raise InputError(p.name, f"{v!r} is not a number", valid) from None
    if not math.isfinite(f) or (p.lo is not None and f < p.lo) or (p.hi is not None and f > p.hi):
        raise InputError(p.name, f"{v!r} is out of range", valid)
    return f


def _as_bool(v, p: Param) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise InputError(p.name, f"{v!r} is not true or false", "true or false (1 or 0)")


def _as_list(v, p: Param) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v]
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    raise InputError(p.name, f"{v!r} is not a list", "comma-separated values")


def coerce(p: Param, v):
    """One parameter from a query-string string or a JSON value to the type the analysis takes (None: absent)."""
    if _blank(v):
        return p.default
    k = p.kind
    if k == "int":
        return _as_int(v, p)
    if k == "float":
        return _as_float(v, p)
    if k == "bool":
        return _as_bool(v, p)
    if k == "batch":
        if isinstance(v, str) and v.strip().lower() == "max":
            return "max"
        return _as_int(v, p)
    if k == "choice":
        s = str(v).strip().lower()
        if s not in p.choices:
            near = closest(s, p.choices)
            raise InputError(p.name, f"{v!r} is not one of the choices",
                             (f"did you mean {', '.join(near)}? " if near else "") + f"one of {', '.join(p.choices)}")
        return s
    if k == "range":
        xs = _as_list(v, p)
        if len(xs) != 2:
            raise InputError(p.name, f"{v!r} is not LOW,HIGH", "two numbers, e.g. 0.2,0.6")
        lo, hi = (_as_float(x, p) for x in xs)
        if lo > hi:
            raise InputError(p.name, f"LOW {lo:g} exceeds HIGH {hi:g}", "LOW <= HIGH")
        return (lo, hi)
    if k == "intlist":
        xs = [_as_int(x, p) for x in _as_list(v, p)]
        if not xs or len(xs) > 64:
            raise InputError(p.name, "needs 1 to 64 values", "comma-separated integers, e.g. 1024,8192")
        return tuple(xs)
    if k == "hardware":
        return hardware_id(v, p.name)
    if k == "hwlist":
        xs = _as_list(v, p)
        if not xs or len(xs) > 32:
            raise InputError(p.name, "needs 1 to 32 catalog ids", "comma-separated ids, e.g. h100-sxm,h200")
        return tuple(hardware_id(x, p.name) for x in xs)
    if k == "model":
        if not isinstance(v, str):
            raise InputError(p.name, f"{v!r} is not a name", "a catalog id or an uploaded config's id")
        return v.strip()
    raise AssertionError(k)


def hardware_id(v, field: str = "hardware") -> str:
    """A hardware catalog id (never a path: the web API reads no files named by a request)."""
    from tokenmath.specs.hardware import catalog
    if not isinstance(v, str) or not v.strip():
        raise InputError(field, f"{v!r} is not a name", "a hardware catalog id such as h100-sxm")
    key = v.strip().lower()
    cat = catalog()
    if key not in cat:
        raise unknown_name(field, v.strip(), cat)
    return key


def _f(x):
    """A float for JSON (None for NaN/inf/None)."""
    if x is None:
        return None
    x = float(np.asarray(x))
    return x if math.isfinite(x) else None


def clean(o):
    """JSON-safe copy: numpy scalars/arrays to Python, tuples to lists, NaN/inf to None."""
    if isinstance(o, (dict, MappingProxyType)):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return clean(o.tolist())
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return f if math.isfinite(f) else None
    if o is None or isinstance(o, str):
        return o
    return str(o)


def thin(n: int, keep: int = CURVE_POINTS) -> np.ndarray:
    """Indices of up to `keep` evenly spaced points of an array of n (first and last included)."""
    if n <= keep:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, keep)).astype(int))


# ---- shared parameter sets --------------------------------------------------------------------------------------

MODEL = Param("model", "model", "llama-3.1-8b", "catalog id (GET /api/models) or an uploaded config's id")
HARDWARE = Param("hardware", "hardware", "h100-sxm", "hardware catalog id (GET /api/hardware)")
LAYOUT = (Param("chips", "int", None, "total chips = tp x pp x ep x dp", 1, MAX_LAYOUT),
          Param("tp", "int", None, "tensor-parallel degree", 1, MAX_LAYOUT),
          Param("pp", "int", None, "pipeline stages", 1, MAX_LAYOUT),
          Param("ep", "int", None, "expert-parallel degree (MoE)", 1, MAX_LAYOUT),
          Param("dp", "int", None, "replicas", 1, MAX_LAYOUT))


@cache
def _dtype_choices():
    from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES
    return tuple(WEIGHT_DTYPES), tuple(KV_DTYPES)


def _dtypes():
    w, kv = _dtype_choices()
    return (Param("weight_dtype", "choice", None, "weights (default: the checkpoint's)", choices=w),
            Param("kv_dtype", "choice", None, "KV cache (default bf16)", choices=kv))


def _eff(peak: bool, calibrated: bool, hardware: str):
    from tokenmath.specs.efficiency import PEAK
    if peak:
        return PEAK
    if calibrated:
        from tokenmath.specs.efficiency import calibrated as cal
        return cal(hardware)
    return None


# ---- the endpoints ----------------------------------------------------------------------------------------------

class Api:
    """The endpoints, their parameters, a response cache and the uploaded models (one instance per server)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cache: OrderedDict = OrderedDict()
        self._uploads: OrderedDict = OrderedDict()
        w, kv = _dtype_choices()
        D = _dtypes()
        self.endpoints: dict[str, tuple[tuple[Param, ...], Callable, str]] = {
            "infer": ((MODEL, HARDWARE, *LAYOUT,
                       Param("batch", "batch", 1, "concurrent sequences, or 'max'", 1, 10_000_000_000),
                       Param("input_len", "int", 1024, "prompt tokens per sequence", 1, 100_000_000),
                       Param("output_len", "int", 256, "generated tokens per sequence", 1, 100_000_000),
                       *D, Param("peak", "bool", False, "100% of every peak (pure roofline)"),
                       Param("calibrated", "bool", False, "efficiencies fitted on published measurements")),
                      self._infer, "tokenmath.analyses.serving.infer.infer (+ explain, roofline)"),
            "hyperbola": ((MODEL, HARDWARE, *LAYOUT,
                           Param("context", "int", 2048, "tokens in each sequence's KV cache", 1, 100_000_000), *D),
                          self._hyperbola, "tokenmath.analyses.serving.hyperbola.hyperbola"),
            "pareto": ((MODEL, HARDWARE, Param("chips", "int", None, "chips (default: one scale-up domain)", 1, 4096),
                        Param("input_len", "int", 1024, "", 1, 100_000_000),
                        Param("output_len", "int", 256, "", 1, 100_000_000), *D,
                        Param("allow_pp", "bool", False, "also pipeline-parallel layouts")),
                       self._pareto, "tokenmath.analyses.serving.pareto.pareto"),
            "context": ((MODEL, HARDWARE, *LAYOUT, Param("batch", "int", 1, "", 1, 10_000_000_000),
                         Param("context", "int", 8192, "", 1, 100_000_000), *D),
                        self._context, "tokenmath.analyses.serving.context.context"),
            "prices": ((MODEL, HARDWARE, *LAYOUT,
                        Param("contexts", "intlist", None, "input lengths (default 256..131072)", 1, 100_000_000),
                        Param("output_len", "int", 256, "", 1, 100_000_000),
                        Param("batch", "int", None, "batch (default: the largest that fits at each context)", 1,
                              10_000_000_000),
                        Param("cache_ttl_s", "float", 300.0, "seconds a cached prompt's KV waits in HBM", 1e-9, 1e9),
                        *D),
                       self._prices, "tokenmath.analyses.serving.input_vs_output.prices"),
            "deduce": ((Param("input_price", "float", None, "$ per million input tokens", 0.0),
                        Param("output_price", "float", None, "$ per million output tokens", 0.0),
                        Param("cached_input_price", "float", None, "", 0.0),
                        Param("long_context_threshold", "float", None, "tokens above which the long tier applies", 0.0),
                        Param("long_input_price", "float", None, "", 0.0),
                        Param("long_output_price", "float", None, "", 0.0),
                        Param("output_speed", "float", None, "measured output tokens/s per user", 0.0),
                        Param("hardware", "hwlist", None, "chip ids replacing the hardware prior"),
                        Param("margin", "range", None, "gross margin LOW,HIGH (default 0,0.75)"),
                        Param("utilization", "range", None, "LOW,HIGH (default 0.3,0.8)"),
                        Param("batch", "range", None, "decode batch LOW,HIGH (default 4,512)"),
                        Param("chip_cost", "range", None, "multiplier on catalog $/h, LOW,HIGH (default 0.4,1.2)"),
                        Param("noise", "float", 0.30, "log-sd between a price and its cost", 1e-6, 10.0),
                        Param("samples", "int", 200_000, "Monte Carlo samples", 1000, MAX_DEDUCE_SAMPLES),
                        Param("seed", "int", 0, "", 0, 2 ** 32 - 1)),
                       self._deduce, "tokenmath.analyses.inverse.deduce.deduce"),
            "train": ((MODEL, HARDWARE,
                       Param("chips", "int", None, "total chips (default 8 without dp)", 1, 65_536),
                       Param("tp", "int", None, "", 1, 65_536), Param("pp", "int", None, "", 1, 65_536),
                       Param("dp", "int", None, "", 1, 65_536), Param("ep", "int", None, "", 1, 65_536),
                       Param("cp", "int", None, "", 1, 65_536),
                       Param("seq_len", "int", 4096, "", 1, 100_000_000),
                       Param("global_batch_tokens", "int", 4_194_304, "tokens per optimizer step", 1, 10 ** 12),
                       Param("micro_batch", "int", 1, "sequences per micro-batch", 1, 1_000_000),
                       Param("recompute", "choice", "selective", "", choices=("none", "selective", "full")),
                       Param("zero", "choice", "1", "ZeRO stage", choices=("0", "1", "2", "3")),
                       Param("dtype", "choice", "bf16", "", choices=("bf16", "fp8")),
                       Param("tokens", "float", None, "training tokens: the whole run's time and cost", 0.0),
                       Param("overlap", "bool", True, "overlap DP communication with backward"),
                       Param("peak", "bool", False, ""),
                       Param("search", "bool", False, "rank the layouts of `chips` that fit")),
                      self._train, "tokenmath.analyses.training.train.train / search"),
            "overtrain": ((Param("target_loss", "float", None, "nats/token (or give compute)"),
                           Param("compute", "float", None, "training budget (FLOPs) setting the target loss"),
                           Param("inference_tokens", "float", 0.0, "lifetime tokens served", 0.0),
                           Param("rl_rollout_tokens", "float", 0.0, "", 0.0),
                           Param("fit", "choice", "epoch", "", choices=_fit_names()),
                           HARDWARE,
                           Param("mfu", "float", 0.4, "training MFU"),
                           Param("flop_only", "bool", False, "inference at 2N FLOPs/token"),
                           Param("min_tokens_per_s_per_user", "float", 20.0, ""),
                           Param("input_output_ratio", "float", 1.0, ""),
                           Param("output_len", "int", 512, "", 1, 100_000_000), *D),
                          self._overtrain, "tokenmath.analyses.training.overtrain.overtrain"),
            "chinchilla": ((Param("compute", "float", None, "FLOPs"), Param("params", "float", None, ""),
                            Param("tokens", "float", None, ""), Param("loss", "float", None, "target loss"),
                            Param("fit", "choice", "epoch", "", choices=_fit_names())),
                           self._chinchilla, "tokenmath.analyses.training.scaling_laws.chinchilla"),
        }
        self.weight_dtypes, self.kv_dtypes = w, kv

    # -- plumbing --------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return sorted(self.endpoints) + ["hardware", "model-config", "models"]

    def parse(self, name: str, raw: dict) -> dict:
        params, _, _ = self.endpoints[name]
        by = {p.name: p for p in params}
        for k in raw:
            if k not in by:
                near = closest(str(k), by)
                raise InputError(str(k), "unknown parameter",
                                 (f"did you mean {', '.join(near)}? " if near else "") + f"{name} takes "
                                 + ", ".join(by))
        return {p.name: coerce(p, raw.get(p.name)) for p in params}

    def call(self, name: str, raw: dict) -> bytes:
        """The JSON bytes answering endpoint `name` with raw parameters; InputError for bad input."""
        args = self.parse(name, raw)
        key = (name, tuple(sorted((k, repr(v)) for k, v in args.items())))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        body = dumps(self.endpoints[name][1](args))
        with self._lock:
            self._cache[key] = body
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return body

    def model(self, spec: str, field: str = "model"):
        """A catalog Model or an uploaded one (never a path)."""
        from tokenmath.specs.model_catalog import catalog, get_model
        key = spec.lower()
        if key.startswith(UPLOAD_PREFIX):
            with self._lock:
                m = self._uploads.get(key)
                if m is not None:
                    self._uploads.move_to_end(key)
            if m is None:
                raise InputError(field, f"no uploaded config {spec!r} on this server (uploads live in memory)",
                                 "upload the config.json again (POST /api/model-config)")
            return m
        cat = catalog()
        if key not in cat:
            raise unknown_name(field, spec, cat)
        return get_model(key)

    def meta(self) -> bytes:
        return _meta_bytes(self)

    # -- catalogs ---------------------------------------------------------------------------------------------
    @staticmethod
    def models() -> bytes:
        return _models_bytes()

    @staticmethod
    def hardware() -> bytes:
        return _hardware_bytes()

    # -- uploads ----------------------------------------------------------------------------------------------
    def upload(self, body: bytes, filename: str | None = None) -> bytes:
        """A Hugging Face config.json (bytes, already size-checked) parsed as data only: json.loads, then
        tokenmath.specs.hf_config.model_from_hf_config. Returns the id to pass as `model`."""
        from tokenmath.specs.catalog import MAX_JSON_DEPTH, json_depth
        from tokenmath.specs.hf_config import model_from_hf_config
        from tokenmath.specs.kv_cache import kv_bytes_per_token
        from tokenmath.specs.params import count_params
        field = "config.json"
        if len(body) > UPLOAD_MAX_BYTES:
            raise InputError(field, f"is {len(body):,} bytes", f"at most {UPLOAD_MAX_BYTES:,} bytes")
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(field, "is not UTF-8 text", "a JSON file") from None
        if json_depth(text) > MAX_JSON_DEPTH:
            raise InputError(field, f"nests deeper than {MAX_JSON_DEPTH} levels", "a Hugging Face config.json")

        def no_constants(c):
            raise ValueError(f"{c} is not a JSON number")
        try:
            data = json.loads(text, parse_constant=no_constants)
        except (ValueError, RecursionError) as e:
            raise InputError(field, f"is not valid JSON ({str(e)[:120]})", "a Hugging Face config.json") from None
        if not isinstance(data, dict):
            raise InputError(field, "is not a JSON object", "a Hugging Face config.json")
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
        mid = UPLOAD_PREFIX + digest
        label = data.get("_name_or_path") if isinstance(data.get("_name_or_path"), str) else None
        label = label or (filename or "").strip() or "uploaded config.json"
        label = "".join(ch for ch in label if ch.isprintable())[:80]
        m = model_from_hf_config(data, name=label)
        m = replace(m, id=mid, name=label)
        P = count_params(m)
        with self._lock:
            self._uploads[mid] = m
            self._uploads.move_to_end(mid)
            while len(self._uploads) > MAX_UPLOADS:
                self._uploads.popitem(last=False)
        return dumps({"id": mid, "name": m.name, "summary": m.describe(), "params_total": P.total,
                      "params_active": P.active, "kv_bytes_per_token_bf16": kv_bytes_per_token(m, 2.0),
                      "is_moe": m.is_moe, "max_context": m.max_context, "native_dtype": m.native_dtype})

    # -- analyses ---------------------------------------------------------------------------------------------
    def _layout(self, a):
        return {k: a[k] for k in ("chips", "tp", "pp", "ep", "dp")}

    def _infer(self, a):
        from tokenmath.faces.explain_infer import explain
        from tokenmath.analyses.serving.infer import infer
        r = infer(self.model(a["model"]), a["hardware"], **self._layout(a), batch=a["batch"],
                  input_len=a["input_len"], output_len=a["output_len"], weight_dtype=a["weight_dtype"],
                  kv_dtype=a["kv_dtype"], efficiency=_eff(a["peak"], a["calibrated"], a["hardware"]))
        d = r.to_dict()
        d["model_name"] = r.model.name
        d["hardware_name"] = r.hardware.name
        d["explain"] = explain(r)
        d["roofline"] = roofline(r)
        return d

    def _hyperbola(self, a):
        from tokenmath.analyses.serving.hyperbola import hyperbola
        h = hyperbola(self.model(a["model"]), a["hardware"], **self._layout(a), context=a["context"],
                      weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
        d = h.to_dict()
        d["explain"] = h.explain()
        return d

    def _pareto(self, a):
        from tokenmath.analyses.serving.pareto import pareto, pareto_text
        p = pareto(self.model(a["model"]), a["hardware"], chips=a["chips"], input_len=a["input_len"],
                   output_len=a["output_len"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"],
                   allow_pp=a["allow_pp"])
        d = p.to_dict()
        d["explain"] = p.explain() + "\n" + pareto_text(p)
        idx = thin(len(p.points), 600)
        d["chart"] = {"points": [[p.points[i]["output_tokens_per_s_per_user"], p.points[i]["output_tokens_per_s_per_chip"]]
                                 for i in idx]}
        return d

    def _context(self, a):
        from tokenmath.analyses.serving.context import context
        c = context(self.model(a["model"]), a["hardware"], **self._layout(a), batch=a["batch"], context=a["context"],
                    weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
        d = c.to_dict()
        d["explain"] = c.explain()
        return d

    def _prices(self, a):
        from tokenmath.analyses.serving.input_vs_output import prices
        r = prices(self.model(a["model"]), a["hardware"], **self._layout(a), contexts=a["contexts"],
                   output_len=a["output_len"], batch=a["batch"], cache_ttl_s=a["cache_ttl_s"],
                   weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
        d = r.to_dict()
        d["explain"] = r.explain()
        return d

    def _deduce(self, a):
        from tokenmath.analyses.inverse.deduce import Priors, deduce
        pr = Priors(price_noise=a["noise"], samples=a["samples"], seed=a["seed"])
        if a["hardware"]:
            pr = replace(pr, hardware=tuple((h, 1.0 / len(a["hardware"])) for h in a["hardware"]))
        for name, key in (("margin", "margin"), ("utilization", "utilization"), ("batch", "batch"),
                          ("chip_cost_factor", "chip_cost")):
            if a[key] is not None:
                pr = replace(pr, **{name: a[key]})
        if not (0 <= pr.margin[0] and pr.margin[1] < 1):
            raise InputError("margin", f"{pr.margin} is not within [0, 1)", "e.g. 0.2,0.6")
        if not (0 < pr.utilization[0] and pr.utilization[1] <= 1):
            raise InputError("utilization", f"{pr.utilization} is not within (0, 1]", "e.g. 0.3,0.8")
        if not pr.batch[0] >= 1:
            raise InputError("batch", f"{pr.batch} starts below 1", "e.g. 4,512")
        if not pr.chip_cost_factor[0] > 0:
            raise InputError("chip_cost", f"{pr.chip_cost_factor} starts at or below 0", "e.g. 0.4,1.2")
        r = deduce(a["input_price"], a["output_price"], cached_input_price=a["cached_input_price"],
                   long_context_threshold=a["long_context_threshold"], long_input_price=a["long_input_price"],
                   long_output_price=a["long_output_price"], output_speed=a["output_speed"], priors=pr)
        d = dict(r.to_dict())
        d["explain"] = r.explain()
        return d

    def _train(self, a):
        from tokenmath.analyses.training import train as T
        from tokenmath.specs.efficiency import PEAK
        eff = PEAK if a["peak"] else None
        chips = a["chips"]
        if chips is None and a["dp"] is None:
            chips = 8
        m = self.model(a["model"])
        if a["search"]:
            n = chips
            if n is None:
                n = 1
                for k in ("tp", "pp", "dp", "ep", "cp"):
                    n *= a[k] or 1
            r = T.search(m, a["hardware"], chips=n, seq_len=a["seq_len"], global_batch_tokens=a["global_batch_tokens"],
                         cp=a["cp"], dtype=a["dtype"], tokens=a["tokens"], overlap=a["overlap"], efficiency=eff)
            d = r.to_dict()
            d["explain"] = T.explain(r.top[0]) if r.top else "no layout fits"
            return d
        r = T.train(m, a["hardware"], chips=chips, tp=a["tp"], pp=a["pp"], dp=a["dp"], ep=a["ep"], cp=a["cp"],
                    seq_len=a["seq_len"], global_batch_tokens=a["global_batch_tokens"], micro_batch=a["micro_batch"],
                    recompute=a["recompute"], zero=int(a["zero"]), dtype=a["dtype"], tokens=a["tokens"],
                    overlap=a["overlap"], efficiency=eff)
        d = r.to_dict()
        d["explain"] = T.explain(r)
        return d

    def _overtrain(self, a):
        from tokenmath.analyses.training.overtrain import explain_overtrain, overtrain
        r = overtrain(target_loss=a["target_loss"], compute=a["compute"], inference_tokens=a["inference_tokens"],
                      rl_rollout_tokens=a["rl_rollout_tokens"], fit=a["fit"], hardware=a["hardware"], mfu=a["mfu"],
                      flop_only=a["flop_only"], min_tokens_per_s_per_user=a["min_tokens_per_s_per_user"],
                      input_output_ratio=a["input_output_ratio"], output_len=a["output_len"],
                      weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
        d = r.to_dict()
        d["explain"] = explain_overtrain(r)
        cv = r.curve
        idx = thin(len(cv["params"]))
        d["chart"] = {k: [_f(x) for x in np.asarray(v)[idx]] for k, v in cv.items()}
        return d

    def _chinchilla(self, a):
        from tokenmath.analyses.training.scaling_laws import chinchilla, explain_chinchilla
        r = chinchilla(compute=a["compute"], params=a["params"], tokens=a["tokens"], loss_target=a["loss"], fit=a["fit"])
        d = r.to_dict()
        d["explain"] = explain_chinchilla(r)
        return d


@cache
def _fit_names() -> tuple:
    from tokenmath.analyses.training.scaling_laws import FITS
    return tuple(FITS)


def roofline(r) -> dict:
    """Each operation of prefill and decode as a point of the roofline: arithmetic intensity (FLOPs / HBM bytes, per
    occurrence per chip, from the engine) and the FLOP/s it attains (FLOPs / its own max(compute, memory, comm)
    time), with the chip's roofs: the dense peak of each compute dtype the ops use and the HBM bandwidth."""
    from tokenmath.specs.hardware import FLOP_KEYS
    hw, eff = r.hardware, r.efficiency
    roofs: dict[str, float] = {}

    def label(achievable: float) -> tuple[str, float]:
        peak = achievable / eff.flops if eff.flops else achievable
        for k in FLOP_KEYS:
            v = hw.flops.get(k)
            if v and abs(v - peak) <= 1e-6 * peak:
                return k, v
        return "peak", peak

    passes = {}
    for name, pc in (("prefill", r.prefill), ("decode", r.decode)):
        if pc is None:
            continue
        ops = []
        for op in pc.ops.values():
            fl, by = _f(op.flops) or 0.0, _f(op.bytes) or 0.0
            c, m, k = _f(op.compute_s) or 0.0, _f(op.memory_s) or 0.0, _f(op.comm_s) or 0.0
            t = max(c, m, k)
            key, peak = label(float(op.peak_flops)) if op.peak_flops else ("peak", 0.0)
            if fl > 0 and peak:
                roofs[key] = peak
            ops.append({"name": op.name, "count": _f(op.count), "flops": fl, "bytes": by,
                        "intensity": fl / by if fl > 0 and by > 0 else None,
                        "attained_flops_per_s": fl / t if fl > 0 and t > 0 else None,
                        "compute_s": c, "memory_s": m, "comm_s": k, "total_s": _f(op.total_s),
                        "bound": "communication" if k > max(c, m) else ("compute" if c >= m else "memory"),
                        "flops_dtype": key, "peak_flops": peak or None,
                        "ridge": peak / hw.memory_bw if peak else None})
        passes[name] = {"ops": ops, "time_s": _f(pc.time_s), "bottleneck": str(pc.bottleneck)}
    wkey = hw.flops_key(r.precision.weight.compute)
    wpeak = hw.peak_flops(r.precision.weight.compute)
    roofs.setdefault(wkey, wpeak)
    return {"memory_bw": hw.memory_bw, "memory_bw_achievable": hw.memory_bw * eff.memory_bw,
            "flops_efficiency": eff.flops,
            "roofs": [{"dtype": k, "peak_flops": v, "achievable_flops": v * eff.flops, "ridge": v / hw.memory_bw}
                      for k, v in sorted(roofs.items(), key=lambda kv: -kv[1])],
            "ridge_point": wpeak / hw.memory_bw, "ridge_dtype": wkey, "passes": passes,
            "per": "one occurrence of each op, per chip"}


def _default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, MappingProxyType):
        return dict(o)
    return str(o)


def dumps(obj) -> bytes:
    """JSON bytes; NaN/inf become null (the fast path first: analyses' dicts are usually clean already)."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"), default=_default).encode("utf-8")
    except (ValueError, TypeError):
        return json.dumps(clean(obj), allow_nan=False, separators=(",", ":")).encode("utf-8")


@cache
def _models_bytes() -> bytes:
    from tokenmath.specs.kv_cache import kv_bytes_per_token
    from tokenmath.specs.model_catalog import get_model, model_ids
    from tokenmath.specs.params import count_params
    rows = []
    for mid in model_ids():
        m = get_model(mid)
        p = count_params(m)
        rows.append({"id": mid, "name": m.name, "params_total": p.total, "params_active": p.active,
                     "summary": m.describe(), "is_moe": m.is_moe, "max_context": m.max_context,
                     "native_dtype": m.native_dtype, "kv_bytes_per_token_bf16": kv_bytes_per_token(m, 2.0),
                     "source": m.source})
    return dumps({"models": rows})


@cache
def _hardware_bytes() -> bytes:
    from tokenmath.specs.hardware import get_hardware, hardware_ids
    rows = []
    for hid in hardware_ids():
        h = get_hardware(hid)
        try:
            ridge = h.ridge_point
        except InputError:
            ridge = None
        rows.append({"id": hid, "name": h.name, "vendor": h.vendor, "kind": h.kind, "memory_bytes": h.memory_bytes,
                     "memory_bw": h.memory_bw, "flops": dict(h.flops), "ridge_point_bf16": ridge,
                     "scaleup_domain": h.scaleup_domain, "scaleup_bw": h.scaleup_bw, "scaleout_bw": h.scaleout_bw,
                     "tdp_w": h.tdp_w, "price_usd_per_hour": h.price_usd_per_hour, "price_date": h.price_date,
                     "sources": dict(h.sources)})
    return dumps({"hardware": rows})


def _meta_bytes(api: Api) -> bytes:
    eps = {f"/api/{n}": {"methods": ["GET", "POST"], "python": doc, "params": [p.describe() for p in params]}
           for n, (params, _, doc) in sorted(api.endpoints.items())}
    eps["/api/models"] = {"methods": ["GET"], "python": "tokenmath.specs.model catalog", "params": []}
    eps["/api/hardware"] = {"methods": ["GET"], "python": "tokenmath.specs.hardware catalog", "params": []}
    eps["/api/model-config"] = {"methods": ["POST"], "python": "tokenmath.specs.hf_config.model_from_hf_config",
                                "body": f"a Hugging Face config.json, at most {UPLOAD_MAX_BYTES:,} bytes",
                                "returns": "an id to pass as model="}
    return dumps({"name": "tokenmath", "endpoints": eps, "weight_dtypes": api.weight_dtypes,
                  "kv_dtypes": api.kv_dtypes, "fits": _fit_names(),
                  "errors": "HTTP 422 {\"error\": {field, problem, valid}}; 404/405/413 the same shape"})
