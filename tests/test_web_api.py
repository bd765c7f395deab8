"""The web API of `tokenmath serve`: shapes, the Python API mirrored, 422 naming the field, limits, 404/405/500."""
from __future__ import annotations

import http.client
import json
import socket
from itertools import pairwise
from urllib.parse import urlencode

import pytest

from tokenmath.faces.web.uploads import UPLOAD_MAX_BYTES


def request(server, method, path, body=None, headers=None, params=None):
    host, port = server.server_address[:2]
    if params:
        path += "?" + urlencode(params)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, data, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def get_json(server, path, **params):
    status, data, headers = request(server, "GET", path, params=params)
    assert headers["content-type"] == "application/json", (path, data[:200])
    return status, json.loads(data)


def assert_error(body, field):
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"field", "problem", "valid"}
    assert err["field"] == field, err
    assert err["problem"]
    assert "Traceback" not in json.dumps(body)


# ---- the page and its files --------------------------------------------------------------------------------------

def test_page_and_static_files(server):
    status, data, h = request(server, "GET", "/")
    assert status == 200 and h["content-type"].startswith("text/html")
    assert b"/static/app.js" in data and b"/static/charts.js" in data and b"/static/words.js" in data
    assert "default-src 'self'" in h["content-security-policy"]
    assert b"http://" not in data and b"https://" not in data   # offline: nothing from elsewhere
    for name, ctype in (("app.js", "text/javascript"), ("charts.js", "text/javascript"), ("words.js", "text/javascript"),
                        ("app.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        status, data, h = request(server, "GET", f"/static/{name}")
        assert status == 200 and h["content-type"].startswith(ctype) and data
        assert b"https://" not in data and b"cdn" not in data.lower()
        status2, data2, _ = request(server, "GET", f"/static/{name}", headers={"If-None-Match": h["etag"]})
        assert status2 == 304 and data2 == b""
    assert request(server, "GET", "/favicon.ico")[0] == 200


@pytest.mark.parametrize("path", ["/nope", "/static/../pyproject.toml", "/static/%2e%2e/x", "/static/", "/api/nope"])
def test_unknown_route_is_404_json(server, path):
    status, body = get_json(server, path)
    assert status == 404
    assert_error(body, "path")
    assert "/api/infer" in body["error"]["valid"]


def test_wrong_method_is_405_json(server):
    status, data, h = request(server, "DELETE", "/api/infer")
    assert status == 405 and h["content-type"] == "application/json"
    assert_error(json.loads(data), "method")
    status, data, _ = request(server, "GET", "/api/model-config")
    assert status == 405
    assert_error(json.loads(data), "method")


def test_foreign_host_header_is_refused(server):
    status, data, _ = request(server, "GET", "/api/models", headers={"Host": "evil.example:80"})
    assert status == 403
    assert_error(json.loads(data), "Host")
    assert request(server, "GET", "/api/models", headers={"Host": "localhost"})[0] == 200


# ---- catalogs and the index ---------------------------------------------------------------------------------------

def test_index_lists_endpoints(server):
    status, body = get_json(server, "/api")
    assert status == 200
    for name in ("infer", "hyperbola", "pareto", "context", "prices", "deduce", "train", "overtrain", "chinchilla",
                 "models", "hardware", "model-config"):
        assert f"/api/{name}" in body["endpoints"]
    assert "bf16" in body["weight_dtypes"] and "fp8" in body["kv_dtypes"] and "epoch" in body["fits"]


def test_models_and_hardware(server):
    from tokenmath.specs.hardware import hardware_ids
    from tokenmath.specs.model_catalog import model_ids
    status, body = get_json(server, "/api/models")
    assert status == 200
    assert [m["id"] for m in body["models"]] == model_ids()
    m = next(m for m in body["models"] if m["id"] == "llama-3.1-8b")
    assert 8.0e9 < m["params_total"] < 8.1e9 and m["summary"] and m["is_moe"] is False
    status, body = get_json(server, "/api/hardware")
    assert status == 200 and [h["id"] for h in body["hardware"]] == hardware_ids()
    h = next(h for h in body["hardware"] if h["id"] == "h100-sxm")
    assert h["memory_bw"] > 3e12 and h["flops"]["bf16"] > 9e14 and h["ridge_point_bf16"] > 200


# ---- each endpoint mirrors its Python function ---------------------------------------------------------------------

INFER_KEYS = {"params_total", "params_active", "weights_bytes", "kv_bytes_per_token", "memory_per_chip_bytes",
              "memory_usable_per_chip_bytes", "memory_breakdown_bytes", "fits", "batch", "ttft_s", "decode_step_s",
              "decode_floor_s", "output_tokens_per_s", "output_tokens_per_s_per_user", "bottleneck_prefill",
              "bottleneck_decode", "cost_per_mtok_input_usd", "cost_per_mtok_output_usd",
              "cost_per_mtok_output_request_usd", "energy_j_per_output_token",
              "efficiency", "advice", "notes", "explain", "roofline"}


def test_infer_mirrors_python_api(server):
    from tokenmath.faces.explain_infer import explain_infer as explain
    from tokenmath.analyses.serving.infer import infer
    q = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "chips": 8, "batch": 16, "input_len": 2048, "output_len": 512}
    status, body = get_json(server, "/api/infer", **q)
    assert status == 200
    assert INFER_KEYS <= set(body)
    # the page's default serving engine is vLLM's profile (the Python API's default is no engine)
    r = infer("llama-3.1-70b", "h100-sxm", chips=8, batch=16, input_len=2048, output_len=512, engine="vllm")
    assert body["engine"] == {"id": "vllm", "name": r.engine.name, "version": r.engine.version}
    for k, v in r.to_dict().items():
        assert body[k] == pytest.approx(v) if isinstance(v, float) else body[k] == v, k
    assert body["explain"] == explain(r)
    rf = body["roofline"]
    assert rf["ridge_point"] == pytest.approx(989e12 / 3.35e12, rel=1e-3)
    dec = {o["name"]: o for o in rf["passes"]["decode"]["ops"]}
    pre = {o["name"]: o for o in rf["passes"]["prefill"]["ops"]}
    # decode at batch 16 sits far below the ridge, prefill of 16 x 2048 tokens far above it
    assert dec["ffn"]["intensity"] < 50 < rf["ridge_point"] < pre["ffn"]["intensity"]
    assert dec["ffn"]["bound"] == "memory" and pre["ffn"]["bound"] == "compute"
    assert dec["tp_allreduce"]["intensity"] is None and dec["tp_allreduce"]["bound"] == "communication"
    for o in dec.values():
        if o["attained_flops_per_s"]:
            assert o["attained_flops_per_s"] <= o["peak_flops"] * (1 + 1e-9)   # never above the roof


def test_infer_post_equals_get(server):
    q = {"model": "qwen3-8b", "batch": 8, "input_len": 512}
    s1, b1 = get_json(server, "/api/infer", **q)
    s2, data, _ = request(server, "POST", "/api/infer", body=json.dumps(q), headers={"Content-Type": "application/json"})
    assert s1 == s2 == 200 and json.loads(data) == b1


def test_infer_batch_max_and_not_fitting(server):
    status, body = get_json(server, "/api/infer", model="llama-3.1-8b", batch="max")
    assert status == 200 and body["fits"] and body["batch"] > 1
    # one chip named (blank chips would be the fewest that fit: tests/test_web_first_load.py)
    status, body = get_json(server, "/api/infer", model="llama-3.1-405b", hardware="h100-sxm", chips=1)
    assert status == 200 and body["fits"] is False and body["decode_step_s"] is None and body["advice"]


def test_hyperbola(server):
    status, body = get_json(server, "/api/hyperbola", model="llama-3.1-70b", chips=8, context=2048)
    assert status == 200
    pts = body["points"]
    assert pts[0]["batch"] == 1 and pts[-1]["batch"] == body["max_batch"]
    costs = [p["cost_per_mtok_output_usd"] for p in pts]
    assert costs[0] > costs[-1] >= body["floor_cost_per_mtok_output_usd"] * 0.999
    assert "critical batch" in body["explain"]


def test_pareto(server):
    status, body = get_json(server, "/api/pareto", model="llama-3.1-8b", hardware="h100-sxm")
    assert status == 200 and body["chips"] == 8
    f = body["frontier"]
    assert f and all(a["output_tokens_per_s_per_user"] >= b["output_tokens_per_s_per_user"] for a, b in pairwise(f))
    assert {"layout", "batch", "output_tokens_per_s_per_chip", "cost_per_mtok_output_request_usd"} <= set(f[0])
    assert body["chart"]["points"] and len(body["chart"]["points"][0]) == 2
    assert "frontier" in body["explain"]


def test_pareto_by_concurrency(server):
    """The page's engine (vLLM) gives each layout's steady state at each concurrency next to the static frontier."""
    status, body = get_json(server, "/api/pareto", model="llama-3.1-8b", hardware="h100-sxm", chips=2)
    assert status == 200
    pts = [q for q in body["by_concurrency"] if q["layout"] == "tp=2 pp=1 ep=1 dp=1"]
    assert [q["concurrency"] for q in pts][:3] == [1, 2, 4]
    assert all(b["output_tokens_per_s_per_chip"] >= a["output_tokens_per_s_per_chip"] for a, b in pairwise(pts))


# ---- simulate: the iteration-level simulator, bounded for a page -------------------------------------------------

def test_simulate_mirrors_python_api(server):
    from tokenmath.analyses.serving.simulation.simulate import simulate
    from tokenmath.faces.explain_simulation import explain_simulation
    q = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "concurrency": 16, "requests": 300,
         "input_len": "uniform:256-768", "output_len": 128, "seed": 2}
    status, body = get_json(server, "/api/simulate", **q)
    assert status == 200
    r = simulate(engine="vllm", **q)         # the page's default engine
    assert {k: v for k, v in body.items() if k != "explain"} == json.loads(json.dumps(r.to_dict()))
    # the CLI's text, with the chip and the model named as the page names them everywhere else (faces/names.py)
    assert body["explain"] == explain_simulation(r).replace("llama-3.1-8b", "Llama 3.1 8B") \
        .replace("h100-sxm", "NVIDIA H100 SXM5 80GB")
    # what the panel draws: latency CDFs (non-decreasing in the quantile) and the queue over time
    cdf = body["cdf"]
    assert cdf["q"][0] == 0 and cdf["q"][-1] == 1
    for k in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        assert len(cdf[k]) == len(cdf["q"]) and all(a <= b for a, b in pairwise(cdf[k])), k
    ser = body["series"]
    assert len(ser["t_s"]) == len(ser["queue"]) == len(ser["running"]) == len(ser["kv_fraction"]) > 10
    assert max(ser["running"]) <= 16 and max(ser["kv_fraction"]) <= 1
    # a closed loop of 16 users never queues more than the users waiting between requests
    assert body["queue_max"] <= 16 and body["requests"] == 300


def test_simulate_open_loop_overload_grows_the_queue(server):
    """Below the replica's capacity the queue stays short and nearly every request meets the targets; well above
    it the queue grows through the run and goodput falls below the request rate."""
    base = {"model": "llama-3.1-8b", "requests": 1500, "input_len": 1024, "output_len": 256}
    _, light = get_json(server, "/api/simulate", arrival_rate=2, **base)
    _, heavy = get_json(server, "/api/simulate", arrival_rate=200, **base)
    assert light["queue_grows"] is False and light["slo_attainment"] > 0.95
    assert heavy["queue_grows"] is True and heavy["queue_max"] > 100
    assert heavy["goodput_rps"] < 0.5 * heavy["requests_per_s"]
    assert heavy["ttft_s"]["p99"] > 10 * light["ttft_s"]["p99"]


@pytest.mark.parametrize("params,field", [
    ({"requests": 20_001}, "requests"),
    ({"input_len": "fit:/etc/passwd"}, "input_len"),
    ({"output_len": "uniform:9-3"}, "output_len"),
    ({"output_len": "zipf:2"}, "output_len"),
    ({"concurrency": 8, "arrival_rate": 2}, "workload"),
    ({"engine": "none"}, "engine"),
    ({"trace": "/etc/passwd"}, "trace"),
    ({"model": "llama-3.1-70b", "chips": 1}, "hardware"),
    ({"burstiness": 0}, "burstiness"),
])
def test_simulate_bad_input_is_422(server, params, field):
    status, body = get_json(server, "/api/simulate", **params)
    assert status == 422, body
    assert_error(body, field)


def test_simulate_largest_request_is_bounded(server):
    """At the cap (20,000 requests) a simulation still answers (about a second on a developer machine; the bound
    here is generous so a loaded CI machine does not fail it)."""
    import time
    _, meta = get_json(server, "/api")
    req = next(p for p in meta["endpoints"]["/api/simulate"]["params"] if p["name"] == "requests")
    assert req["max"] == 20_000
    t = time.perf_counter()
    status, body = get_json(server, "/api/simulate", requests=20_000, arrival_rate=10, seed=7)
    assert status == 200 and body["requests"] == 20_000
    assert time.perf_counter() - t < 20


def test_context(server):
    status, body = get_json(server, "/api/context", model="llama-3.1-8b", batch=4, context=32768)
    assert status == 200
    assert body["kv_bytes_per_token"] == 131072 and body["max_batch_at_context"] >= 4
    assert body["curve"] and {"context", "decode_step_s", "kv_share", "weight_share", "fits"} <= set(body["curve"][0])
    assert "KV per token" in body["explain"]


def test_prices(server):
    status, body = get_json(server, "/api/prices", model="llama-3.1-8b", contexts="1024,16384")
    assert status == 200 and [r["input_len"] for r in body["rows"]] == [1024, 16384]
    r = body["rows"][0]
    assert r["cost_per_mtok_output"] > r["cost_per_mtok_input"] and r["output_input_ratio"] > 1


def test_deduce(server):
    status, body = get_json(server, "/api/deduce", input_price=0.27, output_price=1.10, samples=20000)
    assert status == 200
    a = body["active_params_b"]
    assert 0 < a["low"] <= a["median"] <= a["high"]
    assert body["kv_bytes_per_token"] is None and abs(sum(body["hardware_posterior"].values()) - 1) < 1e-6
    assert "Monte Carlo" in body["explain"]


def test_train_and_search(server):
    from tokenmath.analyses.training.train import train
    status, body = get_json(server, "/api/train", model="llama-3.1-8b", hardware="h100-sxm", chips=8, tokens=1e12)
    assert status == 200 and body["fits"]
    assert body["step_time_s"] == pytest.approx(train("llama-3.1-8b", "h100-sxm", chips=8).step_time_s)
    assert body["train_time_s"] > 0 and body["cost_usd"] > 0 and "MFU" in body["explain"]
    status, body = get_json(server, "/api/train", model="llama-3.1-8b", chips=8, search=1)
    assert status == 200 and body["top"] and body["layouts_fitting"] >= 1


def test_overtrain_and_chinchilla(server):
    status, body = get_json(server, "/api/overtrain", compute=1e24, inference_tokens=1e13)
    assert status == 200
    assert body["optimum"]["params"] < body["chinchilla"]["params"] and body["saving_fraction"] > 0
    c = body["chart"]
    assert len(c["params"]) == len(c["total_usd"]) <= 200 and "Over-training" in body["explain"]
    status, body = get_json(server, "/api/chinchilla", compute=5.76e23)
    assert status == 200 and 60e9 < body["params"] < 80e9 and body["explain"]


# ---- bad input: 422 naming the field -------------------------------------------------------------------------------

BAD = [
    ("infer", {"batch": 0}, "batch"),
    ("infer", {"batch": "lots"}, "batch"),
    ("infer", {"input_len": "1.5"}, "input_len"),
    ("infer", {"model": "llama-3.1-8"}, "model"),
    ("infer", {"model": "/etc/passwd"}, "model"),
    ("infer", {"model": "../tests/fixtures/Llama-3.1-8B.json"}, "model"),
    ("infer", {"hardware": "h1000"}, "hardware"),
    ("infer", {"hardware": "/etc/hostname"}, "hardware"),
    ("infer", {"batchsize": 4}, "batchsize"),
    ("infer", {"chips": 8, "tp": 3}, "chips"),
    ("infer", {"weight_dtype": "fp7"}, "weight_dtype"),
    ("infer", {"peak": "maybe"}, "peak"),
    ("infer", {"model": "upload:0123456789abcdef"}, "model"),
    ("hyperbola", {"context": "abc"}, "context"),
    ("hyperbola", {"model": "llama-3.1-405b", "chips": 1}, "context"),     # one chip named: no sequence fits
    ("pareto", {"chips": 0}, "chips"),
    ("context", {"batch": -1}, "batch"),
    ("prices", {"contexts": "1024,x"}, "contexts"),
    ("deduce", {"output_price": 1.1}, "input_price"),
    ("deduce", {"input_price": 0.27, "output_price": 1.1, "margin": "0.9,0.5"}, "margin"),
    ("deduce", {"input_price": 0.27, "output_price": 1.1, "hardware": "h100-sxm,nope"}, "hardware"),
    ("deduce", {"input_price": 0.27, "output_price": 1.1, "samples": 10 ** 9}, "samples"),
    ("train", {"recompute": "most"}, "recompute"),
    ("train", {"chips": 8, "tp": 3}, "chips"),
    ("overtrain", {"target_loss": 1.95, "compute": 1e24}, "target_loss"),      # one of them, not both
    ("overtrain", {"compute": 1e24, "fit": "kaplan"}, "fit"),
    ("chinchilla", {"compute": -5}, "compute"),
]


@pytest.mark.parametrize("endpoint,params,field", BAD)
def test_bad_input_is_422_naming_the_field(server, endpoint, params, field):
    status, body = get_json(server, f"/api/{endpoint}", **params)
    assert status == 422, body
    assert_error(body, field)


def test_bad_json_body_is_422(server):
    for body in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        status, data, _ = request(server, "POST", "/api/infer", body=body, headers={"Content-Type": "application/json"})
        assert status == 422
        assert_error(json.loads(data), "body")
    status, data, _ = request(server, "POST", "/api/infer", body=b"x" * (65 * 1024))
    assert status == 413
    assert_error(json.loads(data), "body")


# ---- uploads ----------------------------------------------------------------------------------------------------

def upload(server, data: bytes, name="config.json"):
    status, body, _ = request(server, "POST", "/api/model-config?" + urlencode({"name": name}), body=data,
                              headers={"Content-Type": "application/json"})
    return status, json.loads(body)


def test_upload_config_then_use_it(server, fixtures):
    raw = (fixtures / "Llama-3.1-8B.json").read_bytes()
    status, body = upload(server, raw, "Llama-3.1-8B.json")
    assert status == 200 and body["id"].startswith("upload:") and body["name"] == "Llama-3.1-8B.json"
    _, cat = get_json(server, "/api/models")
    ref = next(m for m in cat["models"] if m["id"] == "llama-3.1-8b")
    assert body["params_total"] == pytest.approx(ref["params_total"], rel=0.01)
    assert upload(server, raw, "Llama-3.1-8B.json")[1]["id"] == body["id"]   # same config and name, same id
    assert upload(server, raw, "other.json")[1]["id"] != body["id"]          # a new name: a new model
    s1, up = get_json(server, "/api/infer", model=body["id"], batch=8)
    s2, cat8 = get_json(server, "/api/infer", model="llama-3.1-8b", batch=8)
    assert s1 == s2 == 200
    assert up["model"] == body["id"] and up["decode_step_s"] == pytest.approx(cat8["decode_step_s"], rel=0.02)
    for ep in ("hyperbola", "context", "pareto", "train"):
        assert get_json(server, f"/api/{ep}", model=body["id"])[0] == 200, ep


@pytest.mark.parametrize("data,field", [
    (b"{not json", "config.json"),
    (b"[1, 2, 3]", "config.json"),
    (b'{"model_type": "llama", "hidden_size": NaN}', "config.json"),
    (b"\xff\xfe\x00", "config.json"),
    (b"[" * 100 + b"]" * 100, "config.json"),
    (b'{"model_type": "bert"}', "model_type"),
    (b'{"__class__": "os.system", "model_type": "llama"}', None),   # data only: a missing field, nothing run
])
def test_upload_bad_config_is_422(server, data, field):
    status, body = upload(server, data)
    assert status == 422
    if field:
        assert_error(body, field)
    else:
        assert body["error"]["field"] and "Traceback" not in json.dumps(body)


def test_upload_size_limit(server):
    big = b'{"model_type": "llama", "pad": "' + b"x" * UPLOAD_MAX_BYTES + b'"}'
    status, body = upload(server, big)
    assert status == 413
    assert_error(body, "config.json")
    assert f"{UPLOAD_MAX_BYTES:,}" in body["error"]["valid"]


def test_upload_refused_from_its_length_before_the_body_is_sent(server):
    """A 50 MB Content-Length is answered 413 at once: the server does not wait for (or read) the body."""
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /api/model-config HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 50000000\r\n\r\n{")
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert_error(json.loads(body), "config.json")


def test_chunked_upload_is_refused(server):
    status, data, _ = request(server, "POST", "/api/model-config", body=iter([b"{}"]),
                              headers={"Transfer-Encoding": "chunked"})
    assert status == 411
    assert_error(json.loads(data), "config.json")


# ---- server errors never leak -------------------------------------------------------------------------------------

def test_internal_error_is_500_without_traceback(server, capsys):
    def boom(args):
        raise RuntimeError("secret detail /home/someone/file.py")
    server.api.endpoints["boom"] = ((), boom, "test only")
    try:
        status, data, h = request(server, "GET", "/api/boom")
    finally:
        del server.api.endpoints["boom"]
    assert status == 500 and h["content-type"] == "application/json"
    text = data.decode()
    assert "secret" not in text and "Traceback" not in text and "RuntimeError" not in text
    assert json.loads(text)["error"]["problem"].startswith("internal error")


def test_keep_alive_and_cache(server):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        bodies = []
        for _ in range(3):
            conn.request("GET", "/api/infer?model=mistral-7b&batch=4")
            r = conn.getresponse()
            assert r.status == 200
            bodies.append(r.read())
        assert bodies[0] == bodies[1] == bodies[2]
    finally:
        conn.close()


def test_serve_command_is_registered():
    from click.testing import CliRunner

    from tokenmath.faces.cli import COMMANDS, cli
    assert COMMANDS["serve"][0] == "tokenmath.faces.commands.web:serve"
    r = CliRunner().invoke(cli, ["serve", "--help"])
    assert r.exit_code == 0 and "--port" in r.output and "--host" in r.output


def test_load_benchmark_runs_clean(server):
    """benchmarks/web_load.py against this server, briefly: varied queries, no errors."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "web_load.py"
    spec = importlib.util.spec_from_file_location("web_load", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    host, port = server.server_address[:2]
    res = mod.run(f"http://{host}:{port}/", mod.queries(60, seed=1), concurrency=8)
    assert res["errors"] == 0, res
    assert res["statuses"] == {"200": 60} and res["latency_ms"]["p50"] > 0
