#!/usr/bin/env python
"""Fuzz the JSON API of `tokenmath serve`: malformed requests must be answered 4xx with a JSON error naming the
field (or 200 for the valid ones), never 5xx, never a dropped connection (issue 15).

    python benchmarks/fuzz_api.py                     # 10,000 requests, seed 0, against `tokenmath serve` in a child
    python benchmarks/fuzz_api.py -n 50000 --seed 7 --concurrency 16 --json
    python benchmarks/fuzz_api.py --url http://127.0.0.1:8000/      # a server already running (no RSS then)
    python benchmarks/fuzz_api.py --in-process        # the server in this process (as tests/test_web_abuse.py)

The server runs in its own process (`tokenmath serve --port 0`), so its resident memory, with its worker processes',
is sampled every 0.2 s and reported (issue 40: the server must stay under 2 GB); each request's time is recorded.

Requests are drawn (fixed seed) from these families, every endpoint and every parameter read off the server's
own table (GET /api):
  numbers    a numeric parameter set to 400 or 5,000 digits, +-1e400, NaN/Infinity literals, "nan"/"inf" strings,
             2**63, 1e-320, 1.5 for a count, "0x10", "1_000", negative, zero, spaces, Arabic-Indic digits
  types      a parameter set to a list, an object, null, true, a nested array, a 60 kB string, control characters
  nesting    a body nested 50 to 60,000 levels (arrays and objects), or a parameter's value nested
  sizes      a body over the 64 kB limit (up to 1 MB), a query string of 70 kB, 200 parameters, 150 headers, a
             header line of 70 kB, a body shorter than its Content-Length (client half-closes)
  types of body: text/plain, form, multipart, XML, no type, a charset, binary, invalid UTF-8, a BOM, empty, null,
             a list, a bare number; a foreign Origin
  fields     unknown names (typos, unicode, 10 kB names, "__proto__"), a key repeated, the upload endpoint fed junk
  routes     other methods (PUT, DELETE, OPTIONS, FOO), odd paths (/api/infer/x, %00, ..), a malformed request line
  valid      parameters in range, mixed at random (15%): the engine must answer or refuse, never fail
  query      GETs of 1-4 declared parameters (and random names) set from each one's declared range: its edges, just
             outside, the middle, huge, NaN/inf, non-ASCII digits (Arabic-Indic, fullwidth, Devanagari), empty,
             spaces, percent-encoded junk (%00, %ZZ, %FF, overlong UTF-8)
  repeat     a parameter given twice (query twice, a JSON key twice, in the query and the body): must be refused,
             never one copy silently dropped
  headers    a computing request from another site (Origin, Referer, Sec-Fetch-Site cross-site / same-site), a
             foreign or doubled Host, header names with spaces, folded lines, NUL bytes, odd framing
  catalogs   /api, /api/models and /api/hardware given parameters (they take none: refused, never ignored)
A request fails when the answer is 5xx, is not JSON of the error shape {"error": {field, problem, valid}} (4xx),
names no field (422), is not strict JSON (200: no NaN), or the connection drops without an answer; a request the
server must refuse (a repeated parameter, a parameter to a catalog, a cross-site computing request) fails when it is
answered 200 ("ignored": a value silently dropped, or "cross-site served"). Exit status 1 when any fails; the
report lists the first examples.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("numbers", "types", "nesting", "sizes", "bodies", "fields", "routes", "valid", "query", "repeat",
            "headers", "catalogs")
WEIGHTS = (18, 8, 5, 5, 7, 6, 5, 14, 16, 6, 7, 3)
# what the server must do with a request of these families: refuse it (any 4xx), or refuse it 403 (cross-site)
MUST_REFUSE = {"repeat": "ignored", "catalogs": "ignored"}
DIGITS = {"arabic": "\u0660", "fullwidth": "\uff10", "devanagari": "\u0966", "bengali": "\u09e6"}
JUNK = ["%00", "%ZZ", "%FF", "%C0%AF", "%E2%80%AE", "%0d%0aX-Injected:%201", "%25", "%2B", "+", "%20%20", "%",
        "%u0031", "%3B1", "%26batch%3D2"]
FOREIGN = ["http://evil.example", "https://127.0.0.1.evil.example", "null", "http://127.0.0.1:1", "file://",
           "http://localhost.evil.example:80"]
NUMBERS = ["9" * 400, "-" + "9" * 400, "7" * 5000, "1e400", "-1e400", "NaN", "Infinity", "-Infinity", '"nan"',
           '"inf"', '"-inf"', str(2 ** 63), str(2 ** 64 + 1), "1e-320", "1.5", '"0x10"', '"1_000"', "-1", "0",
           "-0.0", '" 12 "', '"\u0661\u0662"', "1e308", "123456789012345678901234567890", '"1e5"', '"12abc"',
           "true", '""', '"   "', "4.9e-324", "-9223372036854775809"]
TYPES = ["[]", "[1,2]", "{}", '{"a":1}', "null", "true", "false", "[[[[1]]]]", '"' + "x" * 60000 + '"',
         '"\\u0000\\u001f\\ud800"', '"<script>"', '["h100-sxm", 1]', '{"$gt": 0}', "[null]", '"../../etc/passwd"']
CTYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=z", "application/xml",
          None, "application/json; charset=latin-1", "application/json;;;", "garbage/\x7f", "APPLICATION/JSON"]
BODIES = [b"", b"null", b"[]", b"1", b'"s"', b"\xff\xfe\xfd", b"\xef\xbb\xbf{}", b"{", b"}", b'{"a":}', b"\x00" * 64,
          b'{"model": "llama-3.1-8b",}', b"{'model': 1}", b"NaN", b'{"batch": 1}{"batch": 2}', b"\n\n\n"]


class Gen:
    """Draws requests (method, path, headers, body bytes or None, raw bytes or None) from the server's own table."""

    def __init__(self, meta: dict, seed: int):
        self.rng = random.Random(seed)
        self.eps = {p.removeprefix("/api/"): e for p, e in meta["endpoints"].items() if e.get("params")}

    def _ep(self):
        name = self.rng.choice(sorted(self.eps))
        return name, self.eps[name]["params"]

    def _json(self, name, pairs: dict[str, str], ctype="application/json", extra=None):
        body = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs.items()) + "}"
        return ("POST", f"/api/{name}", {"Content-Type": ctype, **(extra or {})}, body.encode("utf-8", "replace"),
                None)

    def _valid_value(self, p):
        r, t = self.rng, p["type"]
        if p.get("choices"):
            return json.dumps(r.choice(p["choices"]))
        if t in ("int", "batch"):
            lo, hi = int(p.get("min", 1)), int(min(p.get("max", 10 ** 6), 10 ** 6))
            return str(r.choice([lo, hi, r.randint(lo, hi), r.randint(lo, max(lo, min(hi, 64)))]))
        if t == "float":
            lo, hi = p.get("min", 0.0), min(p.get("max", 1e6), 1e6)
            return repr(r.uniform(lo, hi) if r.random() < 0.7 else r.choice([lo, hi]))
        if t == "bool":
            return r.choice(["true", "false", '"1"', '"no"'])
        if t == "intlist":
            return json.dumps([r.randint(1, 200_000) for _ in range(r.randint(1, 5))])
        if t == "range":
            a, b = sorted((r.random(), r.random()))
            return json.dumps([a, b])
        if t == "hardware":
            return json.dumps(r.choice(["h100-sxm", "h200", "a100-80gb", "b200", "mi300x"]))
        if t == "hwlist":
            return json.dumps("h100-sxm,h200")
        if t == "model":
            return json.dumps(r.choice(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "deepseek-v3", "qwen3-8b"]))
        return "null"

    def draw(self):
        """(family, request, what the answer must be: None (4xx or 200), "refuse" (4xx) or "403")."""
        fam = self.rng.choices(FAMILIES, WEIGHTS)[0]
        self.expect = MUST_REFUSE.get(fam) and "refuse"
        return fam, getattr(self, "f_" + fam)(), self.expect

    # -- families -----------------------------------------------------------------------------------------------
    def f_numbers(self):
        name, params = self._ep()
        nums = [p for p in params if p["type"] in ("int", "float", "batch", "intlist", "range")] or params
        p, v = self.rng.choice(nums), self.rng.choice(NUMBERS)
        if p["type"] in ("intlist", "range") and self.rng.random() < 0.5:
            v = f"[{v}, {v}]"
        if self.rng.random() < 0.25:   # the same value in a query string
            return "GET", f"/api/{name}?{p['name']}={quote(v.strip(chr(34)))}", {}, None, None
        return self._json(name, {p["name"]: v})

    def f_types(self):
        name, params = self._ep()
        p = self.rng.choice(params)
        return self._json(name, {p["name"]: self.rng.choice(TYPES)})

    def f_nesting(self):
        name, params = self._ep()
        depth = self.rng.choice([50, 500, 1000, 5000, 30000, 60000])
        o, c = self.rng.choice([("[", "]"), ('{"a":', "}")])
        inner = o * depth + "1" + c * depth
        if self.rng.random() < 0.5:
            return "POST", f"/api/{name}", {"Content-Type": "application/json"}, inner.encode(), None
        return self._json(name, {self.rng.choice(params)["name"]: inner})

    def f_sizes(self):
        name, params = self._ep()
        k = self.rng.randrange(6)
        if k == 0:
            n = self.rng.choice([65 * 1024, 300 * 1024, 1024 * 1024])
            return "POST", f"/api/{name}", {"Content-Type": "application/json"}, b'{"x": "' + b"a" * n + b'"}', None
        if k == 1:
            return "GET", f"/api/{name}?model=" + "a" * 70000, {}, None, None
        if k == 2:
            q = urlencode({f"p{i}": i for i in range(200)})
            return "GET", f"/api/{name}?{q}", {}, None, None
        if k == 3:
            head = "".join(f"X-H{i}: {i}\r\n" for i in range(150))
            return None, None, None, None, f"GET /api/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode()
        if k == 4:
            return None, None, None, None, (f"GET /api/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: "
                                            + "b" * 70000 + "\r\n\r\n").encode()
        return None, None, None, None, (f"POST /api/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                        f"application/json\r\nContent-Length: 500\r\n\r\n{{\"batch\": 1").encode()

    def f_bodies(self):
        name, params = self._ep()
        if self.rng.random() < 0.5:
            ctype = self.rng.choice(CTYPES)
            h = {"Content-Type": ctype} if ctype else {}
            return "POST", f"/api/{name}", h, b'{"batch": 2}', None
        h = {"Content-Type": "application/json"}
        if self.rng.random() < 0.2:
            h["Origin"] = self.rng.choice(["http://evil.example", "null", "file://", "http://127.0.0.1:1"])
        return "POST", self.rng.choice([f"/api/{name}", "/api/model-config"]), h, self.rng.choice(BODIES), None

    def f_fields(self):
        name, params = self._ep()
        k = self.rng.randrange(4)
        key = [self.rng.choice(params)["name"] + "s", "__proto__", "\u00e9\u00e8\u2603", "k" * 10000][k]
        if self.rng.random() < 0.3:   # the upload endpoint with a config that is not one
            cfg = {"model_type": self.rng.choice(["llama", "bert", None, 7]), key: 1,
                   "hidden_size": self.rng.choice([4096, -1, 0, "x", 10 ** 30])}
            return ("POST", "/api/model-config?name=" + quote(key[:100]), {"Content-Type": "application/json"},
                    json.dumps(cfg).encode(), None)
        return self._json(name, {key: "1", self.rng.choice(params)["name"]: self._valid_value(params[0])})

    def f_routes(self):
        name, _ = self._ep()
        k = self.rng.randrange(4)
        if k == 0:
            return self.rng.choice(["PUT", "DELETE", "OPTIONS", "PATCH", "FOO"]), f"/api/{name}", {}, b"{}", None
        if k == 1:
            return "GET", self.rng.choice([f"/api/{name}/x", "/api/%00", "/api/..%2f..%2fetc", "/api//infer",
                                           "/static/../../x", "/api/infer?" + "&" * 5000]), {}, None, None
        if k == 2:
            return None, None, None, None, self.rng.choice([b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                                                            b"GET /api HTTP/1.1\r\nBad Header\r\n\r\n",
                                                            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
                                                            b"GET /api HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                                                            b"POST /api/infer HTTP/1.1\r\nContent-Length: 2\r\n"
                                                            b"Content-Length: 3\r\n\r\n{}"])
        return "GET", f"/api/{name}?{quote('a=1&=2&%ZZ&;')}", {}, None, None

    def f_valid(self):
        name, params = self._ep()
        chosen = self.rng.sample(params, k=min(len(params), self.rng.randint(1, 4)))
        pairs = {p["name"]: self._valid_value(p) for p in chosen}
        # keep the slow ones bounded (a fuzz run, not a load test)
        for k, cap in (("samples", "2000"), ("chips", "8")):
            if k in pairs:
                pairs[k] = cap
        if name == "train" and "search" in pairs:
            pairs["search"] = "false"
        return self._json(name, pairs)


    # -- issue 40's families ------------------------------------------------------------------------------------
    def _edge(self, p) -> str:
        """One value of a declared parameter as a query string carries it: its edges, just outside, the middle, huge,
        NaN/inf, non-ASCII digits, empty, spaces or percent-encoded junk (already percent-encoded)."""
        r, t = self.rng, p["type"]
        lo, hi = p.get("min"), p.get("max")
        num = t in ("int", "float", "batch", "intlist", "floatlist", "range", "length")
        k = r.randrange(12)
        if k == 0 or not num:
            if p.get("choices") and r.random() < 0.5:
                c = r.choice(p["choices"])
                return quote(r.choice([c, c.upper(), " " + c, c + "x", c[:-1]]))
            return quote(self._valid_value(p).strip('"')) if r.random() < 0.5 else r.choice(JUNK)
        if k == 1:
            return r.choice(JUNK)
        if k == 2:
            return r.choice(["", "%20", "%09", "0", "-0"])
        if k == 3:
            return r.choice(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e-400", "4.9e-324"])
        if k == 4:
            return "9" * r.choice([19, 40, 400, 5000])
        if k == 5:       # a number written in other digits, percent-encoded
            z = ord(r.choice(list(DIGITS.values())))
            text = "".join(chr(z + int(d)) for d in str(r.randint(1, 64)))
            return quote(text)
        base = lo if k in (6, 7) else hi
        if base is None:
            base = r.choice([0, 1, 1e6, 1e18])
        if k == 6:                       # the edge itself
            v = base
        elif k == 7:                     # just below the lowest
            v = base - (1 if t in ("int", "batch", "intlist", "length") else max(abs(base) * 1e-9, 1e-12))
        elif k == 8:
            v = base
        elif k == 9:                     # just above the highest
            v = base + (1 if t in ("int", "batch", "intlist", "length") else max(abs(base) * 1e-9, 1e-12))
        elif k == 10:                    # the middle (kept modest: a fuzz, not a load test)
            top = min(hi if hi is not None else 64, 64)
            v = ((lo or 0) + top) / 2
            v = int(v) if t in ("int", "batch", "intlist", "length") else v
        else:
            v = r.choice([-1, 0, 0.5, 1.5, 2 ** 31, 2 ** 63, 1e308])
        if isinstance(v, float) and v.is_integer() and t in ("int", "batch", "intlist", "length") and abs(v) < 1e18:
            v = int(v)
        text = repr(v) if isinstance(v, float) else str(v)
        if t in ("intlist", "floatlist", "range") and r.random() < 0.5:
            text = f"{text},{text}"
        return quote(text)

    def f_query(self):
        name, params = self._ep()
        chosen = self.rng.sample(params, k=min(len(params), self.rng.randint(1, 4)))
        parts = [f"{quote(p['name'])}={self._edge(p)}" for p in chosen]
        if self.rng.random() < 0.15:     # a random name beside them
            junk = self.rng.choice(["x", "Batch", "batch ", "chips[]", "%62atch", "b%00", "é", "k" * 300])
            parts.append(f"{quote(junk, safe='%')}=1")
        if self.rng.random() < 0.1:
            parts.append(self.rng.choice(["&", "=", "==", "&&", ";", "a=1=2"]))
        self.rng.shuffle(parts)
        return self.rng.choice(["GET", "GET", "HEAD"]), f"/api/{name}?" + "&".join(parts), {}, None, None

    def f_repeat(self):
        name, params = self._ep()
        p = self.rng.choice(params)
        a, b = self._valid_value(p), self._valid_value(p)
        k = self.rng.randrange(3)
        if k == 0:                       # twice in the query string
            q = lambda v: quote(v.strip('"'))     # noqa: E731
            return "GET", f"/api/{name}?{p['name']}={q(a)}&{p['name']}={q(b)}", {}, None, None
        if k == 1:                       # a JSON key twice
            body = f'{{{json.dumps(p["name"])}: {a}, {json.dumps(p["name"])}: {b}}}'.encode()
            return "POST", f"/api/{name}", {"Content-Type": "application/json"}, body, None
        body = f'{{{json.dumps(p["name"])}: {b}}}'.encode()      # in the query and in the body
        return ("POST", f"/api/{name}?{p['name']}={quote(a.strip(chr(34)))}", {"Content-Type": "application/json"},
                body, None)

    def f_headers(self):
        name, params = self._ep()
        path = f"/api/{name}"
        r = self.rng
        k = r.randrange(10)
        if k < 4:                        # a computing request from another site: 403, whatever the method
            self.expect = "403"
            h = r.choice([{"Origin": r.choice(FOREIGN)}, {"Referer": r.choice(FOREIGN) + "/page"},
                          {"Sec-Fetch-Site": r.choice(["cross-site", "same-site", "CROSS-SITE", " cross-site"])},
                          {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}])
            if r.random() < 0.5:
                return "GET", path + "?batch=2", h, None, None
            return "POST", path, {"Content-Type": "application/json", **h}, b'{"batch": 2}', None
        lines = {4: [b"Host: 127.0.0.1", b"Host: evil.example"],              # two Host headers
                 5: [b"Host: evil.example"],                                  # a foreign Host on a loopback server
                 6: [b"Host: 127.0.0.1", b"X-A : 1"],                         # white space before a colon
                 7: [b"Host: 127.0.0.1", b"X-A: 1", b" folded"],              # an obsolete folded line
                 8: [b"Host: 127.0.0.1", b"X-A: a\x00b"],                     # a NUL byte in a value
                 9: [b"Host: 127.0.0.1", r.choice([b"Content-Length: +2", b"Content-Length: 0x2",
                                                   b"Transfer-Encoding: chunked", b"Content-Length: 2, 2"])]}[k]
        if k in (4, 5, 6, 7):
            self.expect = "refuse"
        body = b"{}" if k == 9 else b""
        raw = (f"POST {path} HTTP/1.1\r\n".encode() + b"\r\n".join(lines)
               + b"\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + body)
        return None, None, None, None, raw

    def f_catalogs(self):
        path = self.rng.choice(["/api", "/api/", "/api/models", "/api/hardware"])
        q = self.rng.choice(["x=1", "model=llama-3.1-8b", "batch=4", "hardware=h100-sxm&x=%00", "verbose=true"])
        return "GET", f"{path}?{q}", {}, None, None


def send(host: str, port: int, req, timeout: float) -> tuple[int | None, bytes, str | None]:
    """(status, body, transport error) for one request, on a fresh connection."""
    method, path, headers, body, raw = req
    if raw is None:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            try:
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass   # the server answered (and stopped reading) before all was sent: read its answer
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (OSError, TimeoutError) as e:
        if not data:
            return None, b"", repr(e)
    head, _, payload = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None, data[:200], "no HTTP answer"
    return status, payload, None


def check(status: int, payload: bytes, expect: str | None = None) -> str | None:
    """What is wrong with an answer (None: fine); expect: "refuse" (any 4xx) or "403" (a cross-site request)."""
    if status >= 500:
        return f"HTTP {status}"
    if expect == "refuse" and status == 200:
        return "ignored: answered 200, a value silently dropped"
    if expect == "403" and status != 403:
        return f"cross-site served: HTTP {status}, not 403"
    if expect == "head":          # HEAD: a status and no body to check
        return None

    def strict(c):
        raise ValueError(c)
    try:
        obj = json.loads(payload, parse_constant=strict)
    except ValueError as e:
        return f"HTTP {status}: body is not strict JSON ({str(e)[:60]})"
    if status == 200:
        return None
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict) or set(err) != {"field", "problem", "valid"} or not err["problem"]:
        return f"HTTP {status}: not the error shape"
    if status == 422 and not err["field"]:
        return "HTTP 422 naming no field"
    return None


class Rss:
    """The resident memory of a process and its children (the server and its worker processes), sampled every
    `every` s from /proc while the run lasts: the peak of the sum, of the server alone and of one worker."""

    def __init__(self, pid: int | None, every: float = 0.2):
        self.pid, self.every = pid, every
        self.peak = self.peak_server = self.peak_worker = 0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                return int(fh.read().split()[1]) * 4096
        except (OSError, ValueError, IndexError):
            return 0

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        try:
            for tid in Path(f"/proc/{pid}/task").iterdir():
                out += [int(x) for x in (tid / "children").read_text().split()]
        except OSError:
            pass
        return out

    def _loop(self):
        while not self._stop.wait(self.every):
            server = self._rss(self.pid)
            kids = [self._rss(c) for c in self._children(self.pid)]
            self.peak_server = max(self.peak_server, server)
            self.peak_worker = max([self.peak_worker, *kids])
            self.peak = max(self.peak, server + sum(kids))
            self.samples += 1

    def __enter__(self):
        if self.pid is not None:
            self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._t.is_alive():
            self._t.join(2)

    def to_dict(self) -> dict:
        gb = lambda b: round(b / 2 ** 30, 3)      # noqa: E731
        return {"peak_gib": gb(self.peak), "peak_server_gib": gb(self.peak_server),
                "peak_worker_gib": gb(self.peak_worker), "samples": self.samples}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))], 3) if xs else 0.0


def run(host: str, port: int, n: int = 10_000, seed: int = 0, concurrency: int = 8, timeout: float = 120.0,
        server_pid: int | None = None) -> dict:
    meta = json.loads(send(host, port, ("GET", "/api", {}, None, None), timeout)[1])
    gen = Gen(meta, seed)
    reqs = [gen.draw() for _ in range(n)]
    statuses, fams = collections.Counter(), collections.Counter()
    bad = collections.Counter()
    examples: list[dict] = []
    times: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def one(item):
        fam, req, expect = item
        t = time.perf_counter()
        status, payload, err = send(host, port, req, timeout)
        dt = time.perf_counter() - t
        m, p, h, b, raw = req
        problem = err or check(status, payload, "head" if m == "HEAD" and expect is None else expect)
        with lock:
            statuses[str(status)] += 1
            fams[fam] += 1
            times.append((dt, fam, (raw or f"{m} {p}".encode())[:120].decode("latin-1")))
            if problem:
                bad[problem.split(":")[0]] += 1
                if len(examples) < 30:
                    examples.append({"family": fam, "problem": problem, "request": (raw or f"{m} {p} {h} ".encode()
                                     + (b or b""))[:300].decode("latin-1"), "answer": payload[:300].decode("latin-1")})

    t0 = time.perf_counter()
    with Rss(server_pid) as rss, ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, reqs))
    secs = time.perf_counter() - t0
    durations = [t for t, _, _ in times]
    transport = statuses.get("None", 0)
    return {"requests": n, "seed": seed, "seconds": round(secs, 1), "statuses": dict(sorted(statuses.items())),
            "families": dict(sorted(fams.items())),
            "5xx": sum(v for k, v in statuses.items() if k.isdigit() and int(k) >= 500),
            "transport_errors": transport,
            "ignored": bad.get("ignored", 0), "cross_site_served": bad.get("cross-site served", 0),
            "bad_error_shape": sum(v for k, v in bad.items() if not k.startswith("HTTP 5")
                                   and k not in ("ignored", "cross-site served")) - transport,
            "time_s": {"p50": _pct(durations, 50), "p99": _pct(durations, 99), "max": _pct(durations, 100)},
            "slowest": [{"s": round(t, 2), "family": f, "request": r} for t, f, r in sorted(times, reverse=True)[:5]],
            "rss": rss.to_dict() if server_pid is not None else None,
            "failures": dict(bad), "examples": examples}


def start_server(src: Path = ROOT / "src") -> tuple[subprocess.Popen, str, int]:
    """`tokenmath serve --port 0` in a child process (its memory sampled apart from this client's), run from the
    source tree `src` (default this checkout's)."""
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-m", "tokenmath.faces.cli", "serve", "--port", "0"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://([^\s:/]+):(\d+)/", line)
    if not m:
        p.kill()
        raise SystemExit(f"server did not start: {line!r} {p.stderr.read()[:2000]}")
    threading.Thread(target=p.stderr.read, daemon=True).start()     # its log (tracebacks of 500s) is drained
    return p, m.group(1), int(m.group(2))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="requests (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--url", help="a running server (default: `tokenmath serve` started in a child process)")
    ap.add_argument("--in-process", action="store_true", help="start the server in this process (no RSS figures)")
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="the source tree the child server runs (default this checkout's src/; e.g. an exported "
                         "earlier commit, to measure before and after with the same requests)")
    ap.add_argument("--json", action="store_true", help="the report as one JSON object")
    a = ap.parse_args(argv)
    srv = child = pid = None
    if a.url:
        u = urlsplit(a.url)
        host, port = u.hostname, u.port or 80
    elif a.in_process:
        sys.path.insert(0, str(ROOT / "src"))
        from tokenmath.faces.web.server import start_in_thread
        srv, _ = start_in_thread("127.0.0.1", 0)
        host, port = srv.server_address[:2]
    else:
        child, host, port = start_server(a.src)
        pid = child.pid
    try:
        rep = run(host, port, a.n, a.seed, a.concurrency, server_pid=pid)
    finally:
        if srv is not None:
            srv.shutdown()
            srv.server_close()
        if child is not None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
    if a.json:
        print(json.dumps(rep, indent=2))
    else:
        print(f"{rep['requests']:,} requests (seed {rep['seed']}) in {rep['seconds']} s")
        print("  by family: " + ", ".join(f"{k} {v:,}" for k, v in rep["families"].items()))
        print("  statuses:  " + ", ".join(f"{k}: {v:,}" for k, v in rep["statuses"].items()))
        print(f"  5xx: {rep['5xx']}   dropped connections: {rep['transport_errors']}   ignored: {rep['ignored']}   "
              f"cross-site served: {rep['cross_site_served']}   other failures: {rep['bad_error_shape']}")
        t = rep["time_s"]
        print(f"  time per request: p50 {t['p50']} s, p99 {t['p99']} s, max {t['max']} s")
        if rep["rss"]:
            r = rep["rss"]
            print(f"  server RSS peak (with its workers): {r['peak_gib']} GiB (server {r['peak_server_gib']} GiB, "
                  f"one worker {r['peak_worker_gib']} GiB; {r['samples']} samples)")
        for x in rep["slowest"]:
            print(f"  slow: {x['s']} s [{x['family']}] {x['request'][:100]!r}")
        for e in rep["examples"]:
            print(f"  - [{e['family']}] {e['problem']}\n      {e['request'][:160]!r}\n      -> {e['answer'][:160]!r}")
    failed = rep["5xx"] + rep["transport_errors"] + rep["bad_error_shape"] + rep["ignored"] + rep["cross_site_served"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
