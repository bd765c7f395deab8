"""The web page's simulate panel with speculative decoding (issue 18 with 17): /api/simulate takes the same draft,
spec_k, acceptance and mtp parameters as /api/infer and answers as tokenmath.simulate(..., speculation=...)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmath.analyses.serving.simulation.simulate import simulate
from tokenmath.analyses.serving.speculative import speculation

from test_web_api import assert_error, get_json

STATIC = Path(__file__).resolve().parents[1] / "src" / "tokenmath" / "faces" / "web" / "static"


BASE = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "concurrency": 8, "requests": 200, "input_len": 512,
        "output_len": 128, "seed": 3}


def test_simulate_with_a_draft_mirrors_python(server):
    status, body = get_json(server, "/api/simulate", draft="llama-3.2-1b", spec_k=3, acceptance=0.8, **BASE)
    assert status == 200, body
    r = simulate(engine="vllm", speculation=speculation("llama-3.2-1b", 3, 0.8), **BASE)
    assert {k: v for k, v in body.items() if k != "explain"} == json.loads(json.dumps(r.to_dict()))
    # E = (1 - 0.8^4) / (1 - 0.8) = (1 - 0.4096) / 0.2 = 2.952 tokens per verification step
    assert body["speculation"]["tokens_per_step"] == pytest.approx(2.952, rel=1e-12)
    _, plain = get_json(server, "/api/simulate", **BASE)
    assert "speculation" not in plain
    # 8 users, memory-bound steps: each user is faster with the draft
    assert body["tpot_s"]["mean"] < plain["tpot_s"]["mean"]


def test_simulate_with_mtp_uses_the_published_acceptance(server):
    q = dict(BASE, model="mixtral-8x7b", chips=2)
    status, body = get_json(server, "/api/simulate", mtp=1, **q)
    assert status == 200, body
    assert body["speculation"]["mtp"] is True and body["speculation"]["acceptance"] == 0.875


@pytest.mark.parametrize("params,field", [
    ({"draft": "llama-3.2-1b"}, "acceptance"),           # no published default for a separate draft
    ({"draft": "../tests/fixtures/Llama-3.1-8B.json", "acceptance": 0.7}, "draft"),   # a catalog id only
    ({"draft": "llama-3.2-1b", "acceptance": 1.5}, "acceptance"),
    ({"mtp": 1, "pp": 2, "chips": 2}, "pp"),
])
def test_simulate_bad_speculation_is_422(server, params, field):
    status, body = get_json(server, "/api/simulate", **dict(BASE, **params))
    assert status == 422, body
    assert_error(body, field)


def test_the_panel_sends_the_sidebars_drafts():
    js = (STATIC / "view_simulate.js").read_text()
    assert "speculation()" in js and "SPEC_FIELDS" in js and "d.speculation" in js
