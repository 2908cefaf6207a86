"""Settings: ``[tool.fixdev]`` from the nearest ``pyproject.toml``, then command-line flags.

Example::

    [tool.fixdev]
    select = ["ALL"]
    ignore = ["FDV106"]
    exclude = ["legacy/**"]
    extend-include = ["*.pyw"]       # walked besides *.py and *.ipynb (include replaces them)
    per-file-ignores = { "tests/**" = ["cuda-call"] }

    [tool.fixdev.rules.constant-buffer]
    persistent = true
"""

from __future__ import annotations

import os

import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from fixdev.engine import registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A bad configuration file or value; the message names the file and the key."""


DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "build", "dist",
    "site-packages", "node_modules", ".tox", ".nox", ".eggs", ".mypy_cache",
    ".pytest_cache", ".fixdev_cache",
)


DEFAULT_INCLUDE = ("*.py", "*.ipynb")


@dataclass(frozen=True)
class Settings:
    root: Path  # where relative globs are anchored: the pyproject.toml's folder
    select: tuple[str, ...] = ("ALL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE  # what folder walks take, as in Ruff
    extend_include: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    rule_options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    unsafe_fixes: bool = False  # apply fixes that may change more than the device, as Ruff's unsafe-fixes
    source: Path | None = None  # the pyproject.toml these came from

    def rules(self) -> tuple[type[registry.Rule], ...]:
        return registry.select(self.select, self.extend_select, self.ignore)

    def options(self) -> dict[str, dict[str, Any]]:
        return {name: dict(values) for name, values in self.rule_options}

    def ignored_for(self, path: Path) -> set[str]:
        """Rule codes switched off for one file by ``per-file-ignores``."""
        if not self.per_file_ignores:
            return set()
        from fixdev.files.globs import glob_matches

        codes: set[str] = set()
        for pattern, words in self.per_file_ignores:
            if glob_matches(pattern, path, self.root):
                for word in words:
                    codes.update(rule.code for rule in registry.matching(word))
        return codes

    def override(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _string_list(value: Any, key: str, where: Path) -> tuple[str, ...]:
    # A lone string is refused, not taken as a list of one: `ignore = "FDV105"`
    # is most likely a slip, and the README promises a type error for it.
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        found = "a string" if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{where}: error: [tool.fixdev] {key} must be a list of strings, not {found}")
    return tuple(value)


def _rule_words(words: tuple[str, ...], key: str, where: Path) -> tuple[str, ...]:
    for word in words:
        try:
            registry.matching(word)
        except registry.SelectionError as exc:
            raise ConfigError(f"{where}: error: [tool.fixdev] {key}: {exc}") from None
    return words


KEYS = ("select", "extend-select", "ignore", "exclude", "include", "extend-include", "per-file-ignores", "unsafe-fixes", "rules")


def parse_table(table: dict[str, Any], where: Path) -> Settings:
    settings = Settings(root=where.parent, source=where)
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in ("select", "extend-select", "ignore"):
            values[key.replace("-", "_")] = _rule_words(_string_list(value, key, where), key, where)
        elif key in ("exclude", "include", "extend-include"):
            values[key.replace("-", "_")] = _string_list(value, key, where)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: error: [tool.fixdev] per-file-ignores must be a table of glob = [rules]")
            values["per_file_ignores"] = tuple(
                (glob, _rule_words(_string_list(words, f"per-file-ignores.{glob}", where), f"per-file-ignores.{glob}", where))
                for glob, words in value.items()
            )
        elif key == "unsafe-fixes":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: error: [tool.fixdev] unsafe-fixes must be true or false, not {type(value).__name__}")
            values["unsafe_fixes"] = value
        elif key == "rules":
            values["rule_options"] = _parse_rule_options(value, where)
        else:
            raise ConfigError(f"{where}: error: unknown key {key!r} in [tool.fixdev]{registry.did_you_mean(key, KEYS)}")
    settings = replace(settings, **values)
    if {"select", "extend_select", "ignore"} & set(values):
        try:
            settings.rules()
        except registry.SelectionError as exc:
            raise ConfigError(f"{where}: error: [tool.fixdev] {exc}") from None
    return settings


def _parse_rule_options(value: Any, where: Path) -> tuple:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: error: [tool.fixdev.rules] must be a table")
    parsed = []
    for rule_word, options in value.items():
        try:
            rule = registry.find_rule(rule_word)
        except registry.SelectionError:
            suggestion = registry.did_you_mean(rule_word, [rule.name for rule in registry.all_rules()])
            raise ConfigError(f"{where}: error: [tool.fixdev.rules] unknown rule {rule_word!r}{suggestion}") from None
        if not isinstance(options, dict):
            raise ConfigError(f"{where}: error: [tool.fixdev.rules.{rule_word}] must be a table")
        checked = []
        for key, option_value in options.items():
            option = rule.options.get(key)
            if option is None:
                known = ", ".join(rule.options) or "none"
                raise ConfigError(f"{where}: error: unknown option {key!r} for rule {rule.name} (known: {known}){registry.did_you_mean(key, rule.options)}")
            if not isinstance(option_value, option.type):
                raise ConfigError(
                    f"{where}: error: [tool.fixdev.rules.{rule_word}] {key} must be {option.type.__name__}, "
                    f"not {type(option_value).__name__}"
                )
            checked.append((key, option_value))
        parsed.append((rule.name, tuple(checked)))
    return tuple(parsed)


def load_file(path: Path) -> Settings | None:
    """Settings from one pyproject.toml, or None when it has no [tool.fixdev]."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: error: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: error: cannot read: {exc}") from None
    table = data.get("tool", {}).get("fixdev")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: error: [tool.fixdev] must be a table")
    return parse_table(table, path)


@lru_cache(maxsize=None)
def nearest(directory: Path) -> Settings:
    """The settings that govern files in ``directory``: the closest pyproject.toml
    with a [tool.fixdev] table, walking up; the defaults when there is none."""
    for folder in (directory, *directory.parents):
        candidate = folder / "pyproject.toml"
        if os.path.isfile(candidate):  # False, not PermissionError, in a folder that cannot be searched
            settings = load_file(candidate)
            if settings is not None:
                return settings
    return Settings(root=directory)
