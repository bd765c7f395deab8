"""Where tokenmath keeps what it derives once per machine and reuses on every start: the parsed catalogs
(specs/catalog.py)."""
from __future__ import annotations

import os


def cache_dir() -> str | None:
    """$TOKENMATH_CACHE_DIR, else $XDG_CACHE_HOME/tokenmath, else ~/.cache/tokenmath, as a string (no pathlib: this
    runs on every start, and pathlib's import is ~5 ms). TOKENMATH_CACHE_DIR="" turns every cache off (None)."""
    env = os.environ.get("TOKENMATH_CACHE_DIR")
    if env is not None:
        return env or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tokenmath")
