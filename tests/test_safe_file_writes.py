"""Files tokenmath writes (issue 15, item 17): `--plot`, `measure --out`, `validate --write-calibration`.

A file is written to a temporary file in the destination's folder, synced, then renamed over the destination: an
interrupted or failed write leaves the old file whole. A destination that exists is replaced only when tokenmath
wrote it (its first 4 KiB carry the marker "`tokenmath": see tokenmath.base.files) or with --force; a symbolic
link is never followed (with --force the link itself is replaced, its target left alone); a FIFO, a folder or a
device is never replaced. The destination is checked before the work (minutes of measuring), and each path
problem exits 2 with a message naming the option, never "internal error".
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenmath.base.errors import InputError
from tokenmath.faces.cli import cli, main

ROOT = Path(__file__).resolve().parents[1]
USER_TEXT = "my own notes, not tokenmath's\n"


def run_main(args: list[str]) -> tuple[int, str, str]:
    """tokenmath.faces.cli:main in-process: (exit code, stdout, stderr)."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


def run_sub(args: list[str], prelude: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    """`tokenmath ARGS` in a child process (after `prelude`, e.g. resource limits)."""
    code = f"{prelude}\nfrom tokenmath.faces.cli import main\nmain({args!r})"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def assert_exit_2(code, out, err, field):
    assert code == 2, (code, out, err)
    assert "internal error" not in out + err and "Traceback" not in out + err
    e = json.loads(out)["error"]
    assert field in (e["field"] or ""), e
    return e["problem"]


PLOT = ["hyperbola", "--plot"]        # a chart in about a second


# ---- --plot --------------------------------------------------------------------------------------------------------

def test_plot_writes_a_chart_and_rewrites_its_own(tmp_path):
    p = tmp_path / "h.png"
    for _ in range(2):   # the second time the file is tokenmath's own: replaced without --force
        code, out, err = run_main([*PLOT, str(p), "--json"])
        assert code == 0, err
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"`tokenmath" in p.read_bytes()[:4096]
    assert [x.name for x in tmp_path.iterdir()] == ["h.png"]   # no temporary file left


def test_plot_refuses_to_replace_a_file_tokenmath_did_not_write(tmp_path):
    """Before: the user's file was silently overwritten."""
    p = tmp_path / "notes.png"
    p.write_text(USER_TEXT)
    problem = assert_exit_2(*run_main([*PLOT, str(p), "--json"]), "plot")
    assert "--force" in problem and "not written by tokenmath" in problem
    assert p.read_text() == USER_TEXT
    code, _, err = run_main([*PLOT, str(p), "--force", "--json"])
    assert code == 0, err
    assert p.read_bytes()[:4] == b"\x89PNG"


def test_plot_does_not_follow_a_symlink(tmp_path):
    """Before: the chart was written through the link, over its target."""
    target = tmp_path / "precious.txt"
    target.write_text(USER_TEXT)
    link = tmp_path / "chart.png"
    link.symlink_to(target)
    problem = assert_exit_2(*run_main([*PLOT, str(link), "--json"]), "plot")
    assert "symbolic link" in problem
    assert target.read_text() == USER_TEXT and link.is_symlink()
    code, _, err = run_main([*PLOT, str(link), "--force"])   # --force: the link itself is replaced
    assert code == 0, err
    assert not link.is_symlink() and link.read_bytes()[:4] == b"\x89PNG"
    assert target.read_text() == USER_TEXT
    dangling = tmp_path / "dangling.svg"
    dangling.symlink_to(tmp_path / "nowhere" / "x.svg")
    assert_exit_2(*run_main([*PLOT, str(dangling), "--json"]), "plot")


@pytest.mark.parametrize("case", ["missing_folder", "name_too_long", "folder_at_destination", "file_as_folder",
                                  "bad_suffix", "empty"])
def test_plot_path_problems_exit_2(tmp_path, case):
    """Before: a name over 255 bytes raised OSError -> "internal error" (exit 1) after the work was done."""
    path = {"missing_folder": tmp_path / "no" / "such" / "h.png",
            "name_too_long": tmp_path / ("x" * 300 + ".png"),
            "folder_at_destination": tmp_path / "d.png",
            "file_as_folder": tmp_path / "f.txt" / "h.png",
            "bad_suffix": tmp_path / "h.gif",
            "empty": ""}[case]
    if case == "folder_at_destination":
        path.mkdir()
    if case == "file_as_folder":
        (tmp_path / "f.txt").write_text("x")
    problem = assert_exit_2(*run_main([*PLOT, str(path), "--json"]), "plot")
    assert problem
    code, out, err = run_main([*PLOT, str(path), "--force", "--json"])   # --force does not help here
    assert code == 2


def test_plot_to_a_fifo_is_refused_not_hung(tmp_path):
    """Before: writing to a FIFO with no reader blocked for ever. A FIFO is never replaced, even with --force."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    for extra in ([], ["--force"]):
        try:
            r = run_sub([*PLOT, str(fifo), "--json", *extra], timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("tokenmath hung writing to a FIFO")
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "FIFO" in json.loads(r.stdout)["error"]["problem"]
    assert fifo.exists() and not fifo.is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_plot_into_a_read_only_folder_exits_2(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert "not writable" in assert_exit_2(*run_main([*PLOT, str(ro / "h.png"), "--json"]), "plot")
    finally:
        ro.chmod(0o700)


FSIZE = """import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))"""
KILLED = """import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)   # Python ignores it; by default a write past the limit kills
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))"""


def test_a_failed_write_leaves_the_old_chart_whole(tmp_path):
    """A disk that fills up (here: a 2 kB file-size limit) mid-write. Before: the old chart was truncated to 2 kB
    and the command died with "internal error: OSError". Now: exit 2 naming the problem, the old chart intact."""
    p = tmp_path / "h.png"
    assert run_main([*PLOT, str(p)])[0] == 0
    before = p.read_bytes()
    r = run_sub([*PLOT, str(p), "--json"], prelude=FSIZE)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "cannot write" in json.loads(r.stdout)["error"]["problem"]
    assert p.read_bytes() == before
    assert [x.name for x in tmp_path.iterdir()] == ["h.png"]


def test_an_interrupted_write_leaves_the_old_chart_whole(tmp_path):
    """The process killed mid-write (SIGXFSZ at 2 kB). Before: a 2 kB chart was left. Now: the old one."""
    p = tmp_path / "h.png"
    assert run_main([*PLOT, str(p)])[0] == 0
    before = p.read_bytes()
    r = run_sub([*PLOT, str(p)], prelude=KILLED)
    assert r.returncode == -signal.SIGXFSZ, (r.returncode, r.stderr[-500:])
    assert p.read_bytes() == before


# ---- measure --out: checked before measuring ------------------------------------------------------------------------

@pytest.fixture
def no_measuring(monkeypatch):
    """Fails the test if the measurement starts (the destination must be refused first)."""
    import tokenmath.local.measure as m

    def boom(*a, **k):
        raise AssertionError("measured before checking --out")
    monkeypatch.setattr(m, "measure", boom)


@pytest.mark.parametrize("case", ["missing_folder", "name_too_long", "not_ours", "template", "symlink", "fifo",
                                  "bad_suffix"])
def test_measure_out_is_checked_before_measuring(tmp_path, no_measuring, case):
    """Before: minutes of measuring, then the error (or a silent overwrite through the link). `template`: a file
    from `tokenmath hardware --template` (which quotes `tokenmath hardware` near its top) was replaced silently
    (issue 40 item 4); it is the user's file."""
    out = {"missing_folder": tmp_path / "no" / "hw.toml", "name_too_long": tmp_path / ("h" * 300 + ".toml"),
           "not_ours": tmp_path / "hw.toml", "template": tmp_path / "hw.toml", "symlink": tmp_path / "link.toml",
           "fifo": tmp_path / "p.toml", "bad_suffix": tmp_path / "hw.yaml"}[case]
    if case == "not_ours":
        out.write_text(USER_TEXT)
    if case == "template":
        code, template, err = run_main(["hardware", "--template"])
        assert code == 0 and "`tokenmath " in template[:4096], err     # what the old rule took for its mark
        out.write_text(template)
    if case == "symlink":
        (tmp_path / "target.toml").write_text(USER_TEXT)
        out.symlink_to(tmp_path / "target.toml")
    if case == "fifo":
        os.mkfifo(out)
    problem = assert_exit_2(*run_main(["measure", "--quick", "--quiet", "--out", str(out), "--json"]), "out")
    if case in ("not_ours", "symlink"):
        assert (tmp_path / ("hw.toml" if case == "not_ours" else "target.toml")).read_text() == USER_TEXT
    if case == "template":
        assert "not written by tokenmath" in problem and out.read_text() == template


def test_measure_out_replaces_its_own_file(tmp_path):
    out = tmp_path / "hw.toml"
    # --accept-noisy: a loaded test machine must not refuse the file (the refusal: tests/test_measure_noise.py)
    for _ in range(2):
        code, stdout, err = run_main(["measure", "--quick", "--quiet", "--accept-noisy", "--out", str(out), "--json"])
        assert code == 0, err
    assert out.read_text().startswith("# tokenmath hardware file written by `tokenmath measure`")
    js = tmp_path / "hw.json"
    for _ in range(2):
        code, _, err = run_main(["measure", "--quick", "--quiet", "--accept-noisy", "--out", str(js)])
        assert code == 0, err
    assert json.loads(js.read_text())["id"].startswith("measured-")


# ---- validate --write-calibration ---------------------------------------------------------------------------------

def test_write_calibration_checked_first_and_never_over_a_user_file(tmp_path, monkeypatch):
    import tokenmath.analyses.calibration.validate as v
    calls = []
    real = v.validate
    monkeypatch.setattr(v, "validate", lambda *a, **k: calls.append(1) or real(*a, **k))
    mine = tmp_path / "calibration.toml"
    mine.write_text(USER_TEXT)
    assert_exit_2(*run_main(["validate", "--write-calibration", str(mine), "--json"]), "write_calibration")
    assert mine.read_text() == USER_TEXT and calls == []
    assert_exit_2(*run_main(["validate", "--write-calibration", str(tmp_path / "x" / "c.toml"), "--json"]),
                  "write_calibration")
    assert calls == []
    code, _, err = run_main(["validate", "--write-calibration", str(mine), "--force"])
    assert code == 0, err
    text = mine.read_text()
    assert "`tokenmath validate --write-calibration`" in text.splitlines()[0]
    code, _, err = run_main(["validate", "--write-calibration", str(mine)])   # now tokenmath's own: replaced
    assert code == 0, err


# ---- the library: tokenmath.base.files -------------------------------------------------------------------------

def test_write_atomic_unit(tmp_path, monkeypatch):
    from tokenmath.base import files
    p = tmp_path / "a.toml"
    files.write_atomic(p, f"# {files.MEASURE_HEADER}\nx = 1\n", "out")      # ours: replaced below without force
    assert p.read_text().endswith("x = 1\n")
    umask = os.umask(0o22)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask       # the usual permissions, not a temporary file's 0600
    # a failure at the sync (a full disk, an I/O error) leaves the old file and no temporary file
    monkeypatch.setattr(files.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(InputError) as e:
        files.write_atomic(p, "# `tokenmath` new\n", "out")
    assert e.value.field == "out" and "No space left" in e.value.problem
    assert p.read_text().endswith("x = 1\n") and sorted(x.name for x in tmp_path.iterdir()) == ["a.toml"]
    monkeypatch.setattr(files.os, "fsync", lambda fd: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(p, "# `tokenmath` new\n", "out")
    assert p.read_text().endswith("x = 1\n") and sorted(x.name for x in tmp_path.iterdir()) == ["a.toml"]


def test_ours_rule(tmp_path):
    from tokenmath.base.files import is_ours
    from tokenmath.local.hardware_file import HEADER, to_toml
    cases = {"a.toml": to_toml({"memory_gb": 1}, header=HEADER).encode(), "b.toml": b"x = 1\n",
             "c.png": b"\x89PNG\r\n\x1a\n....tEXtSoftware\x00`tokenmath` (matplotlib 3)", "d.png": b"\x89PNG....",
             "e.json": b'{"id": "m", "notes": "Measured on this machine by `tokenmath measure` on 2026-01-01"}',
             "f.json": b"{}", "g.svg": b"<svg></svg>", "h.png": b"",
             # mentioning tokenmath near the top is not the mark: the template quotes `tokenmath measure`
             "i.toml": b"# my chip, from `tokenmath hardware --template`; see `tokenmath measure`\nx = 1\n",
             "j.toml": b"x = 1\n# tokenmath hardware file written by `tokenmath measure` (catalog schema; see "
                       b"src/tokenmath/data/hardware.toml)\n",
             "k.json": b'{"notes": "written by `tokenmath measure`"}', "l.txt": b"`tokenmath` (matplotlib)"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    assert {n for n in cases if is_ours(tmp_path / n)} == {"a.toml", "c.png", "e.json"}
