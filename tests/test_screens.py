"""Rule screens (``Rule.screen``) only save work: a file a screen turns away
would have given that rule no finding. Checked by linting every example and
fixture twice, with the screens and with every screen passing everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.rule import Rule

ROOT = Path(__file__).resolve().parent.parent
TEXTS = sorted(
    [*(case.code for rule in all_rules() for case in rule.INVALID), *(code for rule in all_rules() for code in rule.VALID)]
    + [path.read_text(encoding="utf-8") for path in sorted((ROOT / "fixtures").rglob("*.before.py"))]
    + [path.read_text(encoding="utf-8") for path in sorted((ROOT / "tests" / "programs").rglob("*.py"))]
)


def _findings(text: str) -> list[tuple]:
    return [(f.code, f.start, f.end, f.message, f.fix) for f in Engine(all_rules()).lint(text)]


def test_there_are_texts_and_screens_to_check():
    assert len(TEXTS) > 250
    screened = [rule.code for rule in all_rules() if rule.__dict__.get("screen") is not None]
    assert len(screened) >= 10, screened


def test_screens_hide_no_finding(monkeypatch):
    with_screens = [_findings(text) for text in TEXTS]
    monkeypatch.setattr(Rule, "screen", classmethod(lambda cls, screening: True))
    for rule in all_rules():
        if "screen" in rule.__dict__:
            monkeypatch.setattr(rule, "screen", classmethod(lambda cls, screening: True))
    without = [_findings(text) for text in TEXTS]
    differ = [text for text, a, b in zip(TEXTS, with_screens, without) if a != b]
    assert not differ, f"{len(differ)} texts lose findings to a screen; the first:\n{differ[0]}"
    assert sum(map(len, without)) > 200  # the texts do hold findings to lose


@pytest.mark.parametrize("rule", [rule for rule in all_rules() if "screen" in rule.__dict__], ids=lambda rule: rule.code)
def test_a_screen_turns_files_away(rule):
    """A screen is finer than its trigger: some VALID example the trigger
    matches is turned away before libcst parses it."""
    import ast

    from fixdev.engine.rule import Screening

    turned_away = [code for code in rule.VALID if rule.might_match(code) and not rule.screen(Screening(code, ast.parse(code)))]
    assert turned_away or not any(rule.might_match(code) for code in rule.VALID), rule.code
