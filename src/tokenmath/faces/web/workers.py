"""The heavy questions of `tokenmath serve` (budget.HEAVY) run in a few worker processes, each under a memory cap and
every request under a deadline, so that no request can take the machine and the cheap ones are never starved.

Why processes: a thread cannot be stopped at a deadline, nor its memory capped. A worker is a fresh interpreter
(`python -m tokenmath.faces.web.workers`, started on the first heavy request: about a second; not a fork of the
threaded server, nor multiprocessing's, which would import the caller's main script again); it sets RLIMIT_AS on
itself, answers one request at a time through its stdin and stdout, and keeps its caches between requests. A request
that runs past its deadline has its worker killed (a new one starts for the next request): answered 504. One that
runs out of its memory answers 503 and its worker exits. The pool holds at most `workers` running and `queue`
waiting requests; beyond, or after waiting `wait_s` for a worker, 503 (busy, with Retry-After). The answers name the
field that sized the question and the cheaper question (budget.cheaper). POSIX only (server.py answers on its
threads elsewhere, without these limits).
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from tokenmath.faces.web.budget import cheaper


START_S = 60.0                     # the most a worker process may take to start


@dataclass
class Refusal(Exception):
    """A request the pool did not answer: status (503/504), field, problem, valid, and Retry-After seconds."""
    status: int
    field: str
    problem: str
    valid: str
    retry_after: int | None = None


def _cap_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def worker_main(conn, memory_bytes: int) -> None:
    """A worker's loop: (name, parsed parameters, uploaded models) in; ("ok", JSON bytes), ("input", error dict),
    ("memory", None) or ("bug", traceback text) out (pickles over `conn`, from the server that started it)."""
    from tokenmath.base.errors import InputError
    from tokenmath.faces.web.api import Api
    api = Api()
    _cap_memory(memory_bytes)
    conn.send_bytes(pickle.dumps(("ready", None)))
    while True:
        try:
            name, args, uploads = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            for m in uploads:
                api.uploads.add(m)
            out = ("ok", api.compute(name, args))
        except InputError as e:
            out = ("input", e.to_dict())
        except MemoryError:
            out = ("memory", None)
        except Exception:  # noqa: BLE001 - a bug: its traceback goes to the server's log
            out = ("bug", traceback.format_exc())
        try:
            conn.send_bytes(pickle.dumps(out))
        except MemoryError:
            conn.send_bytes(pickle.dumps(("memory", None)))
        if out[0] == "memory":
            return           # exit: the memory goes back to the system, a fresh worker takes the next request


class Worker:
    """One worker process (`python -m tokenmath.faces.web.workers MEMORY_BYTES`: a fresh interpreter, not a fork of
    the threaded server), talking through its stdin and a copy of its stdout; its own prints go to stderr."""

    def __init__(self, memory_bytes: int):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONWARNINGS": "ignore"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenmath.faces.web.workers", str(memory_bytes)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        self.to = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.frm = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.ready = False

    def wait_ready(self, timeout: float) -> bool:
        """Whether the worker has started (imported tokenmath, capped its memory) within `timeout` seconds: its
        start does not count against a request's deadline."""
        if not self.ready:
            try:
                self.ready = self.frm.poll(timeout) and pickle.loads(self.frm.recv_bytes())[0] == "ready"
            except (EOFError, OSError):
                self.ready = False
        return self.ready

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for c in (self.to, self.frm):
            try:
                c.close()
            except OSError:
                pass


class Pool:
    """Runs a heavy question in a worker: run(name, args, uploads) (args: Api.parse's) -> ("ok", bytes) | ("input", error dict);
    Refusal for busy, deadline and memory."""

    def __init__(self, workers: int = 2, queue: int = 14, deadline_s: float = 60.0,
                 memory_bytes: int = 1 << 30, wait_s: float = 60.0):
        self.workers, self.queue, self.deadline_s, self.memory_bytes, self.wait_s = \
            workers, queue, deadline_s, memory_bytes, wait_s
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(workers)
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._admitted = 0
        self._closed = False

    def _take(self) -> Worker:
        with self._lock:
            while self._idle:
                w = self._idle.pop()
                if w.alive():
                    self._busy.add(w)
                    return w
                w.kill()
        w = Worker(self.memory_bytes)
        with self._lock:
            if not self._closed:
                self._busy.add(w)
                return w
        w.kill()              # the server stopped meanwhile
        raise Refusal(503, "request", "the server is stopping", "try again when it runs")

    def _give(self, w: Worker, keep: bool) -> None:
        with self._lock:
            self._busy.discard(w)
            if keep and not self._closed and w.alive():
                self._idle.append(w)
                return
        w.kill()

    def run(self, name: str, args: dict, uploads=()) -> tuple[str, object]:
        field, instead = cheaper(name)
        busy = Refusal(503, field, f"the server is busy with {self.workers + self.queue} long questions",
                       "try again in a moment", retry_after=5)
        with self._lock:
            if self._closed or self._admitted >= self.workers + self.queue:
                raise busy
            self._admitted += 1
        try:
            if not self._slots.acquire(timeout=self.wait_s):
                raise busy
            try:
                return self._run_in(self._take(), name, args, uploads, field, instead)
            finally:
                self._slots.release()
        finally:
            with self._lock:
                self._admitted -= 1

    def _run_in(self, w: Worker, name, args, uploads, field, instead):
        keep = False
        try:
            if not w.wait_ready(START_S):
                raise Refusal(503, field, "the worker process that answers this question did not start",
                              "try again in a moment", retry_after=5)
            w.to.send_bytes(pickle.dumps((name, args, tuple(uploads))))
            if not w.frm.poll(self.deadline_s):
                raise Refusal(504, field, f"this {name} question ran past the {self.deadline_s:g} s a web request may "
                              "take", instead)
            try:
                kind, value = pickle.loads(w.frm.recv_bytes())
            except (EOFError, OSError):   # the worker died: killed for its memory by the system, or a crash
                if self._closed:          # or killed as the server stopped
                    raise Refusal(503, "request", "the server is stopping", "try again when it runs") from None
                kind, value = "memory", None
            if kind == "memory":
                raise Refusal(503, field, f"this {name} question needs more than the "
                              f"{self.memory_bytes / 2 ** 30:.3g} GiB of memory a web request may use", instead)
            if kind == "bug":
                sys.stderr.write(value)
                raise RuntimeError(f"a worker failed on /api/{name}")
            keep = True
            return kind, value
        finally:
            self._give(w, keep)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ws = self._idle + list(self._busy)
            self._idle.clear()
        for w in ws:
            w.kill()


def main() -> None:
    """A worker process: the protocol on a copy of stdout, anything it prints to stderr."""
    out = os.dup(1)
    os.dup2(2, 1)
    worker_main(_Duplex(Connection(0, writable=False), Connection(out, readable=False)), int(sys.argv[1]))


class _Duplex:
    def __init__(self, r: Connection, w: Connection):
        self.recv_bytes, self.send_bytes = r.recv_bytes, w.send_bytes


if __name__ == "__main__":
    main()
