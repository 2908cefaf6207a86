"""fixdev uses only libcst's public API, so a libcst release within the pinned
range cannot break it by moving an internal; and what replaced the internals
(character spans from byte spans, indented code for a new node) gives exactly
what regenerating the whole file would."""

from __future__ import annotations

import ast
import re
import sys

import libcst as cst
import pytest
from libcst.metadata import ByteSpanPositionProvider, ParentNodeProvider, PositionProvider

from fixdev.engine.rule import CharSpanProvider, Rule, RuleContext
from fixdev.engine.spans import MetadataWrapper

from tests.conftest import FIXTURES, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SOURCES = sorted([*(ROOT / "fixdev").rglob("*.py"), *(ROOT / "codemods").rglob("*.py")])


# The modules libcst documents; anything else under ``libcst.`` is internal,
# even without an underscore (``libcst.metadata.span_provider``).
PUBLIC = {"libcst", "libcst.metadata", "libcst.matchers", "libcst.helpers", "libcst.display", "libcst.codemod", "libcst.codemod.visitors"}


def _private(dotted: str) -> bool:
    return dotted not in PUBLIC or any(part.startswith("_") for part in dotted.split("."))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_private_libcst_import(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    libcst_names = {"libcst"}  # names bound to libcst modules in this file
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "libcst":
                    libcst_names.add(alias.asname or "libcst")
                    if _private(alias.name):
                        found.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "libcst":
            if _private(node.module):
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
            libcst_names.update(a.asname or a.name for a in node.names if a.name in {"matchers", "metadata"})
    for node in ast.walk(tree):  # cst._nodes..., metadata._private
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in libcst_names:
                found.append(ast.unparse(node))
    assert found == [], f"private libcst API used in {path.name}: {found}"


def test_libcst_requirement_is_a_tested_range_and_ci_runs_both_ends():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = [r for r in project["dependencies"] if re.match(r"libcst\b", r)]
    lowest = re.search(r">=\s*([\d.]+)", requirement)
    assert lowest and re.search(r"<\s*[\d.]+", requirement), f"{requirement!r}: a lower and an upper bound"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^OLDEST_LIBCST={re.escape(lowest.group(1))}\s", ci, re.M), "CI names the oldest libcst accepted"
    assert '"libcst==$OLDEST_LIBCST"' in ci and ci.count("pytest") >= 2, "CI runs the suite with it, and with the newest"


def _context(text: str) -> RuleContext:
    module = cst.parse_module(text)
    assert module.code == text
    return RuleContext(module=module, text=text, wrapper=MetadataWrapper(module, unsafe_skip_copy=True))


class _Probe(Rule):
    code, name, message, trigger = "FDV999", "probe", "probe", "."


NON_ASCII = (
    "# café ✓ 😀\n"
    "größe = 'ünïcode ✓'  # 注释\n"
    "def f(x):\n"
    '    s = """😀\n  ß"""; y = g(größe,\n          x)  # ü\n'
    "    return f'{größe}€' + y\n"
)


@pytest.mark.parametrize("text", [NON_ASCII, re.sub(r"[^\x00-\x7f]", "x", NON_ASCII)], ids=["non-ascii", "ascii"])
def test_char_spans_count_characters(text):
    context = _context(text)
    spans = context.metadata(CharSpanProvider)
    # every node, layout tokens (comments) included: the index leaves those out
    nodes, stack = [], [context.module]
    while stack:
        nodes.append(stack.pop())
        stack.extend(nodes[-1].children)
    leaves = [n for n in nodes if isinstance(n, (cst.Name, cst.SimpleString, cst.Comment, cst.FormattedStringText, cst.Integer))]
    assert len(leaves) > 15
    for node in leaves:
        span = spans[node]
        assert text[span.start : span.start + span.length] == node.value
    # every node: the same place as libcst's line/column positions (columns count characters)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    positions = context.metadata(PositionProvider)
    for node, span in spans.items():
        where = positions[node]
        assert span.start == line_starts[where.start.line - 1] + where.start.column
        assert span.start + span.length == line_starts[where.end.line - 1] + where.end.column


SNIPPETS = {
    "tabs": "import torch\nclass M:\n\tdef f(self, x):\n\t\tif x:\n\t\t\ty = torch.ones(\n\t\t\t\tx.shape,\n\t\t\t)\n\t\treturn y\n",
    "crlf": "import torch\r\ndef f(x):\r\n    y = torch.zeros(\r\n        x.size(),\r\n        dtype=torch.float,\r\n    )\r\n    return y\r\n",
    "multi-line string": 'import torch\ndef f(x):\n    y = g("""a\n  b\n""", torch.ones(\n        x.shape))\n    return y\n',
    "nested blocks": "import torch\nclass A:\n    def f(self, x):\n        for i in x:\n            with g(\n                    i):\n                while h(\n                  i,\n                ):\n                    z = k(i,\n                          i)\n",
    "decorator": "import torch\nclass A:\n    # c\n\n    @dec(torch.ones(\n        3))\n    @other(1)\n    def f(self): pass\n",
    "elif": "import torch\ndef f(x):\n    if x:\n        pass\n    elif torch.ones(\n            x.shape):\n        pass\n    else:\n        q = h(\n          1)\n",
    "non-ascii": "import torch\n# größe ✓ 😀\ndef f(x):\n    s = 'ü'; y = torch.ones(\n        x.shape)  # ✓\n    return y\n",
    "backslash": "import torch\ndef f(x):\n    y = 1 + \\\n        torch.ones(x.shape, \\\n            1)\n",
    "same-line suite": "import torch\ndef f(x):\n    if x: y = torch.ones(\n        x.shape)\n",
    "comments inside": "import torch\ndef f(x):\n    # lead\n\n    y = torch.ones(\n        # inner\n        x.shape)\n",
    "f-string": "import torch\ndef f(x):\n    y = f'{torch.ones(x.shape)!r:>{w(1)}}'\n",
    "default argument": "import torch\ndef f(x=torch.ones(\n        3)):\n    pass\n",
    "no final newline": "import torch\ndef f(x):\n    return torch.ones(\n        x.shape)",
    "imports": "def f():\n    from torch import (\n        ones,\n        zeros,\n    ); g(1)\n    from torch import rand\n    return ones(3)\n",
}
FILES = sorted(FIXTURES.glob("*/*.py"))
# A new node with lines of its own: brackets that continue it, a string that spans lines.
SPREAD = cst.parse_expression('g(\n    """x\n  y""",\n    h(1,\n      2),\n)')


def _cases():
    for name, text in SNIPPETS.items():
        yield pytest.param(text, id=name)
    for path in FILES:
        yield pytest.param(path.read_bytes().decode("utf-8"), id=path.relative_to(FIXTURES).as_posix())


def _has_calls_or_imports(case) -> bool:
    """A text with something the test below replaces (a call, a from-import)."""
    return any(isinstance(n, (ast.Call, ast.ImportFrom)) for n in ast.walk(ast.parse(case.values[0])))


@pytest.mark.parametrize("text", [case for case in _cases() if _has_calls_or_imports(case)])
def test_code_in_place_is_what_regenerating_the_file_gives(text, monkeypatch):
    context = _context(text)
    rule = _Probe(context)
    calls = [n for n in context.index().order if isinstance(n, cst.Call)]
    imports = [n for n in context.index().order if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar)]
    assert calls or imports
    whole_file = Rule._code_in_module

    def not_needed(self, old, new):  # the fast path must do for plain expressions
        raise AssertionError("fell back to regenerating the whole file")

    replacements = [(call, new) for call in calls for new in (call.with_changes(args=[*call.args, cst.Arg(cst.Name("d"), keyword=cst.Name("device"))]), SPREAD)]
    replacements += [(node, node.with_changes(names=[*node.names, cst.ImportAlias(cst.Name("empty"))])) for node in imports]
    for old, new in replacements:
        monkeypatch.setattr(Rule, "_code_in_module", not_needed)
        code = rule._code_in_place(old, new)
        monkeypatch.setattr(Rule, "_code_in_module", whole_file)
        start, end = rule.span(old)
        regenerated = context.module.deep_replace(old, new).code
        assert text[:start] + code + text[end:] == regenerated


@pytest.mark.parametrize("text", [NON_ASCII, *SNIPPETS.values()])
def test_wrapper_resolves_as_libcst_s_without_the_empty_walk(text, monkeypatch):
    """fixdev's wrapper gives libcst's metadata, batched or not, but skips the
    whole-tree walk libcst makes after a provider that does not batch."""
    walks = []
    visit = cst.Module.visit
    monkeypatch.setattr(cst.Module, "visit", lambda self, visitor: walks.append(visitor) or visit(self, visitor))

    def resolve(wrapper_type, provider):
        walks.clear()
        found = wrapper_type(cst.parse_module(text), unsafe_skip_copy=True).resolve(provider)
        return found, len(walks)

    for provider in (ByteSpanPositionProvider, PositionProvider):  # they do not batch
        (ours, our_walks), (theirs, their_walks) = resolve(MetadataWrapper, provider), resolve(cst.MetadataWrapper, provider)
        assert (our_walks, their_walks) == (0, 1)
        assert len(ours) > 10 and sorted(map(repr, ours.values())) == sorted(map(repr, theirs.values()))
    (ours, our_walks), (theirs, their_walks) = resolve(MetadataWrapper, ParentNodeProvider), resolve(cst.MetadataWrapper, ParentNodeProvider)
    assert our_walks == their_walks > 0 and len(ours) == len(theirs) > 10
