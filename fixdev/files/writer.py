"""Writing a fixed file without ever leaving it half-written.

The new bytes go to a temporary file in the same folder, are flushed to disk,
get the original's permission bits, and replace the original by ``os.replace``
(atomic on POSIX and Windows). Just before the swap the file on disk is read
again: if someone changed it since fixdev read it, nothing is written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

TEMP_PREFIX = ".fixdev-"
TEMP_SUFFIX = ".tmp"


class WriteError(Exception):
    """The file could not be written; the message says why."""


def write_atomic(path: Path, data: bytes, expected: bytes) -> None:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise WriteError(f"cannot write: {exc.strerror}") from None
    if not info.st_mode & stat.S_IWUSR:
        # Even root could rename over it; a read-only file is a user's "hands off".
        raise WriteError("file is read-only; not written")

    def unchanged() -> None:
        if _current(path) != expected:
            raise WriteError("changed on disk while fixdev was running; not overwritten")

    _replace(path, data, stat.S_IMODE(info.st_mode), unchanged)


def _replace(path: Path, data: bytes, mode: int, check=None) -> None:
    """``data`` to a temporary file beside ``path``, flushed to disk, given
    ``mode``, then renamed over ``path`` (after ``check``, which may raise
    ``WriteError`` to stop it); the temporary file never stays behind."""
    try:
        handle, temp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise WriteError(f"cannot write in {path.parent}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        if check is not None:
            check()
        os.replace(temp, path)
    except OSError as exc:
        raise WriteError(f"cannot write: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def is_stale_temp(name: str) -> bool:
    """A temporary file a killed fixdev run left behind."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def remove_stale_temps(folders) -> None:
    """Delete temporary files a killed run left in these folders. Only names
    fixdev itself makes are touched."""
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if is_stale_temp(name):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass


def write_report(path: Path, data: bytes) -> None:
    """A report (``--output-file``), made or replaced whole: the bytes go to a
    temporary file beside it, flushed, then renamed over it, so a reader
    never sees half a report. Missing parent folders are made, as Ruff makes
    them; a file already there keeps its permission bits (a new one gets the
    umask's). Unlike ``write_atomic`` it has no earlier content to protect."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot write in {path.parent}: {exc.strerror or exc}") from None
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    _replace(path, data, mode)
