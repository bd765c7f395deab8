"""Bounded load test of `tokenmath serve` on loopback: N requests at C concurrent against /api/infer.

    python benchmarks/web_load.py                      # starts its own server (a separate process), 2000 x 32
    python benchmarks/web_load.py --url http://127.0.0.1:8000/ --requests 5000 --concurrency 64
    python benchmarks/web_load.py --json               # one JSON object

Inputs vary (model, hardware, layout, batch, input/output lengths, drawn with a fixed seed), so most requests run
the engine rather than hit the server's response cache; the report says how many distinct queries there were.
Each client thread keeps one HTTP/1.1 connection (http.client). One untimed warm-up query per setup first (imports,
catalogs). Reports throughput, latency percentiles and errors
(any status other than 200, or a transport failure). Exit status 1 when any request failed.
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time
from urllib.parse import urlencode, urlsplit

# (model, hardware, layout) triples that fit and are valid layouts; batch and lengths vary on top
SETUPS = [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-8b", "h200", {}),
    ("qwen3-8b", "h100-sxm", {}),
    ("mistral-7b", "a100-80gb", {}),
    ("llama-3.1-70b", "h100-sxm", {"chips": 8}),
    ("llama-3.1-70b", "h200", {"chips": 4}),
    ("qwen2.5-72b", "b200", {"chips": 2}),
    ("mixtral-8x7b", "h100-sxm", {"chips": 2}),
    ("qwen3-30b-a3b", "h100-sxm", {}),
    ("gpt-oss-120b", "h100-sxm", {"chips": 2}),
    ("deepseek-v3", "h200", {"chips": 8, "ep": 8}),
    ("llama-3.1-405b", "h200", {"chips": 8}),
]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, "max"]
INPUTS = [128, 512, 1024, 2048, 4096, 8192]
OUTPUTS = [64, 128, 256, 512, 1024]


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        model, hw, lay = rng.choice(SETUPS)
        q = {"model": model, "hardware": hw, **lay, "batch": rng.choice(BATCHES), "input_len": rng.choice(INPUTS),
             "output_len": rng.choice(OUTPUTS)}
        if rng.random() < 0.2:
            q["kv_dtype"] = "fp8"
        out.append("/api/infer?" + urlencode(q))
    return out


def start_server() -> tuple[subprocess.Popen, str]:
    """`tokenmath serve --port 0` in a child process (its own interpreter: the load does not share its GIL)."""
    code = "import sys; from tokenmath.faces.cli import main; main(sys.argv[1:])"
    p = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"(http://[^\s]+/)", line)
    if not m:
        p.kill()
        raise SystemExit(f"server did not start: {line!r} {p.stderr.read()[:2000]}")
    return p, m.group(1)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))
    return xs[k]


def run(url: str, paths: list[str], concurrency: int, timeout: float = 60.0) -> dict:
    u = urlsplit(url)
    host, port = u.hostname, u.port or 80
    # warm-up, not timed: one query per setup (batch 3 is never drawn, so these never pre-fill the cache)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    for model, hw, lay in SETUPS:
        conn.request("GET", "/api/infer?" + urlencode({"model": model, "hardware": hw, **lay, "batch": 3}))
        conn.getresponse().read()
    conn.close()
    lock = threading.Lock()
    nxt = iter(range(len(paths)))
    lat: list[float] = []
    statuses: dict[str, int] = {}
    errors: list[str] = []

    def worker():
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                break
            t0 = time.perf_counter()
            try:
                conn.request("GET", paths[i], headers={"Accept": "application/json"})
                r = conn.getresponse()
                body = r.read()
                dt = time.perf_counter() - t0
                ok = r.status == 200 and body.startswith(b"{")
                key = str(r.status)
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=timeout)
            except Exception as e:  # noqa: BLE001 - a transport failure counts as an error; reconnect
                dt = time.perf_counter() - t0
                ok, key = False, type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            with lock:
                lat.append(dt)
                statuses[key] = statuses.get(key, 0) + 1
                if not ok and len(errors) < 5:
                    errors.append(f"{key} {paths[i]}")
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    n_err = sum(v for k, v in statuses.items() if k != "200")
    return {"requests": len(paths), "concurrency": concurrency, "distinct_queries": len(set(paths)),
            "wall_s": wall, "throughput_rps": len(paths) / wall,
            "latency_ms": {"p50": 1e3 * pct(lat, 50), "p90": 1e3 * pct(lat, 90), "p99": 1e3 * pct(lat, 99),
                           "max": 1e3 * max(lat) if lat else float("nan"), "mean": 1e3 * sum(lat) / max(len(lat), 1)},
            "statuses": statuses, "errors": n_err, "error_examples": errors}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="an already running server (default: start one)")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not (1 <= a.requests <= 1_000_000 and 1 <= a.concurrency <= 1024):
        ap.error("--requests 1..1,000,000 and --concurrency 1..1024")
    proc = None
    url = a.url
    if url is None:
        proc, url = start_server()
    try:
        res = run(url, queries(a.requests, a.seed), a.concurrency)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
    res["url"] = url
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        L = res["latency_ms"]
        print(f"{res['requests']:,} requests ({res['distinct_queries']:,} distinct) at {res['concurrency']} concurrent "
              f"against {url}api/infer")
        print(f"  wall {res['wall_s']:.2f} s, throughput {res['throughput_rps']:,.0f} requests/s")
        print(f"  latency p50 {L['p50']:.1f} ms, p90 {L['p90']:.1f} ms, p99 {L['p99']:.1f} ms, max {L['max']:.1f} ms")
        print(f"  errors {res['errors']} (statuses {res['statuses']})")
        for e in res["error_examples"]:
            print(f"    e.g. {e}")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
