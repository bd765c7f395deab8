"""Golden outputs: every subcommand's JSON and --explain text, recorded before the architecture move (issue 14),
must stay byte-identical. A change of numbers is intended only by a physics fix; re-record then with
`python tests/golden/record.py` and say why in the commit."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))
import record  # noqa: E402

CASES = record.commands()


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_output_unchanged(args):
    for fname, text in record.outputs(args).items():
        want = (record.OUT / fname).read_text()
        assert record.same(fname, text, want), f"tokenmath {' '.join(args)}: {fname} differs from the recorded output"
