"""Reading the shipped catalogs and user files, with size limits before parsing."""
from __future__ import annotations

import json
import os
from functools import cache
from typing import TYPE_CHECKING

from tokenmath.base.cache_dir import cache_dir
from tokenmath.base.errors import InputError, show

if TYPE_CHECKING:
    from pathlib import Path
# pathlib is imported only where a Path is made (a user file, a cache miss): the catalogs every command reads are
# found with os.path, since pathlib (with urllib.parse and ipaddress) is ~5 ms of a start-up that needs nothing else
# of it

# a config.json or hardware file is a few KB (the largest fixture 3.8 KB); the limit also bounds parse time
# (tomllib is pure Python: a 2 MB TOML array took seconds)
MAX_FILE_BYTES = 256_000
MAX_JSON_DEPTH = 32


@cache
def shipped(name: str) -> dict:
    """A catalog shipped in tokenmath/data (TOML), as a dict of id -> record.

    tomllib is pure Python (~70 ms for the five catalogs an `infer` reads, most of its start-up beyond imports), so
    the parsed dict is also kept as JSON in the user's cache folder (parsed_cache_dir()), named by the SHA-256 of
    the TOML's bytes (a changed catalog is parsed again) and checked on every read: its first line is the SHA-256
    of that name's digest and the JSON after it, so a cache edited, truncated or corrupted since it was written is
    not trusted but parsed again from the TOML and rewritten (issue 40: an edited cache changed answers silently).
    A cache that cannot be read or written is ignored. (Not a defence against someone who may write the cache folder
    on purpose and recompute the digest: they may as well edit the package.)"""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", name)
    if os.path.isfile(path):      # an ordinary install; importlib.resources (slow to import) only for zipped ones
        with open(path, "rb") as fh:
            raw = fh.read()
    else:
        from importlib import resources
        raw = resources.files("tokenmath").joinpath("data", name).read_bytes()
    import hashlib
    source = hashlib.sha256(raw).hexdigest()
    cached = _cache_path(name, source)
    if cached is not None:
        try:
            with open(cached, encoding="utf-8") as fh:
                seal, _, body = fh.read().partition("\n")
            if seal == _seal(source, body):
                data = json.loads(body)
                if isinstance(data, dict):
                    return data
        except (OSError, ValueError):
            pass
    import tomllib      # only on a cache miss: its import is ~5 ms of a start-up that needs none
    data = tomllib.loads(raw.decode("utf-8"))
    if cached is not None:
        from pathlib import Path
        _store(Path(cached), data, source)
    return data


def _cache_path(name: str, source: str) -> str | None:
    """The cache file of catalog `name` whose bytes have SHA-256 `source` (hex)."""
    d = cache_dir()
    if d is None:
        return None
    return os.path.join(d, f"{name}.{source[:32]}.json")


def _seal(source: str, body: str) -> str:
    """The first line of a cache file: the SHA-256 of its catalog's digest and the JSON that follows."""
    import hashlib
    return hashlib.sha256(f"{source}\n{body}".encode()).hexdigest()


def parsed_cache_dir() -> Path | None:
    """Where parsed catalogs are kept: $TOKENMATH_CACHE_DIR, else $XDG_CACHE_HOME/tokenmath, else
    ~/.cache/tokenmath; TOKENMATH_CACHE_DIR="" turns the cache off (None)."""
    from pathlib import Path
    d = cache_dir()
    return None if d is None else Path(d)


def _store(dest: Path | None, data: dict, source: str) -> None:
    """Write the parsed catalog as JSON, under its seal, when JSON gives back exactly the same dict (no dates, no NaN
    surprises)."""
    if dest is None:
        return
    try:
        text = json.dumps(data)
        if json.loads(text) != data:
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{_seal(source, text)}\n{text}", encoding="utf-8")
        os.replace(tmp, dest)       # atomic: another process reads the old file or the new, never half of one
    except (OSError, TypeError, ValueError):
        pass


def json_depth(text: str) -> int:
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
    from pathlib import Path
    p = Path(path)
    try:
        if not p.is_file():
            raise InputError(field, f"file not found: {show(str(path), 120)}",
                             "give a catalog id or the path of an existing file")
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(field, f"file {p.name!r} is {size:,} bytes", f"at most {MAX_FILE_BYTES:,} bytes are read")
        with p.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)   # never trust the size the file system reports
    except OSError as e:            # a name too long for the file system, a folder we may not read, ...
        raise InputError(field, f"cannot read {show(str(path), 120)}: {e.strerror or type(e).__name__}",
                         "the path of an existing, readable file") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(field, f"file {p.name!r} is over {MAX_FILE_BYTES:,} bytes", f"at most {MAX_FILE_BYTES:,} bytes are read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(field, f"file {p.name!r} is not UTF-8 text", "a JSON or TOML text file") from None
    if p.suffix.lower() == ".toml":
        try:
            import tomllib
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as e:   # TOMLDecodeError, huge integer literals, deep nesting
            raise InputError(field, f"{p.name!r} is not valid TOML: {str(e)[:200]}", "a TOML table of keys") from None
    else:
        if json_depth(text) > MAX_JSON_DEPTH:
            raise InputError(field, f"{p.name!r} is nested deeper than {MAX_JSON_DEPTH} levels", "a flat JSON object")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as e:   # JSONDecodeError, integer literals over 4300 digits
            raise InputError(field, f"{p.name!r} is not valid JSON: {str(e)[:200]}", "a JSON object") from None
    if not isinstance(data, dict):
        raise InputError(field, f"{p.name!r} holds a {type(data).__name__}, not an object", "a JSON object of keys")
    return data


def looks_like_path(s: str) -> bool:
    return s.endswith((".json", ".toml")) or "/" in s or "\\" in s


def shipped_rows(table: dict | None, name: str, key: str, what: str) -> list:
    """The [[key]] rows of `table`, or of the shipped file `name` when table is None; refused (field `key`) when
    there are none. what: what the rows should be, for the error."""
    rows = (shipped(name) if table is None else table).get(key)
    if not isinstance(rows, list) or not rows:
        raise InputError(key, f"no [[{key}]] rows", what)
    return rows
