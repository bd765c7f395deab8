"""What this machine says about itself: memory (bytes), last-level cache (bytes), CPU name and cores, whether other
processes already load it, and the versions of the software a measurement ran on."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.meminfo import meminfo  # noqa: F401 (its home is base; measure reads it here)

DEVICES = ("cpu", "cuda")


def check_device(device: str) -> str:
    """The device name in lower case; InputError("device") for anything but cpu or cuda."""
    device = str(device).lower()
    if device not in DEVICES:
        raise InputError("device", f"unknown device {device!r}", "cpu or cuda")
    return device


def _parse_size(s: str) -> int | None:
    """'32K', '1.5 MiB', '8388608' -> bytes; None when it is not a size."""
    s = s.strip().upper().replace("IB", "").replace("B", "")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        if s and s[-1] in mult:
            return int(float(s[:-1]) * mult[s[-1]])
        return int(s)
    except ValueError:
        return None


def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache (L3 where there is one), from /sys, else lscpu; None when unknown."""
    best = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in sorted(base.glob("index*")):
            size = _parse_size((d / "size").read_text())
            if size and (best is None or size > best):
                best = size
    except OSError:
        pass
    if best:
        return best
    try:
        txt = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5, check=False).stdout
        for line in txt.splitlines():
            if line.startswith(("L3 cache", "L2 cache")):
                tok = line.split(":", 1)[1].split("(")[0].strip().replace(" ", "")
                size = _parse_size(tok)
                if size and (best is None or size > best):
                    best = size
    except (OSError, ValueError, subprocess.SubprocessError):  # lscpu is optional
        return best
    return best


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def torch_available() -> bool:
    """Whether torch can be imported (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def load_average() -> str | None:
    """'load average 5.3 on 2 cores' (the last minute's), None where the system does not say."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {cpu_count()} cores"
    except (AttributeError, OSError):
        return None


def machine_busy() -> str | None:
    """A note when other processes already load the cores (timings then run slow and scatter)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    n = cpu_count()
    if load > 0.5 * n + 0.25:
        return (f"the machine was busy when this started (load average {load:.1f} on {n} cores): other processes "
                "share the cores, so measured times run slow and scatter (verify --threads 1 suffers least)")
    return None


def tokenmath_version() -> str:
    """The installed distribution's version; "unknown" when run from a source tree that was never installed."""
    try:
        return importlib.metadata.version("tokenmath")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def versions(with_torch: bool) -> dict[str, str]:
    """What `tokenmath measure` ran on (torch and CUDA only when torch took part)."""
    v = {"tokenmath": tokenmath_version(), "python": platform.python_version(), "numpy": np.__version__,
         "platform": platform.platform()}
    if with_torch:
        import torch
        v["torch"] = torch.__version__
        if torch.cuda.is_available():
            v["cuda"] = str(torch.version.cuda)
    return v


def model_versions() -> dict[str, str]:
    """What `tokenmath verify` ran its transformers model on (torch and transformers must be installed)."""
    import torch
    import transformers
    return {"tokenmath": tokenmath_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__, "python": platform.python_version()}
