"""The HTTP face of `tokenmath serve`: http.server.ThreadingHTTPServer, standard library only.

Routes: / (the page), /static/<file> (its script, style and icon, from the package), /api (the endpoint index),
/api/<name> (GET with a query string, or POST with a JSON object), POST /api/model-config (a config.json upload).
Every error is JSON {"error": {"field", "problem", "valid"}}: 422 for bad input, 404 unknown route, 405 wrong
method, 411/413 for a body without a length or over the limit (refused before it is read), 500 for a bug (logged
on the server, never sent to the client as a traceback).
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qsl, urlsplit

from tokenmath.base.errors import InputError
from tokenmath.faces.web.api import Api
from tokenmath.faces.web.params import PARAMS_MAX_BYTES
from tokenmath.faces.web.payload import dumps
from tokenmath.faces.web.uploads import UPLOAD_MAX_BYTES

STATIC = {  # the only files served: name -> content type
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# the icon lives here, not in static/ (the repository ignores *.svg files)
FAVICON_SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
               b'<rect width="32" height="32" rx="6" fill="#1f3a5f"/>'
               b'<path d="M5 26 L15 10 L27 10" fill="none" stroke="#f4b942" stroke-width="3" stroke-linejoin="round"/>'
               b'<circle cx="10" cy="22" r="2.2" fill="#8fd3ff"/><circle cx="21" cy="14" r="2.2" fill="#8fd3ff"/></svg>')
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
DRAIN_MAX = 8 * 1024 * 1024   # an oversized body up to this is read and discarded so the client sees the 413
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def _load_static() -> dict[str, tuple[bytes, str, str]]:
    root = resources.files("tokenmath.faces.web").joinpath("static")
    out = {}
    for name, ctype in STATIC.items():
        data = root.joinpath(name).read_bytes()
        out[name] = (data, ctype, '"' + hashlib.sha256(data).hexdigest()[:20] + '"')
    out["favicon.svg"] = (FAVICON_SVG, "image/svg+xml", '"' + hashlib.sha256(FAVICON_SVG).hexdigest()[:20] + '"')
    return out


def _error(field, problem, valid=None) -> bytes:
    return dumps({"error": {"field": field, "problem": problem, "valid": valid}})


class TokenmathServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, api: Api | None = None, log_requests: bool = False):
        if ":" in addr[0]:
            import socket
            self.address_family = socket.AF_INET6
        super().__init__(addr, handler)
        self.api = api or Api()
        self.static = _load_static()
        self.log_requests = log_requests
        host = addr[0]
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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tokenmath"
    timeout = 30          # a client that stops sending frees its thread after this many seconds
    server: TokenmathServer

    def version_string(self) -> str:
        return "tokenmath"

    # -- responses --------------------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str = "application/json", extra: dict | None = None,
              head_only: bool = False):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if ctype.startswith("text/html"):
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Frame-Options", "DENY")
        if ctype == "application/json":
            self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head_only:
            self.wfile.write(body)

    def _json_error(self, status: int, field, problem, valid=None, extra=None):
        self._send(status, _error(field, problem, valid), extra=extra)

    def log_message(self, fmt, *args):  # access log only when asked (--log)
        if self.server.log_requests:
            sys.stderr.write(f"{self.address_string()} - {fmt % args}\n")

    def _host_ok(self) -> bool:
        """Refuse other Host names on a loopback server (DNS rebinding: a web page elsewhere talking to it)."""
        if not self.server.loopback_only:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            name = host[1:host.find("]")] if "]" in host else host
        else:
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        return name in LOOPBACK_NAMES

    # -- methods ----------------------------------------------------------------------------------------------
    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def _other(self):
        self.close_connection = True
        self._json_error(405, "method", f"{self.command} is not supported", "GET, HEAD or POST",
                         extra={"Allow": "GET, HEAD, POST"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other

    def _dispatch(self, method: str):
        try:
            if not self._host_ok():
                self.close_connection = True
                return self._json_error(403, "Host", f"Host {self.headers.get('Host')!r} is not this loopback server",
                                        "open the page at http://127.0.0.1:PORT/ or http://localhost:PORT/")
            url = urlsplit(self.path)
            path = url.path
            if path in ("/", "/index.html"):
                return self._static("index.html", method)
            if path == "/favicon.ico":
                return self._static("favicon.svg", method)
            if path.startswith("/static/"):
                name = path[len("/static/"):]
                if name in self.server.static:
                    return self._static(name, method)
                return self._not_found(path)
            if path == "/api" or path == "/api/":
                if self._only(method, ("GET", "HEAD")):
                    self._send(200, self.server.api.meta(), head_only=method == "HEAD")
                return
            if path.startswith("/api/"):
                return self._api(path[len("/api/"):], method, url.query)
            return self._not_found(path)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # noqa: BLE001 - a bug: logged here with its traceback, answered with a plain JSON 500
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            try:
                self._json_error(500, None, "internal error (logged on the server)",
                                 "please report the request that caused it")
            except OSError:   # the client is gone
                pass

    def _only(self, method, allowed) -> bool:
        if method in allowed:
            return True
        self.close_connection = True
        self._json_error(405, "method", f"{method} is not supported here", " or ".join(allowed),
                         extra={"Allow": ", ".join(allowed)})
        return False

    def _not_found(self, path):
        self._json_error(404, "path", f"no such route {path[:200]!r}",
                         "/, /api, " + ", ".join(f"/api/{n}" for n in self.server.api.names()))

    def _static(self, name, method):
        if not self._only(method, ("GET", "HEAD")):
            return
        data, ctype, etag = self.server.static[name]
        hdr = {"ETag": etag, "Cache-Control": "no-cache"}
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            for k, v in hdr.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send(200, data, ctype, extra=hdr, head_only=method == "HEAD")

    def _body(self, limit: int, field: str) -> bytes | None:
        """The request body, refused (413/411) from its Content-Length before it is read; None when refused."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._json_error(411, field, "a chunked body is not accepted", "send Content-Length")
            return None
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        try:
            n = int(raw)
            if n < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            self._json_error(400, "Content-Length", f"{raw[:40]!r} is not a length", "a whole number of bytes")
            return None
        if n > limit:
            # refused before reading: discard what was sent (up to DRAIN_MAX) so the client can read the answer
            self.close_connection = True
            if n <= DRAIN_MAX:
                self._drain(n)
            self._json_error(413, field, f"is {n:,} bytes", f"at most {limit:,} bytes")
            return None
        return self.rfile.read(n)

    def _drain(self, n: int):
        try:
            self.connection.settimeout(2.0)
            while n > 0:
                chunk = self.rfile.read(min(n, 65536))
                if not chunk:
                    break
                n -= len(chunk)
        except OSError:
            pass

    def _api(self, name: str, method: str, query: str):
        api = self.server.api
        if name == "models" or name == "hardware":
            if not self._only(method, ("GET", "HEAD")):
                return
            return self._send(200, api.models() if name == "models" else api.hardware(), head_only=method == "HEAD")
        if name == "model-config":
            if not self._only(method, ("POST",)):
                return
            body = self._body(UPLOAD_MAX_BYTES, "config.json")
            if body is None:
                return
            fname = self.headers.get("X-Filename") or dict(parse_qsl(query)).get("name")
            try:
                return self._send(200, api.upload(body, fname))
            except InputError as e:
                return self._send(422, dumps(e.to_dict()))
        if name not in api.endpoints:
            return self._not_found("/api/" + name)
        if not self._only(method, ("GET", "HEAD", "POST")):
            return
        try:
            raw: dict = {}
            for k, v in parse_qsl(query, keep_blank_values=True):
                raw[k] = v
            if method == "POST":
                body = self._body(PARAMS_MAX_BYTES, "body")
                if body is None:
                    return
                if body.strip():
                    try:
                        obj = json.loads(body.decode("utf-8"))
                    except (UnicodeDecodeError, ValueError, RecursionError):
                        raise InputError("body", "is not a JSON object", "a JSON object of parameters") from None
                    if not isinstance(obj, dict):
                        raise InputError("body", "is not a JSON object", "a JSON object of parameters")
                    raw.update(obj)
            out = api.call(name, raw)
        except InputError as e:
            return self._send(422, dumps(e.to_dict()), head_only=method == "HEAD")
        return self._send(200, out, head_only=method == "HEAD")


def make_server(host: str = "127.0.0.1", port: int = 8000, log_requests: bool = False) -> TokenmathServer:
    """A server bound to host:port (port 0: any free port; see .server_address); call serve_forever()."""
    return TokenmathServer((host, port), Handler, log_requests=log_requests)


def serve(host: str = "127.0.0.1", port: int = 8000, log_requests: bool = False, ready=None) -> None:
    srv = make_server(host, port, log_requests)
    if ready is not None:
        ready(srv)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


def start_in_thread(host: str = "127.0.0.1", port: int = 0) -> tuple[TokenmathServer, threading.Thread]:
    """For tests and benchmarks: a server on a free port, serving from a daemon thread."""
    srv = make_server(host, port)
    t = threading.Thread(target=srv.serve_forever, name="tokenmath-web", daemon=True)
    t.start()
    return srv, t
