"""Handler: one HTTP request of `tokenmath serve`, whole in memory, answered on a worker thread (http.server's
request parsing; the connections themselves are connections.py's).

Routes: / (the page), /static/<file> (its script, style and icon, from the package), /api (the endpoint index),
/api/<name> (GET with a query string, or POST with a JSON object), POST /api/model-config (a config.json upload).
Every error is JSON {"error": {"field", "problem", "valid"}}: 422 for bad input, 404 unknown route, 405 wrong
method, 411/413 for a body without a length or over the limit (refused before it is read), 400 for a malformed
request (and, from connections.py, for a body shorter than its length or an ambiguous head; 408 for a head that
does not arrive), 403 for a cross-site POST or computing GET, 503/504 for a heavy question over the memory or time a
request may use or a full pool (workers.py; refused from its estimate before it runs: 422, budget.py), 500 for a bug
(logged on the server, never sent to the client as a traceback). An error's field is the parameter sent, its texts
bounded (Api.error). Nothing sent is silently dropped: a parameter given twice (twice in the query string, a JSON key
twice, or in the query and the body) and a parameter to a route that takes none (/api, /api/models, /api/hardware)
are refused 422.

Cross-site requests: a POST to /api/* is refused (403) when its Origin (or, without one, its Referer) is not this
server as the request's Host names it, when its Sec-Fetch-Site is not same-origin or none, and when its Content-Type
is one a page elsewhere can send without a CORS preflight (a form: application/x-www-form-urlencoded,
multipart/form-data; text/plain). Other types but JSON: 415.
Clients that send neither header (curl, scripts) are served. A GET or HEAD of /api/<question> (it computes) is
refused (403) when its Sec-Fetch-Site is not same-origin or none, or its Origin or Referer is another server: an
<img> tag elsewhere cannot make this server work; the page, /api and the catalogs stay open to links.
"""
from __future__ import annotations

import io
import sys
import traceback
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlsplit

from tokenmath.base.errors import InputError, show
from tokenmath.faces.web.budget import HEAVY
from tokenmath.faces.web.params import PARAMS_MAX_BYTES, json_object, merged, query_params
from tokenmath.faces.web.payload import dumps
from tokenmath.faces.web.uploads import UPLOAD_MAX_BYTES
from tokenmath.faces.web.workers import Refusal

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
SIMPLE_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")  # no CORS preflight


def _origin_key(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an Origin, a Referer or http:// + a Host header; None when it is not one
    ("null", no host, a bad port)."""
    try:
        u = urlsplit(url.strip())
        if u.scheme not in ("http", "https") or not u.hostname:
            return None
        return u.scheme, u.hostname.lower(), u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return None


def _error(field, problem, valid=None) -> bytes:
    return dumps({"error": {"field": field, "problem": problem, "valid": valid}})


class Handler(BaseHTTPRequestHandler):
    """One request, whole in memory (`request`: its head and body as the front read them), answered into
    `wfile`; http.server parses it. Built and run by TokenmathServer.respond on a worker thread."""
    protocol_version = "HTTP/1.1"
    server_version = "tokenmath"
    server: object                 # the TokenmathServer: .api, .static, .loopback_only, .log_requests

    def setup(self):
        self.rfile = io.BytesIO(self.request)
        self.wfile = io.BytesIO()

    def handle(self):
        self.close_connection = True
        self.handle_one_request()

    def finish(self):
        pass

    def handle_expect_100(self) -> bool:   # the front has sent 100 Continue before it read the body
        return True

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":   # no status line, no headers: not served
            self.send_error(400, "HTTP/0.9 is not supported")
            return False
        return True

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors (a malformed request line, too many headers, an unknown method) as JSON, with
        an HTTP/1.1 status line even when the request line could not be read; an unknown method is 405 (not 501),
        an unknown HTTP version 400 (not 505): a 5xx is only ever the server's own fault."""
        self.close_connection = True
        self.request_version = "HTTP/1.1"
        if code == 501:
            return self._json_error(405, "method", f"{str(self.command)[:40]!r} is not supported",
                                    "GET, HEAD or POST", extra={"Allow": "GET, HEAD, POST"})
        if code == 505:   # the client's version, not the server's fault: 4xx, as every error of the request
            code = 400
        problem = message or self.responses.get(code, ("error",))[0]
        self._json_error(code, "request", str(problem)[:200], "a request as browsers and HTTP clients send it")

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
                if self._only(method, ("GET", "HEAD")) and self._no_params(url.query, "/api"):
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

    def _no_params(self, query: str, path: str) -> bool:
        """A route that takes no parameters refuses any (422), rather than answering as if they were not sent."""
        given = parse_qsl(query, keep_blank_values=True)
        if not given:
            return True
        self._json_error(422, given[0][0][:64] or "parameter", "unknown parameter" if given[0][0] else
                         "has an empty name", f"{path} takes no parameters")
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

    def _same_site(self) -> bool:
        """A POST from a page elsewhere is refused (403; see the module's docstring); False when refused."""
        site = (self.headers.get("Sec-Fetch-Site") or "").strip().lower()
        if site and site not in ("same-origin", "none"):
            return self._refuse(403, "Sec-Fetch-Site", f"{show(site, 40)}: a page elsewhere posted to this server",
                                "post from this server's own page, or from a client that is not a browser")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype in SIMPLE_TYPES:
            return self._refuse(403, "Content-Type", f"{ctype} is what a page elsewhere can post here",
                                "application/json")
        if ctype and ctype != "application/json":
            return self._refuse(415, "Content-Type", f"{ctype[:60]!r} is not accepted", "application/json")
        host = _origin_key("http://" + (self.headers.get("Host") or ""))
        for header in ("Origin", "Referer"):
            value = self.headers.get(header)
            if value is not None:
                if _origin_key(value) is None or _origin_key(value) != host:
                    return self._refuse(403, header, f"{show(value, 80)} is not this server",
                                        "post from this server's own page")
                return True
        return True

    def _same_origin_get(self) -> bool:
        """A GET or HEAD that computes is answered only for this server's own page or a client that is not a browser
        (curl, scripts: no Sec-Fetch-Site, Origin or Referer): a page elsewhere (an <img> tag) is refused 403."""
        site = (self.headers.get("Sec-Fetch-Site") or "").strip().lower()
        if site and site not in ("same-origin", "none"):
            return self._refuse(403, "Sec-Fetch-Site", f"{show(site, 40)}: a page elsewhere asked this server to "
                                "compute", "ask from this server's own page, or from a client that is not a browser")
        host = _origin_key("http://" + (self.headers.get("Host") or ""))
        for header in ("Origin", "Referer"):
            value = self.headers.get(header)
            if value is not None and (_origin_key(value) is None or _origin_key(value) != host):
                return self._refuse(403, header, f"{show(value, 80)} is not this server",
                                    "ask from this server's own page")
        return True

    def _refuse(self, status: int, field: str, problem: str, valid: str) -> bool:
        self.close_connection = True
        self._json_error(status, field, problem, valid)
        return False

    def _body(self, limit: int, field: str) -> bytes | None:
        """The request body, refused (413/411) from its Content-Length before it is read; None when refused."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._json_error(411, field, "a chunked body is not accepted", "send Content-Length")
            return None
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        n = int(raw.strip()) if raw.strip().isdigit() and len(raw.strip()) <= 18 else -1
        if n < 0 or len(self.headers.get_all("Content-Length")) > 1:
            self.close_connection = True
            self._json_error(400, "Content-Length", f"{raw[:40]!r} is not one length", "a whole number of bytes")
            return None
        if n > limit:   # refused from its length (the front did not read it, or read it whole and no more)
            self.close_connection = True
            self._json_error(413, field, f"is {n:,} bytes", f"at most {limit:,} bytes")
            return None
        return self.rfile.read(n)

    def _api(self, name: str, method: str, query: str):
        api = self.server.api
        if name == "models" or name == "hardware":
            if not self._only(method, ("GET", "HEAD")) or not self._no_params(query, "/api/" + name):
                return
            return self._send(200, api.models() if name == "models" else api.hardware(), head_only=method == "HEAD")
        if name == "model-config":
            if not self._only(method, ("POST",)) or not self._same_site():
                return
            body = self._body(UPLOAD_MAX_BYTES, "config.json")
            if body is None:
                return
            try:
                q = query_params(query)
                extra = [k for k in q if k != "name"]
                if extra:
                    raise InputError(extra[0][:64], "unknown parameter", "model-config takes name (the file's name)")
                fname = self.headers.get("X-Filename") or q.get("name")
                return self._send(200, api.upload(body, fname))
            except InputError as e:
                return self._send(422, dumps(e.to_dict()))
        if name not in api.endpoints:
            return self._not_found("/api/" + name)
        if not self._only(method, ("GET", "HEAD", "POST")):
            return
        head_only = method == "HEAD"
        if method != "POST" and not self._same_origin_get():
            return
        try:
            raw = query_params(query)
            if method == "POST":
                if not self._same_site():
                    return
                body = self._body(PARAMS_MAX_BYTES, "body")
                if body is None:
                    return
                raw = merged(raw, json_object(body))
            args, key, out = api.prepare(name, raw)
            if out is None:
                out = self._compute(name, args)
                if out is None:
                    return
                api.store(key, out)
        except InputError as e:
            return self._send(422, api.error(name, e.to_dict()), head_only=head_only)
        return self._send(200, out, head_only=head_only)

    def _compute(self, name: str, args: dict) -> bytes | None:
        """The answer's bytes: a heavy question (budget.HEAVY) from the server's worker processes under their deadline
        and memory cap (None when refused: answered 503/504 here), the others on this thread."""
        api, pool = self.server.api, getattr(self.server, "heavy", None)
        if pool is None or name not in HEAVY:
            return api.compute(name, args)
        try:
            kind, value = pool.run(name, args, api.uploads_of(args))
        except Refusal as r:
            self._json_error(r.status, r.field, r.problem, r.valid,
                             extra={"Retry-After": str(r.retry_after)} if r.retry_after else None)
            return None
        if kind == "input":
            raise InputError(**value["error"])
        return value
