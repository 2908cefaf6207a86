import pytest

from fixdev.codemods.cuda_call import CudaCall
from fixdev.codemods.like_factory import LikeFactory
from fixdev.engine import Engine, FixConflictError
from fixdev.findings import apply_edits
from fixdev.registry import all_rules
from fixdev.rule import Edit, Rule
from fixdev.source import SourceError

ALL = Engine(all_rules())


def test_apply_edits_in_any_order():
    assert apply_edits("abcdef", [Edit(4, 5, "E"), Edit(0, 1, "A"), Edit(2, 2, "+")]) == "Ab+cdEf"


def test_nested_fixes_compose_over_rounds():
    src = "import torch\ndevice = 'cuda'\ny = torch.zeros(x.shape).cuda()\n"
    assert ALL.fix(src).text == "import torch\ndevice = 'cuda'\ny = torch.zeros_like(x).to(device)\n"


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
    assert fixed == 'import torch\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ry = x.to(device)\r'


def test_lint_sorts_and_fix_reports_what_remains():
    src = "import torch\na = x.cuda(0)\nb = torch.ones(y.shape)\n"
    outcome = Engine([CudaCall, LikeFactory]).fix(src)
    assert [f.code for f in outcome.applied] == ["FDV101"]
    assert [f.code for f in outcome.remaining] == ["FDV104"]


def test_applied_findings_are_in_the_original_texts_terms():
    src = "import torch\ny = torch.zeros(x.shape).cuda()\nz = w.cuda()\n"
    outcome = ALL.fix(src)
    assert [f.code for f in outcome.applied] == ["FDV101", "FDV104", "FDV104"]
    for finding in outcome.applied:
        assert src[finding.start : finding.end].startswith(("torch.zeros(x.shape)", "torch.zeros(x.shape).cuda()", "w.cuda()"))
