"""Every rule's own VALID and INVALID examples, run through the engine."""

from __future__ import annotations

import pytest

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules

VALID = [pytest.param(rule, code, id=f"{rule.code}-valid-{i}") for rule in all_rules() for i, code in enumerate(rule.VALID)]
INVALID = [pytest.param(rule, case, id=f"{rule.code}-invalid-{i}") for rule in all_rules() for i, case in enumerate(rule.INVALID)]


def test_every_rule_has_examples_and_docs():
    for rule in all_rules():
        assert len(rule.VALID) >= 3 and len(rule.INVALID) >= 3, rule.code
        for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety", "## When it stays silent"):
            assert heading in rule.doc(), (rule.code, heading)


def _rules(rule):
    """The rule alone; a rule that judges the other rules' ``# noqa``
    (unused-noqa) with all of them, since what they find decides."""
    return all_rules() if rule.judges_noqa else [rule]


@pytest.mark.parametrize("rule, code", VALID)
def test_valid_example_is_not_flagged(rule, code):
    assert Engine(_rules(rule)).lint(code) == []


@pytest.mark.parametrize("rule, case", INVALID)
def test_invalid_example_is_flagged_and_fixed(rule, case):
    engine = Engine(_rules(rule), unsafe_fixes=True)  # every example shows its fix, safe or not
    findings = engine.lint(case.code)
    assert findings, "expected a finding"
    assert all(f.code == rule.code for f in findings)
    outcome = engine.fix(case.code)
    if case.fixed is None:
        assert all(f.fix is None for f in findings)
        assert outcome.text == case.code
    else:
        assert outcome.text == case.fixed
        assert engine.fix(outcome.text).text == outcome.text, "a second run must change nothing"


def test_a_device_name_rebound_by_a_loop_is_not_reused():
    from fixdev.codemods.cuda_call import CudaCall
    from fixdev.engine.core import Engine

    src = "import torch\ndevice = torch.device('cuda')\nfor device in devices:\n    pass\nx = y.cuda()\n"
    fixed = Engine([CudaCall]).fix(src).text
    assert "x = y.to(torch_device)" in fixed
