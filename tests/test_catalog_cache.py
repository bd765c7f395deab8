"""Issue 23 item 9: the shipped TOML catalogs are parsed once per machine and kept as JSON in a cache folder keyed
by the TOML's bytes. The cache must never change an answer: same dict as tomllib, a corrupt or stale file ignored."""
import json
import tomllib
from pathlib import Path

import pytest

from tokenmath.specs import catalog

DATA = Path(catalog.__file__).parent.parent / "data"
parse = catalog.shipped.__wrapped__      # the uncached-in-memory function (functools.cache keeps the original)


@pytest.mark.parametrize("name", ["hardware.toml", "models.toml", "kernels.toml"])
def test_cached_equals_tomllib_and_a_corrupt_cache_is_ignored(tmp_path, monkeypatch, name):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    truth = tomllib.loads((DATA / name).read_text(encoding="utf-8"))
    assert parse(name) == truth                      # first call: parsed, then stored
    files = list(tmp_path.glob(f"{name}.*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == truth
    assert parse(name) == truth                      # second call: read from the cache
    files[0].write_text("{ not json")
    assert parse(name) == truth                      # corrupt: parsed again
    files[0].write_text("[1, 2]")
    assert parse(name) == truth                      # not a dict: parsed again


def test_key_follows_the_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    # an edited catalog never meets its old parse: the file name carries the TOML's length and CRC-32
    d = catalog.parsed_cache_dir()
    assert d == tmp_path
    names = {p.name for p in tmp_path.iterdir()} if tmp_path.exists() else set()
    parse("engines.toml")
    new = {p.name for p in tmp_path.iterdir()} - names
    raw = (DATA / "engines.toml").read_bytes()
    import zlib
    assert new == {f"engines.toml.{len(raw)}-{zlib.crc32(raw):08x}.json"}


def test_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", "")
    assert catalog.parsed_cache_dir() is None
    assert parse("engines.toml") == tomllib.loads((DATA / "engines.toml").read_text(encoding="utf-8"))


def test_unwritable_cache_folder_is_harmless(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(blocker / "sub"))   # a folder under a file: mkdir fails
    assert parse("calibration.toml") == tomllib.loads((DATA / "calibration.toml").read_text(encoding="utf-8"))
