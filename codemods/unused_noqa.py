"""FDV100 unused-noqa: a ``# noqa: FDV1xx`` that silences nothing, as Ruff's RUF100."""

from __future__ import annotations

from typing import Sequence

from fixdev.engine.findings import Finding
from fixdev.engine.noqa import Directive
from fixdev.engine.rule import Invalid, Rule


class UnusedNoqa(Rule):
    """
    ## What it does
    Reports a `# noqa: FDVxxx` code that silences no finding on its line, and
    removes it, as Ruff's `unused-noqa` (`RUF100`) does for Ruff's codes. A
    code is judged only when its rule ran on the file: it was selected and
    not left out for the file by `ignore` or `per-file-ignores` (the rules a
    file's text gave nothing to look at ran too, and found nothing there).
    This rule is off by default: select it by its code, name or group
    (`--extend-select FDV100`, `extend-select = ["unused-noqa"]`); `ALL` and
    `FDV1` leave it out.

    ## Why is this bad?
    A suppression outlives the finding it was written for: the code was
    fixed, moved, or fixdev learned to see that it is right. Left in place,
    it hides the next real finding on that line.

    ## Example
    ```python
    x = x.to(device)  # noqa: FDV104
    y = y.to(device)  # noqa: E501, FDV104
    ```

    ## Use instead
    ```python
    x = x.to(device)
    y = y.to(device)  # noqa: E501
    ```

    ## Fix safety
    Safe: only a comment changes. The unused codes are taken out and the
    others kept (`# noqa: E501`); when none is left the directive goes with
    the blanks before it, and what else the comment holds stays (`# keep`,
    `# type: ignore`, or `# reason` for words after the codes); a line that
    held only the directive goes whole. Whether a code silences a finding is
    decided with the files of the run, as every finding is: a finding that
    needs another file's facts (what its function returns) is seen only
    when that file is in the run, so judge a project with all of it.

    ## When it stays silent
    A bare `# noqa` (it silences every rule) and `# fixdev: ignore[...]`;
    other tools' codes (`E501`, `F401`); a code whose rule did not run on the
    file (not selected, ignored, or in its `per-file-ignores`); a code prefix
    (`# noqa: FDV1`) or a code no rule has; `FDV100` itself. A directive
    with `FDV100` among its codes, or under `# fixdev: ignore[unused-noqa]`,
    is not reported. A `# noqa` inside a string is no comment.
    """

    code = "FDV100"
    name = "unused-noqa"
    group = "noqa"
    message = "Unused `noqa` directive"
    trigger = r"(?i)#\s*noqa\s*:"
    explicit = True
    judges_noqa = True

    @classmethod
    def judge_noqa(cls, text: str, directives: Sequence[Directive], ran: frozenset[str]) -> list[Finding]:
        findings = []
        for directive in directives:
            unused = [code for code in directive.codes if code.upper() in ran and code.upper() != cls.code and code.upper() not in directive.used]
            if not unused:
                continue
            listed = ", ".join(f"`{code}`" for code in dict.fromkeys(code.upper() for code in unused))
            findings.append(cls.finding_at(
                directive.start, directive.end, f"{cls.message} (unused: {listed})",
                fix=[directive.removal(text, unused)], fix_message="Remove the unused `noqa` code" + ("s" if len(unused) > 1 else ""),
            ))
        return findings

    # Run with every rule (tests/test_rule_examples.py): whether a code is
    # used depends on what the other rules find.
    VALID = [
        "import torch\n\n\ndef f(x):\n    return x.cuda()  # noqa: FDV104\n",
        "import torch\nx = y.to(device)  # noqa: E501, F401\n",
        "import torch\nx = y.to(device)  # noqa\n",
        "import torch\nx = y.to(device)  # noqa: FDV1\n",
        "import torch\nx = y.to(device)  # noqa: FDV199\n",
        "import torch\nx = y.to(device)  # noqa: FDV104, FDV100\n",
        "import torch\nx = y.to(device)  # noqa: FDV104  # fixdev: ignore[unused-noqa]\n",
        "import torch\ns = '''\nx = y.to(device)  # noqa: FDV104\n'''\n",
    ]
    INVALID = [
        Invalid("import torch\nx = y.to(device)  # noqa: FDV104\n", "import torch\nx = y.to(device)\n"),
        Invalid("import torch\nx = y.to(device)  # noqa: E501, FDV104\n", "import torch\nx = y.to(device)  # noqa: E501\n"),
        Invalid("import torch\nx = y.to(device)  # noqa:FDV104,E501\n", "import torch\nx = y.to(device)  # noqa:E501\n"),
        Invalid("import torch\nx = y.to(device)  # keep  # noqa: FDV104\n", "import torch\nx = y.to(device)  # keep\n"),
        Invalid("import torch\nx = y.to(device)  # noqa: FDV104  # type: ignore\n", "import torch\nx = y.to(device)  # type: ignore\n"),
        Invalid("import torch\nx = y.to(device)  # noqa: FDV104 moved by the caller\n", "import torch\nx = y.to(device)  # moved by the caller\n"),
        Invalid("import torch\n# noqa: FDV104\nx = y.to(device)\n", "import torch\nx = y.to(device)\n"),
        Invalid(
            "import torch\n\n\ndef f(x):\n    return x.cuda()  # noqa: FDV101, FDV104\n",
            "import torch\n\n\ndef f(x):\n    return x.cuda()  # noqa: FDV104\n",
        ),
    ]
