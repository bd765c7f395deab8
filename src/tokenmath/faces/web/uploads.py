"""Uploaded Hugging Face config.json files: parsed as data only into a Model, and kept in memory per server (least
recently used dropped). A model uploaded is named `upload:<16 hex digits of the SHA-256 of its canonical JSON and its
display name>`: the same file under the same name is the same model; under a new name, a new one."""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING

from tokenmath.base.errors import InputError

if TYPE_CHECKING:
    from tokenmath.specs.model import Model

UPLOAD_MAX_BYTES = 256 * 1024      # a config.json is a few kB; refuse more before reading the body
UPLOAD_PREFIX = "upload:"
MAX_UPLOADS = 128                  # uploaded models kept in memory (least recently used dropped)
FIELD = "config.json"              # the field named by an upload's errors
LABEL_MAX_CHARS = 80               # of an uploaded model's display name


def _no_constants(c):
    raise ValueError(f"{c} is not a JSON number")


def model_from_upload(body: bytes, filename: str | None = None) -> Model:
    """A Hugging Face config.json (bytes, at most UPLOAD_MAX_BYTES) parsed as data only: json.loads, then
    tokenmath.specs.hf_config.model_from_hf_config. Its id is the one to pass as `model`."""
    from tokenmath.specs.catalog import MAX_JSON_DEPTH, json_depth
    from tokenmath.specs.hf_config import model_from_hf_config
    if len(body) > UPLOAD_MAX_BYTES:
        raise InputError(FIELD, f"is {len(body):,} bytes", f"at most {UPLOAD_MAX_BYTES:,} bytes")
    if body.startswith(b"\xef\xbb\xbf"):   # refused, as the command line refuses such a file (RFC 8259: JSON has none)
        raise InputError(FIELD, "starts with a UTF-8 byte order mark", "a JSON file saved as UTF-8 without a BOM")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(FIELD, "is not UTF-8 text", "a JSON file") from None
    if json_depth(text) > MAX_JSON_DEPTH:
        raise InputError(FIELD, f"nests deeper than {MAX_JSON_DEPTH} levels", "a Hugging Face config.json")
    try:
        data = json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError) as e:
        raise InputError(FIELD, f"is not valid JSON ({str(e)[:120]})", "a Hugging Face config.json") from None
    if not isinstance(data, dict):
        raise InputError(FIELD, "is not a JSON object", "a Hugging Face config.json")
    label = data.get("_name_or_path") if isinstance(data.get("_name_or_path"), str) else None
    label = label or (filename or "").strip() or "uploaded config.json"
    label = "".join(ch for ch in label if ch.isprintable())[:LABEL_MAX_CHARS]
    # content + name: the same config under another name is another model (its answers carry its own name)
    canonical = json.dumps([data, label], sort_keys=True, separators=(",", ":"))
    mid = UPLOAD_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:16]
    m = model_from_hf_config(data, name=label)
    return replace(m, id=mid, name=label)


def upload_summary(m: Model) -> dict:
    """The answer to an upload: the model's id and what the page shows of it (parameters, KV bytes per token in
    bf16, largest context)."""
    from tokenmath.specs.kv_cache import kv_bytes_per_token
    from tokenmath.specs.params import count_params
    p = count_params(m)
    return {"id": m.id, "name": m.name, "summary": m.describe(), "params_total": p.total,
            "params_active": p.active, "kv_bytes_per_token_bf16": kv_bytes_per_token(m, 2.0),
            "is_moe": m.is_moe, "max_context": m.max_context, "native_dtype": m.native_dtype}


class UploadedModels:
    """The models uploaded to one server, by id, in memory (thread-safe; least recently used dropped)."""

    def __init__(self, limit: int = MAX_UPLOADS):
        self._lock = threading.Lock()
        self._models: OrderedDict[str, Model] = OrderedDict()
        self._limit = limit

    def add(self, m: Model) -> None:
        with self._lock:
            self._models[m.id] = m
            self._models.move_to_end(m.id)
            while len(self._models) > self._limit:
                self._models.popitem(last=False)

    def get(self, spec: str, field: str = "model") -> Model:
        """The uploaded model `spec` names (case-insensitive); InputError when this server has none by that id."""
        key = spec.lower()
        with self._lock:
            m = self._models.get(key)
            if m is not None:
                self._models.move_to_end(key)
        if m is None:
            raise InputError(field, f"no uploaded config {spec!r} on this server (uploads live in memory)",
                             "upload the config.json again (POST /api/model-config)")
        return m
