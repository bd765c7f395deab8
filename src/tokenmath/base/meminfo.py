"""This machine's memory as the kernel reports it (/proc/meminfo): read by `measure` (local/machine.py) and by the
work budget that keeps one question from taking the machine (analyses/serving/work_budget.py)."""
from __future__ import annotations

from pathlib import Path


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (empty where there is none)."""
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            k, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[k.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    except OSError:
        pass
    return out
