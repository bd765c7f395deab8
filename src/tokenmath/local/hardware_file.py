"""Writing a hardware record (the catalog's schema, see src/tokenmath/data/hardware.toml) to a .toml or .json file,
with a small TOML writer of its own: tomllib only reads."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from tokenmath.base.files import MEASURE_HEADER, check_destination, write_atomic

SUFFIXES = (".toml", ".json")
HEADER = MEASURE_HEADER       # the first line marks the file as ours (base/files.is_ours): replaced without --force


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("TOML has no place for NaN here")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)   # JSON's escapes are valid in a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def to_toml(rec: dict, header: str = "") -> str:
    """Scalars and small tables inline at the top; nested tables (sources, measured) as [sections]."""
    lines = [f"# {header}"] if header else []
    inline_tables = ("tflops",)

    def emit(d: dict, prefix: str):
        scal = [(k, v) for k, v in d.items() if not isinstance(v, dict) or k in inline_tables and not prefix]
        subs = [(k, v) for k, v in d.items() if isinstance(v, dict) and not (k in inline_tables and not prefix)]
        if prefix and scal:
            lines.append("")
            lines.append(f"[{prefix}]")
        for k, v in scal:
            lines.append(f"{_toml_key(k)} = {toml_value(v)}")
        for k, v in subs:
            emit(v, f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k))
    emit(rec, "")
    return "\n".join(lines) + "\n"


def write_hardware_file(rec: dict, path: str | os.PathLike) -> str:
    """Write rec as TOML or JSON by the path's suffix, whole or not at all (tokenmath.base.files.write_atomic: no
    link followed; a file tokenmath did not write is replaced only when `path` carries --force); InputError("out")
    for another suffix or a path problem. Both forms carry "`tokenmath measure`" near their start (ours)."""
    dest = check_destination(path, "out", SUFFIXES)
    if Path(dest).suffix.lower() == ".json":
        text = json.dumps(rec, indent=2) + "\n"
    else:
        text = to_toml(rec, header=HEADER)
    return write_atomic(dest, text, "out")
