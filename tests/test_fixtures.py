"""Every fixture pair, end to end through the CLI, the way a user runs it on a
tree: ``--diff`` writes nothing and shows every rewrite, ``--apply`` turns each
``before`` into its ``after`` byte for byte, a second ``--apply`` changes
nothing, and ``--check`` then reports only the cases meant to be reported."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixdev.engine.registry import all_rules

from tests.conftest import FIXTURES, run_fixdev

CASES = sorted(FIXTURES.glob("*/*.before.py"))


def _after(before: Path) -> Path:
    return before.with_name(before.name.replace(".before.py", ".after.py"))


def _changes(before: Path) -> bool:
    return _after(before).read_bytes() != before.read_bytes()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One copy of every ``before`` file, and the four runs over it."""
    tree = tmp_path_factory.mktemp("fixtures")
    for before in CASES:
        target = tree / before.parent.name / before.name.replace(".before.py", ".py")
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(before, target)
    originals = {p: p.read_bytes() for p in tree.rglob("*.py")}
    # Every fixture shows its rule's fix, safe or unsafe (tests/test_applicability.py
    # checks that --apply alone leaves the unsafe ones), with every rule:
    # unused-noqa (FDV100) too, which only its code or name selects.
    every = ("--extend-select", "FDV100")
    diff = run_fixdev("--diff", "--unsafe-fixes", *every, ".", cwd=tree)
    after_diff = {p: p.read_bytes() for p in tree.rglob("*.py")}
    apply = run_fixdev("--apply", "--unsafe-fixes", *every, ".", cwd=tree)
    after_apply = {p: p.read_bytes() for p in tree.rglob("*.py")}
    again = run_fixdev("--apply", "--unsafe-fixes", *every, ".", cwd=tree)
    after_again = {p: p.read_bytes() for p in tree.rglob("*.py")}
    check = run_fixdev("--check", "--output-format", "concise", *every, ".", cwd=tree)
    return dict(tree=tree, originals=originals, diff=diff, after_diff=after_diff, apply=apply,
                after_apply=after_apply, again=again, after_again=after_again, check=check)


def _copy(runs, before: Path) -> Path:
    return runs["tree"] / before.parent.name / before.name.replace(".before.py", ".py")


@pytest.mark.parametrize("before", CASES, ids=lambda p: f"{p.parent.name}/{p.name.removesuffix('.before.py')}")
def test_fixture_pair(before, runs):
    copy = _copy(runs, before)
    rel = copy.relative_to(runs["tree"]).as_posix()
    assert runs["after_diff"][copy] == before.read_bytes(), "--diff must not write"
    assert (f"--- a/{rel}\n" in runs["diff"].stdout.decode()) == _changes(before)
    assert runs["after_apply"][copy] == _after(before).read_bytes()
    assert runs["after_again"][copy] == _after(before).read_bytes(), "a second run must change nothing"
    reported = [line for line in runs["check"].stdout.decode().splitlines() if line.startswith(f"{rel}:")]
    if "reported_" in before.name:
        assert reported and all("[*]" not in line for line in reported), "reported, without a fix"
    else:
        assert reported == []


def test_exit_codes_of_the_runs(runs):
    assert runs["diff"].returncode == 1
    assert runs["apply"].returncode == 1  # the reported_ cases remain
    assert runs["again"].returncode == 1 and runs["again"].stdout.decode().count("--- a/") == 0
    assert runs["check"].returncode == 1
    for run in ("diff", "apply", "again", "check"):
        assert b"Traceback" not in runs[run].stderr


def test_every_rule_has_enough_fixtures():
    for rule in all_rules():
        pairs = sorted((FIXTURES / rule.name).glob("*.before.py"))
        rewrites = [p for p in pairs if _changes(p)]
        silent = [p for p in pairs if not _changes(p)]
        assert len(pairs) >= 8 and len(rewrites) >= 4 and len(silent) >= 4, rule.name
