"""Issue 23 item 8: the documentation site builds with `mkdocs build --strict` (a broken link, a missing page or an
API name that no longer imports fails), and its generated references cover every command and every public name.
Skipped with the reason where mkdocs is not installed; the test extra installs it, so CI builds the site."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def need_mkdocs():
    for mod in ("mkdocs", "mkdocs_click", "mkdocstrings_handlers.python"):
        pytest.importorskip(mod, reason=f"{mod} is not installed (it is in the test extra: pip install '.[test]')")


def build(config: Path, site: Path):
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=600, cwd=config.parent)


def test_site_builds_strict_with_generated_references(tmp_path):
    need_mkdocs()
    r = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert r.returncode == 0, r.stderr[-3000:]
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    from tokenmath.faces.cli import COMMANDS
    for name in COMMANDS:                     # generated from the click commands: every one is there
        assert f"tokenmath {name}" in cli_page, name
    assert "--template" in cli_page            # options come from the code, not a hand-kept list
    api_page = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    import tokenmath
    for name, target in tokenmath._PUBLIC.items():   # every public name, rendered from its docstring
        assert target.replace(":", ".") in api_page, name
    assert (tmp_path / "site" / "notebooks" / "tour.ipynb").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    # the same validation settings as mkdocs.yml, on a one-page site with a link to a page that does not exist
    need_mkdocs()
    import yaml
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python", "#"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](guide.md).\n")
    small = {"site_name": "t", "strict": True, "validation": cfg["validation"], "docs_dir": "docs"}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    r = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert r.returncode != 0 and "guide.md" in r.stderr
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n")
    assert build(tmp_path / "mkdocs.yml", tmp_path / "site").returncode == 0
