"""Files tokenmath writes (charts, hardware files, calibration tables): checked before the work, written whole.

- check_destination(path, field, suffixes): before any work (minutes of measuring), refuse a destination tokenmath
  must not write: an unsupported suffix, an empty name, a name or path longer than the file system takes, a folder
  that does not exist, is not a folder or is not writable; an existing folder, FIFO, socket or device (never
  replaced); a symbolic link (never followed; with force, the link itself is replaced and its target left alone);
  an existing file tokenmath did not write (replaced only with force). Each refusal is InputError(field).
- write_atomic(path, data, field): the data goes to a temporary file in the destination's folder (".tokenmath-
  <random>.tmp", created exclusively, not through a link), is synced to disk, then renamed over the destination (a
  new name is linked into place, so a file that appeared meanwhile is not clobbered); the folder is synced. An
  interrupted or failed write (Ctrl-C, a full disk) leaves the old file whole and removes the temporary file (a
  process killed outright may leave the temporary file, never a truncated destination). Any OSError is
  InputError(field) naming the path and the reason.
- is_ours(path): "a file tokenmath wrote" is a regular file carrying the exact mark its writer puts there, never
  merely a file that mentions tokenmath (`tokenmath hardware --template` quotes `tokenmath measure` in its comments,
  and a user's copy of it is theirs): a TOML file whose first line is one of TOML_FIRST_LINES (`tokenmath measure`'s
  header, `tokenmath validate --write-calibration`'s), a JSON hardware file whose first 4 KiB hold JSON_MARK (the
  notes `tokenmath measure` writes), a PNG or SVG chart whose first 4 KiB hold CHART_MARK (its Software text chunk
  or dc:creator, faces/plots.py SIGNATURE).

A path checked by check_destination comes back as an OutputPath: a str that remembers `force`, so the writer
called much later (a chart after the analysis) honours the same --force.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from tokenmath.base.errors import InputError, show

# the exact marks of the files tokenmath writes (is_ours); each writer's test checks it writes its own
MEASURE_HEADER = ("tokenmath hardware file written by `tokenmath measure` "
                  "(catalog schema; see src/tokenmath/data/hardware.toml)")
TOML_FIRST_LINES = (b"# " + MEASURE_HEADER.encode(),
                    b"# Efficiencies fitted on data/measurements.toml by `tokenmath validate --write-calibration`.")
JSON_MARK = b'"notes": "Measured on this machine by `tokenmath measure` on '
CHART_MARK = b"`tokenmath` (matplotlib"
SNIFF_BYTES = 4096
NAME_MAX = 255                     # bytes, when the file system does not say
PATH_MAX = 4096
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)   # POSIX; elsewhere links were refused by check_destination already
KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}
HINTS = {errno.ENOSPC: "free some space or choose another folder", errno.EDQUOT: "free some space (disk quota)",
         errno.EFBIG: "free some space, or raise the file-size limit (ulimit -f)",
         errno.EROFS: "a folder on a writable file system", errno.EACCES: "a folder you may write to",
         errno.EPERM: "a folder you may write to", errno.ENAMETOOLONG: "a shorter name",
         errno.EIO: "check the disk"}


class OutputPath(str):
    """A destination that passed check_destination, carrying the user's `force` to the writer."""
    force: bool = False

    def __new__(cls, path, force: bool = False):
        self = super().__new__(cls, path)
        self.force = bool(force)
        return self


def is_ours(path) -> bool:
    """Whether `path` is a regular file that tokenmath wrote: its writer's exact mark, by the suffix (see the module)."""
    suffix = os.path.splitext(str(path))[1].lower()
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, SNIFF_BYTES)
        if suffix == ".toml":
            return head.split(b"\n", 1)[0].rstrip(b"\r") in TOML_FIRST_LINES
        if suffix == ".json":
            return JSON_MARK in head
        return suffix in (".png", ".svg") and CHART_MARK in head
    except OSError:
        return False
    finally:
        os.close(fd)


def _name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


def check_destination(path, field: str, suffixes: tuple[str, ...] | None = None,
                      force: bool | None = None) -> OutputPath:
    """The destination `path` checked before any work (see the module); InputError(field) for each problem."""
    force = getattr(path, "force", False) if force is None else force
    raw = os.fspath(path) if path is not None else ""
    if not str(raw).strip():
        raise InputError(field, "is an empty path", "a file name, e.g. out" + (suffixes[0] if suffixes else ""))
    p = Path(raw)
    if suffixes and p.suffix.lower() not in suffixes:
        raise InputError(field, f"unsupported file type {p.suffix or '(none)'!r}",
                         f"a {' or '.join(suffixes)} path")
    folder = str(p.parent) if str(p.parent) else "."
    name_bytes = len(os.fsencode(p.name))
    try:
        fst = os.stat(folder)
    except FileNotFoundError:
        raise InputError(field, f"folder {show(folder, 120)} does not exist", "an existing folder") from None
    except NotADirectoryError:
        raise InputError(field, f"{show(folder, 120)} is not a folder", "a path inside an existing folder") from None
    except OSError as e:
        raise InputError(field, f"cannot use folder {show(folder, 120)}: {e.strerror}",
                         HINTS.get(e.errno, "another folder")) from None
    if not stat.S_ISDIR(fst.st_mode):
        raise InputError(field, f"{show(folder, 120)} is not a folder", "a path inside an existing folder")
    if name_bytes > _name_max(folder):
        raise InputError(field, f"the file name is {name_bytes} bytes, longer than this file system takes "
                         f"({_name_max(folder)})", "a shorter name")
    if len(os.fsencode(os.path.abspath(raw))) >= PATH_MAX:
        raise InputError(field, f"the path is longer than {PATH_MAX:,} bytes", "a shorter path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(field, f"folder {show(folder, 120)} is not writable", "a folder you may write to")
    try:
        st = os.lstat(raw)
    except FileNotFoundError:
        return OutputPath(raw, force)
    except OSError as e:
        raise InputError(field, f"cannot use {show(raw, 120)}: {e.strerror}", HINTS.get(e.errno)) from None
    kind = stat.S_IFMT(st.st_mode)
    if kind in KINDS:
        raise InputError(field, f"{show(raw, 120)} is {KINDS[kind]}, not a file: never replaced", "another path")
    if stat.S_ISLNK(st.st_mode) and not force:
        raise InputError(field, f"{show(raw, 120)} is a symbolic link (to {show(os.readlink(raw), 120)}); tokenmath "
                         "does not write through links", "another path, or --force to replace the link itself "
                         "(its target is left alone)")
    if stat.S_ISREG(st.st_mode) and not force and not is_ours(raw):
        raise InputError(field, f"{show(raw, 120)} exists and was not written by tokenmath (it lacks the mark "
                         "tokenmath puts in its own files; one made from `tokenmath hardware --template` is yours)",
                         "another path, or --force to replace it")
    return OutputPath(raw, force)


def write_atomic(path, data: bytes | str, field: str, force: bool | None = None,
                 suffixes: tuple[str, ...] | None = None) -> str:
    """Write `data` to `path` whole or not at all (see the module); returns the path written."""
    dest = check_destination(path, field, suffixes, force)   # again: the destination may have changed meanwhile
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(dest) or "."
    tmp = os.path.join(folder, f".tokenmath-{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_BINARY", 0), 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        _into_place(tmp, dest, field)
        _sync_folder(folder)
    except OSError as e:
        raise InputError(field, f"cannot write {show(str(dest), 120)}: {e.strerror or e}",
                         HINTS.get(e.errno, "another path")) from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        except OSError:
            pass
    return dest


def _into_place(tmp: str, dest: OutputPath, field: str) -> None:
    """Rename tmp over dest; where dest did not exist, link it into place (fails if a file appeared meanwhile)."""
    if not os.path.lexists(dest):
        try:
            os.link(tmp, dest)
            return
        except FileExistsError:   # appeared while we wrote: decide again
            check_destination(dest, field, None, dest.force)
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                raise
    os.replace(tmp, dest)


def _sync_folder(folder: str) -> None:
    """The rename made durable (best effort: some systems cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
