"""Rule groups: every rule names the kind of bug it finds, ``--list-rules``
shows the rules under their group's title, and a group name selects its rules
on the command line and in ``[tool.fixdev]``."""

from __future__ import annotations

import json

from fixdev.engine.registry import all_rules
from fixdev.engine.rule import GROUPS

# Finds a bug of each group: FDV101 (mismatch) and FDV104 (cuda-only).
BUGGY = "import torch\n\n\ndef f(x):\n    y = x.cuda()\n    return y * torch.ones(y.shape)\n"


def test_every_rule_has_a_known_group():
    # `group` is declared, not defaulted, on Rule: a new rule without one fails here
    unknown = {rule.code: getattr(rule, "group", None) for rule in all_rules() if getattr(rule, "group", None) not in GROUPS}
    assert not unknown, f"rules without a group from fixdev.engine.rule.GROUPS: {unknown}"


def test_list_rules_groups_the_rules_under_titles(fixdev):
    result = fixdev("--list-rules")
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    seen = {}
    group = None
    for line in lines:
        if line and not line.startswith(" "):
            title = line
            group = next(key for key, text in GROUPS.items() if title == f"{text} ({key})")
        elif line.strip():
            assert group is not None, "a rule before any group's title"
            seen[line.split()[0]] = group
    rules = all_rules()
    assert seen == {rule.code: rule.group for rule in rules}
    # within a group, in code order; groups in GROUPS' order
    order = [line.split()[0] for line in lines if line.startswith(" ")]
    assert order == [rule.code for key in GROUPS for rule in rules if rule.group == key]


def _codes(result) -> set[str]:
    return {item["code"] for item in json.loads(result.stdout)}


def test_a_group_name_selects_its_rules(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    everything = fixdev("--output-format", "json", "--no-cache", "m.py", cwd=tmp_path)
    assert _codes(everything) == {"FDV101", "FDV104"}
    only = fixdev("--output-format", "json", "--no-cache", "--select", "cuda-only", "m.py", cwd=tmp_path)
    assert _codes(only) == {"FDV104"}
    without = fixdev("--output-format", "json", "--no-cache", "--ignore", "cuda-only", "m.py", cwd=tmp_path)
    assert _codes(without) == {"FDV101"}


def test_a_group_name_in_the_configuration(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nignore = ["mismatch"]\n')
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--output-format", "json", "--no-cache", "m.py", cwd=tmp_path)
    assert _codes(result) == {"FDV104"}


def test_an_unknown_group_suggests_the_closest(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--select", "cuda-onyl", "m.py", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err
    assert "did you mean 'cuda-only'?" in err


def test_sarif_rules_carry_their_group(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    log = json.loads(fixdev("--output-format", "sarif", "--no-cache", "m.py", cwd=tmp_path).stdout)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert {rule["id"]: rule["properties"]["group"] for rule in rules} == {rule.code: rule.group for rule in all_rules()}
