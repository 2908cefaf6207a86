"""Spans found a statement at a time (fixdev.engine.spans) are the spans libcst gives
for the whole module, and where the two trees do not line up they are the
whole module's, checked as before."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.rule import CharSpanProvider, RuleContext
from fixdev.engine.spans import MetadataWrapper
from fixdev.engine.source import SourceError, parseable_text

from tests.conftest import FIXTURES, ROOT
from tests.test_libcst_api import NON_ASCII, SNIPPETS

SHAPES = {
    "decorators": "import torch\nclass A:\n    @staticmethod\n    @ dec(torch.ones(\n        3))  # c\n    def f(x):\n        return torch.ones(x.shape)\n",
    "elif and else": "import torch\nif a:\n    x = 1\nelif b(torch.ones(2)):\n    x = 2\nelif c:\n    pass\nelse:\n    x = torch.zeros(3)\n",
    "try": "try:\n    import torch\nexcept ImportError as e:  # c\n    torch = None\nelse:\n    y = 1\nfinally:\n    z = f(2)\n",
    "loops": "for i in range(3):\n    x = f(i)\nelse:\n    y = g(1)\nwhile h(2):\n    break\nelse:\n    pass\nasync def k():\n    async for a in b():\n        async with c() as d:\n            await e(d)\n",
    "match": "match f(x):\n    case [a, b]:\n        y = g(a)\n    case {'k': v}:\n        pass\n    case _:\n        z = h(1)\n",
    "one-line bodies": "if x: y = f(1); z = g(2)\nclass C: pass\ndef d(): return h(3)\nwhile w(): pass\n",
    "semicolons": "a = f(1); b = g(2)\nc = h(3);\n",
    "comments": "# head\n\nimport torch  # t\n\n# lead\nx = torch.ones(\n    # inner\n    3,  # c\n)  # after\n\n# tail\n",
    "lone cr": "import torch\rx = torch.ones(3)\rif x:\r    y = f(x)\r",
    "tab and spaces": "def f():\n\tif x:\n\t    y = g(1)\n\treturn h(2)\n",
    "deep": "class A:\n    class B:\n        def f(self):\n            with g() as h:\n                for i in h:\n                    if i:\n                        return k(i)\n",
}


def _texts():
    for name, text in {**SNIPPETS, **SHAPES, "non-ascii": NON_ASCII}.items():
        yield pytest.param(text, id=name)
    for path in sorted(FIXTURES.glob("*/*.py")) + sorted((ROOT / "tests" / "programs").rglob("*.py")):
        yield pytest.param(path.read_bytes().decode("utf-8"), id=path.relative_to(ROOT).as_posix())


def _context(text: str) -> RuleContext:
    module = cst.parse_module(parseable_text(text))
    tree = ast.parse(text.removeprefix("\ufeff"))
    return RuleContext(module=module, text=text, wrapper=MetadataWrapper(module, unsafe_skip_copy=True), tree=tree)


@pytest.mark.parametrize("text", list(_texts()))
def test_statement_spans_are_the_whole_module_s(text):
    context = _context(text)
    spans = context.spans()
    other = _context(text)  # another parse: nothing shared
    whole = other.metadata(CharSpanProvider)
    order = context.index().order
    twin = dict(zip(order, other.index().order))
    for node in order:
        if type(node) is cst.Module:
            continue
        span = spans[node]
        assert not spans.whole, f"{type(node).__name__} was not found a statement at a time"
        assert (span.start, span.length) == (whole[twin[node]].start, whole[twin[node]].length), type(node).__name__
    # the questions rules ask in offsets (sites found in CPython's tree)
    fresh = _context(text).spans()
    for node in order:
        span = whole[twin[node]]
        if type(node) is cst.Call:
            assert fresh.call_at(span.start, span.start + span.length) is not None
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            found = fresh.statement_at(span.start)
            assert found is not None and type(found) is type(node) and fresh[found].start == span.start
    assert not fresh.whole


@pytest.mark.parametrize("text", list(_texts()))
def test_header_spans_asked_first_are_the_whole_module_s(text):
    """A def's name, a loop's target, an if's test asked before anything else
    of its statement: the header is positioned alone (a stub body in place of
    the real one), and its spans are still the whole module's."""
    context = _context(text)
    spans = context.spans()
    other = _context(text)
    whole = other.metadata(CharSpanProvider)
    order = context.index().order
    twin = dict(zip(order, other.index().order))
    compound = [n for n in order if isinstance(n, cst.BaseCompoundStatement)]
    rest = [n for n in order if type(n) is not cst.Module and not isinstance(n, cst.BaseCompoundStatement)]
    for node in rest + compound:  # headers are reached before their statements
        span = spans[node]
        assert not spans.whole, f"{type(node).__name__} was not found a statement at a time"
        assert (span.start, span.length) == (whole[twin[node]].start, whole[twin[node]].length), type(node).__name__


def test_nothing_is_positioned_until_asked():
    context = _context(SHAPES["deep"])
    calls = {cst.Module(body=()).code_for_node(n.func): n for n in context.index().order if type(n) is cst.Call}
    spans = context.spans()
    assert SHAPES["deep"][spans[calls["k"]].start :].startswith("k(i)")  # in the innermost statement
    assert len(spans._done) == 1 and calls["g"] not in spans._known


def test_a_byte_order_mark_counts_as_a_character():
    """CPython's tree was not given the mark; the spans are in the text that has it."""
    text = "\ufeffimport torch\nif x:\n    y = torch.ones(3)\n"
    context = _context(text)
    call = next(n for n in context.index().order if type(n) is cst.Call)
    span = context.spans()[call]
    assert text[span.start : span.start + span.length] == "torch.ones(3)"


def test_a_statement_libcst_does_not_reproduce_falls_back_to_the_whole_module():
    # a form feed opens the line: libcst drops it, so the statement's code is
    # not the text there, and the whole module is positioned (and refused)
    text = "import torch\n\x0cy = torch.ones(x.shape)\n"
    spans = _context(text).spans()
    call = next(n for n in spans._context.index().order if type(n) is cst.Call)
    spans[call]
    assert spans.whole
    with pytest.raises(SourceError, match="cannot reproduce"):
        Engine(all_rules()).lint(text)


def test_a_form_feed_elsewhere_does_not_stop_a_finding():
    """Each statement a finding uses is checked where it stands, so a form feed
    opening another line no longer refuses the file; and --apply keeps it."""
    engine = Engine(all_rules(), unsafe_fixes=True)  # FDV101's fix is unsafe
    text = "import torch\n\n\x0cdef g():\n    pass\n\ndef f(x):\n    return torch.ones(x.shape)\n"
    (finding,) = engine.lint(text)
    assert text[finding.start : finding.end] == "torch.ones(x.shape)"
    fixed = engine.fix(text).text
    assert fixed == text.replace("torch.ones(x.shape)", "torch.ones_like(x)")


def test_the_cli_reports_positions_from_statements(tmp_path, fixdev):
    source = "import torch\n# größe ✓\n@dec(1)\ndef f(x):  # ü\n    if x:\n        pass\n    elif x.any():\n        return torch.ones(x.shape) + torch.zeros(x.size())\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    # --unsafe-fixes: FDV101's fix is unsafe ([*] marks what --apply applies).
    done = fixdev("--check", "--unsafe-fixes", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.decode().splitlines() == [
        "m.py:8:16: FDV101 [*] Factory sized by another tensor's shape allocates on the CPU, not on that tensor's device",
        "m.py:8:38: FDV101 [*] Factory sized by another tensor's shape allocates on the CPU, not on that tensor's device",
    ]
    fixdev("--apply", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == source.replace("torch.ones(x.shape)", "torch.ones_like(x)").replace("torch.zeros(x.size())", "torch.zeros_like(x)")
