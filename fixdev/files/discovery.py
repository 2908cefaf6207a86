"""Which files a run looks at.

Directories are walked for ``*.py`` and ``*.ipynb`` (``[tool.fixdev] include``
replaces these globs, ``extend-include`` adds to them; ``notebooks=False``
leaves notebooks out); ``.gitignore`` files (from the repository
root down), the default excludes, ``--exclude`` (relative to the current folder)
and ``[tool.fixdev] exclude`` (relative to its pyproject.toml) prune the walk. A file named
on the command line is processed all the same, unless ``force_exclude`` says
otherwise (``force_excluded`` asks, for one file, what a walk would have
decided). Symbolic links to directories are not
followed, a linked file is taken only when it resolves inside the tree being
walked, and a file reached twice is yielded once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

import pathspec

from fixdev.files.config import DEFAULT_EXCLUDES, DEFAULT_INCLUDE, ConfigError, nearest
from fixdev.files.globs import relative as _relative
from fixdev.files.globs import spec as _spec
from fixdev.files.notebook import SUFFIX as NOTEBOOK_SUFFIX


@dataclass(frozen=True)
class Missing:
    """A command-line path that does not exist or cannot be listed."""

    path: Path
    message: str



def _configured_excludes(folder: Path) -> tuple[Path, pathspec.PathSpec] | None:
    """``[tool.fixdev] exclude`` of the configuration that governs files in
    ``folder`` (the nearest pyproject.toml with such a table), with the
    folder its patterns are relative to: that pyproject.toml's own."""
    try:
        settings = nearest(folder)
    except ConfigError:
        return None  # reported, once, when the files are processed
    if not settings.exclude:
        return None
    return settings.root.absolute(), _config_spec(settings.exclude)


def _configured_includes(folder: Path) -> tuple[Path, pathspec.PathSpec] | None:
    """``include`` and ``extend-include`` of the configuration that governs
    ``folder``, with the folder they are relative to; None for the default
    (``*.py`` and ``*.ipynb``), which is checked by name alone."""
    try:
        settings = nearest(folder)
    except ConfigError:
        return None
    patterns = settings.include + settings.extend_include
    if patterns == DEFAULT_INCLUDE:
        return None
    return settings.root.absolute(), _config_spec(patterns)


@lru_cache(maxsize=None)
def _config_spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    return _spec(patterns)


def _repo_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        # os.path.exists, not Path.exists: a folder that cannot be searched
        # holds no repository fixdev can read, rather than a traceback.
        if os.path.exists(folder / ".git"):
            return folder
    return None


def _read_gitignore(folder: Path) -> pathspec.PathSpec | None:
    try:
        lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return _spec(lines)


class _Ignores:
    """The stack of .gitignore specs that apply inside one folder."""

    def __init__(self, layers: tuple[tuple[Path, pathspec.PathSpec], ...] = ()) -> None:
        self.layers = layers

    def entering(self, folder: Path) -> "_Ignores":
        spec = _read_gitignore(folder)
        return _Ignores(self.layers + ((folder, spec),)) if spec else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        # The deepest .gitignore with an opinion wins, as in git.
        for folder, spec in reversed(self.layers):
            rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
            verdict = spec.check_file(rel).include
            if verdict is not None:
                return verdict
        return False


def _initial_ignores(start: Path) -> _Ignores:
    root = _repo_root(start)
    if root is None:
        return _Ignores()
    ignores = _Ignores()
    chain = [start, *start.parents]
    for folder in reversed(chain[: chain.index(root) + 1]):
        if folder != start:
            ignores = ignores.entering(folder)
    return ignores


def _excluded(path: Path, is_dir: bool, exclude_spec: pathspec.PathSpec, exclude_root: Path,
              configured: tuple[Path, pathspec.PathSpec] | None) -> bool:
    """``path`` matches the default excludes or ``--exclude`` (relative to
    ``exclude_root``), or the configured ``exclude`` (relative to its
    pyproject.toml). Gitignore semantics: a match on a folder covers what is in it."""
    rel = _relative(path, exclude_root).as_posix()
    if exclude_spec.match_file(rel + ("/" if is_dir else "")) or exclude_spec.match_file(rel):
        return True
    if configured is None:
        return False
    root, spec = configured
    rel = _relative(path, root).as_posix()
    return spec.match_file(rel + ("/" if is_dir else "")) or spec.match_file(rel)


def named_path_excluded(path: Path, excludes: Iterable[str] = (), exclude_root: Path | None = None, is_dir: bool = False) -> bool:
    """``--force-exclude``: a path named on the command line (or given as
    ``--stdin-filename``) that a folder walk would have skipped. (Its own name:
    two merges each added a ``force_excluded`` with other parameters, and the
    language server's, defined below, replaced this one, so ``discover`` and
    the CLI called it with their arguments in the wrong places.)"""
    full = path.absolute()
    if full == (exclude_root or Path.cwd()).absolute() or not path.name:
        return False  # the folder the patterns are relative to is never its own match
    exclude_spec = _spec([*DEFAULT_EXCLUDES, *excludes])
    return _excluded(path, is_dir, exclude_spec, (exclude_root or Path.cwd()).absolute(), _configured_excludes(full.parent))


def discover(paths: Iterable[Path], excludes: Iterable[str] = (), exclude_root: Path | None = None, notebooks: bool = True,
             force_exclude: bool = False) -> Iterator[Path | Missing]:
    """Yield the files to process, and a ``Missing`` for each bad path given.
    With ``force_exclude``, paths given are checked against the excludes too,
    as Ruff's ``--force-exclude`` does (pre-commit names every staged file)."""
    excludes = tuple(excludes)
    exclude_spec = _spec([*DEFAULT_EXCLUDES, *excludes])
    exclude_root = (exclude_root or Path.cwd()).absolute()
    seen: set[str] = set()

    def excluded(path: Path, is_dir: bool, configured: tuple[Path, pathspec.PathSpec] | None) -> bool:
        return _excluded(path, is_dir, exclude_spec, exclude_root, configured)

    def included(path: Path, name: str, configured: tuple[Path, pathspec.PathSpec] | None) -> bool:
        if not notebooks and name.endswith(NOTEBOOK_SUFFIX):
            return False
        if configured is None:
            return name.endswith((".py", NOTEBOOK_SUFFIX))
        root, spec = configured
        return spec.match_file(_relative(path, root).as_posix())

    def first_time(path: Path) -> bool:
        key = os.path.realpath(path)
        if key in seen:
            return False
        seen.add(key)
        return True

    for given in paths:
        try:
            is_file, is_dir = given.is_file(), given.is_dir()
        except OSError as exc:
            # A path inside a folder that cannot be searched: stat itself is
            # refused. One line, as a walked folder's unreadable file gets.
            yield Missing(given, f"cannot read: {exc.strerror or exc}")
            continue
        if force_exclude and (is_file or is_dir) and named_path_excluded(given, excludes, exclude_root, is_dir):
            continue
        if is_file:
            if first_time(given):
                yield given
            continue
        if not is_dir:
            reason = "no such file or directory" if not given.exists() and not given.is_symlink() else "not a file or directory"
            yield Missing(given, reason)
            continue
        tree = os.path.realpath(given)
        start = given.absolute()
        stack: list[tuple[Path, _Ignores]] = [(given, _initial_ignores(start).entering(start))]
        while stack:
            folder, ignores = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                yield Missing(folder, f"cannot list directory: {exc.strerror}")
                continue
            subfolders = []
            configured = _configured_excludes(folder.absolute())
            includes = _configured_includes(folder.absolute())
            for entry in entries:
                path = Path(entry.path)
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    if not excluded(path, True, configured) and not ignores.ignored(path.absolute(), True):
                        subfolders.append(path)
                    continue
                if not included(path, entry.name, includes) or excluded(path, False, configured) or ignores.ignored(path.absolute(), False):
                    continue
                if is_link:
                    target = os.path.realpath(path)
                    if not os.path.isfile(target) or os.path.commonpath([tree, target]) != tree:
                        continue
                if first_time(path):
                    yield path
            for sub in reversed(subfolders):
                stack.append((sub, ignores.entering(sub.absolute())))


def force_excluded(path: Path, exclude_root: Path | None = None, excludes: Iterable[str] = ()) -> bool:
    """Whether a walk would have skipped ``path``, a file named directly (an
    editor's document): the file or a folder above it matches the default
    excludes or ``excludes`` (relative to ``exclude_root``, the current folder
    by default), or the ``[tool.fixdev] exclude`` of the configuration that
    governs the folder holding it (relative to that pyproject.toml). A path
    outside the folder that patterns are relative to is not matched by them,
    as a walk never meets it. ``.gitignore`` files are not read: they say
    what git tracks, and an open file is one the user chose."""
    path = path.absolute()
    root = (exclude_root or Path.cwd()).absolute()
    spec = _spec([*DEFAULT_EXCLUDES, *excludes])
    for depth, item in enumerate([path, *path.parents][:-1]):
        is_dir = depth > 0
        if _matches(spec, item, root, is_dir):
            return True
        configured = _configured_excludes(item.parent)
        if configured is not None and _matches(configured[1], item, configured[0], is_dir):
            return True
    return False


def _matches(spec: pathspec.PathSpec, path: Path, root: Path, is_dir: bool) -> bool:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return False
    return bool(spec.match_file(rel + ("/" if is_dir else ""))) or bool(spec.match_file(rel))
