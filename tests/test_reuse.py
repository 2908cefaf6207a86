"""What the language server keeps from one version of a file to the next
(fixdev.engine.ast_reuse: CPython's nodes and what is read off them;
fixdev.analysis.flow.carry: functions' summaries) gives the findings of a
fresh analysis, messages and fixes included, edit after edit: edits to the
imports, the device variable, a callee, a class's helper, module-level code
that moves a model or stops the script, and the function being typed in."""

from __future__ import annotations

import ast

from hypothesis import given, settings, strategies as st

from fixdev.analysis.flow import FileFlow, carry
from fixdev.engine import ast_reuse
from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.reparse import ParseCache, reusing
from fixdev.engine.source import SourceError

# A training script in slots: each slot is one of its variants. The script's
# other lines never change, so their statements are kept between versions.
SLOTS: list[list[str]] = [
    ["import torch\n", "import torch as th\ntorch = th\n", "import numpy as torch\n"],
    ["import torch.nn as nn\n", "from torch import nn\n"],
    ["", "from torch import *\n"],
    [
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
        'device = "cpu"\n',
        'device = torch.device("cuda")\n',
        "device = None\n",
    ],
    ["\n\nclass Scaler(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(4, 4)\n        self._build()\n\n    def _build(self):\n"],
    [
        "        self.scale = torch.ones(4)\n",
        "        self.register_buffer('scale', torch.ones(4))\n",
        "        self.scale = nn.Parameter(torch.ones(4))\n",
    ],
    ["\n    def forward(self, x):\n        return self.lin(x) * self.scale\n\n\ndef make_batch(n):\n"],
    ["", "    if n > 100:\n        return make_batch(n - 1)\n", "    global device\n    device = 'cpu'\n"],
    [
        "    return torch.zeros(n, 4)\n",
        "    return torch.zeros(n, 4, device=device)\n",
        "    return torch.randn(n, 4).to(device)\n",
        "    return n\n",
    ],
    ["\n\ndef score(out):\n"],
    ["    return out.sum().item()\n", "    return out * 2\n", "    return out.cpu()\n", "    return out + torch.zeros(1)\n"],
    ["\n\ndef evaluate(model, batch):\n    out = model(batch)\n    return score(out)\n\n\nshared = Scaler()\n"],
    ["\n\ndef main():\n"],
    ["    model = Scaler().to(device)\n", "    model = Scaler()\n", "    model = Scaler().cuda()\n", "    model = shared\n"],
    ["    x = make_batch(8)\n", "    x = make_batch(8).to(device)\n", "    x = torch.zeros(8, 4)\n", "    x = torch.zeros(8, 4).cuda()\n"],
    ["    y = model(x)\n    print(evaluate(model, x), y)\n"],
    ["", "    z = torch.ones(3).cuda() + torch.ones(3)\n", "    z = evaluate(model.cuda(), x.cuda()) * torch.ones(4)\n"],
    ["\n\n", "\n\nshared.cuda()\n", "\n\nshared.to(device)\n", "\n\nraise SystemExit(0)\n", "\n\nshared._build()\n"],
    ["if __name__ == '__main__':\n    main()\n"],
]


def _script(choice: list[int]) -> str:
    return "".join(variants[i % len(variants)] for variants, i in zip(SLOTS, choice))


def _outcome(engine: Engine, text: str):
    try:
        return engine.lint(text)
    except SourceError as exc:
        return str(exc)


STEPS = st.lists(st.tuples(st.integers(0, len(SLOTS) - 1), st.integers(0, 4)), min_size=1, max_size=10)


@settings(max_examples=80, deadline=None)
@given(STEPS)
def test_edits_to_what_functions_read_keep_the_findings_of_a_fresh_analysis(steps):
    engine = Engine(all_rules())
    cache = ParseCache()
    choice = [0] * len(SLOTS)
    with reusing(cache):
        _outcome(engine, _script(choice))
    for slot, variant in steps:
        choice[slot] = variant
        text = _script(choice)
        with reusing(cache):
            kept = _outcome(engine, text)
        assert kept == _outcome(engine, text), text


TYPED = ["x", " ", "\n", "    ", "#", "(", ")", ".cuda()", "torch.zeros(3)", "device", " = ", ":", "'cuda'", "make_batch", "shared", "global device\n    "]
KEYS = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.booleans(), st.sampled_from(TYPED)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=len(SLOTS), max_size=len(SLOTS)), KEYS, st.booleans())
def test_typing_anywhere_keeps_the_findings_of_a_fresh_analysis(choice, keys, rebuilt):
    """``rebuilt``: every def and class typed in is made from its last
    version (``AstReuse._rebuilt``, from one line up rather than 40)."""
    _INNER_LINES = ast_reuse._INNER_LINES
    ast_reuse._INNER_LINES = 1 if rebuilt else _INNER_LINES
    try:
        _typing_keeps_the_findings(choice, keys)
    finally:
        ast_reuse._INNER_LINES = _INNER_LINES


def _typing_keeps_the_findings(choice, keys):
    engine = Engine(all_rules())
    cache = ParseCache()
    text = _script(choice)
    with reusing(cache):
        _outcome(engine, text)
    for where, typing, typed in keys:
        at = int(where * len(text))
        text = text[:at] + typed + text[at:] if typing else text[:at] + text[at + len(typed) :]
        with reusing(cache):
            kept = _outcome(engine, text)
        assert kept == _outcome(engine, text), text


def _flows(*texts: str) -> list[FileFlow]:
    """The flows of ``texts`` as the language server makes them, one version after another."""
    cache = ParseCache()
    flows = []
    with reusing(cache), ast_reuse.walking():
        for text in texts:
            tree = ast_reuse.splice(text, ast.parse(text))
            flow = FileFlow(tree, text=text)
            flow.sinks()
            flows.append(flow)
    return flows


def _function(flow: FileFlow, name: str) -> ast.AST:
    return next(node for node in ast.walk(flow.tree) if type(node) is ast.FunctionDef and node.name == name)


BASE = _script([0] * len(SLOTS))


def test_a_function_that_reads_nothing_edited_keeps_its_summary():
    typed = BASE.replace("    y = model(x)\n", "    y = model(x)  # typed\n")
    before, after = _flows(BASE, typed)
    function = _function(after, "make_batch")
    assert function is _function(before, "make_batch")  # the node kept
    assert carry.refusal(before, after, ("sym", function)) is None
    assert after.cache[("sym", function)] is before.cache[("sym", function)]
    # the function typed in is new, and computed anew
    assert _function(after, "main") is not _function(before, "main")


def test_an_edited_device_variable_or_import_invalidates_its_readers():
    device = BASE.replace('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', 'device = "cpu"')
    imported = BASE.replace("import torch\n", "import numpy as torch\n")
    for edited, reader, other in ((device, "main", "make_batch"), (imported, "make_batch", None)):
        before, after = _flows(BASE, edited)
        function = _function(after, reader)
        assert function is _function(before, reader)
        assert carry.refusal(before, after, ("sym", function)) is not None
        assert after.cache[("sym", function)] is not before.cache[("sym", function)]
        if other is not None:  # what does not read the device keeps its summary
            assert after.cache[("sym", _function(after, other))] is before.cache[("sym", _function(before, other))]


def test_a_callee_edited_invalidates_its_callers_not_its_callees():
    edited = BASE.replace("    return torch.zeros(n, 4)\n", "    return torch.zeros(n, 4, device=device)\n")
    before, after = _flows(BASE, edited)
    assert carry.refusal(before, after, ("sym", _function(after, "main"))) is not None
    evaluate = _function(after, "evaluate")
    assert carry.refusal(before, after, ("sym", evaluate)) is None


def test_module_code_that_moves_a_model_invalidates_who_reads_it():
    uses = BASE.replace("    model = Scaler().to(device)\n", "    model = shared\n")
    moved = uses.replace("\n\nif __name__", "\n\nshared.cuda()\nif __name__")
    before, after = _flows(uses, moved)
    main = _function(after, "main")
    assert main is _function(before, "main")
    assert carry.refusal(before, after, ("sym", main)) == "global shared"
    assert carry.refusal(before, after, ("sym", _function(after, "make_batch"))) is None


def test_the_cli_keeps_nothing():
    flow = FileFlow(BASE)
    flow.sinks()
    assert ast_reuse.active() is None and flow.carry_units is None


def test_a_statement_keeps_its_node_only_on_the_same_lines():
    reuse = ast_reuse.AstReuse()
    first = reuse.splice(BASE, ast.parse(BASE))
    typed = BASE.replace("    y = model(x)\n", "    y = model(x)  # typed\n")
    second = reuse.splice(typed, ast.parse(typed))
    assert [a is b for a, b in zip(first.body, second.body)].count(False) == 1  # main, typed in
    assert ast.dump(second, include_attributes=True) == ast.dump(ast.parse(typed), include_attributes=True)
    moved = "\n" + typed  # every statement one line lower: none is kept
    third = reuse.splice(moved, ast.parse(moved))
    assert not any(a is b for a, b in zip(second.body, third.body))
    assert ast.dump(third, include_attributes=True) == ast.dump(ast.parse(moved), include_attributes=True)


def test_what_is_kept_is_bounded(monkeypatch):
    monkeypatch.setattr(ast_reuse, "_NODES", 50)
    cache = ParseCache()
    engine = Engine(all_rules())
    with reusing(cache):
        for i in range(4):
            engine.lint(BASE.replace("    y = model(x)\n", f"    y = model(x)  # {i}\n"))
    reuse = cache.by_node[("fixdev.engine.ast_reuse",)]
    nodes = sum(1 for _ in ast.walk(ast.parse(BASE)))
    # started over before the last version: what it kept is that version's at most
    assert len(reuse.children) <= nodes and len(reuse.memo) <= nodes


def test_the_screens_index_put_together_is_one_pass_over_the_whole_tree():
    from fixdev.analysis.file_analysis import _composed_index, _statement_index

    for text in (BASE, _script([1, 1, 0, 2, 0, 2, 0, 1, 2, 0, 3, 0, 0, 2, 3, 0, 2, 1, 0])):
        tree = ast.parse(text)
        (index, parents), (whole, whole_parents) = _composed_index(tree), _statement_index(tree)
        assert index == whole and parents == whole_parents
        assert [list(v) for v in index.calls.values()] == [list(v) for v in whole.calls.values()] and list(index.calls) == list(whole.calls)


def test_the_module_lists_put_together_by_statement_are_one_walks():
    """``placement``'s own statements and torch imports of a module, made a
    top-level statement at a time, are those one walk of it gives, in order."""
    import libcst as cst

    from fixdev.analysis import placement
    from tests.conftest import FIXTURES, ROOT

    paths = sorted(FIXTURES.glob("*/*.py")) + sorted((ROOT / "tests" / "programs").rglob("*.py"))
    texts = [BASE] + [path.read_text(encoding="utf-8") for path in paths]
    for text in texts:
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        assert [id(n) for n in placement._own_statement_list(module)] == [id(n) for n in placement.own_statements(module)]
        assert placement._torch_imports(module) == placement._torch_imports_of(module)


def test_the_node_count_put_together_by_statement_is_the_whole_trees(monkeypatch):
    """The size check's count (``budget``) in the language server, kept per
    top-level statement, is ``count_nodes`` of the whole tree version after
    version, and refuses a file over the limit as the CLI does."""
    from fixdev.engine import budget
    from fixdev.engine.core import _node_count

    long = "import torch\n\n\n@dec\nclass Long:\n    x: int = 1\n\n    def long(self, a: int = 2) -> int:\n" + "".join(f"        x{n} = torch.zeros({n}, a)[0]\n" for n in range(50)) + "        return x1\n"
    texts = [BASE, BASE.replace("    y = model(x)\n", "    y = model(x)  # typed\n"), "x = 1  # type: ignore\n" + BASE, _script([1, 1, 1, 2, 0, 2, 0, 1, 2, 0, 3, 0, 0, 2, 3, 0, 2, 1, 0]), long, long.replace("x20 =", "y20 =")]
    cache = ParseCache()
    with reusing(cache), ast_reuse.walking():
        for text in texts + texts:
            tree = ast_reuse.splice(text, ast.parse(text, type_comments=True))
            assert _node_count(tree) == budget.count_nodes(tree) == budget.count_nodes(ast.parse(text, type_comments=True)), text
    whole = budget.count_nodes(ast.parse(BASE))
    monkeypatch.setattr(budget, "node_limit", lambda: whole - 1)
    with reusing(cache):
        assert isinstance(_outcome(Engine(all_rules()), BASE), str)
    monkeypatch.setattr(budget, "node_limit", lambda: whole)
    with reusing(cache):
        assert not isinstance(_outcome(Engine(all_rules()), BASE), str)


PIECES = ["x", " ", "\n", "    ", "#", "(", ")", "[", "'", '"""', "\\\n", "@dec\n", "def f():\n", "class C:\n", "if a:\n    pass\n", "y = 1; z = 2\n", "\n\n", "else:\n", "\t", "é", "\r\n", "\f"]


def _parsed(reuse: ast_reuse.AstReuse, text: str) -> str:
    from fixdev.engine.core import _cpython_parse

    tree, error = reuse.parse(text, _cpython_parse)
    return ast.dump(tree, include_attributes=True) if tree is not None else f"{error.msg} {error.lineno}"


def _whole(text: str) -> str:
    from fixdev.engine.core import _cpython_parse

    tree, error = _cpython_parse(text)
    return ast.dump(tree, include_attributes=True) if tree is not None else f"{error.msg} {error.lineno}"


def _typed_and_parsed(reuse: ast_reuse.AstReuse, text: str, keys) -> None:
    """Types ``keys`` (where, typed or taken away, what) into ``text``; each
    version's tree from ``reuse`` is the whole parse's, or the same error."""
    assert _parsed(reuse, text) == _whole(text)
    for where, typing, typed in keys:
        at = int(where * len(text))
        text = text[:at] + typed + text[at:] if typing else text[:at] + text[at + len(typed) :]
        assert _parsed(reuse, text) == _whole(text), text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=len(SLOTS), max_size=len(SLOTS)), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.booleans(), st.sampled_from(PIECES)), min_size=1, max_size=10))
def test_the_parse_in_pieces_is_the_whole_parse(choice, keys):
    """CPython's tree made in pieces against the version before
    (``AstReuse.parse``) is the whole text's, positions included, or the
    same error, edit after edit: lines added and taken away, strings and
    brackets opened, blocks, decorators, a; b, line continuations."""
    reuse = ast_reuse.AstReuse()
    _typed_and_parsed(reuse, _script(choice), keys)


def test_the_parse_in_pieces_parses_only_the_statement_typed_in():
    reuse = ast_reuse.AstReuse()
    _parsed(reuse, BASE)
    assert reuse.parsed == 0
    typed = BASE.replace("    y = model(x)\n", "    y = model(x)  # typed\n")
    assert _parsed(reuse, typed) == _whole(typed)
    main = typed[typed.index("def main") : typed.index("\n\n\n", typed.index("def main"))]
    assert len(main) <= reuse.parsed < len(main) + 10  # main() and the blank lines after it
    probed = typed + "probe = torch.zeros(1).cuda()\n"  # typed at the end too: the statements between are kept
    before = reuse.parsed
    assert _parsed(reuse, probed) == _whole(probed)
    assert reuse.parsed - before < 100
    moved = typed.replace("    y = model(x)  # typed\n", "    y = model(x)\n    # a line more\n")
    before = reuse.parsed
    assert _parsed(reuse, moved) == _whole(moved)
    assert reuse.parsed - before == len(moved) - moved.index("def main")  # from main() to the end: the rest moved a line down
    for text in ("", "import torch\n", "x = (\n", "import torch\n"):
        assert _parsed(reuse, text) == _whole(text)


def test_the_parse_in_pieces_on_real_files():
    """The fixtures' files, each typed into at a few places after another
    (the reuse's last text is the file before, or another file)."""
    import random

    from tests.conftest import FIXTURES

    chooser = random.Random(28)
    reuse = ast_reuse.AstReuse()
    for path in sorted(FIXTURES.glob("*/*.py"))[::7]:
        text = path.read_text(encoding="utf-8")
        assert _parsed(reuse, text) == _whole(text), path
        for _ in range(3):
            at = chooser.randrange(len(text) + 1)
            text = text[:at] + chooser.choice(PIECES) + text[at:]
            assert _parsed(reuse, text) == _whole(text), (path, at)


TRIGGERED = ["cuda", ".cuda()", "device", "'cuda'", "pin_memory", ".to(x)", "numpy", "# noqa: FDV104", "class ", "def ", "\n", " ", "x", "(", ")", ".shape", "optim"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=len(SLOTS), max_size=len(SLOTS)), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.booleans(), st.sampled_from(TRIGGERED + PIECES)), min_size=1, max_size=12))
def test_triggers_tried_where_they_matched_before_answer_as_a_search(choice, keys):
    """``source.matches`` tries each trigger first where it matched the
    text before (moved by the change in length): edit after edit, every
    rule's trigger answers as a search of the whole text."""
    import re

    from fixdev.engine.registry import RuleInfo, _compiled
    from fixdev.engine.source import matches

    patterns = [branch for rule in all_rules() for branches in _compiled(RuleInfo.of(rule).trigger if not isinstance(rule, RuleInfo) else rule.trigger) for branch in branches]
    patterns += [re.compile(source) for source in (r"(?m)^x", r"\bx\b", r"(?<=\.)cuda", r"x\Z", r"\Ax", r"cuda(?!\()")]
    text = _script(choice)
    for where, typing, typed in [(0.0, True, "")] + keys:
        at = int(where * len(text))
        text = text[:at] + typed + text[at:] if typing else text[:at] + text[at + len(typed) :]
        for pattern in patterns:
            assert matches(pattern, text) == (pattern.search(text) is not None), (pattern.pattern, text)


def _stopped_after(calls: int):
    """A ``superseded`` that turns true at its ``calls``-th question."""
    asked = [0]

    def superseded() -> bool:
        asked[0] += 1
        return asked[0] >= calls

    return superseded


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=len(SLOTS), max_size=len(SLOTS)), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.booleans(), st.sampled_from(TYPED), st.integers(1, 12)), min_size=1, max_size=8))
def test_an_analysis_stopped_by_a_newer_change_leaves_what_the_next_reuses_sound(choice, keys):
    """The language server stops an analysis whose text a newer change
    replaced (``fixdev.engine.stop``), between the engine's steps: after
    CPython's parse, a screen, libcst's parse, or some nodes into the
    rules' visit. What it kept by then (statements parsed, the flow's facts
    so far) serves the next version: each text typed, first stopped at a
    random step and then analysed in full, gives a fresh analysis's findings."""
    from fixdev.engine.stop import Superseded, stoppable

    engine = Engine(all_rules())
    cache = ParseCache()
    text = _script(choice)
    with reusing(cache):
        _outcome(engine, text)
    for where, typing, typed, calls in keys:
        at = int(where * len(text))
        text = text[:at] + typed + text[at:] if typing else text[:at] + text[at + len(typed) :]
        with reusing(cache), stoppable(_stopped_after(calls)):
            try:
                _outcome(engine, text)
            except Superseded:
                pass
        with reusing(cache):
            kept = _outcome(engine, text)
        assert kept == _outcome(engine, text), text


def test_a_superseded_analysis_stops_and_the_command_line_never_does():
    from fixdev.engine.stop import Superseded, checkpoint, stoppable

    engine = Engine(all_rules())
    text = BASE + "\nprobe = torch.zeros(1).cuda()\n"
    for calls in (1, 2, 3, 5, 8):
        with reusing(ParseCache()), stoppable(_stopped_after(calls)):
            try:
                engine.lint(text)
            except Superseded:
                continue
        raise AssertionError(f"not stopped at the {calls}th question")
    with stoppable(lambda: False):
        assert engine.lint(text) == engine.lint(text)
    checkpoint()  # outside stoppable: nothing to stop


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=len(SLOTS), max_size=len(SLOTS)), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.booleans(), st.sampled_from(PIECES + ["        ", "\tx", "@dec\n    ", "return 1\n", "    def g():\n"])), min_size=1, max_size=10))
def test_a_def_made_from_its_last_version_is_the_whole_parse(choice, keys):
    """Every def and class made from its last version (``AstReuse._rebuilt``,
    here from one line up rather than 40): the tree is the whole text's,
    positions included, or the same error, edit after edit."""
    reuse = ast_reuse.AstReuse()
    reuse.inner_lines = 1
    _typed_and_parsed(reuse, _script(choice), keys)


def test_a_long_function_typed_in_keeps_the_statements_the_edit_did_not_touch():
    body = "".join(f"    x{n} = torch.zeros({n})\n" for n in range(50))
    text = "import torch\n\n\ndef long():\n" + body + "    return x1\n\n\nlong()\n"
    reuse = ast_reuse.AstReuse()
    first = reuse.parse(text, lambda t: (ast.parse(t), None))[0]
    typed = text.replace("    x20 = torch.zeros(20)\n", "    x20 = torch.zeros(20)  # typed\n")
    second = reuse.parse(typed, lambda t: (ast.parse(t), None))[0]
    assert reuse.rebuilt == 1 and ast.dump(second, include_attributes=True) == ast.dump(ast.parse(typed), include_attributes=True)
    old, new = first.body[1].body, second.body[1].body
    assert [a is b for a, b in zip(old, new)] == [n != 20 for n in range(51)]
    assert reuse.parsed < 60  # the one statement
    for edited in (typed.replace("    x21", "\n    x21"), typed.replace("    x30 = ", "      x30 = "), typed.replace("    x40 = torch", "x40 = torch")):
        assert _parsed(reuse, edited) == _whole(edited)  # a line more, an indent off, out of the block: parsed whole


def test_defs_made_from_their_last_version_on_real_files():
    """The fixtures' and test programs' files, edited within lines (a
    comment, a character, a name changed; the line count kept): every def
    and class made from its last version is the whole parse."""
    import random

    from tests.conftest import FIXTURES, ROOT

    chooser = random.Random(2028)
    reuse = ast_reuse.AstReuse()
    reuse.inner_lines = 1
    edits = ["  # typed", "x", "(", ")", " + 1", "'", ":", "\t", "    "]
    paths = sorted(FIXTURES.glob("*/*.py"))[::5] + sorted((ROOT / "tests" / "programs").rglob("*.py"))[::3]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert _parsed(reuse, text) == _whole(text), path
        for _ in range(4):
            lines = text.split("\n")
            row = chooser.randrange(len(lines))
            column = chooser.randrange(len(lines[row]) + 1)
            lines[row] = lines[row][:column] + chooser.choice(edits) + lines[row][column:]
            text = "\n".join(lines)
            assert _parsed(reuse, text) == _whole(text), (path, row)
    assert reuse.rebuilt > 20


def test_a_defs_expression_spans_put_together_by_statement_are_one_walks():
    """``ast_reuse.spans_of`` of a def or class (its header's spans, then
    each body statement's, kept by it) is the walk of the whole statement,
    version after version, methods and nested defs included."""
    from fixdev.analysis.flow import FileFlow

    long = "import torch\n\n\n@dec(1)\nclass Long(Base, metaclass=M):\n    x: int = (1)\n\n    @staticmethod\n    def long(a: int = torch.zeros(2), *b, c=(3), **d) -> int:\n" + "".join(f"        x{n} = torch.zeros({n}, a)[0] + (b)  # é\n" for n in range(50)) + "        def inner(y=x1):\n            return (y)\n        return inner(x1)\n"
    texts = [long, long.replace("x20 = torch", "y20 = torch"), long.replace("# é\n        x30", "# é typed\n        x30"), _script([1, 1, 0, 2, 0, 2, 0, 1, 2, 0, 3, 0, 0, 2, 3, 0, 2, 1, 0])]
    cache = ParseCache()
    with reusing(cache), ast_reuse.walking():
        for text in texts:
            tree, _ = ast_reuse.parse(text, lambda t: (ast.parse(t), None))
            flow = FileFlow(tree, text=text)
            for statement in tree.body:
                base = flow._offset(statement.lineno, 0)
                assert ast_reuse.spans_of(statement, base, flow._offset, flow._relative_spans) == flow._relative_spans(statement, base), text
    assert cache.by_node[("fixdev.engine.ast_reuse",)].rebuilt >= 1
