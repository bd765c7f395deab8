"""Scenario sweeps on an existing Dask cluster (the optional extra `cluster`: Dask's `distributed`,
imported only here and only when a cluster is asked for).

DaskCluster(address) connects a client to a running scheduler (`dask scheduler` + `dask worker ADDRESS` on each
machine, or any deployment: Kubernetes, SLURM via dask-jobqueue, a LocalCluster) and maps a function over the
scenarios as one task each; the results come back in the scenarios' order. The workers run the same function as
local processes do (analyses/serving/scenarios.run_scenario), so they need tokenmath (the same version) installed;
a trace file named by a scenario must be readable at the same path on every worker.
"""
from __future__ import annotations

from tokenmath.base.errors import InputError, show
from tokenmath.base.install import install_hint

CONNECT_TIMEOUT_S = 10.0
SCHEMES = ("tcp", "tls", "ucx", "inproc", "ws", "wss")


def check_address(address) -> str:
    """A scheduler address: SCHEME://HOST:PORT (tcp, tls, ...) or HOST:PORT; InputError('cluster') otherwise."""
    valid = "a running Dask scheduler's address, e.g. tcp://10.0.0.5:8786"
    if not isinstance(address, str) or not address.strip() or len(address) > 1000:
        raise InputError("cluster", f"{show(address)} is not an address", valid)
    a = address.strip()
    scheme, sep, rest = a.partition("://")
    if sep and scheme.lower() not in SCHEMES:
        raise InputError("cluster", f"{show(a)} has the scheme {scheme!r}", f"{', '.join(SCHEMES)}; {valid}")
    if not (rest if sep else a) or any(c.isspace() for c in a):
        raise InputError("cluster", f"{show(a)} is not an address", valid)
    host, colon, port = (rest if sep else a).rstrip("/").rpartition(":")
    if scheme.lower() != "inproc" and not (colon and host and port.isascii() and port.isdigit()
                                           and 1 <= int(port) <= 65535):
        raise InputError("cluster", f"{show(a)} has no port from 1 to 65535 (HOST:PORT)", valid)
    return a


def load_distributed():
    """Dask's `distributed`, or InputError('cluster') saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise InputError("cluster", "running on a cluster needs Dask's distributed package, which is not installed",
                         install_hint("cluster")) from None
    return distributed


class DaskCluster:
    """A runner for scenarios.run_scenarios on the Dask scheduler at `address` (use as a context manager, or
    close()); `client` instead: an existing distributed.Client (not closed here)."""

    def __init__(self, address: str | None = None, *, client=None, timeout_s: float = CONNECT_TIMEOUT_S):
        if client is None:
            address = check_address(address)
            distributed = load_distributed()
            try:
                client = distributed.Client(address, timeout=timeout_s, set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise InputError("cluster", f"cannot reach a Dask scheduler at {address!r} within {timeout_s:g} s "
                                 f"({type(e).__name__}: {str(e)[:200]})",
                                 "start one (dask scheduler; dask worker ADDRESS) or give its address") from None
            self._own = True
        else:
            self._own = False
        self.client = client
        self.address = client.scheduler.address
        self.workers = 0

    def map(self, fn, items: list) -> list:
        self.workers = len(self.client.nthreads())         # asked of the scheduler now (scheduler_info() is cached)
        if not items:
            return []
        # pure=False: every scenario runs even when two are equal; gather keeps the order of `items`
        futures = self.client.map(fn, items, pure=False)
        try:
            return self.client.gather(futures)
        except ModuleNotFoundError as e:
            raise InputError("cluster", f"a worker cannot import {e.name!r}",
                             "install tokenmath (the same version) on every worker") from None

    def describe(self) -> dict:
        return {"kind": "dask", "address": self.address, "workers": self.workers}

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
