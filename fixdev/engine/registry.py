"""Finds the rules (every ``Rule`` subclass in ``fixdev.codemods``, the repository's ``codemods/``) and
turns ``--select`` / ``--ignore`` words into a set of rules.

Choosing rules and asking whether a file could interest them needs only each
rule's code, name, group and trigger: those come from ``rule_table.py``, a
table generated from the rules (``python -m fixdev.engine.registry``), so a run over
files no trigger matches never imports libcst or a rule body. The table holds
a fingerprint of the rules' source; when the sources changed since it was
written, the rules are imported and read instead (right, only slower)."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import pkgutil
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple, Union

from fixdev.engine.source import matches_any, trigger_branches

if TYPE_CHECKING:
    from fixdev.engine.rule import Rule


class SelectionError(ValueError):
    """An unknown rule code, prefix, name or group."""


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    # Imported here: a run served from the cache never loads libcst.
    from fixdev import codemods
    from fixdev.engine.rule import Rule

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


class RuleInfo(NamedTuple):
    """What choosing a rule and pre-filtering a file need, without the rule's code."""

    code: str
    name: str
    group: str | None
    trigger: tuple[str, ...]  # all must match
    module: str  # the rule's module in fixdev.codemods
    qualname: str  # its class there
    explicit: bool = False  # selected only by its code or name (``Rule.explicit``)

    @classmethod
    def of(cls, rule: type[Rule]) -> "RuleInfo":
        trigger = (rule.trigger,) if isinstance(rule.trigger, str) else tuple(rule.trigger)
        if rule.might_match.__func__ is not _base_might_match():
            trigger = ("",)  # a rule with its own test: every file goes to it
        return cls(rule.code, rule.name, getattr(rule, "group", None), trigger, rule.__module__.rsplit(".", 1)[-1], rule.__qualname__, rule.explicit)

    def might_match(self, text: str) -> bool:
        """``Rule.might_match``, read from the table."""
        return all(matches_any(branches, text) for branches in _compiled(self.trigger))

    def load(self) -> type[Rule]:
        from fixdev import codemods

        return getattr(importlib.import_module(f"{codemods.__name__}.{self.module}"), self.qualname)


AnyRule = Union["type[Rule]", RuleInfo]


def _base_might_match() -> object:
    from fixdev.engine.rule import Rule

    return Rule.might_match.__func__


@lru_cache(maxsize=None)
def _compiled(trigger: tuple[str, ...]) -> tuple[tuple[re.Pattern[str], ...], ...]:
    return tuple(trigger_branches(source) for source in trigger)


def rules_fingerprint() -> str:
    """A digest of everything a rule's metadata can come from: the rule
    modules and what they import from beside them, and the base class."""
    from fixdev import analysis, codemods  # their __init__s are docstrings: nothing heavy

    digest = hashlib.sha256()
    for name, path in [*python_files(codemods, analysis), ("rule.py", Path(__file__).with_name("rule.py"))]:
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def python_files(*packages) -> list[tuple[str, Path]]:
    """Every ``*.py`` under the packages' folders, subpackages included, as
    (name, path) pairs sorted by name, where the name is the file's path from
    its package's folder, prefixed with the package's last name: what a
    fingerprint of their code must read (an edit anywhere below them changes
    it), the same wherever the package is installed."""
    found = []
    for package in packages:
        folder = Path(package.__file__).parent
        prefix = package.__name__.rsplit(".", 1)[-1]
        for path in folder.rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.append((f"{prefix}/{path.relative_to(folder).as_posix()}", path))
    return sorted(found)


@lru_cache(maxsize=1)
def rule_infos() -> tuple[RuleInfo, ...]:
    """Every rule's metadata, sorted by code: from the generated table while
    it is current, else from the rules themselves."""
    try:
        from fixdev.engine import rule_table
    except ImportError:
        rule_table = None
    if rule_table is not None and rule_table.FINGERPRINT == rules_fingerprint():
        return tuple(RuleInfo(*row) for row in rule_table.RULES)
    return tuple(RuleInfo.of(rule) for rule in all_rules())


def load(rule: AnyRule) -> type[Rule]:
    """The rule class behind a table entry (a class is returned as it is)."""
    return rule.load() if isinstance(rule, RuleInfo) else rule


def table_source() -> str:
    """The text of ``rule_table.py`` for the rules as they are now."""
    rows = "".join(f"    {tuple(RuleInfo.of(rule))!r},\n" for rule in all_rules())
    return (
        '"""Generated by ``python -m fixdev.engine.registry`` from the rules; do not edit.\n'
        "Each rule's (code, name, group, trigger, module, class, explicit), read by\n"
        '``fixdev.engine.registry`` while FINGERPRINT matches the rules\' sources."""\n\n'
        f"FINGERPRINT = {rules_fingerprint()!r}\n"
        f"RULES = (\n{rows})\n"
    )


def _rule_words() -> list[str]:
    return [word for rule in rule_infos() for word in (rule.name, rule.code)]


def find_rule(word: str) -> type[Rule]:
    for rule in all_rules():
        if word.upper() == rule.code or word.lower() == rule.name:
            return rule
    raise SelectionError(f"unknown rule {word!r}{did_you_mean(word, _rule_words())}")


def matching(word: str) -> list[RuleInfo]:
    """Rules named by one selector: ALL, a code, a code prefix, a rule name,
    or a group name (``cuda-only``: every rule whose ``group`` it is); as
    table entries (``load`` gives the class)."""
    word = word.strip()
    if word.upper() == "ALL":
        return list(rule_infos())
    groups = {r.group for r in rule_infos()} - {None}
    rules = [r for r in rule_infos() if r.code.startswith(word.upper()) or r.name == word.lower() or r.group == word.lower()]
    if not rules:
        raise SelectionError(f"unknown rule code, prefix, name or group {word!r}{did_you_mean(word, [*_rule_words(), *sorted(groups), 'ALL'])}")
    return rules


def select(selected: Iterable[str], extended: Iterable[str] = (), ignored: Iterable[str] = ()) -> tuple[RuleInfo, ...]:
    """The rules chosen, as table entries (``Engine`` loads them); a
    selection that leaves none is an error, not a run that silently checks
    nothing. An ``explicit`` rule is chosen only by a word that is its code,
    its name or its group's name; ALL and a code prefix (``FDV1``, which
    names every rule) leave it out. ``--ignore`` takes it out by any word."""
    selected, extended, ignored = tuple(selected), tuple(extended), tuple(ignored)
    chosen: set[RuleInfo] = set()
    for word in [*selected, *extended]:
        chosen.update(rule for rule in matching(word) if not rule.explicit or word.strip().lower() in (rule.code.lower(), rule.name, rule.group))
    for word in ignored:
        chosen.difference_update(matching(word))
    if not chosen:
        raise SelectionError(f"no rule left to run (selected: {', '.join(selected + extended) or 'none'}; ignored: {', '.join(ignored) or 'none'})")
    return tuple(rule for rule in rule_infos() if rule in chosen)


if __name__ == "__main__":
    # Regenerates the table: python -m fixdev.engine.registry
    target = Path(__file__).with_name("rule_table.py")
    target.write_text(table_source())
    print(f"wrote {target} ({len(all_rules())} rules, fingerprint {rules_fingerprint()})")
