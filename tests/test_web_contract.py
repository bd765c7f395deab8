"""The web API's contract (issue 40, items 2, 3 and 7): a GET that computes answers only this server's own page or a
client that is not a browser; ambiguous heads are refused; /api advertises the bounds the analysis accepts, from one
declaration; an error names the parameter sent, bounded; numbers are ASCII; a config.json with a byte order mark is
refused by the page as by the command line."""
from __future__ import annotations

import http.client
import json
import socket

import pytest

from tokenmath.analyses.inverse.priors import PRICE_NOISE
from tokenmath.base.errors import InputError
from tokenmath.faces.web.api import MAX_NAME_CHARS, MAX_UNKNOWN


def request(srv, method, path, body=None, headers=None):
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data and r.getheader("Content-Type") == "application/json" else data
    finally:
        conn.close()


def raw(srv, data: bytes) -> bytes:
    with socket.create_connection(srv.server_address[:2], timeout=30) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def web_error(api, name, **params) -> dict:
    """The error body the server sends for a request (Api.error of the InputError)."""
    with pytest.raises(InputError) as e:
        api.call(name, {k: str(v) for k, v in params.items()})
    return json.loads(api.error(name, e.value.to_dict()))["error"]


# ---- item 2: GETs that compute, same origin only ----------------------------------------------------------------------

@pytest.mark.parametrize("headers,field", [
    ({"Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site"),     # an <img> tag on another site
    ({"Sec-Fetch-Site": "same-site"}, "Sec-Fetch-Site"),      # another port of localhost
    ({"Origin": "http://evil.example"}, "Origin"),
    ({"Referer": "http://evil.example/page"}, "Referer"),
])
def test_a_cross_site_get_that_computes_is_refused_403(server, headers, field):
    for method in ("GET", "HEAD"):
        status, body = request(server, method, "/api/infer?model=llama-3.1-8b", headers=headers)
        assert status == 403
        if method == "GET":
            assert body["error"]["field"] == field


@pytest.mark.parametrize("headers", [{}, {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}])
def test_a_same_origin_or_plain_client_get_is_answered(server, headers):
    host, port = server.server_address[:2]
    if "Sec-Fetch-Site" in headers:
        headers = {**headers, "Origin": f"http://{host}:{port}"} if headers["Sec-Fetch-Site"] != "none" else headers
    status, body = request(server, "GET", "/api/infer?model=llama-3.1-8b", headers=headers)
    assert status == 200 and body["model"] == "llama-3.1-8b"


def test_the_page_and_the_catalogs_stay_open_to_links_from_elsewhere(server):
    for path in ("/", "/api", "/api/models"):
        assert request(server, "GET", path, headers={"Sec-Fetch-Site": "cross-site"})[0] == 200


# ---- item 7: ambiguous heads ------------------------------------------------------------------------------------------

def test_content_length_with_a_space_before_its_colon_is_refused_not_ignored(server):
    body = b'{"batch":"x"}'
    head = (f"POST /api/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length : {len(body)}\r\n\r\n").encode()
    out = raw(server, head + body)
    assert out.startswith(b"HTTP/1.1 400"), out[:200]
    assert b"white space before its colon" in out


def test_two_host_headers_are_refused(server):
    out = raw(server, b"GET /api/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400"), out[:200]
    assert b"two Host headers" in out


# ---- item 7: one declaration, the parameter's name, bounded echoes ----------------------------------------------------

def test_deduce_noise_advertised_as_the_analysis_accepts_it(server, api):
    status, meta = request(server, "GET", "/api")
    noise = next(p for p in meta["endpoints"]["/api/deduce"]["params"] if p["name"] == "noise")
    assert (noise["min"], noise["max"]) == PRICE_NOISE
    prices = {"input_price": 3, "output_price": 15, "samples": 1000}
    for v in PRICE_NOISE:          # the ends pass the analysis' own check (a tight noise may find the prices
        try:                       # inconsistent: an answer about the prices, not about the range)
            api.call("deduce", {**{k: str(x) for k, x in prices.items()}, "noise": str(v)})
        except InputError as e:
            assert e.field not in ("noise", "price_noise"), e
    for v in (PRICE_NOISE[0] / 2, PRICE_NOISE[1] * 2):   # beyond them refused by the declaration, by its name
        err = web_error(api, "deduce", **prices, noise=v)
        assert err["field"] == "noise" and f"{PRICE_NOISE[0]:g}" in err["valid"]


def test_overtrain_train_days_advertised_from_the_range_the_analysis_accepts(api):
    p = next(p for p in api.endpoints["overtrain"].params if p.name == "train_days")
    assert (p.lo, p.hi) == (1e-3, 3650.0)
    err = web_error(api, "overtrain", train_days="1e-308")
    assert err["field"] == "train_days" and "0.001" in err["valid"]


def test_a_what_if_error_names_the_set_parameter(api):
    for name in ("infer", "prices", "context"):
        err = web_error(api, name, set="memory_gb=-1")
        assert err["field"] == "set" and err["problem"].startswith("memory_gb:")


def test_a_zero_chip_price_is_refused_naming_the_range(api):
    err = web_error(api, "prices", set="price_usd_per_hour=0")
    assert err["field"] == "set" and "price_usd_per_hour" in err["problem"] and "between" in err["valid"]


def cli(*args):
    from click.testing import CliRunner
    from tokenmath.faces.cli import cli as main
    return CliRunner().invoke(main, list(args))


def test_the_cli_refuses_a_zero_chip_price_as_an_input_error():
    r = cli("prices", "--set", "price_usd_per_hour=0")
    assert r.exit_code != 0 and "price_usd_per_hour: 0.0 is out of range" in r.output
    assert "internal error" not in r.output


def test_unknown_parameter_names_are_echoed_bounded(api):
    params = {"x" * 5000: "1", **{f"y{i}" * 100: "1" for i in range(40)}}
    with pytest.raises(InputError) as e:
        api.call("infer", params)
    err = json.loads(api.error("infer", e.value.to_dict()))["error"]
    assert len(err["field"]) <= MAX_NAME_CHARS
    assert "40 more" in err["problem"] and err["problem"].count("y") <= MAX_UNKNOWN * MAX_NAME_CHARS
    assert len(json.dumps(err)) < 2000


@pytest.mark.parametrize("digits", ["١٢", "１２", "१२"])     # Arabic-Indic, fullwidth, Devanagari twelve
def test_non_ascii_digits_are_not_numbers(api, digits):
    err = web_error(api, "infer", batch=digits)
    assert err["field"] == "batch" and "not a whole number" in err["problem"]


def test_a_config_with_a_byte_order_mark_is_refused_by_the_page_as_by_the_cli(api, tmp_path):
    body = b'\xef\xbb\xbf{"model_type": "llama", "hidden_size": 64}'
    with pytest.raises(InputError) as e:
        api.upload(body, "bom.json")
    assert "byte order mark" in e.value.problem
    f = tmp_path / "bom.json"
    f.write_bytes(body)
    r = cli("infer", "--model", str(f))
    assert r.exit_code != 0 and "BOM" in r.output


@pytest.mark.parametrize("name,base", [("overtrain", {"flop_only": "1", "compute": "1e24"}),
                                       ("deduce", {"input_price": "3", "output_price": "15", "samples": "1000"})])
def test_every_advertised_bound_is_accepted_by_the_analysis(api, name, base):
    """/api's min and max of each number are values the analysis itself takes (a refusal there may name another
    field or the combination, never this field's range)."""
    for p in api.endpoints[name].params:
        if p.kind not in ("int", "float"):
            continue
        for v in (p.lo, p.hi):
            if v is None:
                continue
            try:
                api.call(name, {**base, p.name: repr(float(v)) if p.kind == "float" else str(int(v))})
            except InputError as e:
                assert e.field != p.name or "out of range" not in e.problem and "not a" not in e.problem, e


# ---- found by benchmarks/fuzz_api.py's issue-40 families: nothing sent is silently dropped -----------------------------

@pytest.mark.parametrize("method,path,body,field", [
    ("GET", "/api/infer?batch=4&batch=5", None, "batch"),                       # http's parsers kept the last
    ("POST", "/api/infer", b'{"batch": 4, "batch": 5}', "batch"),              # json.loads kept the last
    ("POST", "/api/infer?batch=9", b'{"batch": 4}', "batch"),                  # the body's replaced the query's
    ("POST", "/api/infer", b'{"set": {"memory_gb": 1, "memory_gb": 2}}', "set"),   # named as the parameter sent
])
def test_a_parameter_given_twice_is_refused_not_one_copy_dropped(server, method, path, body, field):
    headers = {"Content-Type": "application/json"} if body else {}
    status, answer = request(server, method, path, body=body, headers=headers)
    assert status == 422, answer
    assert answer["error"]["field"] == field and "twice" in answer["error"]["problem"]


@pytest.mark.parametrize("path", ["/api?x=1", "/api/?model=llama-3.1-8b", "/api/models?batch=4",
                                  "/api/hardware?verbose=true"])
def test_a_route_that_takes_no_parameters_refuses_them(server, path):
    status, answer = request(server, "GET", path)
    assert status == 422 and answer["error"]["problem"] == "unknown parameter", answer
    assert "takes no parameters" in answer["error"]["valid"]


def test_a_config_upload_refuses_parameters_other_than_its_name(server):
    status, answer = request(server, "POST", "/api/model-config?name=a.json&hidden_size=64", body=b"{}",
                             headers={"Content-Type": "application/json"})
    assert status == 422 and answer["error"]["field"] == "hidden_size", answer


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_post_a_browser_marks_cross_site_is_refused_403(server, site):
    """Sec-Fetch-Site is the browser's own word on where a request came from: a POST it marks cross-site is refused
    as a GET is (before, it was answered: only its Origin and Content-Type were read)."""
    status, answer = request(server, "POST", "/api/infer", body=b'{"batch": 2}',
                             headers={"Content-Type": "application/json", "Sec-Fetch-Site": site})
    assert status == 403 and answer["error"]["field"] == "Sec-Fetch-Site"


@pytest.mark.parametrize("path", ["/api/pareto?=&input_len=1", "/api/infer?=5", "/api?="])
def test_a_parameter_with_an_empty_name_is_refused_naming_a_field(server, path):
    """An error's field is never empty (the fuzz's contract for 422): `?=` is a parameter with no name."""
    status, answer = request(server, "GET", path)
    assert status == 422 and answer["error"]["field"] == "parameter", answer
    assert answer["error"]["problem"].startswith("has an empty name")


def test_deduce_refuses_typed_prices_beside_an_api_model(api):
    """With api_model the catalog's own prices and evidence are deduced from; a typed price beside it was dropped
    silently (the page never sends both: view_deduce.js)."""
    err = web_error(api, "deduce", api_model=api.endpoints["deduce"].params[-1].choices[1], input_price=3)
    assert err["field"] == "input_price" and "api_model" in err["problem"]
