import dataclasses

import pytest

from fixdev.codemods.cuda_call import CudaCall
from fixdev.codemods.like_factory import LikeFactory
from fixdev.engine.core import Engine, FixConflictError
from fixdev.engine.findings import apply_edits
from fixdev.engine.registry import all_rules
from fixdev.engine.rule import Edit, Rule, dotted
from fixdev.engine.source import SourceError

ALL = Engine(all_rules())
UNSAFE = Engine(all_rules(), unsafe_fixes=True)  # like-factory's fix is unsafe (dtype, random stream): --unsafe-fixes


def test_apply_edits_in_any_order():
    assert apply_edits("abcdef", [Edit(4, 5, "E"), Edit(0, 1, "A"), Edit(2, 2, "+")]) == "Ab+cdEf"


def test_nested_fixes_compose_over_rounds():
    # `.add(x)` before the move: FDV101 is silent where the factory's result is
    # moved before it meets anything (torch.zeros(x.shape).cuda())
    src = "import torch\ndevice = torch.device(args.device)\ny = torch.zeros(x.shape).add(x).cuda()\n"
    assert UNSAFE.fix(src).text == "import torch\ndevice = torch.device(args.device)\ny = torch.zeros_like(x).add(x).to(device)\n"
    # without unsafe fixes only the safe outer one applies
    assert ALL.fix(src).text == "import torch\ndevice = torch.device(args.device)\ny = torch.zeros(x.shape).add(x).to(device)\n"


def test_identical_insertions_are_made_once():
    src = "import torch\na = x.cuda()\nb = y.cuda()\n"
    fixed = Engine([CudaCall]).fix(src).text
    assert fixed.count("device = torch.device") == 1
    assert fixed.endswith("a = x.to(device)\nb = y.to(device)\n")


@pytest.mark.parametrize("comment", ["# noqa", "# noqa: FDV101", "# fixdev: ignore[like-factory]", "# noqa: E501, FDV101", "# fixdev: ignore"])
def test_suppression_comments(comment):
    assert ALL.lint(f"import torch\ny = torch.ones(x.shape)  {comment}\n") == []


@pytest.mark.parametrize("comment", ["# noqa: E501", "# fixdev: ignore[cuda-call]", "# a comment"])
def test_other_comments_do_not_suppress(comment):
    assert [f.code for f in ALL.lint(f"import torch\ny = torch.ones(x.shape)  {comment}\n")] == ["FDV101"]


def test_noqa_inside_a_string_does_not_suppress():
    assert ALL.lint("import torch\ny = torch.ones(x.shape, dtype=d['# noqa'])\n")


def test_syntax_errors_are_source_errors_even_without_candidates():
    with pytest.raises(SourceError, match="syntax error at line 1"):
        ALL.lint("print 'hello'\n")
    with pytest.raises(SourceError, match="syntax error"):
        ALL.lint("import torch\nx = torch.ones(a.shape\n")


def test_newer_syntax_than_the_running_python_is_not_an_error():
    # match statements parse with libcst whatever CPython runs the check
    ALL.lint("match x:\n    case 1:\n        pass\n")


def test_form_feed_files_are_refused_not_corrupted():
    with pytest.raises(SourceError, match="cannot reproduce"):
        ALL.fix("import torch\n\x0cy = torch.ones(x.shape)\n")
    assert ALL.lint("x = 1\n\x0cy = 2\n") == []  # nothing to report: nothing to refuse


def test_a_fix_that_breaks_the_code_is_refused_and_named():
    class Broken(Rule):
        """Breaks things."""

        code, name, message, trigger = "FDV999", "broken", "broken", "x"

        def visit_Name(self, node):
            if node.value == "x":
                self.report(node, fix=[self.replace(node, "x +")])

    with pytest.raises(FixConflictError, match="FDV999"):
        Engine([Broken]).fix("x = 1\n")


def test_crlf_and_cr_files_keep_their_line_endings():
    crlf = "import torch\r\ny = x.cuda()\r\n"
    fixed = Engine([CudaCall]).fix(crlf).text
    assert "\n" not in fixed.replace("\r\n", "")
    cr = "import torch\ry = x.cuda()\r"
    fixed = Engine([CudaCall]).fix(cr).text
    assert fixed == 'import torch\r\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ry = x.to(device)\r'


def test_lint_sorts_and_fix_reports_what_remains():
    src = "import torch\na = x.cuda(0)\nb = torch.ones(y.shape)\n"
    outcome = Engine([CudaCall, LikeFactory], unsafe_fixes=True).fix(src)
    assert [f.code for f in outcome.applied] == ["FDV101"]
    assert [f.code for f in outcome.remaining] == ["FDV104"]


def test_applied_findings_are_in_the_original_texts_terms():
    src = "import torch\ny = torch.zeros(x.shape).add(x).cuda()\nz = w.cuda()\n"
    outcome = UNSAFE.fix(src)
    assert [f.code for f in outcome.applied] == ["FDV101", "FDV104", "FDV104"]
    for finding in outcome.applied:
        assert src[finding.start : finding.end].startswith(("torch.zeros(x.shape)", "torch.zeros(x.shape).add(x).cuda()", "w.cuda()"))


# Issue 10 item 7: syntax errors as CPython's parser reports them.
@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(:\n", "syntax error at line 1, column 7: invalid syntax"),
        ("x = 1\n\ndef f(x:\n    return x\n", "syntax error at line 3, column 6: '(' was never closed"),
        # A file some rule would analyse goes through libcst's parse, not only the check.
        ("import torch\nx = torch.ones(a.shape\n", "syntax error at line 2, column 15: '(' was never closed"),
        ("é = 'é'; y = f(:\n", "syntax error at line 1, column 16: invalid syntax"),  # columns count characters
    ],
)
def test_syntax_errors_report_cpythons_line_column_and_message(tmp_path, fixdev, source, expected):
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    result = fixdev("m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode("utf-8").splitlines()[0] == f"m.py: error: {expected}"


# Issue 10 item 10: one span, one finding, whichever rules report it.
SAME_SPAN = """import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        mask = torch.ones(x.shape)
        z = y.cuda(0)
        return y * mask
"""


def test_findings_on_one_span_from_two_rules_are_one_and_summaries_agree(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(SAME_SPAN)
    # FDV101's fix is unsafe: counted as fixable (and applied) with --unsafe-fixes
    check = fixdev("--unsafe-fixes", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert [line.split()[1] for line in check.stdout.decode().splitlines()] == ["FDV101", "FDV104"]
    assert "Found 2 findings (1 fixable with --apply)." in check.stderr.decode()
    diff = fixdev("--unsafe-fixes", "--diff", "m.py", cwd=tmp_path)
    assert "Would fix 1 finding in 1 file; 1 without a fix." in diff.stderr.decode()


def test_one_span_keeps_the_finding_with_a_fix_then_the_lowest_code():
    class Twin(Rule):
        """Reports the span FDV101 reports, without a fix, under a lower code."""

        code, name, message, trigger = "FDV001", "twin", "twin", "ones"

        def visit_Call(self, node):
            if dotted(node.func) == "torch.ones":
                self.report(node)

    class Triplet(Twin):
        """The same, under a higher code."""

        code, name = "FDV901", "triplet"

    src = "import torch\ny = torch.ones(x.shape)\n"
    assert [f.code for f in Engine([Twin, LikeFactory, Triplet]).lint(src)] == ["FDV101"]  # the one with a fix
    assert [f.code for f in Engine([Triplet, Twin]).lint(src)] == ["FDV001"]  # then the lowest code
    # Collapsing comes after suppression: silencing one rule leaves the other's finding.
    quiet = "import torch\ny = torch.ones(x.shape)  # noqa: FDV101\n"
    assert [f.code for f in Engine([Twin, LikeFactory]).lint(quiet)] == ["FDV001"]


# Issue 26 item 9: one value, one fix. Class weights made on the CPU meet the
# model's output on the device: factory-device's device= where they are made
# fixes them, and unmoved-input's move where they are used would fix them again.
ONE_VALUE = """import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(3, 2).to(device)
weights = torch.tensor([1.0, 2.0])
x = torch.randn(4, 3).to(device)
out = model(x) * weights
"""


def test_a_value_fixed_where_it_is_made_is_not_moved_too(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(ONE_VALUE)
    check = fixdev("--output-format", "concise", "--no-cache", "m.py", cwd=tmp_path)
    assert [line.split()[1] for line in check.stdout.decode().splitlines()] == ["FDV102"]
    assert fixdev("--apply", "-q", "--no-cache", "m.py", cwd=tmp_path).returncode == 0
    fixed = (tmp_path / "m.py").read_text()
    assert "weights = torch.tensor([1.0, 2.0], device=device)\n" in fixed and ".to(device)\nout" in fixed
    assert "weights = weights.to(device)" not in fixed
    # Without factory-device, or with it silenced, the move is the fix.
    (tmp_path / "m.py").write_text(ONE_VALUE)
    alone = fixdev("--select", "FDV107", "--diff", "--no-cache", "m.py", cwd=tmp_path)
    assert "+weights = weights.to(device)" in alone.stdout.decode()
    (tmp_path / "m.py").write_text(ONE_VALUE.replace("2.0])", "2.0])  # noqa: FDV102"))
    quiet = fixdev("--diff", "--no-cache", "m.py", cwd=tmp_path)
    assert "+weights = weights.to(device)" in quiet.stdout.decode()


def test_a_source_fix_the_run_does_not_apply_leaves_the_downstream_fix():
    class Source(Rule):
        """An unsafe fix where the value is made."""

        code, name, message, trigger, fixes_where_made = "FDV001", "source", "source", "ones", True

        def visit_Call(self, node):
            if dotted(node.func) == "torch.ones":
                self.report(node, fix=[self.replace(node, "torch.ones(2, device=d)")], unsafe=True)

    class Downstream(Rule):
        """A move of the value made by ``torch.ones`` where it is used."""

        code, name, message, trigger = "FDV002", "downstream", "downstream", "ones"

        def visit_Name(self, node):
            if node.value == "y":
                call = self.context.text.index("torch.ones(2)")
                self.report(node, fix=[self.replace(node, "y.to(d)")])
                self.findings[-1] = dataclasses.replace(self.findings[-1], origins=((call, call + len("torch.ones(2)")),))

    src = "import torch\nx = torch.ones(2)\nz = y\n"
    assert [f.code for f in Engine([Source, Downstream]).lint(src)] == ["FDV001", "FDV002"]
    assert [f.code for f in Engine([Source, Downstream], unsafe_fixes=True).lint(src)] == ["FDV001"]


# Issue 10 item 14: a declined fix stays declined for the run.
def test_a_declined_fix_is_not_offered_again_after_other_fixes_move_it():
    src = "import torch\na = torch.ones(x.shape)\nb = torch.zeros(y.shape)\n"
    asked = []

    def approve(text, finding):
        asked.append(text[finding.start : finding.end])
        return "ones" in asked[-1]

    outcome = Engine([LikeFactory], unsafe_fixes=True).fix(src, approve)
    assert asked == ["torch.ones(x.shape)", "torch.zeros(y.shape)"]
    assert outcome.text == "import torch\na = torch.ones_like(x)\nb = torch.zeros(y.shape)\n"
    assert [f.code for f in outcome.remaining] == ["FDV101"]


def test_a_declined_fix_inside_an_accepted_one_is_not_offered_again():
    src = "import torch\ndevice = torch.device(args.device)\ny = torch.zeros(x.shape).add(x).cuda()\n"
    asked = []

    def approve(text, finding):
        asked.append(finding.code)
        return finding.code == "FDV101"

    outcome = UNSAFE.fix(src, approve)
    assert sorted(asked) == ["FDV101", "FDV104"]
    assert outcome.text == "import torch\ndevice = torch.device(args.device)\ny = torch.zeros_like(x).add(x).cuda()\n"


# Issue 10 item 17: a code prefix in `# noqa` suppresses, as in flake8.
def test_noqa_with_a_code_prefix_suppresses(tmp_path, fixdev):
    (tmp_path / "m.py").write_text("import torch\ny = torch.ones(x.shape)  # noqa: FDV1\nz = torch.ones(w.shape)  # noqa: FDV2\n")
    result = fixdev("--output-format", "concise", "m.py", cwd=tmp_path)
    assert [line.split(":")[1] for line in result.stdout.decode().splitlines()] == ["3"]


def _names_of_calls(text: str) -> tuple:
    """(the context, [(a call's code, fixdev's qualified names of its callee,
    libcst's scope analysis's)]) for every call of ``text``."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

    from fixdev.engine.rule import RuleContext

    wrapper = MetadataWrapper(cst.parse_module(text))
    context = RuleContext(module=wrapper.module, text=text, wrapper=wrapper)
    provider = wrapper.resolve(QualifiedNameProvider)
    answers = []
    for call in [n for n in context.index().order if isinstance(n, cst.Call)]:
        found = provider[call.func]
        found = found() if callable(found) else found  # lazy in newer libcst
        expected = {q.name for q in found if q.source is not QualifiedNameSource.LOCAL}
        answers.append((cst.Module([]).code_for_node(call), context.qualified_names(call.func), expected))
    return context, answers


LOCAL_IMPORTS = '''\
import os


def load(path):
    import torch
    from numpy import asarray as arr
    return torch.load(path), arr([1]), os.sep


def other(x):
    from mylib import open
    return open(x)


def elsewhere():
    return open("f")
'''


def test_names_imported_inside_functions_resolve_as_libcsts_scope_analysis_does():
    """The fast path (imports alone) gives libcst's answer for names only a
    function's imports bind; a builtin's name imported in one function stays
    the builtin elsewhere, so the scope analysis is asked for it."""
    context, answers = _names_of_calls(LOCAL_IMPORTS)
    assert len(answers) == 4
    for code, ours, libcsts in answers:
        assert ours == libcsts, code
    assert context.index().resolve("torch", ["load"]) == {"torch.load"}  # no scope analysis needed
    assert context.index().resolve("open", []) is None  # the builtin elsewhere: libcst decides


FALLBACK_IMPORTS = '''\
try:
    from torch.hub import load_state_dict_from_url
except ImportError:
    from torch.utils.model_zoo import load_url as load_state_dict_from_url
if HALF:
    import torch.cuda.amp as amp
else:
    import apex.amp as amp

state = load_state_dict_from_url(URL)


def build(url):
    with amp.autocast():
        return load_state_dict_from_url(url)
'''


def test_names_module_level_imports_bind_several_ways_resolve_as_libcsts_scope_analysis_does():
    """A name imported one way or another (``try`` / ``except ImportError``,
    ``if`` / ``else``) outside functions: every import's name, without a scope analysis."""
    context, answers = _names_of_calls(FALLBACK_IMPORTS)
    assert len(answers) == 3
    for code, ours, libcsts in answers:
        assert len(libcsts) == 2 and ours == libcsts, code
    assert context.index().resolve("load_state_dict_from_url", []) == {"torch.hub.load_state_dict_from_url", "torch.utils.model_zoo.load_url"}


def test_a_rule_that_would_visit_a_layout_token_is_refused():
    """The index leaves layout tokens out, so a rule visiting one would never
    be called: it is refused, with what to do instead."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    from fixdev.engine.rule import Rule, RuleContext

    class CommaCounter(Rule):
        code = "FDV999"
        name = "comma-counter"
        message = "a comma"

        def visit_Comma(self, node: cst.Comma) -> None:
            self.report(node)

    wrapper = MetadataWrapper(cst.parse_module("f(a, b)\n"))
    context = RuleContext(module=wrapper.module, text="f(a, b)\n", wrapper=wrapper)
    with pytest.raises(TypeError, match="CommaCounter.visit_Comma: the index leaves layout tokens out"):
        context.run([CommaCounter(context)])


def test_the_cycle_collector_is_paused_while_a_file_is_analysed_and_only_then():
    """A file's trees live until it is done: the collector does not walk them
    again and again meanwhile, and runs again after, whatever happened."""
    import gc

    import libcst as cst

    from fixdev.engine.core import Engine
    from fixdev.engine.rule import Rule

    seen = []

    class Probe(Rule):
        code, name, message, trigger = "FDV999", "probe", "probe", "."

        def visit_Call(self, node: cst.Call) -> None:
            seen.append(gc.isenabled())

    engine = Engine([Probe])
    assert gc.isenabled()
    engine.lint("f(1)\n")
    assert seen == [False] and gc.isenabled()
    with pytest.raises(SourceError):
        engine.lint("f(\n")
    assert gc.isenabled()
    engine.fix("f(1)\n")
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        engine.lint("f(1)\n")
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_a_files_trees_and_flow_are_freed_without_the_cycle_collector():
    """When a file is done, what its analysis built (both trees, metadata,
    spans, the device flow) is freed by reference counting: the collector,
    run after, finds none of it. (Left in cycles, each file's millions of
    objects waited for a collection that walked them all.)"""
    import ast
    import gc

    import libcst as cst

    from fixdev.analysis.flow import FileFlow

    program = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def train(model, device):
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = torch.nn.CrossEntropyLoss()
    dataset = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    for images, labels in DataLoader(dataset, batch_size=4):
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()


def embed(model, device):
    model.to(device)
    model.eval()
    embedding = model(torch.randn(5, 4, device=device))
    return np.array(embedding)


def rest(x):
    torch.load("w.pt")
    return torch.zeros(x.shape).cuda()  # noqa: FDV101
"""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        findings = ALL.lint(program)
        fixed = ALL.fix(program)
        gc.collect()
        left = [type(o) for o in gc.garbage if isinstance(o, (ast.AST, cst.CSTNode, FileFlow))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert {f.name for f in findings} >= {"unmoved-input", "numpy-on-device", "load-map-location", "cuda-call"}
    assert fixed.applied
    assert left == []


def _overlaps_by_scan(edit: Edit, taken: list[Edit]) -> bool:
    """What a fix round asks of its taken edits, asked of each in turn."""
    for other in taken:
        if edit == other:
            continue
        if edit.start < other.end and other.start < edit.end:
            return True
        if edit.start == edit.end == other.start == other.end:
            return True
        if edit.start == edit.end and other.start < edit.start < other.end:
            return True
        if other.start == other.end and edit.start < other.start < edit.end:
            return True
    return False


def _map_back_by_walk(offset: int, edits: list[Edit], end: bool = False) -> int:
    delta = 0
    for edit in edits:
        new_start = edit.start + delta
        new_end = new_start + len(edit.content)
        if offset < new_start:
            break
        if offset < new_end:
            return edit.end if end and offset > new_start else edit.start
        if offset == new_end:
            return edit.end
        delta += len(edit.content) - (edit.end - edit.start)
    return offset - delta


def test_a_rounds_taken_edits_and_shifts_answer_as_a_scan_and_a_walk_would():
    """``_Taken`` asks only the edits near a new one, ``_Round`` maps back by
    bisection (a round of n fixes in n log n): the answers are the scan's
    and the walk's, on random rounds with insertions, touching edits and
    replacements."""
    import random

    from fixdev.engine.core import _Round, _Taken

    chance = random.Random(26)
    for _ in range(2000):
        scanned: list[Edit] = []
        taken = _Taken()
        for _ in range(chance.randint(1, 25)):
            start = chance.randint(0, 50)
            edit = Edit(start, start + chance.choice([0, 0, 1, 2, 6]), chance.choice(["", "a", "bcd"]))
            overlaps = _overlaps_by_scan(edit, scanned)
            assert taken.overlaps(edit) == overlaps, (edit, scanned)
            if not overlaps:
                if edit not in scanned:
                    scanned.append(edit)
                taken.add(edit)
        assert taken.edits == scanned
        edits = sorted(scanned)
        shift = _Round(edits)
        for offset in range(80):
            for end in (False, True):
                assert shift.back(offset, end) == _map_back_by_walk(offset, edits, end)


def test_a_fix_round_asks_about_conflicts_in_proportion_to_its_fixes(monkeypatch):
    """Each new fix was checked against every edit taken before it: n² checks
    for a file of n fixes. Counted, not timed."""
    from fixdev.engine import core

    asked = {"conflicts": 0}
    conflict = core._conflict

    def counted(edit, other):
        asked["conflicts"] += 1
        return conflict(edit, other)

    monkeypatch.setattr(core, "_conflict", counted)

    def conflicts(lines: int) -> int:
        asked["conflicts"] = 0
        text = "import torch\n\n" + "".join(f"x{i} = torch.zeros(3).cuda()\n" for i in range(lines))
        outcome = ALL.fix(text)
        assert len(outcome.applied) >= lines
        return asked["conflicts"]

    fewer = conflicts(100)
    assert conflicts(200) <= 2 * fewer + 10


def _many_findings(copies: int) -> str:
    """Each rule's kind of finding, ``copies`` times over (issue 26's generated
    file held only ``.cuda()`` calls)."""
    lines = ["import torch", "", "model = torch.nn.Linear(3, 3).cuda()", ""]
    for i in range(copies):
        lines += [
            f"a{i} = torch.zeros(3).cuda()",
            f"b{i} = torch.load('w{i}.pt')",
            f"c{i} = model(torch.ones(2, 3))",
            f"d{i} = model(a{i}).numpy()",
            f"e{i} = torch.zeros(3, device='cuda')",
            f"f{i} = torch.cuda.FloatTensor(3)",
            f"g{i} = torch.zeros(a{i}.shape)",
        ]
    return "\n".join(lines) + "\n"


def test_a_files_cost_grows_in_proportion_to_its_findings():
    """Every Python call made to lint a file, counted: twice the findings must
    cost at most about twice the calls (walks of the whole module per finding
    in load-map-location, the flow's bare moves and hard-coded-cuda's checks
    made them grow as n²). Counted, not timed."""
    import sys

    engine = Engine(all_rules())

    def calls(copies: int) -> tuple[int, int]:
        text = _many_findings(copies)
        engine.lint(text)  # imports and first-use caches out of the count
        count = 0

        def profile(frame, event, arg):
            nonlocal count
            if event == "call":
                count += 1

        sys.setprofile(profile)
        try:
            findings = engine.lint(text)
        finally:
            sys.setprofile(None)
        return count, len(findings)

    fewer, found = calls(40)
    more, found_more = calls(80)
    assert found >= 6 * 40 and found_more - 1 == 2 * (found - 1)  # the model line is one
    assert more <= 2.1 * fewer
