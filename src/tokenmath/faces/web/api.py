"""The JSON API behind `tokenmath serve`: parameters in, an analysis' own `to_dict()` (+ its --explain text) out.

Every endpoint mirrors one Python function (tokenmath.analyses.*) with the same parameter names. Api parses a
request's raw parameters (faces/web/params.py), refuses what a web page must never pass on (file paths: a model is a
catalog id or an uploaded config, hardware is a catalog id), calls the endpoint (faces/web/endpoints.py) and keeps
its JSON bytes (faces/web/payload.py) in a response cache. No physics here.

Bad input raises tokenmath.base.errors.InputError naming the field; the server answers it with HTTP 422.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from tokenmath.base.errors import InputError, closest, unknown_name
from tokenmath.faces.web.budget import check
from tokenmath.faces.web.catalogs import hardware_json, models_json
from tokenmath.faces.web.agents import agents_table
from tokenmath.faces.web.endpoints import Endpoint, endpoint_table, fit_names
from tokenmath.faces.web.serving_fields import dtype_choices
from tokenmath.faces.names import named
from tokenmath.faces.web.params import coerce
from tokenmath.faces.web.payload import dumps
from tokenmath.faces.web.sensitivity import metric_labels, sensitivity_table
from tokenmath.faces.web.uploads import (UPLOAD_MAX_BYTES, UPLOAD_PREFIX, UploadedModels, model_from_upload,
                                         upload_summary)

if TYPE_CHECKING:
    from tokenmath.specs.model import Model

CACHE_ENTRIES = 1024               # responses kept (least recently used dropped)
MAX_NAME_CHARS = 64                # of a parameter's name, as an error repeats it
MAX_TEXT_CHARS = 600               # of an error's problem or valid text
MAX_UNKNOWN = 8                    # unknown parameter names an error lists


class Api:
    """The endpoints, their parameters, a response cache and the uploaded models (one instance per server)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, bytes] = OrderedDict()
        self.uploads = UploadedModels()
        self.endpoints: dict[str, Endpoint] = {**endpoint_table(self.model), **sensitivity_table(self.model),
                                               **agents_table(self.model)}
        self.weight_dtypes, self.kv_dtypes = dtype_choices()

    def names(self) -> list[str]:
        return sorted(self.endpoints) + ["hardware", "model-config", "models"]

    def parse(self, name: str, raw: dict) -> dict:
        params, _, _ = self.endpoints[name]
        by = {p.name: p for p in params}
        unknown = [str(k) for k in raw if k not in by]
        if unknown:
            k = bounded(unknown[0], MAX_NAME_CHARS)
            near = closest(k, by)
            more = (f" (and {len(unknown) - 1:,} more: {', '.join(bounded(u, MAX_NAME_CHARS) for u in unknown[1:MAX_UNKNOWN])}"
                    + (", ..." if len(unknown) > MAX_UNKNOWN else "") + ")") if len(unknown) > 1 else ""
            raise InputError(k or "parameter", ("unknown parameter" if k else "has an empty name") + more,
                             (f"did you mean {', '.join(near)}? " if near else "") + f"{name} takes " + ", ".join(by))
        return {p.name: coerce(p, raw.get(p.name)) for p in params}

    def call(self, name: str, raw: dict) -> bytes:
        """The JSON bytes answering endpoint `name` with raw parameters; InputError for bad input."""
        args, key, hit = self.prepare(name, raw)
        if hit is not None:
            return hit
        body = self.compute(name, args)
        self.store(key, body)
        return body

    def prepare(self, name: str, raw: dict) -> tuple[dict, tuple, bytes | None]:
        """(parsed parameters, cache key, the cached answer or None); InputError for bad input, and for a question
        over the web's budget on work (faces/web/budget.py), before anything runs."""
        args = self.parse(name, raw)
        key = (name, tuple(sorted((k, repr(v)) for k, v in args.items())))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return args, key, hit
        check(name, args, self.model)
        return args, key, None

    def compute(self, name: str, args: dict) -> bytes:
        """The JSON bytes answering endpoint `name` with parsed parameters (not cached; see call)."""
        _, handler, _ = self.endpoints[name]
        return dumps(named(handler(args), self.model_name))

    def store(self, key: tuple, body: bytes) -> None:
        with self._lock:
            self._cache[key] = body
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)

    def uploads_of(self, args: dict) -> tuple:
        """The uploaded models a request names (a worker process has none of its own)."""
        spec = args.get("model")
        if isinstance(spec, str) and spec.lower().startswith(UPLOAD_PREFIX):
            return (self.uploads.get(spec),)
        return ()

    def error(self, name: str, err: dict) -> bytes:
        """An InputError's dict as the web answers it: its field named as the request's parameter (an override's
        'set.memory_gb' is the parameter 'set'; the figure named in the problem), every text bounded."""
        e = dict(err.get("error", err))
        field = str(e.get("field") or "")
        params = {p.name for p in self.endpoints[name].params} if name in self.endpoints else set()
        if params and field not in params:
            head, _, rest = field.partition(".")
            if head in params and rest:
                field, e["problem"] = head, f"{rest}: {e.get('problem')}"
        e["field"] = bounded(field, MAX_NAME_CHARS) if e.get("field") is not None else None
        for k in ("problem", "valid"):
            if e.get(k) is not None:
                e[k] = bounded(str(e[k]), MAX_TEXT_CHARS)
        return dumps({"error": e})

    def model(self, spec: str, field: str = "model") -> Model:
        """A catalog Model or an uploaded one (never a path)."""
        from tokenmath.specs.model_catalog import catalog, get_model
        key = spec.lower()
        if key.startswith(UPLOAD_PREFIX):
            return self.uploads.get(spec, field)
        cat = catalog()
        if key not in cat:
            raise unknown_name(field, spec, cat)
        return get_model(key)

    def model_name(self, spec: str) -> str | None:
        """A model id's name (catalog or upload), None for an id this server does not know."""
        try:
            return self.model(spec).name
        except InputError:
            return None

    def meta(self) -> bytes:
        """GET /api: every endpoint with its methods, the Python function it mirrors and its parameters."""
        eps = {f"/api/{n}": {"methods": ["GET", "POST"], "python": doc, "params": [p.describe() for p in params]}
               for n, (params, _, doc) in sorted(self.endpoints.items())}
        eps["/api/models"] = {"methods": ["GET"], "python": "tokenmath.specs.model catalog", "params": []}
        eps["/api/hardware"] = {"methods": ["GET"], "python": "tokenmath.specs.hardware catalog", "params": []}
        eps["/api/model-config"] = {"methods": ["POST"], "python": "tokenmath.specs.hf_config.model_from_hf_config",
                                    "body": f"a Hugging Face config.json, at most {UPLOAD_MAX_BYTES:,} bytes",
                                    "returns": "an id to pass as model="}
        return dumps({"name": "tokenmath", "endpoints": eps, "weight_dtypes": self.weight_dtypes,
                      "kv_dtypes": self.kv_dtypes, "fits": fit_names(), "sensitivity_metrics": metric_labels(),
                      "errors": "HTTP 422 {\"error\": {field, problem, valid}} (field: the parameter sent; also a "
                                "question over the work a request may do); 403 a cross-site request; 503/504 a heavy "
                                "question over its memory or time, or a busy server; 404/405/413 the same shape"})

    @staticmethod
    def models() -> bytes:
        return models_json()

    @staticmethod
    def hardware() -> bytes:
        return hardware_json()

    def upload(self, body: bytes, filename: str | None = None) -> bytes:
        """POST /api/model-config: a Hugging Face config.json parsed as data only and kept in memory; the answer
        holds the id to pass as `model`."""
        m = model_from_upload(body, filename)
        summary = upload_summary(m)
        self.uploads.add(m)
        return dumps(summary)


def bounded(text: str, n: int) -> str:
    """text cut to n characters (an ellipsis marks the cut)."""
    return text if len(text) <= n else text[:n - 3] + "..."
