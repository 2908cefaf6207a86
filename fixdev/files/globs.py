"""Gitignore-style patterns, as ``exclude``, ``per-file-ignores`` and
``.gitignore`` files spell them (pathspec's ``GitIgnoreSpec``)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pathspec


def spec(patterns: Iterable[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def glob_matches(pattern: str, path: Path, root: Path) -> bool:
    """Gitignore-style matching: a pattern without a slash matches any path
    component; one with a slash is anchored at ``root``."""
    rel = relative(path, root)
    one = spec([pattern])
    return bool(one.match_file(rel.as_posix())) or bool(one.match_file(rel.as_posix() + "/"))


def relative(path: Path, root: Path) -> Path:
    """``path`` from ``root`` (both made absolute), or as it is when outside it."""
    try:
        return path.absolute().relative_to(root.absolute())
    except ValueError:
        return path
