"""The documentation site builds with `mkdocs build --strict` (a broken link or a missing page fails), its command-line
reference covers every command, and the Python API reference (plain Markdown, docs/gen_api.py) names every public
name with its current signature. The site tests skip with the reason where mkdocs is not installed; the test extra
installs it, so CI builds the site."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def need_mkdocs():
    for mod in ("mkdocs", "mkdocs_click"):
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
    for name in tokenmath._PUBLIC:                   # every public name has its section
        assert f'id="{name.lower()}"' in api_page, name
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


def test_api_reference_is_plain_markdown_and_current():
    # docs/reference/api.md reads without a site build (no mkdocstrings directive) and docs/gen_api.py --check finds
    # every public name with its current signature; after changing the API: python docs/gen_api.py
    text = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    assert "\n::: " not in text
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_api
    finally:
        sys.path.remove(str(ROOT / "docs"))
    problems = gen_api.check()
    assert not problems, "docs/reference/api.md is out of date (run python docs/gen_api.py):\n" + "\n".join(problems)
