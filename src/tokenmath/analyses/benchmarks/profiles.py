"""Named calibration profiles: the values `tokenmath calibrate` fitted on the user's own runs, kept as a small TOML
file in the user's tokenmath folder (base/cache_dir.py: $TOKENMATH_CACHE_DIR, else $XDG_CACHE_HOME/tokenmath, else
~/.cache/tokenmath; profiles/NAME.toml) and applied with `--profile NAME`: the chip's kernel model with the profile's
residuals in place of the shipped ones (specs.efficiency.physics_calibrated with values=). A profile belongs to the
chip and serving engine it was fitted on; asking it of another is refused, naming both.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from datetime import date

from tokenmath.base.errors import InputError

HEADER = "# tokenmath calibration profile written by `tokenmath calibrate`"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_PROFILE_BYTES = 64_000
VALUE_NAMES = ("compute_scale", "bw_scale", "step_cpu_s", "layer_overhead_s", "step_cpu_per_seq_s")


def profile_dir() -> str:
    from tokenmath.base.cache_dir import cache_dir
    base = cache_dir()
    if base is None:
        raise InputError("profile", "TOKENMATH_CACHE_DIR is empty, so tokenmath keeps no files",
                         "set TOKENMATH_CACHE_DIR to a folder, or unset it")
    return os.path.join(base, "profiles")


def profile_path(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InputError("profile", f"{str(name)[:70]!r} is not a profile name",
                         "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return os.path.join(profile_dir(), f"{name}.toml")


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    s = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{s}"'


def save_profile(name: str, result: dict, files: list[str]) -> str:
    """Write the calibration `result` (analyses.benchmarks.calibrate.calibrate) as profile `name`; returns its path.
    A refused calibration is never saved."""
    from tokenmath.base.files import write_atomic
    if result.get("refused"):
        raise InputError("profile", "this calibration was refused: " + result["refused"], "nothing saved")
    path = profile_path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    dep, ho = result["deployment"], result["heldout"]
    lines = [HEADER, f"# from {len(result['runs'])} runs in: " + ", ".join(os.path.basename(f) for f in files),
             f"name = {_toml_value(name)}", f"fitted = {_toml_value(date.today().isoformat())}",
             f"runs = {len(result['runs'])}"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in dep.items()]
    for k in ("default_median_ape", "calibrated_median_ape"):
        if ho.get(k) is not None:
            lines.append(f"heldout_{k} = {_toml_value(ho[k])}")
    lines.append("")
    lines.append("[values]")
    lines += [f"{k} = {_toml_value(float(result['values'][k]))}" for k in VALUE_NAMES]
    return write_atomic(path, "\n".join(lines) + "\n", "profile", force=True, suffixes=(".toml",))


def load_profile(name: str) -> dict:
    """A saved profile, checked: its values inside the bounds their parameters declare."""
    import tomllib
    path = profile_path(name)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_PROFILE_BYTES + 1)
    except FileNotFoundError:
        have = sorted(f[:-5] for f in os.listdir(os.path.dirname(path)) if f.endswith(".toml")) \
            if os.path.isdir(os.path.dirname(path)) else []
        raise InputError("profile", f"no profile {name!r} in {os.path.dirname(path)}",
                         ("one of: " + ", ".join(have)) if have else "make one with tokenmath calibrate") from None
    except OSError as e:            # a folder by that name, a file it may not read, ...
        raise InputError("profile", f"cannot read {path}: {e.strerror or type(e).__name__}",
                         "a file tokenmath calibrate wrote") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise InputError("profile", f"{path} is over {MAX_PROFILE_BYTES:,} bytes", "a file tokenmath calibrate wrote")
    try:
        prof = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:   # not TOML, a huge integer, nested too deep
        raise InputError("profile", f"{path} is not a TOML profile: {str(e)[:200]}",
                         "a file tokenmath calibrate wrote") from None
    vals = prof.get("values")
    if not isinstance(vals, dict) or any(k not in vals for k in VALUE_NAMES):
        raise InputError("profile", f"{path} lacks [values] " + ", ".join(VALUE_NAMES), "a file tokenmath "
                         "calibrate wrote")
    bounds = _bounds()
    for k in VALUE_NAMES:
        v = vals[k]
        lo, hi = bounds[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise InputError(f"profile {name}.values.{k}", f"{v!r} is outside its physical range [{lo:g}, {hi:g}]",
                             "a value tokenmath calibrate fitted")
    for k in ("name", "hardware", "engine"):      # name: an answer names its profile by it (missing: a KeyError)
        if not isinstance(prof.get(k), str):
            raise InputError(f"profile {name}.{k}", "is missing", "a file tokenmath calibrate wrote")
    return prof


def _bounds() -> dict:
    from tokenmath.analyses.calibration.parameters import physics_params
    return {p.name: p.bounds for p in physics_params() if p.name in VALUE_NAMES}


def efficiency_of(prof: dict, hardware, engine):
    """The Efficiency a profile gives for `hardware` and `engine` (ids or resolved objects): refused for a chip or
    engine other than the profile's own."""
    from tokenmath.specs.efficiency import physics_calibrated
    from tokenmath.specs.serving_engines import resolve_engine
    hw_id = getattr(hardware, "id", hardware)
    if str(hw_id) != prof["hardware"] and _chip_of(hardware) != prof["hardware"]:
        raise InputError("profile", f"{prof['name']!r} was fitted on {prof['hardware']}, not {hw_id}",
                         f"--hardware {prof['hardware']}, or calibrate on runs of {hw_id}")
    eng = resolve_engine(engine if engine is not None else prof["engine"])
    eng_id = getattr(eng, "id", None)
    if eng_id != prof["engine"]:
        raise InputError("profile", f"{prof['name']!r} was fitted on {prof['engine']}, not {eng_id}",
                         f"--engine {prof['engine']}")
    vals = {k: float(prof["values"][k]) for k in VALUE_NAMES}
    eff = physics_calibrated(hardware, eng, vals,
                             f"profile {prof['name']}")
    return replace(eff, source=eff.source + f"; calibrated on the user's runs (profile {prof['name']!r}, "
                   f"{prof.get('runs')} runs, fitted {prof.get('fitted')})")


def _chip_of(hardware) -> str | None:
    """The chip of a system (hgx-h100 -> h100-sxm), so a profile fitted on a chip serves the systems built of it."""
    from tokenmath.specs.systems import get_system
    try:
        return get_system(hardware).chip or None
    except InputError:
        return None
