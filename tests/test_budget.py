"""fixdev.engine.budget: a file over the memory budget is refused, before libcst parses it, with one error line and exit 2."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixdev.engine.budget import MAX_NODES, count_nodes, node_limit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def generated(lines: int) -> str:
    """The issue's file, smaller: a .cuda() finding with a fix on every line."""
    return "import torch\n\n" + "".join(f"x{i} = torch.zeros(3).cuda()\n" for i in range(lines))


def fixdev(cwd: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "FIXDEV_CACHE_DIR": str(cwd / ".cache")}
    env.pop("FIXDEV_MAX_NODES", None)
    if limit is not None:
        env["FIXDEV_MAX_NODES"] = str(limit)
    return subprocess.run([sys.executable, "-m", "fixdev", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode", [["--check"], ["--check", "--output-format", "json"], ["--diff"], ["--apply"]], ids=" ".join)
def test_a_file_over_the_budget_is_one_error_line_and_exit_2(tmp_path, mode):
    text = generated(100)
    path = tmp_path / "gen.py"
    path.write_text(text)
    nodes = count_nodes(ast.parse(text))
    done = fixdev(tmp_path, *mode, "gen.py", limit=nodes - 1)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"gen.py: error: too large to fix ({nodes:,} nodes; the limit is {nodes - 1:,})"]
    assert done.stdout.strip() in ("", "[]")  # no finding: only libcst's visitors make them
    assert path.read_text() == text


def test_at_the_limit_the_file_is_fixed_and_a_refusal_is_not_cached(tmp_path):
    text = generated(100)
    (tmp_path / "gen.py").write_text(text)
    nodes = count_nodes(ast.parse(text))
    refused = fixdev(tmp_path, "--check", "--output-format", "concise", "gen.py", limit=nodes - 1)
    assert refused.returncode == 2
    # the same file, the cache kept: a limit it fits now checks it
    checked = fixdev(tmp_path, "--check", "--output-format", "concise", "gen.py", limit=nodes)
    assert checked.returncode == 1
    assert checked.stdout.count("gen.py:") == 100
    fixed = fixdev(tmp_path, "--apply", "gen.py", limit=nodes)
    assert fixed.returncode == 0
    assert ".cuda()" not in (tmp_path / "gen.py").read_text()


def test_the_limit_is_the_budget_unless_the_tests_set_it(monkeypatch):
    monkeypatch.delenv("FIXDEV_MAX_NODES", raising=False)
    assert node_limit() == MAX_NODES
    monkeypatch.setenv("FIXDEV_MAX_NODES", "7")
    assert node_limit() == 7
    monkeypatch.setenv("FIXDEV_MAX_NODES", "many")
    assert node_limit() == MAX_NODES


@pytest.mark.parametrize(
    "text",
    ["x", "-x", "-" * 40 + "x", "~-~-x\n" * 5, "a+b+c+d", "a<b<c<d", "not x", "x\n" * 20, "f()", "[[[]]]", "a[:]", "a[:,::]", 'f"{x}{y!r}"', "lambda: 0", "*a, = b", "f(**k)", ""],
)
def test_a_text_has_at_most_two_nodes_a_character(text):
    """``check`` counts nothing for a text of c characters when 2c + 2 is
    within the limit: that bound must hold for the densest code."""
    assert count_nodes(ast.parse(text)) <= 2 * len(text) + 2


def test_the_bound_holds_on_every_fixture():
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        assert count_nodes(tree) <= 2 * len(text) + 2, path


def test_count_nodes_leaves_out_the_load_and_store_markers():
    tree = ast.parse("a.b = c")
    # Module, Assign, Attribute, Name a, Name c: ast.walk adds a Store and two Loads
    assert count_nodes(tree) == 5
    assert sum(1 for _ in ast.walk(tree)) == 8
