"""Jupyter notebooks, through the CLI and the language server as users run them.

The fixture pairs in fixtures/notebooks/ are notebooks as real writers lay
them out (nbformat's 1-space indent and lists of lines; a 2-space indent with
one string per source and no final newline), with outputs, metadata, magics,
shell escapes, skipped cell magics and a cell that does not parse.
"""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from fixdev.files.notebook import mask, unmask

from tests.conftest import FIXTURES, run_fixdev

NOTEBOOKS = FIXTURES / "notebooks"
CASES = sorted(NOTEBOOKS.glob("*.before.ipynb"))


def _name(before: Path) -> str:
    return before.name.replace(".before.ipynb", "")


def _after(before: Path) -> Path:
    return before.with_name(f"{_name(before)}.after.ipynb")


def _sources(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"] for cell in cells]


def _changed_cells(before: Path) -> list[int]:
    return [n for n, (old, new) in enumerate(zip(_sources(before), _sources(_after(before))), 1) if old != new]


def _notebook(tmp_path: Path, cells: list[tuple[str, str]], name: str = "nb.ipynb", **layout) -> Path:
    """A notebook written the way nbformat writes one."""
    nb = nbformat.v4.new_notebook()
    for kind, source in cells:
        nb.cells.append(nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source))
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One copy of every ``before`` notebook, and the runs over the folder."""
    tree = tmp_path_factory.mktemp("notebooks")
    for before in CASES:
        shutil.copyfile(before, tree / f"{_name(before)}.ipynb")
    originals = {p.name: p.read_bytes() for p in tree.glob("*.ipynb")}
    # The after notebooks hold every fix, unsafe ones too (FDV101's take x's dtype).
    diff = run_fixdev("--diff", "--unsafe-fixes", ".", cwd=tree)
    after_diff = {p.name: p.read_bytes() for p in tree.glob("*.ipynb")}
    apply = run_fixdev("--apply", "--unsafe-fixes", ".", cwd=tree)
    after_apply = {p.name: p.read_bytes() for p in tree.glob("*.ipynb")}
    again = run_fixdev("--apply", "--unsafe-fixes", ".", cwd=tree)
    after_again = {p.name: p.read_bytes() for p in tree.glob("*.ipynb")}
    check = run_fixdev("--check", "--output-format", "concise", ".", cwd=tree)
    return dict(tree=tree, originals=originals, diff=diff, after_diff=after_diff, apply=apply, after_apply=after_apply,
                again=again, after_again=after_again, check=check)


@pytest.mark.parametrize("before", CASES, ids=_name)
def test_fixture_pair(before, runs):
    name = f"{_name(before)}.ipynb"
    assert runs["after_diff"][name] == before.read_bytes(), "--diff must not write"
    shown = runs["diff"].stderr.decode()  # cell diffs go to stderr: stdout stays a patch git apply takes
    for number in range(1, len(_sources(before)) + 1):
        header = f"--- a/{name}:cell {number}\n+++ b/{name}:cell {number}\n"
        assert (header in shown) == (number in _changed_cells(before)), f"cell {number}: one hunk per changed cell"
    assert runs["after_apply"][name] == _after(before).read_bytes()
    assert runs["after_again"][name] == _after(before).read_bytes(), "a second run must change nothing"
    reported = [line for line in runs["check"].stdout.decode().splitlines() if line.startswith(f"{name}:")]
    if name.startswith("reported_"):
        assert reported and all("[*]" not in line for line in reported)
    else:
        assert reported == []


@pytest.mark.parametrize("before", CASES, ids=_name)
def test_written_notebook_is_valid_and_only_sources_changed(before):
    after = _after(before)
    nbformat.validate(nbformat.reads(after.read_text(encoding="utf-8"), as_version=4))
    old, new = json.loads(before.read_text(encoding="utf-8")), json.loads(after.read_text(encoding="utf-8"))
    for old_cell, new_cell in zip(old["cells"], new["cells"]):
        old_cell["source"] = new_cell["source"] = None
    assert old == new, "outputs, execution counts and metadata stay as they were"
    # Byte for byte outside the sources: every changed line of the file is a
    # string of a source list, or a "source": "..." line.
    old_lines = before.read_text(encoding="utf-8").splitlines(True)
    new_lines = after.read_text(encoding="utf-8").splitlines(True)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in old_lines[i1:i2] + new_lines[j1:j2]:
            item = line.strip().rstrip(",")
            assert item.startswith('"source": "') or isinstance(json.loads(item), str), line


def test_fixtures_cover_every_rule_forms_and_layouts():
    """Each rule at least once in a notebook, both source forms, both indents."""
    result = run_fixdev("--check", "--no-cache", "--output-format", "json", *[before.name for before in CASES], cwd=NOTEBOOKS)
    found = {item["code"] for item in json.loads(result.stdout)}
    assert found >= {f"FDV1{n:02}" for n in range(1, 13)}
    texts = [p.read_text(encoding="utf-8") for p in CASES]
    assert any('\n "cells"' in t for t in texts) and any('\n  "cells"' in t for t in texts)
    sources = [cell["source"] for t in texts for cell in json.loads(t)["cells"]]
    assert any(isinstance(s, list) for s in sources) and any(isinstance(s, str) for s in sources)
    assert any(not t.endswith("\n") for t in texts)


def test_exit_codes_and_cell_errors(runs):
    # syntax_error_cell has a cell that does not parse: reported by number,
    # exit 2; the other cells were fixed all the same.
    for run in ("diff", "apply", "again", "check"):
        err = runs[run].stderr.decode()
        assert runs[run].returncode == 2
        assert "Traceback" not in err
        assert [line for line in err.splitlines() if ": error: " in line] == [
            "syntax_error_cell.ipynb:cell 2: error: syntax error at line 1, column 1: Missing parentheses in call to 'print'. Did you mean print(...)?"
        ]


def test_positions_name_the_cell(tmp_path):
    shutil.copyfile(NOTEBOOKS / "training_loop.before.ipynb", tmp_path / "nb.ipynb")
    result = run_fixdev("--check", "--no-cache", "--output-format", "concise", "nb.ipynb", cwd=tmp_path)
    # Cells count from 1 over all cells, the markdown ones included.
    assert [" ".join(line.split(" ")[:3]) for line in result.stdout.decode().splitlines()] == [
        "nb.ipynb:cell 4:2:9: FDV104",
        "nb.ipynb:cell 5:1:9: FDV105",
        "nb.ipynb:cell 7:1:5: FDV104",
        "nb.ipynb:cell 7:2:9: FDV101",
    ]
    full = run_fixdev("--check", "--no-cache", "nb.ipynb", cwd=tmp_path).stdout.decode()
    assert "nb.ipynb:cell 4:2:9: FDV104 [cuda-call] [*]" in full
    assert "2 | model = model.cuda()\n  |         ^^^^^^^^^^^^ FDV104" in full


def test_json_sarif_and_github_name_the_cell(tmp_path):
    shutil.copyfile(NOTEBOOKS / "training_loop.before.ipynb", tmp_path / "nb.ipynb")
    items = json.loads(run_fixdev("--check", "--no-cache", "--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    first = items[0]
    assert (first["code"], first["cell"], first["location"], first["end_location"]) == (
        "FDV104", 4, {"row": 2, "column": 9, "cell": 4}, {"row": 2, "column": 21, "cell": 4}
    )
    # The device definition the fix adds goes after the imports of cell 2.
    assert [e["location"]["cell"] for e in first["fix"]["edits"]] == [2, 4]
    # Issue 26 item 19: GitHub's viewers know files, not cells. The annotation
    # and the SARIF region are placed in the .ipynb's JSON text, where the
    # cell's line is; the cell and its own position stay in the message and
    # in the result's properties.
    raw = (tmp_path / "nb.ipynb").read_text().splitlines()
    github = run_fixdev("--check", "--no-cache", "--output-format", "github", "nb.ipynb", cwd=tmp_path).stdout.decode()
    line, column = _json_place(raw, "model.cuda()")
    assert github.splitlines()[0] == (
        f"::error title=FDV104 cuda-call,file=nb.ipynb,line={line},col={column}::cell 4:2:9: FDV104 `.cuda()` ties the code to CUDA; use `.to(device)`"
    )
    sarif = json.loads(run_fixdev("--check", "--no-cache", "--output-format", "sarif", "nb.ipynb", cwd=tmp_path).stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["message"]["text"].startswith("cell 4:2:9: ")
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": line, "startColumn": column, "endLine": line, "endColumn": column + len("model.cuda()")}
    assert result["properties"] == {"cell": 4, "cellRegion": {"startLine": 2, "startColumn": 9, "endLine": 2, "endColumn": 21},
                                    "applicability": "safe", "fixApplied": False}
    assert "fixes" not in result  # SARIF's replacements would edit the JSON text
    # An escaped quote inside the cell's string: the region still covers the call.
    loads = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "FDV105")["locations"][0]["physicalLocation"]["region"]
    assert raw[loads["startLine"] - 1][loads["startColumn"] - 1 : loads["endColumn"] - 1] == 'torch.load(\\"checkpoint.pt\\")'


def _json_place(raw: list[str], text: str) -> tuple[int, int]:
    (found,) = [(number, line.index(text) + 1) for number, line in enumerate(raw, 1) if text in line]
    return found


@pytest.mark.parametrize("case", ["training_loop", "device_in_earlier_cell", "syntax_error_cell"])
def test_json_edits_applied_to_the_cells_give_the_fixed_notebook(tmp_path, case):
    """A tool that applies the JSON fixes to the cells' sources gets what
    --apply writes (an insertion after a last line without a line break goes
    at the end of that line)."""
    before = NOTEBOOKS / f"{case}.before.ipynb"
    shutil.copyfile(before, tmp_path / "nb.ipynb")
    items = json.loads(run_fixdev("--diff", "--unsafe-fixes", "--no-cache", "--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)
    sources = _sources(before)
    edits = {(e["location"]["cell"], e["location"]["row"], e["location"]["column"], e["end_location"]["row"], e["end_location"]["column"], e["content"])
             for item in items if item["fix"] and item["fix"]["applied"] for e in item["fix"]["edits"]}
    for cell, row, column, end_row, end_column, content in sorted(edits, reverse=True):
        lines = sources[cell - 1].split("\n")
        start = sum(len(line) + 1 for line in lines[: row - 1]) + column - 1
        end = sum(len(line) + 1 for line in lines[: end_row - 1]) + end_column - 1
        sources[cell - 1] = sources[cell - 1][:start] + content + sources[cell - 1][end:]
    assert sources == _sources(_after(before))


def test_definition_goes_into_the_first_cell_that_imports_torch(tmp_path):
    path = _notebook(tmp_path, [
        ("code", "import numpy as np"),
        ("markdown", "Imports"),
        ("code", "import torch\nimport torch.nn as nn"),
        ("code", "from torch.utils.data import DataLoader\nimport os"),
        ("code", "model = nn.Linear(2, 2).cuda()"),
    ])
    assert run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert _sources(path) == [
        "import numpy as np",
        "Imports",
        'import torch\nimport torch.nn as nn\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "from torch.utils.data import DataLoader\nimport os",
        "model = nn.Linear(2, 2).to(device)",
    ]


def test_device_defined_in_an_earlier_cell_is_used(tmp_path):
    path = _notebook(tmp_path, [
        ("code", "import torch\ndev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')"),
        ("code", "x = torch.ones(3)"),
        ("code", "y = x.cuda()"),
    ])
    assert run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert _sources(path)[1:] == ["x = torch.ones(3)", "y = x.to(dev)"]


def test_a_cells_last_expression_is_shown_not_discarded(tmp_path):
    """The kernel shows the value of a cell's last expression (unless a ';'
    ends it): `x.to("cpu")` there is no result thrown away."""
    path = _notebook(tmp_path, [
        ("code", "import torch\nx = torch.ones(2)\nmodel = torch.nn.Linear(2, 2)"),
        ("code", 'x.to("cpu")'),
        ("code", 'y = x * 2\ny.to("cpu");'),
        ("code", "model.cuda()"),
        ("code", 'w = torch.zeros(2); w.to("cpu")'),
        ("code", 'é = torch.zeros(2); é.cuda()'),
    ])
    check = run_fixdev("--check", "--no-cache", "--output-format", "concise", "nb.ipynb", cwd=tmp_path).stdout.decode()
    assert [line.split(" [*]")[0] for line in check.splitlines()] == [
        "nb.ipynb:cell 3:2:1: FDV106", "nb.ipynb:cell 4:1:1: FDV104", "nb.ipynb:cell 6:1:21: FDV104"
    ]
    assert run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert _sources(path)[1:] == ['x.to("cpu")', 'y = x * 2\ny = y.to("cpu");', "model.to(device)", 'w = torch.zeros(2); w.to("cpu")', "é = torch.zeros(2); é.to(device)"]


IPYTHON_CELL = """\
%load_ext autoreload
%autoreload 2
!pip install -q einops
!!ls
files = !ls *.pt
flag = %env CUDA_VISIBLE_DEVICES
a, b = %time 1, 2
?torch.load
torch.load?
torch.nn.Module??
%pip install --quiet \\
    timm
text = '''
%not a magic inside a string
!nor this
'''
values = (1,
          2)
w = (2
     % x.cuda())
v = 2 \\
    % x.cuda()
for i in range(2):
    %time y = x.cuda()
    !echo {i}
    z = x.cuda()  # fixed
"""


def test_ipython_syntax_is_masked_and_kept_byte_for_byte(tmp_path):
    path = _notebook(tmp_path, [("code", "import torch\nx = torch.ones(2)"), ("code", IPYTHON_CELL)])
    result = run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    # Lines that go on a bracket or a backslash are Python, even starting with '%'.
    expected = IPYTHON_CELL.replace("z = x.cuda()", "z = x.to(device)").replace("% x.cuda()", "% x.to(device)")
    assert expected.count("x.to(device)") == 3
    assert _sources(path)[1] == expected
    assert "text = '''\n%not a magic" in expected  # the string's lines were Python, left as they were
    assert unmask(mask(IPYTHON_CELL)) == IPYTHON_CELL


@pytest.mark.parametrize(
    "magic, analysed",
    [("%%time", True), ("%%timeit -n 1", True), ("%%capture out", True), ("%%bash", False), ("%%html", False),
     ("%%writefile model.py", False), ("%%script python", False), ("%%javascript", False)],
)
def test_cell_magics(tmp_path, magic, analysed):
    cell = f"{magic}\ny = x.cuda()"
    path = _notebook(tmp_path, [("code", "import torch\nx = torch.ones(2)"), ("code", cell)])
    result = run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0 and b"error" not in result.stderr
    assert _sources(path)[1] == (f"{magic}\ny = x.to(device)" if analysed else cell)


def test_a_cell_that_does_not_parse_is_reported_and_the_others_fixed(tmp_path):
    path = _notebook(tmp_path, [("markdown", "x"), ("code", "import torch"), ("code", "def f(:\n    pass"), ("code", "y = torch.ones(2).cuda()")])
    result = run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert "nb.ipynb:cell 3: error: syntax error at line 1, column 7" in result.stderr.decode()
    assert _sources(path)[3] == "y = torch.ones(2, device=device)"
    assert _sources(path)[2] == "def f(:\n    pass"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "nb.ipynb: error: not a valid notebook: invalid JSON at line 1, column 2"),
        (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "nb.ipynb: error: not a valid notebook: nbformat 3; fixdev reads nbformat 4"),
        (b"[1, 2]", "nb.ipynb: error: not a valid notebook: the JSON is not an object"),
        (b'{"cells": [], "metadata": {}}', "nb.ipynb: error: not a valid notebook: no nbformat version"),
        (b'{"cells": [{"cell_type": "code"}], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "nb.ipynb: error: not a valid notebook: cell 1 has no source"),
        (b'{"cells": [], "nbformat": 4, "metadata": {}, "x": "\xff"}', "nb.ipynb: error: not a valid notebook: not UTF-8"),
    ],
)
def test_a_file_that_is_no_notebook_is_one_error_line(tmp_path, content, message):
    (tmp_path / "nb.ipynb").write_bytes(content)
    result = run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith(message)
    assert (tmp_path / "nb.ipynb").read_bytes() == content


def test_folders_are_walked_for_notebooks_unless_left_out(tmp_path):
    _notebook(tmp_path, [("code", "import torch\ny = torch.ones(2).cuda()")], name="a.ipynb")
    (tmp_path / "b.py").write_text("import torch\ny = torch.ones(2).cuda()\n")
    (tmp_path / "c.pyw").write_text("import torch\ny = torch.ones(2).cuda()\n")

    def files(*args: str) -> list[str]:
        out = run_fixdev("--check", "--no-cache", "--output-format", "concise", *args, cwd=tmp_path).stdout.decode()
        return sorted({line.split(":")[0] for line in out.splitlines()})

    assert files(".") == ["a.ipynb", "b.py"]
    assert files("--no-notebooks", ".") == ["b.py"]
    assert files("--no-notebooks", ".", "a.ipynb") == ["a.ipynb", "b.py"], "a notebook named on the command line is processed"
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nextend-include = ["*.pyw"]\n')
    assert files(".") == ["a.ipynb", "b.py", "c.pyw"]
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\ninclude = ["*.py"]\n')
    assert files(".") == ["b.py"]
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\ninclude = "*.py"\n')
    bad = run_fixdev("--check", "--no-cache", ".", cwd=tmp_path)
    assert bad.returncode == 2 and "include must be a list of strings" in bad.stderr.decode()


def test_stdin_reads_a_notebook(tmp_path):
    before = NOTEBOOKS / "device_in_earlier_cell.before.ipynb"
    data = before.read_bytes()
    fixed = run_fixdev("--apply", "--stdin-filename", "x.ipynb", "-", cwd=tmp_path, stdin=data)
    assert fixed.returncode == 0 and fixed.stdout == _after(before).read_bytes()
    diff = run_fixdev("--diff", "--stdin-filename", "x.ipynb", "-", cwd=tmp_path, stdin=data)
    # Issue 26 item 10: a notebook's cell diffs go to stderr (stdout stays a patch git apply takes).
    assert diff.returncode == 1 and "--- a/x.ipynb:cell 6\n+++ b/x.ipynb:cell 6\n" in diff.stderr.decode() and diff.stdout == b""
    check = run_fixdev("--check", "--output-format", "concise", "--stdin-filename", "x.ipynb", "-", cwd=tmp_path, stdin=data)
    assert "x.ipynb:cell 8:2:9: FDV102" in check.stdout.decode()
    broken = run_fixdev("--apply", "--stdin-filename", "x.ipynb", "-", cwd=tmp_path, stdin=b"{")
    assert broken.returncode == 2 and broken.stdout == b"{" and "not a valid notebook" in broken.stderr.decode()


def test_cached_results_write_the_same_notebook(tmp_path):
    before = NOTEBOOKS / "training_loop.before.ipynb"
    shutil.copyfile(before, tmp_path / "nb.ipynb")
    # --unsafe-fixes: the after notebook holds FDV101's fix, an unsafe one.
    cold = run_fixdev("--diff", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path, env={"FIXDEV_CACHE_DIR": str(tmp_path / "cache")})
    warm = run_fixdev("--diff", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path, env={"FIXDEV_CACHE_DIR": str(tmp_path / "cache")})
    assert cold.stdout == warm.stdout and cold.stderr == warm.stderr
    applied = run_fixdev("--apply", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path, env={"FIXDEV_CACHE_DIR": str(tmp_path / "cache")})
    assert applied.returncode == 0
    assert (tmp_path / "nb.ipynb").read_bytes() == _after(before).read_bytes()


def test_outputs_do_not_count_towards_the_size_limit(tmp_path):
    path = _notebook(tmp_path, [("code", "import torch\ny = torch.ones(2).cuda()")])
    nb = json.loads(path.read_text())
    nb["cells"][0]["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "A" * 2_500_000}}]
    path.write_text(json.dumps(nb, indent=1))
    result = run_fixdev("--apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(path.read_text())["cells"][0]["outputs"][0]["data"]["image/png"] == "A" * 2_500_000


def test_non_python_notebook_is_left_alone(tmp_path):
    path = _notebook(tmp_path, [("code", "x <- y.cuda()")])
    nb = json.loads(path.read_text())
    nb["metadata"]["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    path.write_text(json.dumps(nb, indent=1))
    result = run_fixdev("--check", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0 and "No device bugs found." in result.stderr.decode()


def test_interactive_shows_cells(tmp_path):
    import os
    import pty
    import subprocess
    import sys

    # (`x` made elsewhere: one made by a CPU factory here sizes a CPU tensor, and FDV101 is silent)
    path = _notebook(tmp_path, [("code", "import torch"), ("code", "x = make()\ny = torch.zeros(x.shape)")])
    leader, follower = pty.openpty()  # --unsafe-fixes: FDV101's fix is unsafe
    proc = subprocess.Popen([sys.executable, "-m", "fixdev", "--apply", "--unsafe-fixes", "-i", "nb.ipynb"], cwd=tmp_path, stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    os.write(leader, b"y\n")
    out, err = proc.communicate(timeout=60)
    os.close(leader)
    os.close(follower)
    assert proc.returncode == 0, err.decode()
    shown = out.decode()
    assert "nb.ipynb:cell 2:2:5: FDV101 [like-factory]" in shown and "--- a/nb.ipynb:cell 2\n" in shown
    assert _sources(path)[1] == "x = make()\ny = torch.zeros_like(x)"


# ---------------------------------------------------------------- the language server


def _client(tmp_path):
    pytest.importorskip("pygls", reason='the language server needs pip install -e ".[test]"')
    from tests.test_lsp import Client

    client = Client(tmp_path)
    init = client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {"notebookDocument": {"synchronization": {}}}})
    client.send("initialized", {}, request=False)
    return client, init["result"]["capabilities"]


def test_lsp_notebook_document_sync(tmp_path):
    uri = (tmp_path / "nb.ipynb").as_uri()
    cells = [
        (1, "markdown", "# Title"),
        (2, "python", "import torch"),
        (2, "python", "x = torch.ones(2)\ny = x.cuda()"),
    ]
    client, capabilities = _client(tmp_path)
    try:
        assert capabilities["notebookDocumentSync"]["notebookSelector"][0]["cells"] == [{"language": "python"}]
        cell_uris = [f"vscode-notebook-cell:{tmp_path}/nb.ipynb#cell{i}" for i in range(len(cells))]
        client.send("notebookDocument/didOpen", {
            "notebookDocument": {"uri": uri, "notebookType": "jupyter-notebook", "version": 1,
                                 "cells": [{"kind": kind, "document": cell_uri} for (kind, _, _), cell_uri in zip(cells, cell_uris)]},
            "cellTextDocuments": [{"uri": cell_uri, "languageId": language, "version": 1, "text": text}
                                  for (_, language, text), cell_uri in zip(cells, cell_uris)],
        }, request=False)
        published = {}
        while len(published) < 3:
            message = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
            published[message["params"]["uri"]] = message["params"]["diagnostics"]
        assert published[cell_uris[0]] == [] and published[cell_uris[1]] == []
        [found] = published[cell_uris[2]]
        assert (found["code"], found["range"]["start"], found["range"]["end"]) == ("FDV104", {"line": 1, "character": 4}, {"line": 1, "character": 12})

        actions = client.request("textDocument/codeAction", {"textDocument": {"uri": cell_uris[2]}, "range": found["range"],
                                                             "context": {"diagnostics": [found]}})["result"]
        quick = [a for a in actions if a["kind"] == "quickfix"][0]["edit"]["changes"]
        assert quick[cell_uris[1]][0]["newText"] == 'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
        assert quick[cell_uris[2]][0]["newText"] == "x = torch.ones(2)\ny = x.to(device)"
        assert quick[cell_uris[2]][0]["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 12}}
        fix_all = [a for a in actions if a["kind"] == "source.fixAll.fixdev"][0]["edit"]["changes"]
        assert fix_all == quick
        assert "notebook.source.fixAll.fixdev" not in [a["kind"] for a in actions]
        on_save = client.request("textDocument/codeAction", {"textDocument": {"uri": cell_uris[0]}, "range": found["range"],
                                                             "context": {"diagnostics": [], "only": ["notebook.source.fixAll"]}})["result"]
        assert [(a["kind"], a["edit"]["changes"]) for a in on_save] == [("notebook.source.fixAll.fixdev", quick)]

        client.send("notebookDocument/didChange", {
            "notebookDocument": {"uri": uri, "version": 2},
            "change": {"cells": {"textContent": [{"document": {"uri": cell_uris[2], "version": 2},
                                                  "changes": [{"text": "x = torch.ones(2)\ny = x"}]}]}},
        }, request=False)
        published = {}
        while len(published) < 3:
            message = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
            published[message["params"]["uri"]] = message["params"]["diagnostics"]
        assert published[cell_uris[2]] == []
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


def test_lsp_notebook_as_plain_text(tmp_path):
    before = NOTEBOOKS / "syntax_error_cell.before.ipynb"
    path = tmp_path / "nb.ipynb"
    shutil.copyfile(before, path)
    text = path.read_text(encoding="utf-8")
    uri = path.as_uri()
    client, _ = _client(tmp_path)
    try:
        client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "json", "version": 1, "text": text}}, request=False)
        [found] = client.diagnostics()
        line = text.splitlines()[found["range"]["start"]["line"]]
        start, end = found["range"]["start"]["character"], found["range"]["end"]["character"]
        assert found["code"] == "FDV104" and line[start:end] == "torch.zeros(3).cuda()"
        actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": found["range"],
                                                             "context": {"diagnostics": [found]}})["result"]
        for kind in ("quickfix", "source.fixAll.fixdev"):
            [edit] = [a for a in actions if a["kind"] == kind][0]["edit"]["changes"][uri]
            assert edit["newText"] == _after(before).read_text(encoding="utf-8")
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)
