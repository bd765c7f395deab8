"""The web server under abuse (issue 15, items 14-16 and the fuzz criterion): huge numbers, connection floods, slow
and truncated requests, cross-site POSTs, stale uploads, and a bounded fuzz run (benchmarks/fuzz_api.py runs
>= 10,000 requests; here a few hundred). Every answer is a JSON error naming the field, never a 5xx.

The only wall-clock bound asserted is the issue's own: a normal request is answered within 1 s during and after a
flood of half-open connections. Other waits are generous socket timeouts (a hang fails, a slow machine does not).
"""
from __future__ import annotations

import http.client
import importlib.util
import json
import resource
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tokenmath.faces.web.server import start_in_thread

ROOT = Path(__file__).resolve().parents[1]
HUGE = "9" * 400                   # a JSON number of 400 digits (~1e400: no float holds it)
LATENCY_BOUND_S = 1.0              # issue 15, item 15: a normal request is answered within 1 s during a flood


def request(srv, method, path, body=None, headers=None, timeout=30):
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def post_json(srv, path, text: str, headers=None):
    h = {"Content-Type": "application/json", **(headers or {})}
    status, data, _ = request(srv, "POST", path, body=text.encode(), headers=h)
    return status, json.loads(data)


def assert_error(body, field):
    assert set(body) == {"error"} and set(body["error"]) == {"field", "problem", "valid"}, body
    assert body["error"]["field"] == field, body
    assert body["error"]["problem"] and "Traceback" not in json.dumps(body)


def numeric_params(srv):
    """(endpoint, parameter, kind) for every parameter that takes a number, read off the server's own table."""
    return [(name, p.name, p.kind) for name, ep in sorted(srv.api.endpoints.items()) for p in ep.params
            if p.kind in ("int", "float", "batch", "intlist", "floatlist", "range")]


# ---- item 14: a JSON number of 400 digits --------------------------------------------------------------------------

def test_every_numeric_parameter_is_covered(server):
    # 13 endpoints (sensitivity the 11th, simulate_sweep the 12th, agents the 13th); a refactor that drops the numbers
    # from the table must not make the tests below vacuous
    assert len({e for e, _, _ in numeric_params(server)}) == 13 and len(numeric_params(server)) > 60


@pytest.mark.parametrize("sign", ["", "-"])
def test_huge_json_number_is_422_naming_the_field(server, sign):
    """Before: OverflowError in as_int/as_float -> HTTP 500 on infer, pareto, context, prices, overtrain, ...
    float(10**400) overflows (the largest double is ~1.8e308), so the number can be neither a count nor a price: 422."""
    bad = []
    for name, field, kind in numeric_params(server):
        value = f"[{sign}{HUGE}, 1]" if kind == "range" else f"{sign}{HUGE}"
        status, body = post_json(server, f"/api/{name}", f'{{"{field}": {value}}}')
        if status != 422 or body["error"]["field"] != field:
            bad.append((name, field, status, body["error"]))
        else:
            assert len(body["error"]["problem"]) < 200, body   # not the 400 digits echoed back
    assert not bad, bad


def test_huge_number_in_query_string_and_beyond_json_int_limit(server):
    status, data, _ = request(server, "GET", "/api/infer?" + urlencode({"batch": HUGE}))
    assert status == 422
    assert_error(json.loads(data), "batch")
    assert "out of range" in json.loads(data)["error"]["problem"]
    # 5,000 digits: beyond Python's default int-parsing limit (4,300 digits): still 422 naming the field
    status, body = post_json(server, "/api/infer", '{"input_len": ' + "7" * 5000 + "}")
    assert status == 422
    assert_error(body, "input_len")
    status, body = post_json(server, "/api/deduce", '{"input_price": 1e400, "output_price": 1}')
    assert status == 422
    assert_error(body, "input_price")


# ---- item 16: cross-site POSTs and the upload cache ----------------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize("ctype", [FORM, "text/plain", "text/plain;charset=UTF-8", "multipart/form-data; boundary=x"])
def test_form_and_text_posts_are_refused(server, ctype):
    """A page elsewhere can send these three types without a CORS preflight; /api/* answers them 403, unread."""
    body = b'{"batch": 4}' if "json" in ctype or "plain" in ctype else b"batch=4"
    for path in ("/api/infer", "/api/model-config"):
        status, data, _ = request(server, "POST", path, body=body, headers={"Content-Type": ctype})
        assert status == 403, (path, ctype, data)
        assert_error(json.loads(data), "Content-Type")


@pytest.mark.parametrize("header,value", [
    ("Origin", "http://evil.example"), ("Origin", "null"), ("Origin", "http://127.0.0.1:1"),
    ("Referer", "http://evil.example/page.html")])
def test_cross_site_origin_is_refused(server, header, value):
    status, data, _ = request(server, "POST", "/api/infer", body=b'{"batch": 4}',
                              headers={"Content-Type": "application/json", header: value})
    assert status == 403, data
    assert_error(json.loads(data), header)


def test_same_origin_and_plain_clients_are_served(server):
    host, port = server.server_address[:2]
    own = f"http://{host}:{port}"
    for headers in ({"Origin": own}, {"Referer": own + "/"}, {"Origin": own.upper()}, {}):
        status, body = post_json(server, "/api/infer", '{"batch": 4}', headers)
        assert status == 200 and body["batch"] == 4, (headers, body)
    # the page opened as localhost: its Origin matches the Host it sent
    status, _, _ = request(server, "POST", "/api/infer", body=b"{}",
                           headers={"Content-Type": "application/json", "Host": f"localhost:{port}",
                                    "Origin": f"http://localhost:{port}"})
    assert status == 200


def test_reupload_under_a_new_name_returns_the_new_name(server):
    """Before: the second upload's infer answer still said 'first.json' (response cache keyed by content only)."""
    raw = (ROOT / "tests" / "fixtures" / "Llama-3.1-8B.json").read_bytes()
    names, ids = [], []
    for fname in ("first.json", "second.json"):
        status, data, _ = request(server, "POST", "/api/model-config?" + urlencode({"name": fname}), body=raw,
                                  headers={"Content-Type": "application/json"})
        up = json.loads(data)
        assert status == 200 and up["name"] == fname
        ids.append(up["id"])
        status, data, _ = request(server, "GET", "/api/infer?" + urlencode({"model": up["id"], "batch": 2}))
        names.append(json.loads(data)["model_name"])
    assert names == ["first.json", "second.json"]
    assert ids[0] != ids[1]
    # the same content under the same name is the same model (content + name addressed)
    status, data, _ = request(server, "POST", "/api/model-config?name=first.json", body=raw,
                              headers={"Content-Type": "application/json"})
    assert json.loads(data)["id"] == ids[0]


# ---- item 15: slow, truncated and flooding clients -----------------------------------------------------------------

def raw_exchange(srv, data: bytes, half_close=False, timeout=20.0) -> bytes:
    """Send raw bytes, keep the socket open (or half-close it), return what the server answers until it closes."""
    host, port = srv.server_address[:2]
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError) as e:
                raise AssertionError(f"no answer: {e!r} after {out!r}") from None
            if not chunk:
                return out
            out += chunk


def split_response(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize("half_close", [False, True])
def test_truncated_body_is_400_not_a_500_after_30_s(server, half_close):
    """Before: Content-Length 100 with 12 bytes sent: the thread waited 30 s, then answered 500. Now 400 from the
    server's body timeout (a few seconds; at once when the client half-closes)."""
    req = (b"POST /api/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: 100\r\n\r\n" + b'{"batch": 4,')
    status, body = split_response(raw_exchange(server, req, half_close=half_close))
    assert status == 400
    assert_error(body, "body")
    assert "12" in body["error"]["problem"] and "100" in body["error"]["problem"]


def test_slow_head_is_cut(server):
    """A client that starts a request and stops (slowloris) is answered 408 and dropped, not held forever."""
    status, body = split_response(raw_exchange(server, b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
    assert status == 408
    assert_error(body, "request")


def timed_get(srv, path: str, timeout: float = 15.0) -> float:
    t0 = time.perf_counter()
    status, data, _ = request(srv, "GET", path, timeout=timeout)
    assert status == 200, data[:300]
    return time.perf_counter() - t0


class Prober(threading.Thread):
    """Normal requests, one new connection each, every 50 ms: (phase, latency in s) or (phase, error)."""

    def __init__(self, srv, path):
        super().__init__(daemon=True)
        self.srv, self.path = srv, path
        self.phase = "before"
        self.results: list[tuple[str, float | str]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            phase = self.phase
            try:
                self.results.append((phase, timed_get(self.srv, self.path)))
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.results.append((phase, repr(e)))
            self.stop.wait(0.05)


# The flood, in a child process (its descriptors are its own): n connections started at once (non-blocking), a
# third of them send nothing, a third half a request head, a third a head and a truncated body; held `hold` s, then
# all closed at once (half reset, half closed politely). It prints "open <n established>" and "closed".
FLOOD = r"""
import select, socket, struct, sys, time
host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        continue
    socks.append(s)
poll, up, t_end = select.poll(), 0, time.monotonic() + 3.0
by_fd = {s.fileno(): (i, s) for i, s in enumerate(socks)}
for fd in by_fd:
    poll.register(fd, select.POLLOUT)
while by_fd and time.monotonic() < t_end:
    for fd, _ in poll.poll(100):
        poll.unregister(fd)
        i, s = by_fd.pop(fd)
        i %= 3
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            up += 1
            try:
                if i == 1:
                    s.send(b"GET /api/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
                elif i == 2:
                    s.send(b"POST /api/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 1000\r\n\r\n{")
            except OSError:
                pass
print("open", up, flush=True)
time.sleep(hold)
for i, s in enumerate(socks):
    if i % 2:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
print("closed", flush=True)
"""
SERVER_FDS = 1024                  # the common default RLIMIT_NOFILE: the old server ran out of descriptors here


def _child_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ValueError, OSError):
        pass


def run_flood(srv, n: int, hold: float = 1.0) -> dict:
    import subprocess
    path = "/api/infer?" + urlencode({"model": "llama-3.1-8b", "batch": 8})
    timed_get(srv, path)              # warm: imports and the response cache
    host, port = srv.server_address[:2]
    prober = Prober(srv, path)
    prober.start()
    time.sleep(0.3)
    prober.phase = "during"
    child = subprocess.Popen([sys.executable, "-c", FLOOD, host, str(port), str(n), str(hold)],
                             stdout=subprocess.PIPE, text=True, preexec_fn=_child_fds)
    try:
        opened = child.stdout.readline().split()
        prober.phase = "closing"
        closed = child.stdout.readline().strip()
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    prober.phase = "after"
    time.sleep(1.5)
    prober.stop.set()
    prober.join(30)
    assert opened[:1] == ["open"] and closed == "closed", (opened, closed)
    return {"opened": int(opened[1]), "results": prober.results}


def assert_answered_in_time(res):
    by = {}
    for phase, r in res["results"]:
        by.setdefault(phase, []).append(r)
    failures = [(p, r) for p, r in res["results"] if isinstance(r, str)]
    assert not failures, failures[:5]
    for phase in ("during", "closing", "after"):
        assert by.get(phase), (phase, res)
    slow = [(p, round(r, 3)) for p, r in res["results"] if r > LATENCY_BOUND_S]
    assert not slow, f"answers slower than {LATENCY_BOUND_S} s: {slow[:10]} (flood of {res['opened']})"


@pytest.fixture
def few_descriptors():
    """This process (the server's) limited to SERVER_FDS open files while the test runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(SERVER_FDS, hard), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_flood_of_half_open_connections_does_not_stall_the_server(few_descriptors):
    """Before (thread per connection, no cap), this same test: the server took every descriptor of the process
    (limit 1,024), so normal requests failed with EMFILE ("Too many open files") or waited 1.1-1.7 s; against
    `tokenmath serve` in its own process under `ulimit -n 1024`, opening the 3,000 connections took 66 s: a new
    connection waited in the backlog until a handler thread timed out (30 s). Now a waiting connection costs no thread, the
    longest-waiting one is dropped at the cap, and normal requests are answered within 1 s before, during and after
    the flood (~0.1-0.3 s at worst here)."""
    srv, thread = start_in_thread("127.0.0.1", 0)
    try:
        assert srv.stats["max_connections"] < SERVER_FDS   # the cap follows the descriptor limit
        res = run_flood(srv, 3000)
        assert srv.stats["accepted"] >= 2000, srv.stats           # a real flood: far beyond the cap
        assert_answered_in_time(res)
        # nothing lingers: the flood's connections are gone from the server (no CLOSE-WAIT pile-up)
        for _ in range(200):
            if srv.open_connections <= 2:
                break
            time.sleep(0.05)
        assert srv.open_connections <= 2, srv.stats
        assert srv.stats["evicted"] > 0, srv.stats
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_connection_cap_drops_the_longest_waiting_not_the_newcomer():
    """With a cap of 64 connections, a flood of 400 idle ones evicts the oldest idle: a new client still gets in."""
    from tokenmath.faces.web.connections import Limits
    srv, thread = start_in_thread("127.0.0.1", 0, limits=Limits(max_connections=64))
    try:
        res = run_flood(srv, 400)
        assert_answered_in_time(res)
        assert srv.stats["evicted"] > 0 and srv.stats["max_connections"] == 64
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


# ---- the fuzz criterion: a bounded run of benchmarks/fuzz_api.py --------------------------------------------------

def _load_fuzz():
    spec = importlib.util.spec_from_file_location("tokenmath_fuzz_api", ROOT / "benchmarks" / "fuzz_api.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_fuzz_malformed_requests_never_5xx(server):
    fuzz = _load_fuzz()
    host, port = server.server_address[:2]
    report = fuzz.run(host, port, n=400, seed=15, concurrency=4)
    assert report["requests"] == 400
    assert report["5xx"] == 0 and report["transport_errors"] == 0, report["examples"]
    assert report["bad_error_shape"] == 0, report["examples"]
    assert report["ignored"] == 0 and report["cross_site_served"] == 0, report["examples"]   # nothing dropped
    assert report["statuses"].get("422", 0) > 100, report["statuses"]   # mostly refused, each naming its field
