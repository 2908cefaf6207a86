"""Results cached by what determines them, so an unchanged file is not parsed
again: its bytes, the mode, the rules that run on it with their options, and
fixdev's own code (version and a fingerprint of its source files, so an edited
rule never serves a stale result), and the Python and libcst that read it
(their parsers decide what is a syntax error). What a result used from the run's other
files (what their functions return: the questions its analysis asked and the
answers it got) is stored with it, and the runner serves it only while the
run answers every question alike. Entries live in ``.fixdev_cache/`` in the
folder fixdev runs from (``FIXDEV_CACHE_DIR`` moves it); a ``.gitignore``
inside keeps it out of version control. Any unreadable entry is a miss."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from fixdev import __version__

FOLDER = ".fixdev_cache"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        parser = version("libcst")  # read from its metadata: a warm run never imports libcst
    except PackageNotFoundError:
        parser = "?"
    digest = hashlib.sha256(repr((__version__, sys.version_info[:3], sys.implementation.name, parser)).encode())
    import fixdev
    from fixdev import codemods
    from fixdev.engine.registry import python_files

    # Every module, subpackages included: an edit anywhere in fixdev's code
    # may change what a file's result is.
    for name, path in python_files(fixdev, codemods):
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def folder() -> Path:
    return Path(os.environ.get("FIXDEV_CACHE_DIR") or Path.cwd() / FOLDER)


def is_empty() -> bool:
    """No entry was ever stored here (the folder does not exist): every lookup would miss."""
    return not folder().is_dir()


def key(data: bytes, *parts: Any) -> str:
    digest = hashlib.sha256(data)
    digest.update(repr((code_fingerprint(), parts)).encode())
    return digest.hexdigest()


def load(entry: str) -> Any | None:
    try:
        with open(folder() / entry[:2] / entry, "rb") as handle:
            return pickle.load(handle)
    except Exception:  # a missing, truncated or foreign entry is just a miss
        return None


_made: set[Path] = set()  # folders this process has made (or found), so a run of stores does not ask again


def store(entry: str, value: Any) -> None:
    target = folder() / entry[:2]
    try:
        _write(target, entry, value)
    except OSError:
        if target not in _made:
            return  # a cache that cannot be written only costs speed
        _made.discard(target)  # removed since this process made it: once more, making it again
        try:
            _write(target, entry, value)
        except OSError:
            pass


def _write(target: Path, entry: str, value: Any) -> None:
    if target not in _made:
        target.mkdir(parents=True, exist_ok=True)
        ignore = target.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by fixdev\n*\n")
        _made.add(target)
    # Written beside the entry under a name no other process uses, then
    # renamed over it: a reader sees the old entry or the new, never half.
    temp = target / f"{entry}.{os.getpid()}.tmp"
    with open(temp, "wb") as out:
        pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(temp, target / entry)
