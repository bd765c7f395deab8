"""`tokenmath serve`'s server, standard library only: connections are read by the loop of connections.py
(deadlines, a connection cap, a fixed pool of worker threads); each complete request is answered by handler.py's
Handler (http.server's request parsing, in memory) on a worker thread; the heavy questions run in worker processes
under a deadline and a memory cap (workers.py; the budget checked before they run: budget.py). Routes and errors:
see handler.py.
"""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import os
import socket
import threading
from dataclasses import replace
from importlib import resources

from tokenmath.faces.web.api import Api
from tokenmath.faces.web.connections import LISTEN_BACKLOG, Front, Limits
from tokenmath.faces.web.handler import LOOPBACK_NAMES, Handler
from tokenmath.faces.web.params import PARAMS_MAX_BYTES
from tokenmath.faces.web.uploads import UPLOAD_MAX_BYTES
from tokenmath.faces.web.workers import Pool

STATIC = {  # the only files served besides the page's .js modules (every static/*.js): name -> content type
    "index.html": "text/html; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
JS = "text/javascript; charset=utf-8"    # an ES module must be served as JavaScript
# the icon lives here, not in static/ (the repository ignores *.svg files)
FAVICON_SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
               b'<rect width="32" height="32" rx="6" fill="#1f3a5f"/>'
               b'<path d="M5 26 L15 10 L27 10" fill="none" stroke="#f4b942" stroke-width="3" stroke-linejoin="round"/>'
               b'<circle cx="10" cy="22" r="2.2" fill="#8fd3ff"/><circle cx="21" cy="14" r="2.2" fill="#8fd3ff"/></svg>')


def _load_static() -> dict[str, tuple[bytes, str, str]]:
    root = resources.files("tokenmath.faces.web").joinpath("static")
    out = {}
    files = dict(STATIC)
    files.update({f.name: JS for f in root.iterdir() if f.name.endswith(".js")})
    for name, ctype in files.items():
        data = root.joinpath(name).read_bytes()
        out[name] = (data, ctype, '"' + hashlib.sha256(data).hexdigest()[:20] + '"')
    out["favicon.svg"] = (FAVICON_SVG, "image/svg+xml", '"' + hashlib.sha256(FAVICON_SVG).hexdigest()[:20] + '"')
    return out


class TokenmathServer:
    """The listening socket (bound at once: see .server_address), the Api, and the connection loop (Front) that
    serves it from serve_forever(); shutdown() from another thread stops it."""

    def __init__(self, addr, api: Api | None = None, log_requests: bool = False, limits: Limits | None = None):
        host, port = addr[:2]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)
        self.server_address = self.socket.getsockname()
        self.api = api or Api()
        self.static = _load_static()
        self.log_requests = log_requests
        self.limits = replace(limits or Limits(), body_max_bytes=max(UPLOAD_MAX_BYTES, PARAMS_MAX_BYTES))
        self.front = Front(self.respond, self.limits)
        lim = self.limits
        self.heavy = (Pool(lim.heavy_workers, lim.heavy_queue, lim.deadline_s, lim.worker_memory_bytes)
                      if os.name == "posix" and lim.heavy_workers > 0 else None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._done.set()
        try:
            self.loopback_only = host in LOOPBACK_NAMES or ipaddress.ip_address(host).is_loopback
        except ValueError:
            self.loopback_only = False

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/"

    @property
    def open_connections(self) -> int:
        return len(self.front.conns)

    @property
    def stats(self) -> dict:
        return {**self.front.stats, "open": self.open_connections, "max_connections": self.front.max_connections}

    def respond(self, head: bytes, body: bytes, peer) -> tuple[bytes, bool]:
        """One complete request (on a worker thread): the answer's bytes and whether to close the connection."""
        h = Handler(head + body, peer, self)
        return h.wfile.getvalue(), h.close_connection

    def serve_forever(self) -> None:
        self._done.clear()
        try:   # a selector loop (the default on POSIX) watches plain sockets everywhere
            with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
                runner.run(self._main())
        finally:
            self._done.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stopping.is_set():
            return
        await self.front.serve(self.socket, self._stop)

    def shutdown(self) -> None:
        """Stop serve_forever (running in another thread) and wait for it to return."""
        self._stopping.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:   # the loop closed meanwhile
                pass
        self._done.wait(10)

    def server_close(self) -> None:
        self.socket.close()
        self.front.pool.shutdown(wait=False, cancel_futures=True)
        if self.heavy is not None:
            self.heavy.close()


def make_server(host: str = "127.0.0.1", port: int = 8000, log_requests: bool = False,
                limits: Limits | None = None) -> TokenmathServer:
    """A server bound to host:port (port 0: any free port; see .server_address); call serve_forever()."""
    return TokenmathServer((host, port), log_requests=log_requests, limits=limits)


def serve(host: str = "127.0.0.1", port: int = 8000, log_requests: bool = False, ready=None) -> None:
    srv = make_server(host, port, log_requests)
    if ready is not None:
        ready(srv)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


def start_in_thread(host: str = "127.0.0.1", port: int = 0,
                    limits: Limits | None = None) -> tuple[TokenmathServer, threading.Thread]:
    """For tests and benchmarks: a server on a free port, serving from a daemon thread."""
    srv = make_server(host, port, limits=limits)
    t = threading.Thread(target=srv.serve_forever, name="tokenmath-web", daemon=True)
    t.start()
    return srv, t
