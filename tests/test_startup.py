"""Start-up cost: a run over files no enabled rule's trigger matches loads
neither libcst nor any rule body; the rules' metadata comes from the generated
table ``fixdev/rule_table.py``, which must agree with the rules themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixdev.engine import registry
from fixdev.engine.registry import RuleInfo, all_rules

NO_TRIGGER = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n"
CUDA_CALL = "import torch\n\nx = torch.zeros(3).cuda()\n"


def test_the_generated_table_is_current() -> None:
    from fixdev.engine import rule_table

    stale = "fixdev/rule_table.py is stale: regenerate it with `python -m fixdev.engine.registry`"
    assert rule_table.FINGERPRINT == registry.rules_fingerprint(), stale
    assert tuple(RuleInfo(*row) for row in rule_table.RULES) == tuple(RuleInfo.of(rule) for rule in all_rules()), stale


def test_table_entries_load_their_rules_and_match_as_they_do() -> None:
    texts = [NO_TRIGGER, CUDA_CALL, ""]
    for rule in all_rules():
        texts += [*rule.VALID, *(case.code for case in rule.INVALID)]
    for info in registry.rule_infos():
        rule = info.load()
        assert (rule.code, rule.name) == (info.code, info.name)
        assert [info.might_match(text) for text in texts] == [rule.might_match(text) for text in texts], info.code


def _imported(tmp_path: Path, *args: str, cache: bool = False) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Runs fixdev in a fresh interpreter; returns the run and the modules it imported."""
    flags = [] if cache else ["--no-cache"]
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "fixdev", *flags, *args], cwd=tmp_path, capture_output=True, text=True)
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, modules


def _heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] == "libcst" or name.startswith(("fixdev.codemods.", "fixdev.analysis.")) and name != "fixdev.analysis.project"}


def test_a_file_no_trigger_matches_loads_no_libcst_and_no_rule(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(NO_TRIGGER)
    done, modules = _imported(tmp_path, "--check", "plain.py")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No device bugs found." in done.stderr
    assert "fixdev.interfaces.cli" in modules  # the measurement saw the run's imports
    assert not _heavy(modules)


def test_apply_on_such_a_file_changes_nothing_and_loads_nothing(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(NO_TRIGGER)
    done, modules = _imported(tmp_path, "--apply", "plain.py")
    assert done.returncode == 0 and (tmp_path / "plain.py").read_text() == NO_TRIGGER
    assert not _heavy(modules)


def test_a_selection_whose_triggers_do_not_match_loads_nothing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(CUDA_CALL)
    done, modules = _imported(tmp_path, "--check", "--select", "load-map-location", "train.py")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _heavy(modules)


def test_a_file_a_trigger_matches_is_analysed(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(CUDA_CALL)
    done, modules = _imported(tmp_path, "--check", "--output-format", "concise", "train.py")
    assert done.returncode == 1
    assert "FDV104" in done.stdout
    assert "libcst" in modules


@pytest.mark.parametrize("text, message", [("x = (\n", "'(' was never closed"), ("def f(:\n    pass\n", "syntax error at line 1")])
def test_a_syntax_error_without_triggers_is_still_reported(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "broken.py").write_text(text)
    done, _ = _imported(tmp_path, "--check", "broken.py")
    assert done.returncode == 2
    assert f"broken.py: error: " in done.stderr and message in done.stderr


def test_a_syntax_error_is_served_from_the_cache_without_libcst(tmp_path: Path) -> None:
    """A file that does not parse gives the same error until its bytes change
    (the cache key holds the parsers' versions): a warm run reports it again
    without parsing it, so without loading libcst."""
    (tmp_path / "broken.py").write_text("import torch\nx = torch.zeros(3).cuda(\n")
    (tmp_path / "plain.py").write_text(NO_TRIGGER)
    first, modules = _imported(tmp_path, "--check", ".", cache=True)
    assert first.returncode == 2 and "libcst" in modules
    assert "broken.py: error: " in first.stderr and "was never closed" in first.stderr
    again, modules = _imported(tmp_path, "--check", ".", cache=True)
    said = [(run.returncode, run.stdout, [line for line in run.stderr.splitlines() if not line.startswith("import time:")]) for run in (first, again)]
    assert said[0] == said[1]
    assert not _heavy(modules)
    (tmp_path / "broken.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    fixed, _ = _imported(tmp_path, "--check", ".", cache=True)
    assert fixed.returncode == 1 and "FDV104" in fixed.stdout and "broken.py: error" not in fixed.stderr


_COUNT_TRIGGER_TRIES = """
import collections, sys
from fixdev.engine import registry, rule
from fixdev.interfaces import cli
tries = collections.Counter()
def counting(original):
    def might_match(self_or_cls, text):
        tries[(self_or_cls.code, text)] += 1
        return original(self_or_cls, text)
    return might_match
registry.RuleInfo.might_match = counting(registry.RuleInfo.might_match)
rule.Rule.might_match = classmethod(counting(rule.Rule.might_match.__func__))
sys.argv = ["fixdev", *sys.argv[1:]]
try:
    cli.main()
except SystemExit as done:
    code = done.code
original = open("train.py").read() if "--apply" not in sys.argv else ORIGINAL
print("TRIES", max(n for (_, text), n in tries.items() if text == original), len({c for c, _ in tries}), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("mode", ["--check", "--apply"])
def test_each_trigger_is_tried_once_on_a_file(tmp_path: Path, mode: str) -> None:
    """The runner tries the triggers (from the table, before anything is
    loaded) and hands the engine the rules they chose: a file's text is never
    searched twice for the same trigger. A fixed text's triggers are tried anew."""
    text = "import torch\nmodel = torch.load('m.pt')\nx = torch.zeros(3).cuda()\n"
    (tmp_path / "train.py").write_text(text)
    program = _COUNT_TRIGGER_TRIES.replace("ORIGINAL", repr(text))
    done = subprocess.run([sys.executable, "-c", program, mode, "--no-cache", "--jobs", "1", "--output-format", "concise", "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr[-2000:]  # the load has no device to load onto: it remains
    (tries_line,) = [line for line in done.stderr.splitlines() if line.startswith("TRIES")]
    most, rules_tried = map(int, tries_line.split()[1:])
    assert most == 1 and rules_tried == len([info for info in registry.rule_infos() if not info.explicit])  # the default selection
    if mode == "--apply":
        assert (tmp_path / "train.py").read_text() != text  # fixed, then linted again


def test_the_device_flow_loads_without_libcst() -> None:
    """The flow reads CPython's tree only: a run that needs another file's
    facts (its summary made by the flow) and parses nothing with libcst
    (everything cached or screened away) does not pay libcst's import, a
    seventh of a second."""
    done = subprocess.run([sys.executable, "-c", "import sys, fixdev.analysis.flow, fixdev.analysis.project; print(sorted(m for m in sys.modules if m.split('.')[0] == 'libcst'))"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
