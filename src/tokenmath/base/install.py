"""How to install an optional extra (plot, cluster, verify, ...): the one home of the install line that every
"not installed" message gives.

tokenmath is installed from a source checkout (README: `pip install .` from the repository root; it is not on
PyPI), so the line names that checkout: `cd /path/to/tokenmath && pip install '.[plot]'` (with -e when tokenmath is
imported from the checkout itself, an editable install, so that it stays editable). Only when no checkout can be
found does it fall back to the package name, `pip install 'tokenmath[plot]'`.

torch: the verify extra pins it exactly, and pip would fetch that version's CUDA build (gigabytes) from the public
index; the CPU build is enough unless a GPU is meant, so the line installs it from PyTorch's CPU index first.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

# The torch pin of pyproject.toml's verify extra ("torch==2.13.0"); tests/test_install.py checks that they agree.
TORCH_PIN = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PACKAGE = Path(__file__).resolve().parents[1]   # the folder tokenmath is imported from (src/tokenmath in a checkout)


def _is_checkout(folder: Path) -> bool:
    """True when `folder` holds tokenmath's pyproject.toml."""
    try:
        return 'name = "tokenmath"' in (folder / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def source_checkout() -> tuple[Path | None, bool]:
    """(the source checkout tokenmath came from, whether it is imported from there): the tree the package is
    imported from when it holds pyproject.toml (an editable install, or src/ on the path), else the folder that
    `pip install .` recorded (PEP 610's direct_url.json) when it still holds pyproject.toml; (None, False) when
    neither."""
    here = PACKAGE.parents[1]       # src/tokenmath -> the checkout
    if _is_checkout(here):
        return here, True
    # the metadata installed beside the package imported, not importlib.metadata's first "tokenmath" on sys.path:
    # a path added later (a checkout's src/ holding the egg-info that `pip install .` leaves) would answer instead
    url = ""
    for info in sorted(PACKAGE.parent.glob("tokenmath-*.dist-info")):
        try:
            url = json.loads((info / "direct_url.json").read_text(encoding="utf-8") or "{}").get("url", "")
        except (OSError, ValueError, AttributeError):   # no record, unreadable or not JSON: no checkout known
            continue
        if url:
            break
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse
        folder = Path(unquote(urlparse(url).path))
        if _is_checkout(folder):
            return folder, False
    return None, False


def install_hint(extra: str, cpu_torch: bool = True) -> str:
    """The command that installs tokenmath's optional `extra` for this installation. For verify, torch's CPU build
    first (cpu_torch=False where a GPU is meant: pip then picks torch's default build)."""
    folder, editable = source_checkout()
    if folder is None:
        line = f"pip install 'tokenmath[{extra}]'"
    else:
        line = f"cd {shlex.quote(str(folder))} && pip install {'-e ' if editable else ''}'.[{extra}]'"
    if extra == "verify" and cpu_torch:
        line = f"pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX} && {line}"
    return line
