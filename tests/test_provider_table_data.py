"""data/provider_table.toml: every row sourced (commit, file, CSV line) and dated, the fit rows dated up to the
cut-off and the check rows after it, and the open-weight rows joined to catalog architectures."""
import csv
import io
import os
import re
import subprocess

import pytest

from tokenmath.analyses.inverse import provider_table as pt
from tokenmath.base.errors import InputError
from tokenmath.specs.catalog import shipped

MIRROR = "/work/.mirror/Nidhal-Jegham+HowHungryisAIDashboard/repo"
FAMILIES = ("GPT-4o", "GPT-4.1", "GPT-5", "Claude", "Gemini", "Grok", "DeepSeek", "Qwen", "Kimi", "GLM", "MiniMax",
            "gpt-oss", "Llama")


@pytest.fixture(scope="module")
def table():
    return shipped("provider_table.toml")


def test_meta_states_the_source_and_the_prompt_lengths(table):
    m = table["meta"]
    assert m["repository"] == "https://github.com/Nidhal-Jegham/HowHungryisAIDashboard"
    assert m["cutoff"] == "2026-05-31"
    assert m["prompt_tokens"] == {"medium": 1000, "long": 10000, "extra_long": 100000}
    assert m["prompt_tokens_source"].startswith("https://artificialanalysis.ai/methodology")


def test_split_at_the_cutoff(table):
    snaps = {s["split"]: s for s in table["snapshot"]}
    assert set(snaps) == set(pt.SPLITS)
    assert snaps["fit"]["date"] <= "2026-05-31" and snaps["fit"]["committed"][:10] <= "2026-05-31"
    assert snaps["check"]["date"] > "2026-05-31"
    for s in snaps.values():
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"])
        assert s["file"] == f"data/artificialanalysis_{s['date']}.csv"
        assert s["endpoints"] == len(table["rows"][s["split"]])


@pytest.mark.parametrize("split", pt.SPLITS)
def test_every_row_sourced_and_plausible(split):
    rows = pt.load(split)
    assert len(rows) > 400
    for r in rows:
        assert r.line and set(r.line) <= set(pt.SIZES), r
        assert all(isinstance(v, int) and v > 1 for v in r.line.values())
        assert set(r.speed) <= set(r.line) and set(r.ttft) <= set(r.line)
        assert 0 < r.input_price < 1000 and 0 < r.output_price < 1000
        assert all(0 < v < 10000 for v in r.speed.values()) and all(0 < v < 3600 for v in r.ttft.values())
        assert all(s.startswith(r.commit + ":" + r.file + "#L") for s in r.sources())
    # one row per endpoint
    assert len({(r.provider, r.model) for r in rows}) == len(rows)


def test_families_open_and_closed_are_there():
    rows = pt.load("fit")
    for fam in FAMILIES:
        assert any(r.model.lower().startswith(fam.lower()) for r in rows), fam
    assert any(r.open_weights for r in rows) and any(not r.open_weights for r in rows)
    truth = [r for r in rows if r.catalog_id]
    assert len(truth) >= 150 and len({r.catalog_id for r in truth}) >= 15
    assert all(r.open_weights for r in truth)


@pytest.mark.parametrize("name,cid", [("DeepSeek V3.1 Terminus (FP8)", "deepseek-v3"), ("gpt-oss-120b (high)",
                                      "gpt-oss-120b"), ("Llama 3.3 70B (Turbo, FP8)", "llama-3.1-70b"),
                                      ("Qwen3 235B A22B 2507 Vertex", "qwen3-235b-a22b"), ("DeepSeek V4 Pro (Max)", ""),
                                      ("DeepSeek R1 Distill Llama 70B", ""), ("Kimi K2.6", "")])
def test_catalog_join(name, cid):
    assert pt.catalog_id_of(name, True) == cid
    assert pt.catalog_id_of(name, False) == ""


def test_find_and_errors():
    r = pt.find("gpt-oss-120b (high)", "Parasail")
    assert r.catalog_id == "gpt-oss-120b" and r.ttft_points()[0][0] == 1000.0
    with pytest.raises(InputError):
        pt.find("no such model")
    with pytest.raises(InputError):
        pt.load("later")


@pytest.mark.skipif(not os.path.isdir(MIRROR), reason="needs the local snapshot of HowHungryisAIDashboard")
@pytest.mark.parametrize("split", pt.SPLITS)
def test_rows_match_their_csv_lines(split):
    rows = [r for r in pt.load(split) if r.catalog_id][:25]
    text = subprocess.run(["git", "-C", MIRROR, "show", f"{rows[0].commit}:{rows[0].file}"], check=True,
                          capture_output=True, text=True).stdout
    lines = text.splitlines()
    head = next(csv.reader([lines[0]]))
    for r in rows:
        for size, n in r.line.items():
            rec = dict(zip(head, next(csv.reader(io.StringIO(lines[n - 1])))))
            assert rec["query_size"] == size and rec["Model"] == r.model
            if size in r.ttft:
                assert float(rec["MedianFirst Chunk (s)"]) == r.ttft[size]
