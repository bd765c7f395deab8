"""docs/guide.md quotes what its commands print: every quoted line of every `$ tokenmath ...` block is in the output
of that command run now (at the 100 columns a piped answer takes), so the guide cannot drift from the tool. A line
ending in '...' is a prefix; search times vary and are left out; commands that measure this machine (measure,
verify), serve, plot or show a refusal sized by this machine's free memory are not re-run."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```\n\$ (tokenmath [^\n]*)\n(.*?)```", (ROOT / "docs" / "guide.md").read_text(encoding="utf-8"),
                    flags=re.S)
SKIP = ("serve", "measure", "verify", "calibrate")
TIMED = re.compile(r"\(\d+(\.\d+)? m?s\)")          # a search's own wall time: "(19 ms)"


def _runs(cmd: str) -> bool:
    words = shlex.split(cmd)
    return words[1] not in SKIP and "--plot" not in words and "4096" not in words


@pytest.mark.parametrize("cmd,body", [b for b in BLOCKS if _runs(b[0])], ids=[b[0] for b in BLOCKS if _runs(b[0])])
def test_the_guide_quotes_what_the_command_prints(cmd, body, monkeypatch):
    from tokenmath.faces.cli import cli
    monkeypatch.setenv("COLUMNS", "100")
    r = CliRunner().invoke(cli, shlex.split(cmd)[1:])
    out = [TIMED.sub("(t)", line.rstrip()) for line in r.output.splitlines()]
    for line in body.splitlines():
        quoted = TIMED.sub("(t)", line.rstrip())
        if not quoted or quoted == "...":
            continue
        if quoted.endswith("..."):
            assert any(o.startswith(quoted[:-3].rstrip()) for o in out), (cmd, quoted)
        else:
            assert quoted in out, (cmd, quoted)


def test_the_guide_has_blocks_to_check():
    assert sum(_runs(c) for c, _ in BLOCKS) >= 15
