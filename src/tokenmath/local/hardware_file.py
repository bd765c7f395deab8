"""Writing a hardware record (the catalog's schema, see src/tokenmath/data/hardware.toml) to a .toml or .json file,
with a small TOML writer of its own: tomllib only reads."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from tokenmath.base.errors import InputError

HEADER = ("tokenmath hardware file written by `tokenmath measure` "
          "(catalog schema; see src/tokenmath/data/hardware.toml)")


def _toml_value(v) -> str:
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
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
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
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for k, v in subs:
            emit(v, f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k))
    emit(rec, "")
    return "\n".join(lines) + "\n"


def write_hardware_file(rec: dict, path: str | os.PathLike) -> str:
    """Write rec as TOML or JSON by the path's suffix; InputError("out") for another suffix or a missing folder."""
    p = Path(path)
    if p.suffix.lower() not in (".toml", ".json"):
        raise InputError("out", f"unsupported file type {p.suffix or '(none)'!r}", "a .toml or .json path")
    if p.parent and not p.parent.exists():
        raise InputError("out", f"folder {str(p.parent)!r} does not exist", "an existing folder")
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(rec, indent=2) + "\n")
    else:
        p.write_text(to_toml(rec, header=HEADER))
    return str(p)
