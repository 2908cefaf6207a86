"""Finds the rules (every ``Rule`` subclass in ``fixdev.codemods``, the repository's ``codemods/``) and
turns ``--select`` / ``--ignore`` words into a set of rules."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .rule import Rule


class SelectionError(ValueError):
    """An unknown rule code, prefix, name or group."""


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


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the closest candidate, or nothing."""
    candidates = list(candidates)
    folded = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(word.lower(), folded, n=1)
    return f"; did you mean {folded[close[0]]!r}?" if close else ""


def _rule_words() -> list[str]:
    return [word for rule in all_rules() for word in (rule.name, rule.code)]


def find_rule(word: str) -> type[Rule]:
    for rule in all_rules():
        if word.upper() == rule.code or word.lower() == rule.name:
            return rule
    raise SelectionError(f"unknown rule {word!r}{did_you_mean(word, _rule_words())}")


def matching(word: str) -> list[type[Rule]]:
    """Rules named by one selector: ALL, a code, a code prefix, a rule name,
    or a group name (``cuda-only``: every rule whose ``group`` it is)."""
    word = word.strip()
    if word.upper() == "ALL":
        return list(all_rules())
    groups = {getattr(r, "group", None) for r in all_rules()} - {None}
    rules = [r for r in all_rules() if r.code.startswith(word.upper()) or r.name == word.lower() or getattr(r, "group", None) == word.lower()]
    if not rules:
        raise SelectionError(f"unknown rule code, prefix, name or group {word!r}{did_you_mean(word, [*_rule_words(), *sorted(groups), 'ALL'])}")
    return rules


def select(selected: Iterable[str], extended: Iterable[str] = (), ignored: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    """The rules chosen; a selection that leaves none is an error, not a run
    that silently checks nothing."""
    selected, extended, ignored = tuple(selected), tuple(extended), tuple(ignored)
    chosen: set[type[Rule]] = set()
    for word in [*selected, *extended]:
        chosen.update(matching(word))
    for word in ignored:
        chosen.difference_update(matching(word))
    if not chosen:
        raise SelectionError(f"no rule left to run (selected: {', '.join(selected + extended) or 'none'}; ignored: {', '.join(ignored) or 'none'})")
    return tuple(rule for rule in all_rules() if rule in chosen)
