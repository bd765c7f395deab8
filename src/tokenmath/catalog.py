"""Reading the shipped catalogs and user files, with size limits before parsing."""
from __future__ import annotations

import json
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from .errors import InputError

MAX_FILE_BYTES = 2_000_000   # a config.json or hardware file is a few KB; refuse anything absurd before parsing
MAX_JSON_DEPTH = 32


@cache
def shipped(name: str) -> dict:
    """A catalog shipped in tokenmath/data (TOML), as a dict of id -> record."""
    text = resources.files("tokenmath").joinpath("data", name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _depth(text: str) -> int:
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def read_user_file(path: str | Path, field: str) -> dict:
    """Parse a user-supplied .json or .toml file into a dict; every failure is an InputError naming `field`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(field, f"file not found: {str(path)!r}", "give a catalog id or the path of an existing file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(field, f"file {p.name!r} is {size:,} bytes", f"at most {MAX_FILE_BYTES:,} bytes are read")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(field, f"file {p.name!r} is not UTF-8 text", "a JSON or TOML text file") from None
    if p.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(field, f"{p.name!r} is not valid TOML: {e}", "a TOML table of keys") from None
    else:
        if _depth(text) > MAX_JSON_DEPTH:
            raise InputError(field, f"{p.name!r} is nested deeper than {MAX_JSON_DEPTH} levels", "a flat JSON object")
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise InputError(field, f"{p.name!r} is not valid JSON: {e}", "a JSON object") from None
    if not isinstance(data, dict):
        raise InputError(field, f"{p.name!r} holds a {type(data).__name__}, not an object", "a JSON object of keys")
    return data


def looks_like_path(s: str) -> bool:
    return s.endswith((".json", ".toml")) or "/" in s or "\\" in s
