"""Which releases of an engine a profile describes, and `--engine NAME@RELEASE` (for example `sglang@0.5`).

A profile's defaults were read from the engine's code at the commits its `sources` name (data/engines.toml);
`releases_from` is the first release line they hold for (the line where the behaviour the profile assumes became
the default: vLLM's V1 engine from 0.8.0, SGLang's overlap scheduler from 0.4, TensorRT-LLM's PyTorch backend and
trtllm-serve from 1.0), each with its source in the profile's `sources.releases`. tokenmath holds one profile per
engine, not one per release: asking for a release the profile covers gives the profile's answer and says which
release it assumed; asking for an earlier one, or for a release of an engine whose profile records none, is refused
with the releases that are covered.

An earlier release line with measurements of its own (`earlier_lines`: vLLM 0.6-0.7, the V0 engine, whose published
rows form the calibration group `vllm-v0` in data/calibration.toml) is answered with the profile's scheduling
defaults and the residuals fitted on that line's rows (its CPU per step and per sequence, its gap per layer, its
compute and bandwidth scales): the figures then do depend on the release, and the answer says which line it took.
"""
from __future__ import annotations

import re

from tokenmath.base.errors import InputError

_RELEASE = re.compile(r"^v?(\d{1,8}(?:\.\d{1,8}){0,3})((?:\.?(?:post|rc|dev)\d{0,8})*)$")


def split(spec: str) -> tuple[str, str]:
    """("sglang", "0.5.9") from "sglang@0.5.9"; ("sglang", "") without a release."""
    name, _, release = spec.partition("@")
    return name.strip(), release.strip()


def numbers(release: str, field: str = "engine") -> tuple[int, ...]:
    """The numeric part of a release ("0.5.12.post1" -> (0, 5, 12)); InputError for anything else."""
    m = _RELEASE.match(release.strip().lower())
    if not m:
        raise InputError(field, f"release {release!r} is not a version",
                         "a release such as 0.5, 0.5.9 or 1.3.0rc14 after the engine's name (sglang@0.5)")
    return tuple(int(x) for x in m.group(1).split("."))


def _covers(got: tuple[int, ...], line: tuple[int, ...]) -> bool:
    """Whether release `got` is on or after release line `line` (0.5.9 is on line 0.5; 0.4 is not)."""
    return got[:len(line)] >= line


def check_release(profile, release: str) -> tuple[str, "object | None"]:
    """(the release asked of an EngineProfile, normalized: no leading v; the EarlierLine it falls on, or None for a
    release of the profile's own lines, >= its releases_from). Refused below every line the profile records."""
    eid, releases_from, name = profile.id, profile.releases_from, profile.name
    if not releases_from:
        raise InputError("engine", f"{eid}@{release}: tokenmath's {name} profile records no release lines",
                         f"{eid} (its defaults as read, see data/engines.toml)")
    got = numbers(release)
    norm = release.strip().lstrip("vV")
    if _covers(got, numbers(releases_from, f"engine[{eid}].releases_from")):
        return norm, None
    for line in sorted(profile.earlier_lines, key=lambda x: numbers(x.start), reverse=True):
        if _covers(got, numbers(line.start)):
            return norm, line
    first = min([releases_from, *(x.start for x in profile.earlier_lines)], key=numbers)
    raise InputError("engine", f"{eid}@{release}: tokenmath's {name} profile describes releases from {first} on",
                     f"{eid}@{first} or later, or {eid}")
