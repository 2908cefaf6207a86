"""``--show-files`` and ``--show-settings``, as Ruff has them: which files a
run would check, and the settings that govern one of them, printed without
checking anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from fixdev.engine.registry import load
from fixdev.files.config import DEFAULT_EXCLUDES, Settings
from fixdev.files.runner import Overrides, settings_for
from fixdev.interfaces.output import display


def files_listing(files: Iterable[Path]) -> str:
    """Each file, one a line, sorted as Ruff sorts them (by path)."""
    return "".join(f"{name}\n" for name in sorted(display(path) for path in files))


def _value(value: Any) -> str:
    """A value as TOML writes it (strings and lists of strings, booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def settings_report(path: Path, overrides: Overrides, excludes: tuple[str, ...], notebooks: bool, force_exclude: bool) -> str:
    """The settings ``path`` is checked with: the pyproject.toml they come
    from, its ``[tool.fixdev]`` keys after the command line's flags
    (``--select`` replaces ``select``, ``--extend-select`` and ``--ignore``
    add to theirs, ``--unsafe-fixes`` sets ``unsafe-fixes``), the flags that
    decide which files are walked, the rules that run on this file (the
    ``per-file-ignores`` matching it taken out), and every option of those
    rules, as set or by default. Raises ``ConfigError`` for a bad
    configuration and ``SelectionError`` when no rule is left."""
    settings: Settings = settings_for(path, overrides)
    source = f'"{settings.source}"' if settings.source is not None else "none (no pyproject.toml with [tool.fixdev] above it: the defaults)"
    ignored = settings.ignored_for(path)
    rules = [load(rule) for rule in settings.rules() if rule.code not in ignored]
    options = settings.options()
    per_file = ", ".join(f"{_value(glob)} = {_value(list(words))}" for glob, words in settings.per_file_ignores)
    lines = [
        f'Resolved settings for: "{display(path)}"',
        f"Settings path: {source}",
        "",
        "[tool.fixdev]",
        f"select = {_value(list(settings.select))}",
        f"extend-select = {_value(list(settings.extend_select))}",
        f"ignore = {_value(list(settings.ignore))}",
        f"per-file-ignores = {{{' ' + per_file + ' ' if per_file else ''}}}",
        f"exclude = {_value(list(settings.exclude))}",
        f"include = {_value(list(settings.include))}",
        f"extend-include = {_value(list(settings.extend_include))}",
        f"unsafe-fixes = {_value(settings.unsafe_fixes)}",
        "",
        "# Folder walks, from the command line:",
        f"#   --exclude {_value(list(excludes))} (relative to the current folder)",
        f"#   --force-exclude {_value(force_exclude)}",
        f"#   notebooks {_value(notebooks)} (--no-notebooks leaves them out)",
        f"#   always excluded: {_value(list(DEFAULT_EXCLUDES))}",
        "",
        f"# The rules that run on {display(path)}"
        + (f" (per-file-ignores take out {', '.join(sorted(ignored))})" if ignored else "")
        + f": {len(rules)}",
        *(f"#   {rule.code}  {rule.name}" for rule in rules),
    ]
    for rule in rules:
        if rule.options:
            lines += ["", f"[tool.fixdev.rules.{rule.name}]"]
            configured = options.get(rule.name, {})
            for key, option in rule.options.items():
                value = configured.get(key, option.default)
                lines.append(f"{key} = {_value(value)}" + ("" if key in configured else "  # the default"))
    return "\n".join(lines) + "\n"
