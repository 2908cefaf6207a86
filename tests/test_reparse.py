"""A module put together from reused top-level statements (fixdev.engine.reparse)
is the module libcst parses from the whole text, and the findings made from it
are the findings of a whole parse, edit after edit."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import given, settings, strategies as st

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.reparse import ParseCache, reusing
from fixdev.engine.source import SourceError, parseable_text

from tests.conftest import FIXTURES, ROOT
from tests.test_spans import SHAPES


def _texts():
    for name, text in SHAPES.items():
        yield pytest.param(text, id=name)
    for path in sorted(FIXTURES.glob("*/*.py")) + sorted((ROOT / "tests" / "programs").rglob("*.py")):
        yield pytest.param(path.read_bytes().decode("utf-8"), id=path.relative_to(ROOT).as_posix())


def _same(module: cst.Module, full: cst.Module) -> bool:
    config = lambda m: (m.default_indent, m.default_newline, m.has_trailing_newline, m.encoding)  # noqa: E731
    return module.deep_equals(full) and config(module) == config(full)


@pytest.mark.parametrize("text", list(_texts()))
def test_the_module_put_together_is_libcsts_own(text):
    text = parseable_text(text.removeprefix("\ufeff"))
    module = ParseCache().parse(text, ast.parse(text))
    if module is not None:  # None: parsed whole by the caller
        assert _same(module, cst.parse_module(text))


def test_an_edit_reparses_only_the_statement_it_changed():
    text = "import torch\n\n\ndef f(x):\n    return x * 2\n\n\ndef g(y):\n    return y + 1\n"
    cache = ParseCache()
    assert cache.parse(text, ast.parse(text)) is not None and cache.parsed == 3
    edited = text.replace("y + 1", "y + torch.ones(3)")
    module = cache.parse(edited, ast.parse(edited))
    assert cache.parsed == 4 and _same(module, cst.parse_module(edited))


def test_a_statement_twice_in_a_text_is_two_trees():
    text = "x = f(1)\ny = 2\nx = f(1)\n"
    cache = ParseCache()
    cache.parse(text, ast.parse(text))
    module = cache.parse(text, ast.parse(text))
    assert module.body[0] is not module.body[2] and _same(module, cst.parse_module(text))


def test_comments_between_statements_go_where_libcst_puts_them():
    text = "def f():\n    x = 1\n    # inside, trailing\n# before g\n\ndef g():\n    pass\n# the end\n"
    module = ParseCache().parse(text, ast.parse(text))
    assert _same(module, cst.parse_module(text))


# Random edits of a program, each analysed with pieces reused from the
# versions before it and from scratch: the same findings, the same fixes.
PROGRAM = [
    "import torch\n",
    "import torch.nn as nn\n",
    "\n",
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
    "model = nn.Linear(3, 2).to(device)\n",
    "# a comment\n",
    "def step(x):\n    mask = torch.ones(x.shape)\n    return model(x * mask)\n",
    "class M(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n",
    "weights = torch.tensor([1.0, 2.0])\n",
    "out = model(torch.randn(4, 3).to(device)) * weights\n",
    "y = torch.randn(2).cuda()\n",
    "if True:\n    z = torch.load('m.pt')\n",
]
LINES = st.lists(st.sampled_from(PROGRAM), min_size=1, max_size=10)


@given(st.lists(LINES, min_size=2, max_size=6))
def test_findings_with_reused_pieces_are_a_whole_parses(versions):
    engine = Engine(all_rules())
    cache = ParseCache()
    for lines in versions:
        text = "".join(lines)
        with reusing(cache):
            reused = engine.lint(text)
        assert reused == engine.lint(text)


# A real-shaped training script (the trainer program the fake-GPU tests run,
# with the rule fixtures' kinds of code after it), edited a keystroke at a
# time where a user types: the findings of each version, made with the trees,
# statement spans and index walks kept from the versions before, are those
# of a fresh analysis, fixes included, and so is a refusal to parse.
SCRIPT = (ROOT / "tests" / "programs" / "robust_trainer.py").read_text(encoding="utf-8") + "".join(PROGRAM)
TYPED = [
    "x", " ", "\n", "    ", "#", "(", ")", ".cuda()", "torch.zeros(3)", "device", " = ", ":", "'cuda'", "\n\n", "  # noqa",
    # lines that change what names mean elsewhere (imports, rebindings, a star import)
    "import torch\n", "torch = None\n", "nn = torch\n", "from torch import *\n", "import torch as nn\n", "    global torch\n",
]


def _edit(text: str, where: float, op: int, typed: str) -> str:
    at = int(where * len(text))
    if op == 0:
        return text[:at] + typed + text[at:]
    if op == 1:
        return text[:at] + text[at + len(typed) :]  # delete as many characters as the key would have typed
    line_begin = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line_end = len(text) if line_end < 0 else line_end + 1
    return text[:line_end] + text[line_begin:line_end] + text[line_end:]  # duplicate the line


def _outcome(engine: Engine, text: str):
    try:
        return engine.lint(text)
    except SourceError as exc:
        return str(exc)


EDITS = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 2), st.sampled_from(TYPED)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(EDITS)
def test_typing_in_a_script_keeps_the_findings_of_a_fresh_analysis(edits):
    engine = Engine(all_rules())
    cache = ParseCache()
    text = SCRIPT
    with reusing(cache):
        _outcome(engine, text)
    for where, op, typed in edits:
        text = _edit(text, where, op, typed)
        with reusing(cache):
            kept = _outcome(engine, text)
        assert kept == _outcome(engine, text)


def test_an_edit_in_a_function_reuses_the_rest():
    """The pieces' codes were checked when parsed: the module put together is
    not generated whole again, and the statements before and after the edit
    are the nodes of the version before (what is kept by node serves)."""
    cache = ParseCache()
    text = SCRIPT
    first = cache.parse(text, ast.parse(text))
    edited = text.replace("total_loss = 0", "total_loss = 0  # typed")
    module = cache.parse(edited, ast.parse(edited))
    again = edited.replace("# typed", "# typed more")
    third = cache.parse(again, ast.parse(again))
    assert cache.checked_whole == 0 and _same(third, cst.parse_module(again))
    assert first is not None and module is not None
    # the class holding the edit and the statement after it are made anew; the others are kept
    assert sum(a is b for a, b in zip(module.body, third.body)) == len(third.body) - 2


def test_a_piece_indented_unlike_the_file_is_checked_whole():
    text = "def f():\n  return 1\n\n\nx = 2\n"  # two-space file; the last piece has no block (four spaces by default)
    cache = ParseCache()
    module = cache.parse(text, ast.parse(text))
    assert cache.checked_whole == 1 and _same(module, cst.parse_module(text))


def test_the_pieces_kept_are_bounded_by_their_text(monkeypatch):
    """Every version of an edited statement is a piece of its own: past a
    bound on their text the cache starts over (what it keeps by node too)."""
    monkeypatch.setattr("fixdev.engine.reparse._CHARACTERS", 200)
    cache = ParseCache()
    body = "def f(x):\n" + "    x = x + 1\n" * 10
    for i in range(10):
        text = body + f"    return x * {i}\n"
        module = cache.parse(text, ast.parse(text))
        assert _same(module, cst.parse_module(text))
    assert len(cache._pieces) < 3 and cache._characters <= 200 + len(text)
