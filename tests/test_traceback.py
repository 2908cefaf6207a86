"""``fixdev --traceback LOG [PATH...]``: every case folder of
``fixtures/traceback/`` (a log, the code it ran, and ``case.toml`` saying
what must be said and fixed) through the CLI, run from the case's folder as a
user would run it."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, run_fixdev

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CASES_DIR = FIXTURES / "traceback"
CASES = sorted(folder for folder in CASES_DIR.iterdir() if (folder / "case.toml").is_file())
PROGRAM = ROOT / "tests" / "programs" / "robust_trainer.py"


class Ran:
    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def fixdev_in(folder: Path, *args: str, stdin: bytes | None = None) -> Ran:
    """The CLI run in this process from ``folder`` (a subprocess per run
    would cost most of this module's time in imports)."""
    import os

    from typer.testing import CliRunner

    from fixdev.interfaces import cli

    here = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner(env={"NO_COLOR": "1"}).invoke(cli.app, list(args), input=stdin, catch_exceptions=False)
    finally:
        os.chdir(here)
    return Ran(result.exit_code, result.stdout_bytes, result.stderr_bytes)


def spec_of(folder: Path) -> dict:
    return tomllib.loads((folder / "case.toml").read_text())


def unsafe_flags(spec: dict) -> list[str]:
    """``unsafe_fixes = true`` in case.toml: the case's fix is unsafe, so it is
    applied (and shown in --diff) only with --unsafe-fixes."""
    return ["--unsafe-fixes"] if spec.get("unsafe_fixes") else []


def copy_case(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / folder.name
    shutil.copytree(folder, target)
    return target


def diff_lines(diff: str) -> set[int]:
    """Lines of the old file a unified diff changes; an insertion counts as
    the line it goes before."""
    touched: set[int] = set()
    old, replacing = 0, False
    for line in diff.splitlines():
        hunk = re.match(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
        if hunk:
            old, replacing = int(hunk.group(1)), False
            continue
        if line.startswith(("---", "+++")) or not old:
            continue
        if line.startswith("-"):
            touched.add(old)
            old, replacing = old + 1, True
        elif line.startswith("+"):
            if not replacing:  # new lines of their own: where they go
                touched.add(old)
        else:
            old, replacing = old + 1, False
    return touched


def test_every_family_has_a_case():
    from fixdev.diagnose.log import FAMILIES

    covered = {spec_of(folder)["family"] for folder in CASES}
    wanted = {family.name for family in FAMILIES} - {"tensor-type", "legacy-type"}  # extras beyond the list
    assert wanted <= covered, wanted - covered


@pytest.mark.parametrize("folder", CASES, ids=lambda p: p.name)
def test_diff_shows_the_fix_at_the_right_line(folder, tmp_path):
    spec = spec_of(folder)
    case = copy_case(folder, tmp_path)
    before = {p: p.read_bytes() for p in (*case.rglob("*.py"), *case.rglob("*.ipynb"))}
    if spec.get("unsafe_fixes"):
        # without --unsafe-fixes the unsafe fix is named, not marked [*], and not in the diff
        safe_only = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
        assert safe_only.returncode == 1 and safe_only.stdout == b"", safe_only.stdout.decode()
        for code in spec["codes"]:
            assert re.search(rf"fix: {code} \[[a-z-]+\] [^\n]*\(unsafe fix: applied with --unsafe-fixes\)", safe_only.stderr.decode()), safe_only.stderr.decode()
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", *unsafe_flags(spec))
    out, err = result.stdout.decode(), result.stderr.decode()
    assert "Traceback (most recent call last)" not in err, err
    assert {p: p.read_bytes() for p in (*case.rglob("*.py"), *case.rglob("*.ipynb"))} == before, "--diff must not write"
    # the error in one line, then the frame: the local file and line
    assert f"{spec['file']}:{spec['line']}: " in err, err
    if spec.get("status") == "stale":
        assert result.returncode == 2
        assert f"line {spec['line']} of {spec['file']} changed since the error" in err and "nothing fixed" in err
        assert out == ""
        return
    assert re.search(rf"\b{spec['line']} \| ", err), err
    assert result.returncode == 1, err
    for words in spec["explain"]:
        assert words in err, (words, err)
    from fixdev.engine.registry import all_rules

    registered = {rule.code for rule in all_rules()}
    assert set(spec["codes"]) <= registered, "a case names a rule that does not exist"
    if spec["codes"]:
        assert out.startswith(f"--- a/{spec['file']}\n+++ b/{spec['file']}\n"), out
        assert diff_lines(out) == set(spec["fix_lines"]), out
        for code in spec["codes"]:
            assert re.search(rf"fix: {code} \[[a-z-]+\] \[\*\]", err), err
        assert "change:" not in err
    else:
        assert out == "", "no rule's fix: nothing to apply"
        assert "change:" in err
        for words in spec["change"]:
            assert words in err, (words, err)


@pytest.mark.parametrize("folder", [f for f in CASES if spec_of(f)["codes"]], ids=lambda p: p.name)
def test_apply_writes_the_fix_and_check_changes_nothing(folder, tmp_path):
    spec = spec_of(folder)
    case = copy_case(folder, tmp_path)
    target = case / spec.get("path", spec["file"])  # path: a notebook, whose cells `file` names
    original = target.read_text()
    unsafe = unsafe_flags(spec)
    check = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--check", *unsafe)
    assert check.returncode == 1 and target.read_text() == original
    # --check shows everything on stdout, the fix as a diff included
    assert f"--- a/{spec['file']}" in check.stdout.decode() and "why:" in check.stdout.decode()
    applied = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply", *unsafe)
    assert applied.returncode == 0, applied.stderr.decode()
    fixed = target.read_text()
    assert fixed != original
    # what --apply wrote is what the rules write for those findings
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / target.name).write_text(original)
    rules = fixdev_in(alone, "--no-cache", "--apply", *unsafe, "--select", ",".join(spec["codes"]), target.name)
    assert rules.returncode in (0, 1)
    if spec.get("evidence"):
        # the rules alone cannot place the value; the error's message did
        assert rules.returncode == 0 and (alone / target.name).read_text() == original
    else:
        assert set(_changed(original, fixed)) <= set(_changed(original, (alone / target.name).read_text()))
    # run again on the same log: the findings are gone, nothing more is written
    again = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply", *unsafe)
    assert again.returncode in (1, 2) and "fix:" not in again.stderr.decode()
    assert target.read_text() == fixed


def _changed(old: str, new: str) -> list[str]:
    import difflib

    return [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:1] in "+-"]


@pytest.mark.parametrize("folder", [f for f in CASES if spec_of(f).get("evidence")], ids=lambda p: p.name)
def test_the_message_places_what_the_analysis_cannot(folder, tmp_path):
    """Cases whose value comes from a function no rule can follow: plain
    ``--check`` on the file finds nothing; with the log, the message's
    evidence lets the ordinary rules fix it (test_diff_shows_the_fix_at_the_right_line
    checks where), or, where two values could be the one it names, nothing."""
    spec = spec_of(folder)
    case = copy_case(folder, tmp_path)
    plain = fixdev_in(case, "--no-cache", "--check", spec["file"])
    assert plain.returncode == 0 and "No device bugs found." in plain.stderr.decode() + plain.stdout.decode(), plain.stdout.decode()
    traced = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    assert (traced.stdout != b"") == bool(spec["codes"]), traced.stdout.decode()
    if spec["codes"]:
        assert "fixdev cannot place" in traced.stderr.decode()
    else:
        assert "fixdev cannot place" not in traced.stderr.decode()
    # the evidence is the log's: a plain run afterwards still finds nothing
    again = fixdev_in(case, "--check", spec["file"])
    assert again.returncode == 0


def test_evidence_does_not_take_a_setting_for_the_tensor(tmp_path):
    """`feats` is moved, `weights` is on `device`, `scale = args.scale` is not placed:
    the one value the analysis cannot place is a setting (most likely a
    number), so the CPU tensor is one the line hides and nothing is resolved."""
    case = copy_case(CASES_DIR / "evidence_operand", tmp_path)
    code = (case / "head.py").read_text()
    code = code.replace("feats = embed(batch)", "feats = embed(batch).to(device)\n    scale = args.scale")
    (case / "head.py").write_text(code.replace("feats @ weights", "feats @ weights * scale"))
    (case / "error.log").write_text((case / "error.log").read_text().replace("line 11, in logits", "line 12, in logits").replace("line 15, in <module>", "line 16, in <module>").replace("return feats @ weights", "return feats @ weights * scale"))
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    assert result.returncode == 1 and result.stdout == b"", result.stdout.decode()
    assert "head.py:12: RuntimeError" in result.stderr.decode() and "fixdev cannot place" not in result.stderr.decode()


def test_json_output(tmp_path):
    case = copy_case(CASES_DIR / "library_frames", tmp_path)
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "--output-format", "json")
    assert result.returncode == 1
    (item,) = json.loads(result.stdout)
    assert item["family"] == "input-weight"
    assert item["error"].startswith("RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)")
    assert item["devices"] == ["cuda", "cpu"]
    assert item["frame"] == {
        "log_path": "/home/alice/projects/cifar/train.py", "line": 29, "function": "main",
        "source": "output = model(images)", "file": "train.py",
    }
    assert item["status"] == "fixable"
    assert any("DataLoader" in sentence for sentence in item["explanation"])
    assert [f["code"] for f in item["findings"]] == ["FDV107"]
    assert item["findings"][0]["fix"]["applied"] is False
    assert item["diff"].startswith("--- a/train.py") and "+        images, labels = images.to(device), labels.to(device)" in item["diff"]
    applied = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply", "--output-format", "json")
    (item,) = json.loads(applied.stdout)
    assert applied.returncode == 0 and item["status"] == "fixed" and item["findings"][0]["fix"]["applied"] is True


def test_concise_output_and_stdin(tmp_path):
    case = copy_case(CASES_DIR / "deserialize", tmp_path)
    log = (case / "error.log").read_bytes()
    result = fixdev_in(case, "--no-cache", "--traceback", "-", "--output-format", "concise", stdin=log)
    assert result.returncode == 1
    assert result.stdout.decode() == (
        "predict.py:10: deserialize: RuntimeError: Attempting to deserialize object on a CUDA device but "
        "torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load with "
        "map_location=torch.device('cpu') to map your storages to the CPU. [fix: FDV105]\n"
    )


def test_paths_narrow_where_the_frames_may_point(tmp_path):
    """Given PATH, only files under it are candidates: under tools/ the only
    model.py is another file, whose line 13 is not the log's: nothing fixed."""
    case = copy_case(CASES_DIR / "another_machine", tmp_path)
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "tools")
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b""
    assert "line 13 of tools/model.py is not the line the log shows" in err and "or another file of that name" in err
    elsewhere = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "src/rank_utils")
    assert elsewhere.returncode == 2 and "src/rank_utils: error:" in elsewhere.stderr.decode()


def test_a_powershell_log_and_two_files_the_frame_could_be(tmp_path):
    """PowerShell writes `2> error.log` as UTF-16. Two local files end like
    the log's path and hold its line: which one ran cannot be told, so
    nothing is fixed and the user is asked to name it."""
    case = copy_case(CASES_DIR / "same_device_factory", tmp_path)
    (case / "error.log").write_bytes((case / "error.log").read_text().encode("utf-16"))
    copy = case / "old"
    copy.mkdir()
    shutil.copyfile(case / "model.py", copy / "model.py")
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b"", err
    assert "ambiguous: /data/users/kim/fusion/model.py could be" in err and "pass the one you mean as PATH" in err
    chosen = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "model.py")
    assert chosen.returncode == 1 and chosen.stdout.decode().startswith("--- a/model.py")


def test_unrecognised_log_exits_2_naming_the_families(tmp_path):
    result = run_fixdev("--traceback", str(CASES_DIR / "unrecognised" / "error.log"), "--diff", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b""
    assert "no device error recognised in the log (it shows: ModuleNotFoundError: No module named 'torchvision')" in err
    for family in ("same-device", "input-weight", "numpy", "deserialize", "no-cuda-build", "no-driver", "index-device", "data-parallel", "backend", "device-type"):
        assert f"  {family}: " in err


def test_unreadable_log_and_usage_errors(tmp_path):
    missing = fixdev_in(tmp_path, "--traceback", "nope.log")
    assert missing.returncode == 2 and "cannot read the log nope.log" in missing.stderr.decode()
    both = fixdev_in(tmp_path, "--traceback", "x.log", "--probe", "m.py:Net")
    assert both.returncode == 2 and "choose one of --traceback and --probe" in both.stderr.decode()
    sarif = fixdev_in(tmp_path, "--traceback", "x.log", "--output-format", "sarif")
    assert sarif.returncode == 2 and "full, concise or json" in sarif.stderr.decode()
    for flag in (["--train"], ["--input", "1,2"], ["--init", "{}"]):
        stray = fixdev_in(tmp_path, *flag, ".")
        assert stray.returncode == 2 and "go with --probe" in stray.stderr.decode()


def test_message_alone_is_recognised_without_a_frame(tmp_path):
    log = tmp_path / "pasted.log"
    log.write_text("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n")
    result = fixdev_in(tmp_path, "--traceback", str(log))
    assert result.returncode == 1
    assert "paste the whole traceback" in result.stdout.decode()


def test_a_notebook_cell_is_named_with_what_to_change(tmp_path):
    log = tmp_path / "cell.log"
    log.write_text(
        "RuntimeError                              Traceback (most recent call last)\n"
        "Cell In[4], line 3\n"
        "      1 model = Net().to(\"cuda\")\n"
        "      2 x = torch.randn(3, 10)\n"
        "----> 3 out = model(x)\n"
        "\n"
        "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same\n"
    )
    result = fixdev_in(tmp_path, "--traceback", str(log))
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "frame: Cell In[4], line 3" in out and "a notebook cell (Cell In[4], line 3: `out = model(x)`)" in out
    assert "change: move `x` to the model's device in that cell on line 3: `x.to(device)`" in out


def test_notebook_cells_stale_ambiguous_and_old_ipython(tmp_path):
    """A cell frame maps to the code cell whose execution count it names,
    checked against the line the log shows: a changed cell is stale, the same
    cell in two notebooks is ambiguous (until the notebook is named), and
    IPython 7's ``<ipython-input-6-...>`` names the count too."""
    case = copy_case(CASES_DIR / "notebook_cell", tmp_path)
    notebook = case / "explore.ipynb"
    original = notebook.read_text()

    notebook.write_text(original.replace('"scores = model(x)\\n"', '"scores = model(x.to(device))\\n"'))
    stale = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply")
    err = stale.stderr.decode()
    assert stale.returncode == 2 and "line 2 of cell 4 of explore.ipynb (Cell In[6]) is not the line the log shows" in err, err
    assert "nothing fixed" in err and "fix:" not in err
    notebook.write_text(original)

    (case / "old").mkdir()
    (case / "old" / "explore.ipynb").write_text(original)
    both = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    assert both.returncode == 2 and both.stdout == b"", both.stderr.decode()
    assert "ambiguous: Cell In[6] could be explore.ipynb (cell 4), old/explore.ipynb (cell 4)" in both.stderr.decode()
    # the cell's fix (device= on torch.randn) is unsafe: it draws from the GPU's generator
    named = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "--unsafe-fixes", "explore.ipynb")
    assert named.returncode == 1 and named.stdout.decode().startswith("--- a/explore.ipynb:cell 4\n")
    as_json = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "--unsafe-fixes", "--output-format", "json", "explore.ipynb")
    (item,) = json.loads(as_json.stdout)
    assert item["findings"][0]["location"] == {"row": 1, "column": 5, "cell": 4} and item["diff"].startswith("--- a/explore.ipynb:cell 4")

    old_style = (
        "RuntimeError                              Traceback (most recent call last)\n"
        "<ipython-input-6-9b1c2f> in <module>\n"
        "      1 x = torch.randn(4, 10)\n"
        "----> 2 scores = model(x)\n"
        "\n"
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n"
    )
    (case / "old.log").write_text(old_style)
    applied = fixdev_in(case, "--no-cache", "--traceback", "old.log", "--apply", "--unsafe-fixes", "explore.ipynb")
    assert applied.returncode == 0, applied.stderr.decode()
    assert "explore.ipynb:cell 4:2: RuntimeError" in applied.stderr.decode()
    cells = json.loads(notebook.read_text())["cells"]
    assert "".join(cells[3]["source"]).startswith("x = torch.randn(4, 10, device=device)\n")
    assert [c.get("execution_count") for c in cells] == [None, 1, 2, 6, None]

    (case / "unrun.log").write_text(old_style.replace("<ipython-input-6-", "<ipython-input-9-"))
    unrun = fixdev_in(case, "--no-cache", "--traceback", "unrun.log", "--diff", "explore.ipynb")
    assert unrun.returncode == 1 and "no notebook under PATH has a code cell run as In[9]" in unrun.stdout.decode() + unrun.stderr.decode()


def test_seed_program_traceback_gives_the_rules_fixes(tmp_path):
    """The second article's RobustModel/Trainer program with its bugs put back,
    and a log with torch's real wording from a CPU-only laptop (Torch not
    compiled with CUDA enabled) and from a GPU (cuda:0 and cpu meet in
    forward): --traceback --apply writes exactly what fixdev --apply writes."""
    by_log, by_rules = tmp_path / "log", tmp_path / "rules"
    for folder in (by_log, by_rules):
        folder.mkdir()
        shutil.copyfile(PROGRAM, folder / "robust_trainer.py")
    log = CASES_DIR / "robust_trainer" / "error.log"
    # FDV101 (randn on x's device) and FDV103 (a buffer) are unsafe fixes: both runs enable them
    traced = run_fixdev("--no-cache", "--traceback", str(log), "--apply", "--unsafe-fixes", cwd=by_log)
    assert traced.returncode == 0, traced.stderr.decode()
    err = traced.stderr.decode()
    assert "robust_trainer.py:44: AssertionError: Torch not compiled with CUDA enabled" in err
    assert "robust_trainer.py:31: RuntimeError: Expected all tensors to be on the same device" in err
    assert "`noise` is made by `torch.randn(x.shape)` on line 30" in err
    ruled = run_fixdev("--no-cache", "--apply", "--unsafe-fixes", "robust_trainer.py", cwd=by_rules)
    assert ruled.returncode == 0
    assert (by_log / "robust_trainer.py").read_text() == (by_rules / "robust_trainer.py").read_text()
    assert (by_log / "robust_trainer.py").read_text() != PROGRAM.read_text()


def test_real_tracebacks_of_this_cpu_only_torch(tmp_path):
    """Not a log written by hand: the not_compiled case's program and a legacy
    CUDA tensor type, run here (CPU-only torch), fail with torch's own text,
    and that output, piped in, is explained and fixed."""
    import subprocess

    pytest.importorskip("torch")
    case = copy_case(CASES_DIR / "not_compiled", tmp_path)
    run = subprocess.run([sys.executable, "train.py"], cwd=case, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and run.stderr.rstrip().endswith("AssertionError: Torch not compiled with CUDA enabled"), run.stderr
    result = fixdev_in(case, "--no-cache", "--traceback", "-", "--diff", stdin=run.stderr.encode())
    assert result.returncode == 1, result.stderr.decode()
    assert "train.py:15: AssertionError: Torch not compiled with CUDA enabled" in result.stderr.decode()
    assert diff_lines(result.stdout.decode()) == set(spec_of(CASES_DIR / "not_compiled")["fix_lines"])

    (tmp_path / "legacy.py").write_text("import torch\n\nweights = torch.cuda.FloatTensor(3, 4)\n")
    run = subprocess.run([sys.executable, "legacy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "type torch.cuda.FloatTensor not available" in run.stderr
    result = fixdev_in(tmp_path, "--no-cache", "--traceback", "-", "--diff", "legacy.py", stdin=run.stderr.encode())
    err = result.stderr.decode()
    assert "legacy.py:3: TypeError: type torch.cuda.FloatTensor not available" in err
    assert "the code makes a `torch.cuda.FloatTensor`" in err
    assert "fix: FDV110 [legacy-tensor-type]" in err and 3 in diff_lines(result.stdout.decode())


def test_a_traceback_run_never_imports_torch(tmp_path):
    case = copy_case(CASES_DIR / "library_frames", tmp_path)
    script = (
        "import runpy, sys\n"
        "sys.argv = ['fixdev', '--no-cache', '--traceback', 'error.log', '--diff']\n"
        "try:\n    runpy.run_module('fixdev', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO TORCH', file=sys.stderr)\n"
    )
    import subprocess

    result = subprocess.run([sys.executable, "-c", script], cwd=case, capture_output=True, text=True, timeout=300)
    assert result.stderr.rstrip().endswith("NO TORCH"), result.stderr


# -- reading logs: the shapes the cases above do not all show ------------------------


def test_old_ipython_and_pytest_long_format_frames():
    from fixdev.diagnose.log import parse_log

    old_ipython = (
        "RuntimeError                              Traceback (most recent call last)\n"
        "<ipython-input-5-3f2a> in <module>\n"
        "      2 x = torch.randn(3, 10)\n"
        "----> 3 out = model(x)\n"
        "\n"
        "~/proj/model.py in forward(self, x)\n"
        "     12     def forward(self, x):\n"
        "---> 13         return self.fc(x)\n"
        "\n"
        "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #4 'mat1'\n"
    )
    (report,) = parse_log(old_ipython)
    assert report.family.name == "backend"
    assert [(f.path, f.line, f.source, f.cell) for f in report.frames] == [
        ("<ipython-input-5-3f2a>", 3, "out = model(x)", True),
        ("~/proj/model.py", 13, "return self.fc(x)", False),
    ]
    pytest_long = (
        "___________________________ test_forward ___________________________\n"
        "\n"
        "    def test_forward():\n"
        ">       out = Net().cuda()(torch.randn(2, 4))\n"
        "\n"
        "tests/test_net.py:8: \n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
        "\n"
        "    def forward(self, x):\n"
        ">       return self.fc(x) + self.bias\n"
        "E       RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n"
        "\n"
        "net.py:12: RuntimeError\n"
    )
    (report,) = parse_log(pytest_long)
    assert report.exception.startswith("RuntimeError: Expected all tensors")
    assert [(f.path, f.line, f.source) for f in report.frames] == [
        ("tests/test_net.py", 8, "out = Net().cuda()(torch.randn(2, 4))"),
        ("net.py", 12, "return self.fc(x) + self.bias"),
    ]


def test_progress_bars_colours_and_timestamps_are_read_as_a_terminal_shows_them():
    from fixdev.diagnose.log import clean

    assert clean("  3%|▎ | 1/30\r 7%|▋ | 2/30\rTraceback (most recent call last):") == ["Traceback (most recent call last):"]
    assert clean("\x1b[0;31mRuntimeError\x1b[0m: boom") == ["RuntimeError: boom"]
    assert clean("2024-05-01T10:00:05.4406127Z E   TypeError: x") == ["E   TypeError: x"]


# -- recurrent layers and the other wordings torch uses -------------------------------


RNN_MOVED_INPUT = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rnn = nn.GRU(8, 16, batch_first=True).to(device)
h0 = torch.zeros(1, 2, 16, device=device)
x = torch.randn(2, 5, 8)
y, _ = rnn(x, h0)
"""

RNN_UNMOVED = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rnn = nn.LSTM(8, 16, batch_first=True)
x = torch.randn(2, 5, 8).to(device)
y, _ = rnn(x)
"""


def _one_frame_log(path: str, line: int, source: str, message: str) -> str:
    return f'Traceback (most recent call last):\n  File "{path}", line {line}, in <module>\n    {source}\nRuntimeError: {message}\n'


def test_rnn_errors_either_way_round(tmp_path):
    """The rnn cases have the GPU on the input's side (hidden state) and on the
    weights' side (parameters); the other order of each: the input on the CPU
    with its hidden state on the GPU is the input's factory to fix; the input
    on the GPU with the weights on the CPU is a layer never moved, which
    unregistered-submodule moves before the call (an unsafe fix)."""
    (tmp_path / "hidden.py").write_text(RNN_MOVED_INPUT)
    (tmp_path / "hidden.log").write_text(_one_frame_log(
        "/srv/job/hidden.py", 8, "y, _ = rnn(x, h0)",
        "Input and hidden tensors are not at the same device, found input tensor at cpu and hidden tensor at cuda:0"))
    # device= on torch.randn is unsafe (the GPU's generator): shown as [*] and in the diff with --unsafe-fixes
    hidden = fixdev_in(tmp_path, "--no-cache", "--traceback", "hidden.log", "--diff", "--unsafe-fixes", "hidden.py")
    err = hidden.stderr.decode()
    assert hidden.returncode == 1, err
    assert "error: a recurrent layer's input is on the CPU while the hidden state passed to it is on the GPU (cuda:0)" in err
    assert "fix: FDV102 [factory-device] [*] Add `device=device` (line 7)" in err
    assert diff_lines(hidden.stdout.decode()) == {7}

    (tmp_path / "unmoved.py").write_text(RNN_UNMOVED)
    (tmp_path / "unmoved.log").write_text(_one_frame_log(
        "/srv/job/unmoved.py", 7, "y, _ = rnn(x)",
        "Input and parameter tensors are not at the same device, found input tensor at cuda:0 and parameter tensor at cpu"))
    unmoved = fixdev_in(tmp_path, "--no-cache", "--traceback", "unmoved.log", "--diff", "--unsafe-fixes", "unmoved.py")
    err = unmoved.stderr.decode()
    assert unmoved.returncode == 1, err
    assert "error: a recurrent layer's input is on the GPU (cuda:0) while its weights are on the CPU" in err
    assert "`rnn` is built by `nn.LSTM(8, 16, batch_first=True)` on line 5 and never moved to the GPU" in err
    assert "fix: FDV113 [unregistered-submodule] [*] Move `rnn` to `device`" in err
    assert "+rnn = rnn.to(device)\n" in unmoved.stdout.decode()


# Device-mismatch wordings from torch's own checks (C++ kernels and the
# Python meta functions that mirror them), each with the two devices it names,
# GPU side first.
OTHER_WORDINGS = [
    ("Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments for addmm)", "cpu-argument", ["cuda", "cpu"]),
    ("Tensor for 'out' is on CPU, Tensor for argument #1 'self' is on CPU, but expected them to be on GPU (while checking arguments for addmm)", "cpu-argument", ["cuda", "cpu"]),
    ("Tensor for argument #2 'weight' is on CPU, but expected it to be on GPU (while checking arguments for cudnn_batch_norm)", "cpu-argument", ["cuda", "cpu"]),
    ("expected self and mask to be on the same device, but got mask on cpu and self on cuda:0", "operand-device", ["cuda:0", "cpu"]),
    ("stft input and window must be on the same device but got self on cuda:0 and window on cpu", "operand-device", ["cuda:0", "cpu"]),
    ("Expected query, key, and value to have the same device type, but got query.device: cuda:0 key.device: cpu and value.device: cuda:0 instead.", "operand-device", ["cuda:0", "cpu"]),
    ("grid_sampler(): expected input and grid to be on same device, but input is on cuda:0 and grid is on cpu", "operand-device", ["cuda:0", "cpu"]),
    ("Expected b and A to be on the same device, but found b on cpu and A on cuda:0 instead.", "operand-device", ["cuda:0", "cpu"]),
    ("Expected all tensors to be on the same device. addmm: expected 'mat1' to be a CPU tensor, but got tensor on cuda:0", "operand-device", ["cuda:0", "cpu"]),
    ("Input and hidden tensors are not at the same device, found input tensor at cpu and hidden tensor at cuda:0", "rnn", ["cuda:0", "cpu"]),
    ("Input and parameter tensors are not at the same device, found input tensor at cuda:0 and parameter tensor at cpu", "rnn", ["cuda:0", "cpu"]),
]


@pytest.mark.parametrize("message, family, devices", OTHER_WORDINGS, ids=[w[0][:40] for w in OTHER_WORDINGS])
def test_other_device_wordings_are_known(tmp_path, message, family, devices):
    """Each is a device error to --traceback (not exit 2, "no device error
    recognised"), with its family and devices in the JSON."""
    (tmp_path / "error.log").write_text(_one_frame_log("/elsewhere/run.py", 3, "out = f(x)", message))
    result = fixdev_in(tmp_path, "--no-cache", "--traceback", "error.log", "--output-format", "json")
    assert result.returncode == 1, result.stderr.decode()
    (item,) = json.loads(result.stdout)
    assert (item["family"], item["devices"]) == (family, devices)
    assert item["error"] == f"RuntimeError: {message}"


# -- after the fix: the lines that would fail next ------------------------------------


NEXT_LINES = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def main():
    net = nn.Linear(4, 2)
    net.cuda()
    x = torch.randn(3, 4)
    out = net(x)
    print(out.sum())


def evaluate():
    model = nn.Linear(4, 2).to(device)
    batch = torch.randn(3, 4)
    return model(batch)


main()
"""


def _cuda_log(name: str, line: int, source: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/home/ana/job/{name}", line 21, in <module>\n    main()\n'
        f'  File "/home/ana/job/{name}", line {line}, in main\n    {source}\n'
        '  File "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", line 310, in _lazy_init\n'
        '    raise AssertionError("Torch not compiled with CUDA enabled")\n'
        "AssertionError: Torch not compiled with CUDA enabled\n"
    )


def test_apply_fixes_what_fails_next_in_the_same_function(tmp_path):
    """`net.cuda()` fails on a CPU-only laptop; fixed alone, `net(x)` two lines
    later fails on the GPU with `x` on the CPU. Both are fixed, and nothing
    outside `main` (evaluate's own finding is another flow)."""
    (tmp_path / "job.py").write_text(NEXT_LINES)
    (tmp_path / "error.log").write_text(_cuda_log("job.py", 9, "net.cuda()"))
    # the next line's fix (device= on torch.randn) is unsafe: the GPU's generator
    result = fixdev_in(tmp_path, "--no-cache", "--traceback", "error.log", "--apply", "--unsafe-fixes", "job.py")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert "next: FDV102 [factory-device] [*]" in err and "(line 10)" in err
    assert "`main` has 1 more value on the wrong device" in err
    fixed = (tmp_path / "job.py").read_text()
    assert "    net.to(device)\n    x = torch.randn(3, 4, device=" in fixed
    assert "    batch = torch.randn(3, 4)\n" in fixed, "evaluate is not the failing flow"
    left = fixdev_in(tmp_path, "--no-cache", "--check", "--output-format", "concise", "job.py")
    assert [line.split(": ")[0].rsplit(":", 1)[0] for line in left.stdout.decode().splitlines()] == ["job.py:17"], left.stdout.decode()


def test_apply_says_what_remains_in_the_same_function_and_exits_1(tmp_path):
    """A finding in the failing function that no rule can fix (no device in
    reach for `device=`): the error is fixed, the summary says one remains,
    and --apply exits 1 as it does for findings without a fix."""
    code = NEXT_LINES.replace("    out = net(x)\n", "    out = net(x) + torch.zeros(3, 2)\n")
    code = code.replace('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "\n")  # no device in reach
    (tmp_path / "job.py").write_text(code)
    # --unsafe-fixes throughout: x's fix (device= on torch.randn) is unsafe; the zeros has no fix either way
    plain = fixdev_in(tmp_path, "--no-cache", "--check", "--unsafe-fixes", "--output-format", "concise", "job.py").stdout.decode()
    assert "job.py:11:20: FDV102 Tensor made on the CPU" in plain and "[*]" not in plain.split("job.py:11:20")[1].splitlines()[0]
    (tmp_path / "error.log").write_text(_cuda_log("job.py", 9, "net.cuda()"))
    result = fixdev_in(tmp_path, "--no-cache", "--traceback", "error.log", "--apply", "--unsafe-fixes", "job.py")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert "1 fixed in 1 file" in err and "1 finding of a value on the wrong device remains in the failing lines' functions after the fix" in err
    assert "x = torch.randn(3, 4, device=" in (tmp_path / "job.py").read_text()


def test_quiet_apply_prints_only_what_is_left(tmp_path):
    """-q with --apply, as for files: an error fixed prints nothing (no
    report, no diff, no summary); one that leaves a finding prints that
    finding's line, in the file as written."""
    case = copy_case(CASES_DIR / "library_frames", tmp_path)
    quiet = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply", "-q")
    assert quiet.returncode == 0 and quiet.stdout == b"" and quiet.stderr == b"", quiet.stderr.decode()
    assert "images, labels = images.to(device), labels.to(device)" in (case / "train.py").read_text()

    code = NEXT_LINES.replace("    out = net(x)\n", "    out = net(x) + torch.zeros(3, 2)\n")
    (tmp_path / "job.py").write_text(code.replace('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "\n"))
    (tmp_path / "error.log").write_text(_cuda_log("job.py", 9, "net.cuda()"))
    left = fixdev_in(tmp_path, "--no-cache", "--traceback", "error.log", "--apply", "--unsafe-fixes", "-q", "job.py")  # x's fix is unsafe
    lines = left.stderr.decode().splitlines()
    assert left.returncode == 1 and left.stdout == b""
    assert len(lines) == 1 and re.match(r"^job\.py:13:\d+: FDV102 ", lines[0]), lines


def test_a_comment_added_to_the_failing_line_is_not_a_change(tmp_path):
    """The line the log prints is compared as code (its tokens), so a
    trailing comment or other spacing since the error still maps and fixes;
    a changed token is still a changed line (the stale case)."""
    case = copy_case(CASES_DIR / "library_frames", tmp_path)
    train = case / "train.py"
    train.write_text(train.read_text().replace("        output = model(images)\n", "        output = model( images )  # why on the GPU?\n"))
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    err = result.stderr.decode()
    assert result.returncode == 1 and "changed since the error" not in err, err
    assert "fix: FDV107 [unmoved-input]" in err and diff_lines(result.stdout.decode()) == {28}
    train.write_text(train.read_text().replace("model( images )", "model(images[0])"))
    stale = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff")
    assert stale.returncode == 2 and "is not the line the log shows" in stale.stderr.decode()


def _cleared(notebook: Path) -> str:
    """The notebook as saved after "Clear All Outputs": no execution counts."""
    data = json.loads(notebook.read_text())
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"], cell["outputs"] = None, []
    return json.dumps(data, indent=1)


def test_a_notebook_saved_with_cleared_outputs_maps_by_the_line(tmp_path):
    """No code cell has the count `Cell In[6]` names: the line the log prints,
    in exactly one cell without a count and at the frame's line of it, is the
    one. Twice in such cells: ambiguous, nothing fixed."""
    case = copy_case(CASES_DIR / "notebook_cell", tmp_path)
    notebook = case / "explore.ipynb"
    cleared = _cleared(notebook)
    notebook.write_text(cleared)
    # the cell's fix (device= on torch.randn) is unsafe: it draws from the GPU's generator
    result = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "--unsafe-fixes", "explore.ipynb")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert "explore.ipynb:cell 4:2: RuntimeError" in err and "fix: FDV102 [factory-device]" in err
    assert result.stdout.decode().startswith("--- a/explore.ipynb:cell 4\n")
    applied = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--apply", "--unsafe-fixes", "explore.ipynb")
    assert applied.returncode == 0, applied.stderr.decode()
    assert "".join(json.loads(notebook.read_text())["cells"][3]["source"]).startswith("x = torch.randn(4, 10, device=device)\n")

    twice = json.loads(cleared)
    twice["cells"][4]["source"] = ["x = torch.randn(2, 10)\n", "scores = model(x)\n"]
    notebook.write_text(json.dumps(twice, indent=1))
    both = fixdev_in(case, "--no-cache", "--traceback", "error.log", "--diff", "explore.ipynb")
    assert both.returncode == 2 and both.stdout == b"", both.stderr.decode()
    assert "the line the log shows is in several cells without an execution count: explore.ipynb (cell 4, line 2), explore.ipynb (cell 5, line 2)" in both.stderr.decode()
