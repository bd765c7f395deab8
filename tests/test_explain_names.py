"""One vocabulary on the command line (issue 21, items 4-5): every --explain text and table title names the chip and
the model as `infer` does, by their catalog names ("NVIDIA H100 SXM5 80GB", "Llama 3.1 8B"); ids stay only where a
user types them back (after --model / --hardware / --system / --draft) and in the JSON, whose contract never changes.
The names are the catalog's (src/tokenmath/data/hardware.toml, models.toml, systems.toml)."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from tokenmath.faces.cli import cli

H100, H100_ID = "NVIDIA H100 SXM5 80GB", "h100-sxm"
L8B, L8B_ID = "Llama 3.1 8B", "llama-3.1-8b"
L1B, L1B_ID = "Llama 3.2 1B", "llama-3.2-1b"
HGX = "NVIDIA HGX H100 (8 x H100 SXM5, NVLink 4 via NVSwitch)"
BASE = ["--model", L8B_ID, "--hardware", H100_ID]


def run(args: list[str]) -> str:
    # wide enough that rich does not wrap a table title in the middle of a chip's name
    r = CliRunner().invoke(cli, args, env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    return r.output


def bare(ident: str, text: str) -> list[str]:
    """The lines where `ident` stands alone in prose: not part of a longer id, a path or a file name, and not the
    value of an option a user types back ("--hardware h100-sxm")."""
    prose = re.sub(r"--[a-z][\w-]* \S+", "", text)
    pat = re.compile(r"(?<![\w.\-/])" + re.escape(ident) + r"(?![\w\-/]|\.\w)")
    return [line for line in prose.splitlines() if pat.search(line)]


# (command line, the display names it must print, the ids it must not print in prose)
CASES = [
    (["hyperbola", *BASE, "--chips", "1"], [H100, L8B], [H100_ID, L8B_ID]),
    (["hyperbola", *BASE, "--chips", "1", "--draft", L1B_ID, "--acceptance", "0.7"], [H100, L8B, L1B],
     [H100_ID, L8B_ID, L1B_ID]),
    (["pareto", *BASE, "--chips", "2"], [H100, L8B], [H100_ID, L8B_ID]),
    (["prices", *BASE, "--chips", "1"], [H100, L8B], [H100_ID, L8B_ID]),
    (["context", *BASE, "--chips", "1"], [H100, L8B], [H100_ID, L8B_ID]),
    (["slowmode", *BASE], [H100, L8B], [H100_ID, L8B_ID]),
    (["price", *BASE], [H100, L8B], [H100_ID, L8B_ID]),
    (["fleet", *BASE, "--demand", "10000"], [H100, L8B], [H100_ID, L8B_ID]),
    (["simulate", *BASE, "--requests", "200"], [H100, L8B], [H100_ID, L8B_ID]),
    (["simulate", *BASE, "--requests", "200", "--draft", L1B_ID, "--acceptance", "0.7"], [H100, L8B, L1B],
     [H100_ID, L8B_ID, L1B_ID]),
    (["sensitivity", *BASE], [H100, L8B], [H100_ID, L8B_ID]),
    (["plan", "--model", L8B_ID, "--system", "hgx-h100", "--chips", "8"], [f"{H100} in {HGX}", L8B],
     [H100_ID, L8B_ID, "hgx-h100"]),
    (["moe", "--model", "mixtral-8x7b", "--system", "hgx-h100", "--chips", "8"], [f"{H100} in {HGX}", "Mixtral 8x7B"],
     [H100_ID, "mixtral-8x7b", "hgx-h100"]),
    (["overtrain", "--target-loss", "2.2", "--inference-tokens", "1e13", "--hardware", H100_ID], [H100], [H100_ID]),
    (["deduce", "--input-price", "0.15", "--output-price", "0.6"], [H100], [H100_ID]),
    # not served: the analysis' advice ("weights + KV need about 36 x rtx-4090") is printed with the chip's name
    (["infer", "--model", "llama-3.1-405b", "--hardware", "rtx-4090", "--chips", "1"],
     ["NVIDIA GeForce RTX 4090 24GB", "Llama 3.1 405B"], ["rtx-4090", "llama-3.1-405b"]),
]


@pytest.mark.parametrize("args, names, ids", CASES, ids=[" ".join(c[0][:1] + c[0][-2:]) for c in CASES])
def test_explain_names_the_chip_and_model_as_infer_does(args, names, ids):
    text = run([*args, "--explain"])
    for name in names:
        assert name in text, f"{name!r} missing from:\n{text[:400]}"
    for ident in ids:
        assert not bare(ident, text), f"bare id {ident!r} in prose: {bare(ident, text)[:3]}"


@pytest.mark.parametrize("args", [["hyperbola", *BASE, "--chips", "1"], ["simulate", *BASE, "--requests", "200"],
                                  ["prices", *BASE, "--chips", "1"], ["sensitivity", *BASE]])
def test_default_text_and_table_titles_too(args):
    text = run(args)
    assert H100 in text and L8B in text
    assert not bare(H100_ID, text) and not bare(L8B_ID, text)


def test_the_same_answer_as_infer_names_it():
    """infer's header is the reference: the hyperbola's title names chip and model with the same words."""
    infer = run(["infer", *BASE, "--chips", "1", "--explain"]).splitlines()[0]
    assert infer.startswith(f"{L8B} on 1 x {H100} ")
    assert f"{L8B} on 1 x {H100}," in run(["hyperbola", *BASE, "--chips", "1", "--explain"])


@pytest.mark.parametrize("args, keys", [(["hyperbola", *BASE, "--chips", "1"], ("model", "hardware")),
                                        (["simulate", *BASE, "--requests", "200"], ("model", "hardware")),
                                        (["fleet", *BASE, "--demand", "10000"], ("model", "hardware")),
                                        (["sensitivity", *BASE], ("model", "hardware"))])
def test_json_keeps_the_ids(args, keys):
    d = json.loads(run([*args, "--json"]))
    assert {k: d[k] for k in keys} == {"model": L8B_ID, "hardware": H100_ID}


def test_a_hint_keeps_the_id_a_user_types_back():
    from tokenmath.faces.names import name_ids
    from tokenmath.specs.hardware import get_hardware
    hw = get_hardware(H100_ID)
    text = "need 2 x h100-sxm; try --hardware h100-sxm or h100-sxm-nvl; data/h100-sxm.toml; h100-sxm's hosts"
    assert name_ids(text, hw) == (f"need 2 x {H100}; try --hardware h100-sxm or h100-sxm-nvl; data/h100-sxm.toml; "
                                  f"{H100}'s hosts")


def test_labels_of_ids_objects_systems_and_unknown_names():
    from tokenmath.faces.names import chip_label, model_label, system_label
    from tokenmath.specs.hardware import get_hardware
    from tokenmath.specs.model_catalog import get_model
    from tokenmath.specs.systems import get_system
    assert chip_label(H100_ID) == chip_label(get_hardware(H100_ID)) == H100
    assert model_label(L8B_ID) == model_label(get_model(L8B_ID)) == L8B
    assert chip_label("my-chip.toml") == "my-chip.toml" and model_label("upload:0123") == "upload:0123"
    hgx = get_system("hgx-h100")
    assert chip_label(hgx) == H100 and system_label(hgx) == f"{H100} in {HGX}"
    # a chip in its usual domain has no system name of its own: the chip's name alone
    assert system_label(get_system(H100_ID, 8)) == H100
    # a rack whose chip id is also its system id: the chip's catalog name, then the rack's
    nvl = get_system("gb200-nvl72")
    assert system_label(nvl) == ("NVIDIA GB200 NVL72 (per B200 GPU in the rack) in "
                                 "NVIDIA GB200 NVL72 (72 x B200 in one NVLink 5 rack)")
