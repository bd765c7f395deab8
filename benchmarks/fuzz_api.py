#!/usr/bin/env python
"""Fuzz the JSON API of `tokenmath serve`: malformed requests must be answered 4xx with a JSON error naming the
field (or 200 for the valid ones), never 5xx, never a dropped connection (issue 15).

    python benchmarks/fuzz_api.py                     # 10,000 requests, seed 0, against a server started in-process
    python benchmarks/fuzz_api.py -n 50000 --seed 7 --concurrency 16 --json
    python benchmarks/fuzz_api.py --url http://127.0.0.1:8000/      # a server already running

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
A request fails when the answer is 5xx, is not JSON of the error shape {"error": {field, problem, valid}} (4xx),
names no field (422), is not strict JSON (200: no NaN), or the connection drops without an answer. Exit status 1
when any fails; the report lists the first examples.
"""
from __future__ import annotations

import argparse
import collections
import json
import random
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("numbers", "types", "nesting", "sizes", "bodies", "fields", "routes", "valid")
WEIGHTS = (30, 14, 8, 8, 10, 8, 7, 15)
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
        fam = self.rng.choices(FAMILIES, WEIGHTS)[0]
        return fam, getattr(self, "f_" + fam)()

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


def check(status: int, payload: bytes) -> str | None:
    """What is wrong with an answer (None: fine)."""
    if status >= 500:
        return f"HTTP {status}"
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


def run(host: str, port: int, n: int = 10_000, seed: int = 0, concurrency: int = 8, timeout: float = 60.0) -> dict:
    meta = json.loads(send(host, port, ("GET", "/api", {}, None, None), timeout)[1])
    gen = Gen(meta, seed)
    reqs = [gen.draw() for _ in range(n)]
    statuses, fams = collections.Counter(), collections.Counter()
    bad = collections.Counter()
    examples: list[dict] = []
    lock = threading.Lock()

    def one(item):
        fam, req = item
        status, payload, err = send(host, port, req, timeout)
        problem = err or check(status, payload)
        with lock:
            statuses[str(status)] += 1
            fams[fam] += 1
            if problem:
                bad[problem.split(":")[0]] += 1
                if len(examples) < 20:
                    m, p, h, b, raw = req
                    examples.append({"family": fam, "problem": problem, "request": (raw or f"{m} {p} {h} ".encode()
                                     + (b or b""))[:300].decode("latin-1"), "answer": payload[:300].decode("latin-1")})

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, reqs))
    secs = time.perf_counter() - t0
    return {"requests": n, "seed": seed, "seconds": round(secs, 1), "statuses": dict(sorted(statuses.items())),
            "families": dict(sorted(fams.items())),
            "5xx": sum(v for k, v in statuses.items() if k.isdigit() and int(k) >= 500),
            "transport_errors": statuses.get("None", 0),
            "bad_error_shape": sum(v for k, v in bad.items() if not k.startswith("HTTP 5")) - statuses.get("None", 0),
            "failures": dict(bad), "examples": examples}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="requests (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--url", help="a running server (default: one started in this process)")
    ap.add_argument("--json", action="store_true", help="the report as one JSON object")
    a = ap.parse_args(argv)
    srv = None
    if a.url:
        u = urlsplit(a.url)
        host, port = u.hostname, u.port or 80
    else:
        sys.path.insert(0, str(ROOT / "src"))
        from tokenmath.faces.web.server import start_in_thread
        srv, _ = start_in_thread("127.0.0.1", 0)
        host, port = srv.server_address[:2]
    try:
        rep = run(host, port, a.n, a.seed, a.concurrency)
    finally:
        if srv is not None:
            srv.shutdown()
            srv.server_close()
    if a.json:
        print(json.dumps(rep, indent=2))
    else:
        print(f"{rep['requests']:,} requests (seed {rep['seed']}) in {rep['seconds']} s")
        print("  by family: " + ", ".join(f"{k} {v:,}" for k, v in rep["families"].items()))
        print("  statuses:  " + ", ".join(f"{k}: {v:,}" for k, v in rep["statuses"].items()))
        print(f"  5xx: {rep['5xx']}   dropped connections: {rep['transport_errors']}   "
              f"other failures: {rep['bad_error_shape']}")
        for e in rep["examples"]:
            print(f"  - [{e['family']}] {e['problem']}\n      {e['request'][:160]!r}\n      -> {e['answer'][:160]!r}")
    failed = rep["5xx"] + rep["transport_errors"] + rep["bad_error_shape"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
