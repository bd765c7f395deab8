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
    assert len(files) == 1 and json.loads(files[0].read_text().partition("\n")[2]) == truth
    assert parse(name) == truth                      # second call: read from the cache
    files[0].write_text("{ not json")
    assert parse(name) == truth                      # corrupt: parsed again
    files[0].write_text("[1, 2]")
    assert parse(name) == truth                      # not a dict: parsed again


def test_key_follows_the_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    # an edited catalog never meets its old parse: the file name carries the SHA-256 of the TOML's bytes
    d = catalog.parsed_cache_dir()
    assert d == tmp_path
    names = {p.name for p in tmp_path.iterdir()} if tmp_path.exists() else set()
    parse("engines.toml")
    new = {p.name for p in tmp_path.iterdir()} - names
    import hashlib
    assert new == {f"engines.toml.{hashlib.sha256((DATA / 'engines.toml').read_bytes()).hexdigest()[:32]}.json"}


def test_an_edited_cache_is_not_trusted(tmp_path, monkeypatch):
    """Issue 40 item 8: a number edited in the cached JSON (a valid JSON dict still) changed infer's decode step
    7.87 -> 3.43 ms with no warning. The seal (the SHA-256 of the source's digest and the JSON) no longer matches: the
    catalog is parsed again from the TOML and the cache rewritten."""
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(tmp_path))
    truth = tomllib.loads((DATA / "hardware.toml").read_text(encoding="utf-8"))
    parse("hardware.toml")
    [f] = tmp_path.glob("hardware.toml.*.json")
    seal, _, body = f.read_text().partition("\n")
    edited = json.loads(body)
    edited["h100-sxm"]["memory_bw_tbs"] *= 3
    f.write_text(seal + "\n" + json.dumps(edited))          # a valid dict under the old seal
    assert parse("hardware.toml") == truth
    assert json.loads(f.read_text().partition("\n")[2]) == truth      # rewritten
    f.write_text(json.dumps(edited))                       # no seal at all (an old-format or hand-made cache)
    assert parse("hardware.toml") == truth


def test_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", "")
    assert catalog.parsed_cache_dir() is None
    assert parse("engines.toml") == tomllib.loads((DATA / "engines.toml").read_text(encoding="utf-8"))


def test_unwritable_cache_folder_is_harmless(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(blocker / "sub"))   # a folder under a file: mkdir fails
    assert parse("calibration.toml") == tomllib.loads((DATA / "calibration.toml").read_text(encoding="utf-8"))
