"""Record (or check) the golden outputs of tests/golden/commands.txt.

    python tests/golden/record.py          # write tests/golden/out/*.json and *.txt
    python tests/golden/record.py --check  # compare, print the first differences, exit 1 on any
    python tests/golden/record.py --only deduce   # re-record only the commands whose text contains "deduce"

Each command runs in this process through the CLI's own entry point, once with --json and once with --explain
(text), so the faces are covered as well as the numbers."""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "out"


def commands() -> list[list[str]]:
    rows = []
    for line in (HERE / "commands.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rows.append(line.split())
    return rows


def slug(args: list[str]) -> str:
    text = " ".join(args)
    short = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")[:60]
    return f"{short}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def run(args: list[str]) -> str:
    from tokenmath.faces.cli import main
    buf = io.StringIO()
    # the goldens were drawn 80 columns wide; a piped answer is drawn wider now, so pin the width they were drawn at
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(list(args))
            except SystemExit:
                pass
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    # wall-clock figures differ run to run; everything else must not
    text = re.sub(r'("search_s": )[0-9.e+-]+', r'\1"<timing>"', buf.getvalue())
    return re.sub(r"in one engine call \(\d+ ms\)", "in one engine call (<timing>)", text)


def outputs(args: list[str]) -> dict[str, str]:
    """{file name: text} for one command: its JSON and its --explain text."""
    name = slug(args)
    out = {f"{name}.json": run(args + ["--json"])}
    if args[0] not in ("systems", "models", "hardware", "validate"):
        out[f"{name}.txt"] = run(args + ["--explain"])
    return out


def _close(a, b) -> bool:
    """Equal data, floats to 1e-12 relative or 1e-12 absolute: moving a formula into one shared function may
    reassociate a product (x * a / b vs x / b * a), and another numpy release may sum in another order (the deduce
    posterior's tail probabilities of 1e-7 and below move in their 10th digit), which changes the last bits and
    nothing a reader can see."""
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def same(fname: str, text: str, want: str) -> bool:
    """JSON compares as data (key order is not a promise: some dicts follow set order); text compares exactly."""
    if fname.endswith(".json"):
        import json
        return _close(json.loads(text), json.loads(want))
    return text == want


def main(check: bool, only: str | None = None) -> int:
    OUT.mkdir(exist_ok=True)
    bad = 0
    for args in commands():
        if only is not None and only not in " ".join(args):
            continue
        for fname, text in outputs(args).items():
            path = OUT / fname
            if check:
                if not path.exists() or not same(fname, text, path.read_text()):
                    bad += 1
                    print("differs:", " ".join(args), "->", fname)
            else:
                path.write_text(text)
    return 1 if bad else 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    sys.exit(main("--check" in argv, only))
