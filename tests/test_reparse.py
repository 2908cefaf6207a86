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


# Edits inside nested blocks: a large compound piece is made from its last
# version, parsing anew only the statements the edit touched
# (``ParseCache.inner_lines`` 0: every compound piece is). The module put
# together is libcst's own parse of the text, whatever the layout around the
# edit: comments and blank lines between inner statements and at the ends of
# blocks, multi-line strings and brackets whose lines a dedent would change,
# tabs, decorators, else/except/finally clauses, one-line compound statements.
def _program(draw, unit: str) -> str:
    counter = iter(range(10_000))

    def block(depth: int, size: int) -> list[str]:
        pad = unit * depth
        out = []
        for _ in range(size):
            kind = draw(st.integers(0, 15 if depth < 3 else 7))
            n = next(counter)
            if kind == 0:
                out.append(f"{pad}x{n} = f({n})\n")
            elif kind == 1:
                out.append(f"{pad}# note {n}\n" if draw(st.booleans()) else "\n")
            elif kind == 2:
                out.append(f"{pad}s{n} = '''first\n{pad}inside {n}\nat zero\n{pad}  '''\n")
            elif kind == 3:
                out.append(f"{pad}y{n} = g(a,\n{pad}   b,\n  c)  # call {n}\n")
            elif kind == 4:
                out.append(f"{pad}if z{n}: w{n} = 1\n")
            elif kind == 5:
                out.append(f"{pad}t{n} = 1; u{n} = 2\n")
            elif kind == 6:
                out.append(f"{pad}return q{n}\n")
            elif kind == 7:
                out.append(f"{pad}# at zero\n"[len(pad):] if draw(st.booleans()) else f"{pad}{unit}# deeper {n}\n")
            elif kind == 8:
                elif_ = [f"{pad}elif e{n}:\n", *block(depth + 1, draw(st.integers(1, 2)))] if draw(st.booleans()) else []
                out += [f"{pad}if c{n}:\n", *block(depth + 1, draw(st.integers(1, 4))), *elif_, f"{pad}else:\n", *block(depth + 1, draw(st.integers(1, 2)))]
            elif kind == 9:
                else_ = [f"{pad}else:\n", *block(depth + 1, 1)] if draw(st.booleans()) else []
                out += [f"{pad}try:\n", *block(depth + 1, draw(st.integers(1, 4))), f"{pad}except E{n}:\n", *block(depth + 1, 2), *else_, f"{pad}finally:\n", *block(depth + 1, 1)]
            elif kind == 10:
                out += [f"{pad}for i{n} in r:\n", *block(depth + 1, draw(st.integers(1, 4)))]
            elif kind == 11:
                out += [f"{pad}@deco({n})\n", f"{pad}def h{n}(p,\n{pad}       q):\n", *block(depth + 1, draw(st.integers(1, 4)))]
            elif kind == 12:
                out += [f"{pad}with m{n} as v:\n", *block(depth + 1, draw(st.integers(1, 3)))]
            elif kind == 13:
                out += [f"{pad}while k{n}:\n", *block(depth + 1, draw(st.integers(1, 3))), f"{pad}    # trailing {n}\n"[: len(pad)] + f"{unit}# footer {n}\n"]
            elif kind == 14:
                out += [f"{pad}class C{n}:\n", *block(depth + 1, draw(st.integers(1, 3)))]
            else:
                out += [f"{pad}async def a{n}():\n", *block(depth + 1, draw(st.integers(1, 3)))]
        if not any(line.strip() and not line.lstrip().startswith("#") for line in out):
            out.append(f"{pad}pass\n")
        return out

    lines = ["import torch\n", "\n", "def main(args):\n", *block(1, draw(st.integers(3, 10))), "\n", "class K:\n", *block(1, draw(st.integers(1, 5))), "# end\n"]
    return "".join(lines)


INNER_TYPED = ["x", " ", "\n", "\t", "    ", "# c", "(", ")", "'''", ":", "\\\n", "if a:\n", "    pass\n", "else:\n", "elif b:\n", "except E:\n", "@d\n", "  # noqa\n", "pass; y"]


@st.composite
def _nested_edits(draw):
    unit = draw(st.sampled_from(["    ", "  ", "\t"]))
    text = _program(draw, unit)
    edits = draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 3), st.sampled_from(INNER_TYPED)), min_size=1, max_size=10))
    return text, edits


def _nested_edit(text: str, where: float, op: int, typed: str) -> str:
    if op == 3:  # re-indent a line
        lines = text.splitlines(keepends=True)
        i = int(where * len(lines))
        return "".join(lines[:i] + [typed.strip(" x#():'\\\n") + lines[i].lstrip(" \t") if typed.isspace() else "  " + lines[i]] + lines[i + 1 :])
    return _edit(text, where, op, typed)


@settings(max_examples=200, deadline=None)
@given(_nested_edits())
def test_edits_inside_nested_blocks_put_together_libcsts_own_module(case):
    text, edits = case
    cache = ParseCache()
    cache.inner_lines = 0
    cache.parse(text, ast.parse(text))
    for where, op, typed in edits:
        edited = _nested_edit(text, where, op, typed)
        try:
            tree, whole = ast.parse(edited), cst.parse_module(edited)
        except (SyntaxError, cst.ParserSyntaxError):
            continue  # an editor's text that does not parse: the engine reports it and keeps nothing
        text = edited
        module = cache.parse(text, tree)
        assert module is None or _same(module, whole)  # None: parsed whole by the caller


def _inner(text: str, edited: str) -> tuple[ParseCache, cst.Module, cst.Module]:
    cache = ParseCache()
    cache.inner_lines = 0
    first = cache.parse(text, ast.parse(text))
    module = cache.parse(edited, ast.parse(edited))
    assert _same(module, cst.parse_module(edited))
    return cache, first, module


NESTED = (
    "import torch\n\n\n"
    "def main(args):\n"
    "    model = build(args)\n"
    "    # the loop\n"
    "\n"
    "    for epoch in range(3):\n"
    "        loss = step(model)\n"
    "        if loss > 1:\n"
    "            print('high')\n"
    "        # end of the loop\n"
    "    doc = '''\n"
    "    kept as typed\n"
    "'''\n"
    "    return model\n"
)


@pytest.mark.parametrize("old, new", [
    ("print('high')", "print('higher')"),  # a statement deep inside
    ("loss = step(model)", "loss = step(model.cuda())"),  # the first line of a block's first statement
    ("    # the loop\n", "    # the loop, typed\n"),  # a comment between statements
    ("        # end of the loop\n", "        # end of the loop!\n"),  # a block's footer
    ("        # end of the loop\n", "# at column 0\n"),  # a comment the next statement takes
    ("kept as typed", "kept as typed, still"),  # a string a dedent would change
    ("    return model\n", "    return model\n    # after\n"),  # lines after the last statement
    ("    model = build(args)\n", "    model = build(args)\n    model.cuda()\n"),  # a statement added
    ("        if loss > 1:\n            print('high')\n", ""),  # one removed
])
def test_an_edit_inside_a_function_is_libcsts_own(old, new):
    assert old in NESTED
    _inner(NESTED, NESTED.replace(old, new, 1))


def test_an_edit_inside_a_function_parses_only_its_statement():
    """The statements around the edit are the old nodes: what is kept by
    node (spans, the index's walks) serves for them."""
    cache, first, module = _inner(NESTED, NESTED.replace("loss = step(model)", "loss = step(model.cuda())"))
    assert cache.inner == 1 and cache.parsed_inner == 1
    old_body, new_body = first.body[1].body.body, module.body[1].body.body
    # the loop is new, the rest kept
    assert old_body[0] is new_body[0] and old_body[1] is not new_body[1] and all(a is b for a, b in zip(old_body[2:], new_body[2:]))
    old_loop, new_loop = old_body[1].body.body, new_body[1].body.body
    assert old_loop[0] is not new_loop[0] and old_loop[1] is new_loop[1]


@pytest.mark.parametrize("text, old, new", [
    ("def f():\n\tif a:\n\t\tx = 1\n\t\ty = 2\n\tz = 3\n", "x = 1", "x = 10"),  # tabs
    ("def f():\n  if a:\n      x = 1\n      y = 2\n  z = 3\n", "x = 1", "x = 10"),  # a block indented unlike the file
    ("class C:\n    @property\n    def p(self):\n        return 1\n\n    @other\n    def q(self):\n        return 2\n", "return 1", "return 11"),
    ("def f():\n    try:\n        x = 1\n        y = 2\n    except E:\n        z = 3\n    else:\n        w = 4\n", "x = 1", "x = (1,\n  2)"),
    ("def f():\n    try:\n        x = 1\n    except E:\n        z = 3\n    else:\n        w = 4\n    finally:\n        v = 5\n", "w = 4", "w = 44"),  # a clause's block
    ("def f():\n    if a:\n        x = 1\n    elif b:\n        y = 2\n    else:\n        z = 3\n", "y = 2", "y = 22"),  # an elif: parsed with its if
    ("def f():\n    for i in r:\n        x = 1\n    else:\n        y = 2\n        # the else's footer\n    z = 3\n", "# the else's footer", "# footer"),
    ("def f():\n    if a: b = 1\n    c = 2\n    d = 3\n", "c = 2", "c = 22"),
    ("def f():\n    if a: b = 1\n    c = 2\n    d = 3\n", "if a: b = 1", "if a: b = 11"),
    ("def f():\n    x = 1\n    y = 2\n    z = 3\n", "y = 2", "y = 2; q = 1"),
    ("def f():\r\n    x = 1\r\n    y = 2\r\n    z = 3\r\n", "y = 2", "y = 3"),
    ("def f():\n    x = 1\n    y = '''a\n  b'''\n    z = 3\n", "  b'''", "  bb'''"),
    ("def f():\n    x = 1\n    y = (2 +\n3)\n    z = 3\n", "3)", "4)"),
])
def test_edits_in_layouts_a_dedent_would_change(text, old, new):
    assert old in text
    _inner(text, text.replace(old, new, 1))


IMPORTING = (
    "import torch\n"
    "def main(args):\n"
    "    import numpy as np\n"
    "    for step in range(3):\n"
    "        from torch import nn\n"
    "        x = np.ones(3)\n"
    "        class Inner:\n"
    "            import os\n"
    "        y = torch.zeros(3, device=x.device)\n"
    "    return y\n"
    "if True:\n"
    "    import torch.nn.functional as F\n"
    "    z = F.relu\n"
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 2), st.sampled_from(TYPED + ["import os\n", "global g\n", "def h(): pass\n"])), min_size=1, max_size=6))
def test_the_index_made_from_kept_walks_is_a_fresh_walks(edits):
    """The index's walks of the statements inside others, kept by node from
    version to version, give the index a walk of the whole tree gives: the
    same nodes in the same order, the same parents, names and imports."""
    from fixdev.engine.rule import FileIndex

    cache = ParseCache()
    cache.inner_lines = 0
    text = IMPORTING + SCRIPT
    for where, op, typed in [(0.0, 0, "")] + edits:
        edited = _edit(text, where, op, typed)
        try:
            tree = ast.parse(edited)
        except SyntaxError:
            continue
        text = edited
        module = cache.parse(parseable_text(text), tree) or cst.parse_module(text)
        with reusing(cache):
            kept = FileIndex(module)
        fresh = FileIndex(module)
        assert kept.order == fresh.order and kept.parents == fresh.parents and kept.classes == fresh.classes
        for name in ("imported", "rebound", "star_import", "names", "_targets", "_top_level", "_scoped", "_star_modules"):
            assert getattr(kept, name) == getattr(fresh, name), name
