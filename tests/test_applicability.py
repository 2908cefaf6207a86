"""Fix applicability, as Ruff has it, the way a user meets it on the command
line: ``--apply`` applies safe fixes (only the device changes), unsafe ones
(dtype, RNG stream, state-dict keys may change) only with ``--unsafe-fixes``
or ``[tool.fixdev] unsafe-fixes = true``; the output says which is which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixdev.engine.registry import all_rules

from tests.conftest import FIXTURES, run_fixdev

# One unsafe fix (like-factory: ones_like takes x's dtype) and one safe fix
# (cuda-call: only the device changes) in one file.
TWO_FIXES = """\
import torch


def blank(x):
    return x + torch.ones(x.shape)


def move(x):
    y = x.cuda()
    return y
"""
UNSAFE_FIXED = "    return x + torch.ones_like(x)\n"
SAFE_FIXED = "    y = x.to(device)\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TWO_FIXES)
    return tmp_path


def test_apply_applies_safe_fixes_and_leaves_unsafe_ones(tree: Path) -> None:
    done = run_fixdev("--apply", "train.py", cwd=tree)
    text = (tree / "train.py").read_text()
    assert SAFE_FIXED in text and UNSAFE_FIXED not in text and "torch.ones(x.shape)" in text
    assert done.returncode == 1  # the unsafe one remains
    assert "1 hidden fix can be enabled with --unsafe-fixes" in done.stderr.decode()


def test_unsafe_fixes_flag_applies_both(tree: Path) -> None:
    done = run_fixdev("--apply", "--unsafe-fixes", "train.py", cwd=tree)
    text = (tree / "train.py").read_text()
    assert SAFE_FIXED in text and UNSAFE_FIXED in text
    assert done.returncode == 0, done.stderr.decode()


def test_configuration_turns_unsafe_fixes_on_and_the_flag_off_again(tree: Path) -> None:
    (tree / "pyproject.toml").write_text("[tool.fixdev]\nunsafe-fixes = true\n")
    off = run_fixdev("--diff", "--no-unsafe-fixes", "train.py", cwd=tree).stdout.decode()
    on = run_fixdev("--diff", "train.py", cwd=tree).stdout.decode()
    assert "+    return x + torch.ones_like(x)" in on and "+    return x + torch.ones_like(x)" not in off
    assert "+    y = x.to(device)" in on and "+    y = x.to(device)" in off


def test_a_bad_unsafe_fixes_value_is_one_error_line(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.fixdev]\nunsafe-fixes = "yes"\n')
    done = run_fixdev("--check", "train.py", cwd=tree)
    err = done.stderr.decode()
    assert done.returncode == 2 and "unsafe-fixes must be true or false" in err and "Traceback" not in err


def test_the_fix_mark_shows_what_apply_applies(tree: Path) -> None:
    lines = run_fixdev("--check", "--output-format", "concise", "train.py", cwd=tree).stdout.decode().splitlines()
    marks = {line.split(": ")[1].split()[0]: "[*]" in line for line in lines}
    assert marks == {"FDV101": False, "FDV104": True}
    lines = run_fixdev("--check", "--unsafe-fixes", "--output-format", "concise", "train.py", cwd=tree).stdout.decode().splitlines()
    assert all("[*]" in line for line in lines) and len(lines) == 2
    full = run_fixdev("--check", "train.py", cwd=tree).stdout.decode()
    assert "help: Use `ones_like` (unsafe fix: applied with --unsafe-fixes)" in full


def test_json_and_sarif_carry_each_fixs_applicability(tree: Path) -> None:
    items = json.loads(run_fixdev("--check", "--output-format", "json", "train.py", cwd=tree).stdout)
    assert {item["code"]: item["fix"]["applicability"] for item in items} == {"FDV101": "unsafe", "FDV104": "safe"}
    sarif = json.loads(run_fixdev("--check", "--output-format", "sarif", "train.py", cwd=tree).stdout)
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"]: r["properties"]["applicability"] for r in results} == {"FDV101": "unsafe", "FDV104": "safe"}


def test_an_unsafe_fix_the_rule_decides_per_fix(tmp_path: Path) -> None:
    # factory-device: device= on a random factory draws from the device's
    # generator (unsafe); on torch.zeros only the device changes (safe).
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n        noise = torch.randn(x.size(0), 4)\n"
        "        pad = torch.zeros(x.size(0), 4)\n        return self.fc(x) + noise + pad\n"
    )
    items = json.loads(run_fixdev("--check", "--select", "FDV102", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    by_line = {item["location"]["row"]: item["fix"]["applicability"] for item in items}
    assert by_line == {11: "unsafe", 12: "safe"}


def test_a_move_added_to_a_classs_own_to_is_unsafe(tmp_path: Path) -> None:
    # constant-buffer: `.cuda()`/`.cpu()`/`.half()` go through `_apply`, not
    # the class's own `to`, so the added move is never safe to apply alone.
    source = (FIXTURES / "constant-buffer" / "own_to_misses_one.before.py").read_text()
    (tmp_path / "m.py").write_text(source)
    items = json.loads(run_fixdev("--check", "--select", "FDV103", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert [item["fix"]["applicability"] for item in items] == ["unsafe"]
    run_fixdev("--apply", "--select", "FDV103", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text() == source
    doc = next(rule for rule in all_rules() if rule.code == "FDV103").doc()
    assert "_apply" in doc.split("## Fix safety", 1)[1].split("##", 1)[0]


def test_each_rule_with_unsafe_fixes_says_so_in_its_fix_safety():
    for rule in all_rules():
        doc = rule.doc()
        section = doc.split("## Fix safety", 1)[1].split("##", 1)[0] if "## Fix safety" in doc else ""
        if rule.fix_applicability == "unsafe":
            assert "unsafe" in section, f"{rule.code}: its fixes are unsafe, its Fix safety must say so"


def test_a_dropped_move_is_safe_only_when_its_argument_is_a_device(tmp_path: Path) -> None:
    # discarded-to: `x.to(orig_dtype)` made effective changes the dtype (unsafe;
    # a real rewrite on timm was marked safe); `x.to(device)` only the device.
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(x, orig_dtype, device):\n    y = x.float()\n    y.to(orig_dtype)\n    y.to(device)\n"
        "    y.to(x.device)\n    y.half()\n    return y\n"
    )
    items = json.loads(run_fixdev("--check", "--select", "FDV106", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    by_line = {item["location"]["row"]: item["fix"]["applicability"] for item in items}
    assert by_line == {6: "unsafe", 7: "safe", 8: "safe", 9: "unsafe"}
