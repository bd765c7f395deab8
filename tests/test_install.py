"""The install line of an optional extra (tokenmath.base.install): each branch, and the torch pin's one value."""
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tokenmath.base import install
from tokenmath.base.install import TORCH_CPU_INDEX, TORCH_PIN, install_hint, source_checkout

ROOT = Path(__file__).resolve().parents[1]


def test_torch_pin_is_pyprojects():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verify"]
    assert f"torch=={TORCH_PIN}" in extra


def test_every_written_torch_pin_is_the_same():
    """README, docs, src and tests name torch's version in words too; each is the pin."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py"),
             *(ROOT / "tests").glob("*.py")]
    pins = {(f.name, m) for f in files for m in re.findall(r"torch==([0-9][0-9.]*[0-9])", f.read_text())}
    assert pins and {m for _, m in pins} == {TORCH_PIN}, pins


def test_editable_checkout(monkeypatch, tmp_path):
    """Imported from a tree that holds tokenmath's pyproject.toml: pip install -e there (it stays editable)."""
    (tmp_path / "src" / "tokenmath").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "tokenmath"\n')
    monkeypatch.setattr(install, "PACKAGE", tmp_path.resolve() / "src" / "tokenmath")
    assert source_checkout() == (tmp_path.resolve(), True)
    assert install_hint("plot") == f"cd {tmp_path.resolve()} && pip install -e '.[plot]'"


def test_installed_from_a_checkout(monkeypatch, tmp_path):
    """`pip install .` (site-packages): the folder pip recorded (direct_url.json), without -e."""
    site = tmp_path / "venv" / "lib" / "site-packages" / "tokenmath"
    site.mkdir(parents=True)
    repo = tmp_path / "my repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "tokenmath"\n')
    monkeypatch.setattr(install, "PACKAGE", site)
    info = site.parent / "tokenmath-0.1.0.dist-info"          # what pip writes beside the package (PEP 610)
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {}}))
    assert source_checkout() == (repo, False)
    # another "tokenmath" metadata earlier on sys.path (a checkout's src/ egg-info) is not the one imported
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: (_ for _ in ()).throw(AssertionError))
    assert source_checkout() == (repo, False)
    assert install_hint("cluster") == f"cd '{repo}' && pip install '.[cluster]'"     # the space: quoted


@pytest.mark.parametrize("url", [None, "https://example.com/tokenmath.tar.gz", "file:///no/such/folder"])
def test_no_checkout_names_the_package(monkeypatch, tmp_path, url):
    monkeypatch.setattr(install, "PACKAGE", tmp_path / "site-packages" / "tokenmath")
    info = tmp_path / "site-packages" / "tokenmath-0.1.0.dist-info"
    info.mkdir(parents=True)
    if url is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": url}))
    assert source_checkout() == (None, False)
    assert install_hint("plot") == "pip install 'tokenmath[plot]'"


def test_verify_installs_cpu_torch_first_unless_a_gpu_is_meant(monkeypatch):
    monkeypatch.setattr(install, "source_checkout", lambda: (None, False))
    cpu = f"pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}"
    assert install_hint("verify") == f"{cpu} && pip install 'tokenmath[verify]'"
    assert install_hint("verify", cpu_torch=False) == "pip install 'tokenmath[verify]'"
    assert install_hint("plot") == "pip install 'tokenmath[plot]'"       # torch only for verify


def test_this_checkout():
    """The tests run from this checkout (the README's editable or plain install): the line names it."""
    folder, _ = source_checkout()
    assert folder == ROOT
    assert install_hint("plot").startswith(f"cd {shlex.quote(str(ROOT))} && pip install ")


def test_messages_use_the_hint(monkeypatch):
    """plot and measure --device cuda say the line (cuda: torch's default build, a GPU being meant)."""
    import sys

    from tokenmath.base.errors import InputError
    from tokenmath.faces.plots import pyplot
    from tokenmath.local.measure import measure
    monkeypatch.setitem(sys.modules, "matplotlib", None)        # import matplotlib -> ImportError
    with pytest.raises(InputError) as e:
        pyplot()
    assert e.value.field == "plot" and e.value.valid == install_hint("plot")
    with pytest.raises(InputError) as e:
        measure("cuda", use_torch=False)
    assert e.value.field == "device" and e.value.valid == install_hint("verify", cpu_torch=False)
    assert "whl/cpu" not in e.value.valid
