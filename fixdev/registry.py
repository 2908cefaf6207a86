"""Finds the rules (every ``Rule`` subclass in ``fixdev.codemods``, the repository's ``codemods/``) and
turns ``--select`` / ``--ignore`` words into a set of rules."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .rule import Rule


class SelectionError(ValueError):
    """An unknown rule code, prefix or name."""


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    # Imported here: a run served from the cache never loads libcst.
    from . import codemods
    from .rule import Rule

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(codemods.__path__):
        module = importlib.import_module(f"{codemods.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__ and hasattr(value, "code"):
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def find_rule(word: str) -> type[Rule]:
    for rule in all_rules():
        if word.upper() == rule.code or word.lower() == rule.name:
            return rule
    raise SelectionError(f"unknown rule {word!r}")


def matching(word: str) -> list[type[Rule]]:
    """Rules named by one selector: ALL, a code, a code prefix, or a rule name."""
    word = word.strip()
    if word.upper() == "ALL":
        return list(all_rules())
    rules = [r for r in all_rules() if r.code.startswith(word.upper()) or r.name == word.lower()]
    if not rules:
        raise SelectionError(f"unknown rule code, prefix or name {word!r}")
    return rules


def select(selected: Iterable[str], extended: Iterable[str] = (), ignored: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    chosen: set[type[Rule]] = set()
    for word in [*selected, *extended]:
        chosen.update(matching(word))
    for word in ignored:
        chosen.difference_update(matching(word))
    return tuple(rule for rule in all_rules() if rule in chosen)
