"""The connection side of `tokenmath serve` (standard library): one event loop reads each request's head and body
under deadlines, caps the connections the process holds, and hands only complete requests to a fixed pool of worker
threads (handler.py's Handler, through `respond`); answers are written back by the loop.

Why not a thread per connection (http.server.ThreadingHTTPServer, used before issue 15): a connection that sends
nothing held a thread and a descriptor for 30 s, without a cap; a few thousand took every descriptor of a process
with the usual limit of 1,024, and nothing was accepted until they timed out. Here a waiting connection is a socket
and a small buffer watched by the loop (asyncio's, as a reactor: add_reader/add_writer on non-blocking sockets,
far cheaper per connection than asyncio's streams); at the cap, the connection that has waited longest for its
client is closed to let the newcomer in (after reading what it sent: a whole request is served, not dropped).
An ASGI server (uvicorn) was considered and not taken: it sets no deadline on a request's head or body, its
`limit_concurrency` answers 503 to new clients while idle connections fill it -- what this module avoids -- and it
would be a new dependency.

Limits: connections at once (by default under the descriptor limit); a request's head within `head_timeout_s` of
the connection's start or of the previous answer (a begun head is answered 408, an idle keep-alive just closed); a
body with no byte for `body_idle_s`, or unfinished after `body_total_s`, is answered 400 (at once when the client
closes); bodies over `body_max_bytes` are not read (the handler answers 413 from the length); an answer not taken
within `write_timeout_s` is dropped. After an error answer the connection stops sending and discards what the
client still sends for `linger_s` (so the client reads the answer, not a reset). Errors have the API's JSON shape.
"""
from __future__ import annotations

import asyncio
import errno
import socket
import struct
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tokenmath.faces.web.heads import framing, head_end, head_problem
from tokenmath.faces.web.payload import dumps

HEAD_MAX_BYTES = 65536             # a request's line and headers together
RESERVED_FDS = 128                 # descriptors kept back (logs, files, the pool)
DEFAULT_MAX_CONNECTIONS = 1024
LISTEN_BACKLOG = 4096              # the accept queue asked of the kernel (which caps it at net.core.somaxconn)
ACCEPT_BATCH = 128                 # connections accepted per wake-up of the loop; also how far busy connections may
                                   # overshoot the cap (when none is waiting to be dropped) before a newcomer gets 503
EVICT_TRIES = 16                   # waiting connections read (their requests served) before one is dropped
RECV_BYTES = 65536
SWEEP_S = 0.25                     # deadlines are checked this often
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
HEAD, BODY, WORK, WRITE, LINGER = "head", "body", "work", "write", "linger"

Respond = Callable[[bytes, bytes, tuple], tuple[bytes, bool]]   # (head, body, peer) -> (answer bytes, close?)


def default_max_connections() -> int:
    """DEFAULT_MAX_CONNECTIONS, or fewer where the process may open fewer files (RLIMIT_NOFILE less RESERVED_FDS
    and the overshoot ACCEPT_BATCH)."""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except ImportError:                # not a POSIX system
        return DEFAULT_MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return DEFAULT_MAX_CONNECTIONS
    return max(16, min(DEFAULT_MAX_CONNECTIONS, soft - RESERVED_FDS - ACCEPT_BATCH))


@dataclass(frozen=True)
class Limits:
    max_connections: int | None = None   # None: default_max_connections() when the server starts
    # threads answering complete requests: more than the heavy questions admitted (heavy_workers + heavy_queue, each
    # holding a thread while it waits for its worker process), so that cheap ones always find a thread
    workers: int = 24
    heavy_workers: int = 2               # worker processes answering the heavy questions (faces/web/workers.py)
    heavy_queue: int = 14                # heavy questions waiting for one (beyond: 503)
    deadline_s: float = 60.0             # the most a heavy question may run (beyond: 504)
    worker_memory_bytes: int = 1 << 30   # each worker process' address space (beyond: 503)
    head_timeout_s: float = 10.0
    body_idle_s: float = 3.0
    body_total_s: float = 30.0
    write_timeout_s: float = 30.0
    linger_s: float = 2.0
    max_headers: int = 100
    body_max_bytes: int = 256 * 1024     # the largest body any route takes (server.py sets it)
    drain_max_bytes: int = 8 * 1024 * 1024


def error_response(status: int, reason: str, field, problem: str, valid=None) -> bytes:
    """A complete HTTP/1.1 answer with the API's JSON error body; the connection closes after it."""
    body = dumps({"error": {"field": field, "problem": problem, "valid": valid}})
    return (f"HTTP/1.1 {status} {reason}\r\nServer: tokenmath\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            f"Connection: close\r\n\r\n").encode() + body


class Conn:
    """One client connection: its socket, what it has sent, where it stands."""
    __slots__ = ("sock", "fd", "peer", "state", "buf", "head", "need", "since", "last", "out", "close_after",
                 "reading", "writing", "drained", "closed")

    def __init__(self, sock: socket.socket, peer, now: float):
        self.sock, self.fd, self.peer = sock, sock.fileno(), peer
        self.state, self.buf, self.head, self.need = HEAD, bytearray(), b"", 0
        self.since = self.last = now
        self.out: memoryview | None = None
        self.close_after = self.reading = self.writing = self.closed = False
        self.drained = 0


class Front:
    """Accepts connections, reads whole requests under Limits, runs `respond` on the worker pool, writes answers."""

    def __init__(self, respond: Respond, limits: Limits):
        self.respond = respond
        self.limits = limits
        self.max_connections = limits.max_connections or default_max_connections()
        self.pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="tokenmath-worker")
        self.conns: dict[int, Conn] = {}
        self.waiting: OrderedDict[int, Conn] = OrderedDict()   # awaiting their client, longest first
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stats = {"accepted": 0, "evicted": 0, "refused": 0, "timed_out": 0, "truncated": 0, "out_of_fds": 0}

    # -- the loop -----------------------------------------------------------------------------------------------
    async def serve(self, sock: socket.socket, stop: asyncio.Event) -> None:
        """Accept on the listening socket until `stop` is set, then close every connection."""
        self.loop = loop = asyncio.get_running_loop()
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._accept, sock)
        sweep = loop.call_later(SWEEP_S, self._sweep)
        try:
            await stop.wait()
        finally:
            sweep.cancel()
            loop.remove_reader(sock.fileno())
            self.close()

    def close(self) -> None:
        for c in list(self.conns.values()):
            self._close(c)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                s, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno not in OUT_OF_FDS:
                    continue                   # e.g. ECONNABORTED: that client is gone already
                self.stats["out_of_fds"] += 1
                if not self._evict():          # nothing to drop: stop accepting for a moment
                    self.loop.remove_reader(sock.fileno())
                    self.loop.call_later(0.05, self.loop.add_reader, sock.fileno(), self._accept, sock)
                    return
                continue
            self.stats["accepted"] += 1
            s.setblocking(False)
            if len(self.conns) >= self.max_connections and not self._evict() and \
                    len(self.conns) >= self.max_connections + ACCEPT_BATCH:
                self.stats["refused"] += 1     # every connection is busy with a request: 503
                try:
                    s.send(error_response(503, "Service Unavailable", None, "the server is busy",
                                          "try again in a moment"))
                except OSError:
                    pass
                s.close()
                continue
            c = Conn(s, peer, self.loop.time())
            self.conns[c.fd] = c
            self._wait(c)
            self._read(c, True)

    def _sweep(self) -> None:
        lim, now = self.limits, self.loop.time()
        for c in list(self.conns.values()):
            if c.state == HEAD and now - c.since > lim.head_timeout_s:
                self.stats["timed_out"] += 1
                if c.buf:   # a request begun and not finished (slowloris); an idle keep-alive just closes
                    self._fail(c, 408, "Request Timeout", "request",
                               f"its head did not arrive within {lim.head_timeout_s:g} s",
                               "send the request line and headers at once")
                else:
                    self._close(c)
            elif c.state == BODY and (now - c.last > lim.body_idle_s or now - c.since > lim.body_total_s):
                self._truncated(c)
            elif (c.state == WRITE and now - c.since > lim.write_timeout_s) or \
                    (c.state == LINGER and now - c.since > lim.linger_s):
                self._close(c)
        self.loop.call_later(SWEEP_S, self._sweep)

    # -- the cap ------------------------------------------------------------------------------------------------
    def _wait(self, c: Conn) -> None:
        self.waiting[c.fd] = c
        self.waiting.move_to_end(c.fd)

    def _evict(self) -> bool:
        """Close (reset) the connection that has waited longest for its client, after reading what it has sent
        (a request already in its socket is served, not dropped); False when none is waiting."""
        for _ in range(EVICT_TRIES):
            if not self.waiting:
                return False
            c = next(iter(self.waiting.values()))
            if c.state in (HEAD, BODY) and c.reading:
                self._on_read(c)
                if c.closed:
                    return True
                if self.waiting.get(c.fd) is not c:   # its request was whole: now being answered
                    continue
            self._close(c, reset=True)
            self.stats["evicted"] += 1
            return True
        return False

    def _close(self, c: Conn, reset: bool = False) -> None:
        if c.closed:
            return
        c.closed = True
        self._read(c, False)
        if c.writing:
            self.loop.remove_writer(c.fd)
        self.conns.pop(c.fd, None)
        self.waiting.pop(c.fd, None)
        try:
            if reset:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
        except OSError:
            pass

    def _read(self, c: Conn, on: bool) -> None:
        if on and not c.reading and not c.closed:
            self.loop.add_reader(c.fd, self._on_read, c)
        elif not on and c.reading:
            self.loop.remove_reader(c.fd)
        c.reading = on and not c.closed

    # -- reading ------------------------------------------------------------------------------------------------
    def _on_read(self, c: Conn) -> None:
        try:
            data = c.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._close(c)
        if c.state == LINGER:
            c.drained += len(data)
            if not data or c.drained > self.limits.drain_max_bytes:
                self._close(c)
            return
        if not data:
            if c.state == BODY:
                return self._truncated(c)
            if c.state == HEAD and c.buf:
                return self._fail(c, 400, "Bad Request", "request", "the connection ended inside the request's head",
                                  "a whole request")
            return self._close(c)
        c.last = self.loop.time()
        c.buf += data
        self._advance(c)

    def _advance(self, c: Conn) -> None:
        """Move a connection on with what it has sent: a whole head, then a whole body, then to the pool."""
        lim = self.limits
        if c.state == HEAD:
            while c.buf[:1] in (b"\r", b"\n") and c.buf:   # empty lines before a request are ignored
                del c.buf[:1]
            end = head_end(c.buf)
            if end < 0 or end > HEAD_MAX_BYTES:
                if len(c.buf) > HEAD_MAX_BYTES or c.buf.count(b"\n") > lim.max_headers + 1:
                    self._fail(c, 431, "Request Header Fields Too Large", "request",
                               f"its head is over {HEAD_MAX_BYTES:,} bytes or {lim.max_headers} lines",
                               "a request as browsers and HTTP clients send it")
                return
            c.head = bytes(c.buf[:end])
            del c.buf[:end]
            if c.head.count(b"\n") > lim.max_headers + 2:
                return self._fail(c, 431, "Request Header Fields Too Large", "request",
                                  f"more than {lim.max_headers} header lines", "fewer headers")
            problem = head_problem(c.head)
            if problem:
                return self._fail(c, 400, "Bad Request", "request", problem,
                                  "a request as browsers and HTTP clients send it")
            length, odd, cont = framing(c.head)
            c.close_after = odd or (length or 0) > lim.body_max_bytes   # a body the stream may still carry
            if length and length <= lim.body_max_bytes:
                c.state, c.need, c.since = BODY, length, self.loop.time()
                if cont and not c.buf:
                    self._send_raw(c, b"HTTP/1.1 100 Continue\r\n\r\n")
            else:
                return self._dispatch(c, b"")
        if c.state == BODY and len(c.buf) >= c.need:
            body = bytes(c.buf[:c.need])
            del c.buf[:c.need]
            self._dispatch(c, body)

    def _truncated(self, c: Conn) -> None:
        self.stats["truncated"] += 1
        lim = self.limits
        self._fail(c, 400, "Bad Request", "body",
                   f"ended after {len(c.buf):,} of the {c.need:,} bytes its Content-Length announced",
                   f"a body as long as its Content-Length, with no pause over {lim.body_idle_s:g} s")

    # -- answering ----------------------------------------------------------------------------------------------
    def _dispatch(self, c: Conn, body: bytes) -> None:
        c.state = WORK
        self.waiting.pop(c.fd, None)
        self._read(c, False)
        fut = self.pool.submit(self.respond, c.head, body, c.peer)
        loop = self.loop
        fut.add_done_callback(lambda f: _call_soon(loop, self._done, c, f))

    def _done(self, c: Conn, fut) -> None:
        if c.closed:
            return
        try:
            answer, close = fut.result()
        except Exception:  # noqa: BLE001 - respond() answers its own errors; this is a bug: logged, 500
            traceback.print_exc(file=sys.stderr)
            answer, close = error_response(500, "Internal Server Error", None, "internal error (logged on the "
                                           "server)", "please report the request that caused it"), True
        if not answer:
            return self._close(c)
        c.close_after = c.close_after or close
        self._write(c, answer)

    def _fail(self, c: Conn, status: int, reason: str, field, problem: str, valid) -> None:
        c.close_after = True
        self.waiting.pop(c.fd, None)
        self._read(c, False)
        self._write(c, error_response(status, reason, field, problem, valid))

    def _send_raw(self, c: Conn, data: bytes) -> None:
        try:
            c.sock.send(data)
        except OSError:
            pass

    def _write(self, c: Conn, data: bytes) -> None:
        c.state, c.since, c.out = WRITE, self.loop.time(), memoryview(data)
        self._flush(c)

    def _flush(self, c: Conn) -> None:
        try:
            n = c.sock.send(c.out)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return self._close(c)
        c.out = c.out[n:]
        if len(c.out):
            if not c.writing:
                self.loop.add_writer(c.fd, self._flush, c)
                c.writing = True
            return
        if c.writing:
            self.loop.remove_writer(c.fd)
            c.writing = False
        c.out = None
        now = self.loop.time()
        if c.close_after:          # stop sending; discard what the client still sends, then close
            try:
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                return self._close(c)
            c.state, c.since, c.drained = LINGER, now, 0
            c.buf.clear()
        else:                      # keep-alive: the next request (perhaps already buffered)
            c.state, c.since, c.head = HEAD, now, b""
        self._wait(c)
        self._read(c, True)
        if c.state == HEAD and c.buf:
            self._advance(c)


def _call_soon(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    """From a worker thread: run fn on the loop (ignored when the loop has closed: the server stopped)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass
