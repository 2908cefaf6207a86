"""Properties that hold for any input: fixdev never raises on code it can
parse, its output always parses, a second run changes nothing, an untouched
file is byte-identical, and a changed file differs only where a rule acts."""

from __future__ import annotations

import ast
import difflib
import re
import warnings

import hypothesmith
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.source import LineIndex, SourceError, split_lines

ENGINE = Engine(all_rules())
# Lines a rule may rewrite all contain one of these; new lines are a device
# definition or an import.
TOUCHABLE = re.compile(r"\.cuda\s*\(|\.shape|\.size\s*\(|load|self\.\w+\s*=|\.(?:to|cpu|half|float|double|bfloat16|long|int|bool)\s*\(|\w+\s*\(")
INSERTED = re.compile(r"^(?:|\w+ = \w+\.device\(\"cuda\" if \w+\.cuda\.is_available\(\) else \"cpu\"\)|import torch|from torch import [\w, ]+)\r?\n?$")


def parses(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
            return True
        except (SyntaxError, ValueError):
            return False


def check_fix_properties(text: str) -> None:
    try:
        findings = ENGINE.lint(text)
    except SourceError:
        assume(False)  # not code libcst can take: rejected with a clear error, fine
        return
    outcome = ENGINE.fix(text)
    if not outcome.applied:
        assert outcome.text == text
        return
    assert parses(outcome.text) or not parses(text)
    assert ENGINE.fix(outcome.text).text == outcome.text, "a second run must change nothing"
    assert findings, "nothing is fixed without a finding"
    # Every line the fix changed lies on a line an applied edit covers (edits
    # are reported in the original text's offsets, whatever round made them).
    index = LineIndex(text)
    touched: set[int] = set()
    for finding in outcome.applied:
        for edit in finding.fix.edits:
            first, _ = index.position(edit.start)
            last, _ = index.position(max(edit.start, edit.end - 1))
            touched.update(range(first - 1, last + 1))  # 0-based; an insertion may start a new line
    old, new = split_lines(text), split_lines(outcome.text)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            assert set(range(i1, i2)) <= touched, (old[i1:i2], sorted(touched))
            assert all(TOUCHABLE.search(line) for line in old[i1:i2]), old[i1:i2]
        elif tag == "insert":
            assert i1 in touched or i1 - 1 in touched, (new[j1:j2], sorted(touched))
            assert all(INSERTED.match(line) or TOUCHABLE.search(line) for line in new[j1:j2]), new[j1:j2]


@given(hypothesmith.from_grammar())
def test_any_python_program(source):
    check_fix_properties(source)


# hypothesmith spends some 0.2 s building each of these programs (more than
# fixdev spends on it), and few reach a rule: a third of the profile's examples.
@settings(max_examples=max(10, settings.default.max_examples // 3))
@given(hypothesmith.from_node())
def test_any_python_module_tree(source):
    check_fix_properties(source)


# PyTorch-like programs made of the patterns the rules fix, and of near misses.
names = st.sampled_from(["x", "h", "batch", "inputs", "state", "mask", "w"])
factories = st.sampled_from(["ones", "zeros", "empty", "rand", "randn", "full", "randint", "arange", "tensor", "linspace"])
spaces = st.sampled_from(["", " ", "  "])


@st.composite
def factory_call(draw, torch="torch"):
    name = draw(factories)
    x = draw(names)
    shape = draw(st.sampled_from([f"{x}.shape", f"{x}.size()", f"*{x}.shape", f"{x}.size(0), 3", "3, 4", "[1.0, 2.0]", f"{x}.shape[0]"]))
    extra = draw(st.sampled_from(["", ", dtype=torch.float16", f", device={x}.device", ", requires_grad=True", ", out=buf"]))
    if name == "full":
        return f"{torch}.full({shape}, 0.5{extra})" if not shape.startswith("*") else f"{torch}.full(({x}.shape), 1)"
    if name == "randint":
        return f"{torch}.randint(0, 5, {x}.shape{extra})"
    return f"{torch}.{name}({shape}{extra})"


@st.composite
def statement(draw, indent, in_init=False):
    x, y = draw(names), draw(names)
    kind = draw(st.integers(0, 11))
    s = draw(spaces)
    if kind == 0:
        return f"{indent}{y} = {draw(factory_call())}"
    if kind == 1:
        return f"{indent}{y} = {x} *{s}{draw(factory_call())}"
    if kind == 2:
        return f"{indent}{x} = {x}.cuda({draw(st.sampled_from(['', 'non_blocking=True', '0', 'device=1']))})"
    if kind == 3:
        return f"{indent}{x}.to(device)"
    if kind == 4:
        return f"{indent}{x}.cuda()"
    if kind == 5:
        return f"{indent}{y} = torch.load({draw(st.sampled_from(['path', 'path, map_location=device', 'path, weights_only=True', '**kw']))})"
    if kind == 6 and in_init:
        return f"{indent}self.{y} = {draw(factory_call())}{draw(st.sampled_from(['', '.float()', '.view(1, -1)']))}"
    if kind == 7:
        return f"{indent}{y} = {x}.float(){draw(st.sampled_from(['', '  # noqa', '  # fixdev: ignore[discarded-to]']))}"
    if kind == 8:
        return f"{indent}{x}.half()"
    if kind == 9:
        return f"{indent}{y} = torch.cat([{x}, {draw(factory_call())}])"
    if kind == 10:
        return f"{indent}{y} = self.fc({draw(factory_call())})" if indent.strip() == "" and len(indent) >= 8 else f"{indent}pass"
    return f"{indent}{y} = ({x}.shape, {draw(factory_call())})  # {draw(names)}"


@st.composite
def torch_program(draw):
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    lines = [draw(st.sampled_from(["import torch", "import torch\nimport torch.nn as nn", '"""Doc."""\nimport torch\nfrom torch import nn']))]
    if draw(st.booleans()):
        lines.append('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")')
    lines += ["", "", "class Net(nn.Module):" if "nn" in lines[0] else "class Net(torch.nn.Module):", "    def __init__(self, n=3):"]
    if draw(st.booleans()):
        lines.append("        super().__init__()")
    lines.append("        self.fc = torch.nn.Linear(3, 3)")
    lines += [draw(statement("        ", in_init=True)) for _ in range(draw(st.integers(0, 4)))]
    lines += ["", "    def forward(self, x, batch):"]
    lines += [draw(statement("        ")) for _ in range(draw(st.integers(1, 6)))]
    lines += ["        return x", "", "", "def main(path, inputs, state):"]
    lines += [draw(statement("    ")) for _ in range(draw(st.integers(1, 6)))]
    lines += ["    return inputs"]
    text = newline.join("\n".join(lines).split("\n")) + (newline if draw(st.booleans()) else "")
    return text


@given(torch_program())
def test_torch_like_programs(source):
    assert parses(source)
    check_fix_properties(source)
