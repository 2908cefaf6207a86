"""The real ``fixdev`` entry point on real files."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

from fixdev.engine.registry import all_rules

BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)\n"
FIXED = "import torch\n\n\ndef f(x):\n    return x * torch.ones_like(x)\n"


def awkward_tree(root: Path) -> dict[str, bytes]:
    files = {
        "crlf.py": BUGGY.replace("\n", "\r\n").encode(),
        "bom.py": codecs.BOM_UTF8 + BUGGY.encode(),
        "latin1.py": b"# -*- coding: latin-1 -*-\n" + BUGGY.encode() + b"name = '\xe9t\xe9'\n",
        "tabs.py": BUGGY.replace("    ", "\t").encode(),
        "no_newline.py": BUGGY.rstrip("\n").encode(),
        "syntax_error.py": b"import torch\ndef f(x:\n    return torch.ones(x.shape)\n",
        "python2.py": b"print 'hello'\n",
        "binary.py": b"\x00\x01\x02\xff" * 10,
        "empty.py": b"",
        "readonly.py": BUGGY.encode(),
        "a/b/c/d/e/f/g/h/deep.py": BUGGY.encode(),
        ".venv/lib/venv_file.py": BUGGY.encode(),
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.chmod(root / "readonly.py", 0o444)
    return files


def test_awkward_tree(tmp_path, fixdev):
    files = awkward_tree(tmp_path)
    result = fixdev("--apply", "--unsafe-fixes", ".", cwd=tmp_path)  # FDV101's fix is unsafe (dtype)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert "Traceback" not in err
    now = {name: (tmp_path / name).read_bytes() for name in files}
    assert now["crlf.py"] == FIXED.replace("\n", "\r\n").encode()
    assert now["bom.py"] == codecs.BOM_UTF8 + FIXED.encode()
    assert now["latin1.py"] == b"# -*- coding: latin-1 -*-\n" + FIXED.encode() + b"name = '\xe9t\xe9'\n"
    assert now["tabs.py"] == FIXED.replace("    ", "\t").encode()
    assert now["no_newline.py"] == FIXED.rstrip("\n").encode()
    assert now["a/b/c/d/e/f/g/h/deep.py"] == FIXED.encode()
    for name in ("syntax_error.py", "python2.py", "binary.py", "readonly.py", "empty.py", ".venv/lib/venv_file.py"):
        assert now[name] == files[name], name
    error_lines = [line for line in err.splitlines() if ": error: " in line]
    assert sorted(line.split(":")[0] for line in error_lines) == ["binary.py", "python2.py", "readonly.py", "syntax_error.py"]
    assert "venv_file" not in result.stdout.decode("utf-8", "replace") + err  # the patch holds latin1.py in latin-1
    second = fixdev("--apply", "--unsafe-fixes", ".", cwd=tmp_path)
    assert {name: (tmp_path / name).read_bytes() for name in files} == now, "a second run changes nothing"
    assert [line for line in second.stdout.decode("utf-8", "replace").splitlines() if line.startswith("--- a/")] == [], "no patch for a file not written"


def test_a_file_apply_cannot_write_is_reported_as_it_stands(tmp_path, fixdev):
    (tmp_path / "readonly.py").write_text(BUGGY)
    os.chmod(tmp_path / "readonly.py", 0o444)
    (tmp_path / "fine.py").write_text(BUGGY)
    result = fixdev("--apply", "--unsafe-fixes", ".", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert (tmp_path / "readonly.py").read_text() == BUGGY and (tmp_path / "fine.py").read_text() == FIXED
    assert "readonly.py: error: file is read-only; not written" in err
    assert [line for line in result.stdout.decode().splitlines() if line.startswith("--- a/")] == ["--- a/fine.py"]
    # its finding is still there, at its place in the file on disk, and the
    # summary counts only what was written
    line = next(i for i, text in enumerate(BUGGY.splitlines(), 1) if "torch.ones(" in text)
    assert f"readonly.py:{line}:" in err and "FDV101" in err
    assert "Fixed 1 finding in 1 file; 1 remaining." in err


def test_diff_never_writes_and_exit_codes(tmp_path, fixdev):
    path = tmp_path / "m.py"
    path.write_text(BUGGY)
    result = fixdev("--diff", "--unsafe-fixes", "m.py", cwd=tmp_path)  # FDV101's fix is unsafe (dtype)
    assert result.returncode == 1
    assert result.stdout.decode().startswith("--- a/m.py\n+++ b/m.py\n")
    assert path.read_text() == BUGGY
    assert fixdev("--diff", "--unsafe-fixes", "--exit-zero", "m.py", cwd=tmp_path).returncode == 0
    assert fixdev("--apply", "--unsafe-fixes", "m.py", cwd=tmp_path).returncode == 0
    assert path.read_text() == FIXED
    assert fixdev("--diff", "--unsafe-fixes", "m.py", cwd=tmp_path).returncode == 0
    assert fixdev("m.py", cwd=tmp_path).returncode == 0


def test_check_is_the_default_and_prints_one_line_per_finding(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY + "y = z.cuda(0)\n")
    result = fixdev("--unsafe-fixes", "m.py", cwd=tmp_path)  # [*] marks a fix --apply applies: FDV101's is unsafe
    assert result.returncode == 1
    lines = [line for line in result.stdout.decode().splitlines() if line.startswith("m.py:")]
    assert lines[0].startswith("m.py:5:16: FDV101 [like-factory] [*] ")
    assert lines[1].startswith("m.py:6:5: FDV104 [cuda-call] `.cuda()` with an explicit")
    assert len(lines) == 2
    assert (tmp_path / "m.py").read_text().startswith(BUGGY)


def test_apply_exits_1_when_unfixable_findings_remain(tmp_path, fixdev):
    (tmp_path / "m.py").write_text("import torch\ny = z.cuda(0)\n")
    assert fixdev("--apply", "m.py", cwd=tmp_path).returncode == 1


def test_missing_path_and_unknown_rule_are_usage_errors(tmp_path, fixdev):
    missing = fixdev("nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py: error: no such file or directory" in missing.stderr.decode()
    unknown = fixdev("--select", "FDV999", ".", cwd=tmp_path)
    assert unknown.returncode == 2 and "FDV999" in unknown.stderr.decode()
    assert b"Traceback" not in missing.stderr + unknown.stderr


def test_missing_path_does_not_stop_the_others(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--apply", "--unsafe-fixes", "nope.py", "m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert (tmp_path / "m.py").read_text() == FIXED


@pytest.mark.parametrize("words, expected", [(["--select", "FDV104"], []), (["--select", "like-factory"], ["FDV101"]),
                                             (["--select", "FDV1"], ["FDV101"]),
                                             (["--select", "cuda-call", "--extend-select", "FDV101"], ["FDV101"])])
def test_selection(tmp_path, fixdev, words, expected):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--output-format", "json", *words, "m.py", cwd=tmp_path)
    assert [item["code"] for item in json.loads(result.stdout)] == expected


def test_configuration_and_per_file_ignores(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nper-file-ignores = { "tests/**" = ["like-factory"] }\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(BUGGY)
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--output-format", "concise", "--unsafe-fixes", ".", cwd=tmp_path)  # [*]: FDV101's fix is unsafe
    assert result.stdout.decode().splitlines() == ["m.py:5:16: FDV101 [*] Factory sized by another tensor's shape allocates on the CPU, not on that tensor's device"]


def test_bad_configuration_is_one_line_and_exit_2(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nselekt = ["ALL"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    (tmp_path / "b.py").write_text(BUGGY)
    result = fixdev(".", cwd=tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err
    assert err.count("unknown key 'selekt'") == 1 and "pyproject.toml" in err


def test_rule_option_from_configuration(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text("[tool.fixdev.rules.constant-buffer]\npersistent = true\n")
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n"
    )
    fixdev("--apply", "--unsafe-fixes", "m.py", cwd=tmp_path)  # FDV103's fix is unsafe (a buffer follows .half())
    assert 'self.register_buffer("c", torch.ones(3))\n' in (tmp_path / "m.py").read_text()


def test_rules_and_explain(fixdev):
    listing = fixdev("--list-rules").stdout.decode()
    for rule in all_rules():
        assert rule.code in listing and rule.name in listing
    explained = fixdev("--explain", "like-factory")
    assert explained.returncode == 0
    for heading in ("## What it does", "## Fix safety", "## When it stays silent"):
        assert heading in explained.stdout.decode()
    assert fixdev("--explain", "nope").returncode == 2


def test_a_folder_named_like_a_command_is_a_path(tmp_path, fixdev):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "m.py").write_text(BUGGY)
    assert "rules/m.py:5:16" in fixdev("rules", cwd=tmp_path).stdout.decode()


def test_interactive_needs_a_terminal(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--apply", "--interactive", "m.py", cwd=tmp_path, stdin=b"y\n")
    assert result.returncode == 2 and "needs a terminal" in result.stderr.decode()
    assert (tmp_path / "m.py").read_text() == BUGGY


def test_interactive_on_a_terminal(tmp_path):
    import pty
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(BUGGY + "\n\ndef g(y):\n    return y * torch.zeros(y.shape)\n")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fixdev", "--apply", "--unsafe-fixes", "-i", "m.py"], cwd=tmp_path, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    os.write(leader, b"n\ny\n")
    out, err = proc.communicate(timeout=60)
    os.close(leader)
    os.close(follower)
    assert proc.returncode == 1, err.decode()  # the refused fix remains a finding
    text = (tmp_path / "m.py").read_text()
    assert "torch.ones(x.shape)" in text and "torch.zeros_like(y)" in text
    assert out.decode().count("Apply this fix?") == 2


def test_color_only_when_asked_or_on_a_terminal(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    assert "\x1b[" not in fixdev("--diff", "--unsafe-fixes", "m.py", cwd=tmp_path).stdout.decode()  # a diff to colour: FDV101's fix is unsafe
    assert "\x1b[31m" in fixdev("--diff", "--unsafe-fixes", "--color", "always", "m.py", cwd=tmp_path).stdout.decode()


def test_version_and_bad_option(fixdev):
    assert fixdev("--version").stdout.decode().startswith("fixdev ")
    bad = fixdev("--frobnicate")
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr
    both = fixdev("--diff", "--apply", ".")
    assert both.returncode == 2 and b"choose one of" in both.stderr


def test_progress_only_on_a_terminal_and_never_on_stdout(tmp_path):
    import pty
    import subprocess
    import sys

    for i in range(210):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    (tmp_path / "bug.py").write_text(BUGGY)
    leader, follower = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "fixdev", "--no-cache", "."], cwd=tmp_path, stdout=subprocess.PIPE, stderr=follower, env={**os.environ, "NO_COLOR": "1"}, timeout=120)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert b"[211/211 files]" in shown
    assert b"\r" not in proc.stdout and proc.stdout.decode().startswith("bug.py:5:16: FDV101")
    piped = subprocess.run([sys.executable, "-m", "fixdev", "--no-cache", "."], cwd=tmp_path, capture_output=True, timeout=120)
    assert b"files]" not in piped.stderr


# Issue 10 item 8: positions a user sees are positions in the file on disk.
POSITIONS = "import torch\na = x.cuda()\nb = torch.ones(x.shape), y.cuda(0)\n"


def test_diff_reports_remaining_findings_at_their_place_on_disk(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(POSITIONS)
    result = fixdev("--diff", "--output-format", "concise", "m.py", cwd=tmp_path)
    # The fixes insert a device line above and shorten `torch.ones(x.shape)`:
    # `y.cuda(0)` is still at line 3, column 26 of the unchanged file.
    assert "m.py:3:26: FDV104 " in result.stderr.decode()


def test_apply_reports_remaining_findings_at_their_place_in_the_written_file(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(POSITIONS)
    result = fixdev("--apply", "--output-format", "concise", "m.py", cwd=tmp_path)
    written = (tmp_path / "m.py").read_text().splitlines()
    reported = [line for line in result.stderr.decode().splitlines() if ": FDV104 " in line]
    assert len(reported) == 1
    row, column = map(int, reported[0].split(":")[1:3])
    assert written[row - 1][column - 1 :].startswith("y.cuda(0)")


def test_json_positions_with_diff_are_in_the_file_on_disk(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(POSITIONS)
    items = json.loads(fixdev("--diff", "--unsafe-fixes", "--output-format", "json", "m.py", cwd=tmp_path).stdout)  # FDV101's fix is unsafe
    assert [(i["code"], i["location"]["row"], i["location"]["column"], (i["fix"] or {}).get("applied")) for i in items] == [
        ("FDV104", 2, 5, True), ("FDV101", 3, 5, True), ("FDV104", 3, 26, None)
    ]


# Issue 10 item 9
def test_stdin_filename_without_dash_is_a_usage_error(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev("--stdin-filename", "x.py", "m.py", cwd=tmp_path, stdin=BUGGY.encode())
    assert result.returncode == 2 and "--stdin-filename" in result.stderr.decode() and result.stdout == b""
    assert fixdev("--stdin-filename", "x.py", cwd=tmp_path, stdin=BUGGY.encode()).returncode == 2


# Issue 10 item 14
def test_interactive_declined_fix_is_not_asked_again(tmp_path):
    import pty
    import subprocess
    import sys

    # Accepting the first fix shortens the text before the second one, so the
    # second one comes back at other offsets in the next round.
    (tmp_path / "m.py").write_text(BUGGY + "\n\ndef g(y):\n    return y * torch.zeros(y.shape)\n")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fixdev", "--apply", "--unsafe-fixes", "-i", "m.py"], cwd=tmp_path, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    os.write(leader, b"y\nn\nn\nn\n")  # spare answers, so that a repeated prompt cannot hang the test
    out, err = proc.communicate(timeout=60)
    os.close(leader)
    os.close(follower)
    assert proc.returncode == 1, err.decode()
    text = (tmp_path / "m.py").read_text()
    assert "torch.ones_like(x)" in text and "torch.zeros(y.shape)" in text
    assert out.decode().count("Apply this fix?") == 2


# Issue 10 item 17
def test_unknown_rule_suggests_a_close_name(tmp_path, fixdev):
    result = fixdev("--select", "like-factroy", ".", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean 'like-factory'" in result.stderr.decode()
    explained = fixdev("--explain", "cuda-cal")
    assert explained.returncode == 2 and "did you mean 'cuda-call'" in explained.stderr.decode()


def test_help_says_where_configuration_lives_and_what_exit_codes_mean(fixdev):
    text = " ".join(fixdev("--help").stdout.decode().split())
    assert "[tool.fixdev] in the nearest pyproject.toml" in text
    for code in ("0 ", "1 ", "2 "):
        assert "Exit codes: " in text and code in text.split("Exit codes:")[1]


@pytest.mark.parametrize("mode", ["--check", "--diff", "--apply"])
def test_a_clean_run_says_so_in_one_line(tmp_path, fixdev, mode):
    (tmp_path / "m.py").write_text(FIXED)
    result = fixdev(mode, "m.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr.decode() == "No device bugs found.\n"
    assert fixdev(mode, "--quiet", "m.py", cwd=tmp_path).stderr == b""


@pytest.mark.parametrize("words", [["--ignore", "ALL"], ["--select", "FDV104", "--ignore", "cuda-call"], ["--ignore", "FDV1"]])
def test_a_selection_that_leaves_no_rule_is_a_usage_error(tmp_path, fixdev, words):
    (tmp_path / "m.py").write_text(BUGGY)
    result = fixdev(*words, "m.py", cwd=tmp_path)
    assert result.returncode == 2 and "no rule" in result.stderr.decode() and result.stdout == b""


def test_findings_without_a_fix_go_to_stderr_in_diff_and_apply(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY + "y = z.cuda(0)\n")
    diff = fixdev("--diff", "--unsafe-fixes", "m.py", cwd=tmp_path)  # FDV101's fix is unsafe
    assert diff.stdout.decode().startswith("--- a/m.py\n") and "FDV104" not in diff.stdout.decode()
    assert "m.py:6:5: FDV104" in diff.stderr.decode()
    apply = fixdev("--apply", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert apply.stdout.decode().startswith("--- a/m.py\n") and "FDV104" not in apply.stdout.decode()
    assert "m.py:6:5: FDV104" in apply.stderr.decode()


def test_a_crashing_rule_costs_one_file_not_the_run(tmp_path):
    """A bug in a rule (here: one made to raise on a file that has a marker)
    is one error line for that file; the other files are fixed; exit 2."""
    import subprocess
    import sys

    (tmp_path / "a_crash.py").write_text("# CRASH\n" + BUGGY)
    (tmp_path / "b_fine.py").write_text(BUGGY)
    driver = (
        "import sys\n"
        "from fixdev.codemods.like_factory import LikeFactory\n"
        "original = LikeFactory.visit_Call\n"
        "def visit_Call(self, node):\n"
        "    if self.context.text.startswith('# CRASH'):\n"
        "        raise KeyError('boom')\n"
        "    return original(self, node)\n"
        "LikeFactory.visit_Call = visit_Call\n"
        "from fixdev.interfaces.cli import main\n"
        "sys.argv = ['fixdev', '--apply', '--unsafe-fixes', '--no-cache', '-j', '1', '.']\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert errors == [errors[0]] and errors[0].startswith("a_crash.py: error: internal error") and "KeyError" in errors[0]
    assert (tmp_path / "b_fine.py").read_text() == FIXED
    assert (tmp_path / "a_crash.py").read_text() == "# CRASH\n" + BUGGY


RESUMED = (
    "import torch\nimport torch.nn as nn\n\n\n"
    "def resume(model, checkpoint, device):\n"
    "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
    "    optimizer.load_state_dict(checkpoint['optimizer'])\n"
    "    model.to(device)\n"
    "    return optimizer\n\n\n"
    "def mask(x):\n    return x * torch.ones(x.shape)\n"
)


def test_select_and_ignore_optimizer_before_move(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(RESUMED)

    def codes(*args):
        result = fixdev("--output-format", "json", "--no-cache", *args, "m.py", cwd=tmp_path)
        assert result.returncode == 1, result.stderr.decode()
        return sorted(item["code"] for item in json.loads(result.stdout))

    assert codes() == ["FDV101", "FDV112"]
    for word in ("FDV112", "optimizer-before-move", "state"):
        assert codes("--select", word) == ["FDV112"]
        assert codes("--ignore", word) == ["FDV101"]
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nignore = ["optimizer-before-move"]\n')
    assert codes() == ["FDV101"]
    assert codes("--extend-select", "FDV112") == ["FDV101"]  # --ignore and ignore win over extend-select


def test_workers_take_the_largest_files_first_and_report_in_path_order(tmp_path, fixdev):
    """Several workers start with the largest files (so none waits on a big one
    at the end); the findings still come out in path order, as with one."""
    for i in range(12):
        padding = "x = 1\n" * (300 * (i % 4))  # sizes out of path order
        (tmp_path / f"m{i:02}.py").write_text(f"import torch\n{padding}def f(x):\n    return torch.ones(x.shape)\n")
    one = fixdev("--check", "--no-cache", "--output-format", "concise", "--jobs", "1", ".", cwd=tmp_path)
    two = fixdev("--check", "--no-cache", "--output-format", "concise", "--jobs", "2", ".", cwd=tmp_path)
    lines = two.stdout.decode().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"m{i:02}.py" for i in range(12)]
    assert two.stdout == one.stdout and two.returncode == one.returncode == 1


# Issue 26 item 3: unreadable paths named on the command line.
def _unprivileged(root: Path) -> list[str]:
    """A command prefix under which permission bits bind, so the test can fail.

    As root they do not: run as nobody when nobody can run fixdev with this
    interpreter, else (its packages under root's 0700 home) stay root without
    the two capabilities that let root ignore them. Never skipped: a missing
    setpriv fails the test."""
    if os.geteuid() != 0:
        return []
    import shutil
    import subprocess
    import sys

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to test unreadable paths as root")
    nobody = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    if subprocess.run([*nobody, sys.executable, "-m", "fixdev", "--version"], capture_output=True).returncode == 0:
        return nobody
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


def test_unreadable_paths_named_on_the_command_line_are_one_line_each(tmp_path):
    import subprocess
    import sys
    import tempfile

    # World-readable, so that nobody can reach the readable files.
    root = Path(tempfile.mkdtemp(prefix="fixdev-perm-"))
    try:
        root.chmod(0o755)
        for name in ("ok.py", "locked/inside.py", "secret.py", "closed/a.py"):
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_text(BUGGY)
            (root / name).chmod(0o644)
        for name in ("locked", "closed"):
            (root / name).chmod(0o000)
        (root / "secret.py").chmod(0o000)
        prefix = _unprivileged(root)
        control = subprocess.run([*prefix, sys.executable, "-c", f"open({str(root / 'secret.py')!r})"], capture_output=True)
        assert control.returncode != 0 and b"PermissionError" in control.stderr, "the permission bits must bind"

        def run(*paths: str) -> tuple[int, str, str]:
            result = subprocess.run([*prefix, sys.executable, "-m", "fixdev", "--no-cache", "--output-format", "concise", *paths],
                                    cwd=root, capture_output=True, env={**os.environ, "NO_COLOR": "1", "HOME": str(root)}, timeout=120)
            return result.returncode, result.stdout.decode(), result.stderr.decode()

        for paths, line in [(["locked/inside.py", "ok.py"], "locked/inside.py: error: cannot read: Permission denied"),
                            (["ok.py", "secret.py"], "secret.py: error: cannot read: Permission denied"),
                            (["closed", "ok.py"], "closed: error: cannot list directory: Permission denied")]:
            code, out, err = run(*paths)
            assert code == 2, (paths, err)
            assert "Traceback" not in err and "Usage:" not in err and "Invalid value" not in err, err
            assert [e for e in err.splitlines() if ": error: " in e] == [line]
            assert out.startswith("ok.py:5:16: FDV101"), "the other path is still checked"
        # The same lines a walked folder gets.
        code, out, err = run(".")
        assert code == 2 and "secret.py: error: cannot read: Permission denied" in err and "closed: error: cannot list directory" in err
    finally:
        for folder in ("locked", "closed"):
            (root / folder).chmod(0o755)
        import shutil

        shutil.rmtree(root)


# Issue 26 item 6: --force-exclude, as Ruff has it.
def test_force_exclude_applies_exclude_to_named_paths(tmp_path, fixdev):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["legacy/", "*_pb2.py"]\n')
    for name in ("legacy/old.py", "m_pb2.py", "ok.py", "skip.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(BUGGY)
    named = ("legacy/old.py", "m_pb2.py", "ok.py", "skip.py", "legacy")
    plain = fixdev("--output-format", "concise", *named, cwd=tmp_path)
    assert sorted({line.split(":")[0] for line in plain.stdout.decode().splitlines()}) == ["legacy/old.py", "m_pb2.py", "ok.py", "skip.py"]
    forced = fixdev("--force-exclude", "--exclude", "skip.py", "--output-format", "concise", *named, cwd=tmp_path)
    assert [line.split(":")[0] for line in forced.stdout.decode().splitlines()] == ["ok.py"] and forced.returncode == 1
    # An editor piping an excluded file through --apply gets it back unchanged.
    # (--unsafe-fixes: FDV101's fix is unsafe, and without it nothing would change either way.)
    piped = fixdev("--force-exclude", "--apply", "--unsafe-fixes", "--stdin-filename", "legacy/old.py", "-", cwd=tmp_path, stdin=BUGGY.encode())
    assert piped.returncode == 0 and piped.stdout == BUGGY.encode()
    assert fixdev("--apply", "--unsafe-fixes", "--stdin-filename", "legacy/old.py", "-", cwd=tmp_path, stdin=BUGGY.encode()).stdout != BUGGY.encode()


def _interactive(cwd: Path, answers: list[bytes], *args: str) -> tuple[int, str, str]:
    """``fixdev --apply -i`` on a terminal, as a user runs it: the terminal is
    its controlling one (so Ctrl-C, b"\\x03", interrupts it, and Ctrl-D,
    b"\\x04", ends its input), and each answer is typed once a new prompt shows."""
    import fcntl
    import pty
    import select
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()

    def take_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-m", "fixdev", "--no-cache", "--apply", "-i", *args], cwd=cwd, stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"}, preexec_fn=take_terminal)
    os.close(follower)
    out = b""
    try:
        for number, answer in enumerate(answers, 1):
            while out.count(b"Apply this fix?") < number:
                ready, _, _ = select.select([proc.stdout], [], [], 60)
                chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
                if not chunk:
                    break  # finished (or silent for a minute): the asserts say what was missing
                out += chunk
            os.write(leader, answer)
        rest, err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, (out + rest).decode(), err.decode()


TWO_FIXES = BUGGY + "\n\ndef g(y):\n    return y * torch.zeros(y.shape)\n"


# Issue 26 item 7
@pytest.mark.parametrize("key", [b"\x03", b"\x04"], ids=["ctrl-c", "ctrl-d"])
def test_interactive_ctrl_c_or_ctrl_d_at_the_prompt_quits(tmp_path, key):
    (tmp_path / "m.py").write_text(TWO_FIXES)
    code, out, err = _interactive(tmp_path, [b"y\n", key], "--unsafe-fixes", "m.py")  # FDV101's fix is unsafe
    assert "internal error" not in err and "Traceback" not in err, err
    assert code == 1, err  # quit: the fix not taken remains a finding
    text = (tmp_path / "m.py").read_text()
    assert "torch.ones_like(x)" in text and "torch.zeros(y.shape)" in text
    assert "Fixed 1 finding in 1 file; 1 remaining." in err


SHARED = """import torch
from torch import nn
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loader = DataLoader([])
criterion = nn.CrossEntropyLoss()
for images, labels in loader:
    output = model(images)
    loss = criterion(output, labels)
    mask = torch.ones(output.shape)
    y = output.cuda()
    z = loss.cuda()
"""


# Issue 26 item 8
def test_interactive_asks_once_per_fix_and_the_summary_adds_up(tmp_path, fixdev):
    (tmp_path / "train.py").write_text(SHARED)
    found = json.loads(fixdev("--output-format", "json", "train.py", cwd=tmp_path).stdout)
    assert [item["code"] for item in found] == ["FDV107", "FDV107", "FDV101", "FDV104", "FDV104"]
    # y: the one fix both FDV107 findings share; a bad answer; Enter (no) for FDV101; a: both FDV104.
    code, out, err = _interactive(tmp_path, [b"y\n", b"maybe\n", b"\n", b"a\n"], "--unsafe-fixes", "train.py")  # FDV101's fix is unsafe
    assert code == 1, err
    assert out.count("FDV107 [unmoved-input]") == 1, out
    assert out.count("Apply this fix? [y/N/a/q]") == 4, out  # y, maybe (asked again), Enter, a
    assert "Answer y (apply it), n or Enter (skip it)" in out.split("Apply this fix?")[2], "the bad answer gets a hint"
    assert "z = loss.to(device)" in out.split("Apply this fix?")[-1] and "Applied (a: all)." in out, "after a, the rest is shown"
    text = (tmp_path / "train.py").read_text()
    assert "images, labels = images.to(device), labels.to(device)" in text and "torch.ones(output.shape)" in text
    assert "y = output.to(device)" in text and "z = loss.to(device)" in text
    assert f"Fixed 4 findings in 1 file; 1 remaining." in err and 4 + 1 == len(found), err


# Issue 26 item 14
def test_the_size_limit_message_says_the_limit(tmp_path, fixdev):
    from fixdev.files.runner import MAX_CHARACTERS

    text = "x = 1\n" * (MAX_CHARACTERS // 6 + 1)
    (tmp_path / "big.py").write_text(text)
    result = fixdev("big.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[0] == (
        f"big.py: error: file too large to analyse ({len(text):,} characters; the limit is {MAX_CHARACTERS:,} characters)"
    )


# Issue 26 item 15: -q with --traceback --apply prints what -q prints for files.
def test_quiet_traceback_apply_prints_no_diff_and_no_summary(tmp_path, fixdev):
    import shutil

    case = tmp_path / "case"
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "traceback" / "backend_old", case)
    before = (case / "train.py").read_text()
    loud = fixdev("--traceback", "error.log", "--apply", ".", cwd=case)
    assert loud.returncode == 0 and loud.stdout.decode().startswith("--- a/train.py") and "1 device error" in loud.stderr.decode()
    (case / "train.py").write_text(before)
    quiet = fixdev("--traceback", "error.log", "--apply", "-q", ".", cwd=case)
    assert quiet.returncode == 0, quiet.stderr
    assert "features, target = features.to(device), target.to(device)" in (case / "train.py").read_text(), "still fixed"
    assert quiet.stdout == b"" and quiet.stderr == b"", "the error was fixed: nothing remains to say"


# Issue 26 item 17
def test_help_shows_path_without_its_type(fixdev):
    shown = fixdev("--help").stdout.decode()
    assert "<list" not in shown and "PATH..." in shown
    assert shown.splitlines()[0] == "Usage: fixdev [OPTIONS] [PATH]..."


@pytest.mark.parametrize("words, line", [
    (["--bogus"], "fixdev: error: no such option: --bogus (see fixdev --help)"),
    (["--chek", "."], "fixdev: error: no such option: --chek; did you mean --check? (see fixdev --help)"),
    (["--select"], "fixdev: error: option '--select' requires an argument"),
])
def test_a_usage_error_is_one_line_in_fixdevs_style(fixdev, words, line):
    result = fixdev(*words)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [line]


def test_explain_a_prefix_or_group_lists_its_rules(fixdev):
    result = fixdev("--explain", "FDV1")
    assert result.returncode == 0, result.stderr
    codes = [line.split()[0] for line in result.stdout.decode().splitlines()[1:]]
    assert codes == [rule.code for rule in all_rules() if rule.code.startswith("FDV1")] and len(codes) > 1
    group = fixdev("--explain", "cuda-only").stdout.decode()
    assert [line.split()[0] for line in group.splitlines()[1:]] == [rule.code for rule in all_rules() if rule.group == "cuda-only"]
    assert fixdev("--explain", "FDV9").returncode == 2


def _on_terminal(cwd: Path, *args: str, env: dict) -> bytes:
    """What fixdev prints when its stdout is a terminal."""
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "fixdev", "--no-cache", *args], cwd=cwd, stdout=follower, stderr=subprocess.DEVNULL, env=env, timeout=120)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.returncode == 1
    return shown


# Issue 26 item 18
@pytest.mark.parametrize("fmt", ["full", "concise"])
def test_findings_are_coloured_on_a_terminal_or_when_asked(tmp_path, fixdev, fmt):
    (tmp_path / "m.py").write_text(BUGGY)
    red_code = "\x1b[1m\x1b[31mFDV101"
    assert red_code in fixdev("--color", "always", "--output-format", fmt, "m.py", cwd=tmp_path).stdout.decode()
    (tmp_path / "p.py").write_text(POSITIONS)  # y.cuda(0) has no fix: --diff reports it on stderr
    assert "\x1b[1m\x1b[31mFDV104" in fixdev("--diff", "--color", "always", "--output-format", fmt, "p.py", cwd=tmp_path).stderr.decode()
    piped = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR")}
    assert "\x1b[" not in fixdev("--output-format", fmt, "m.py", cwd=tmp_path, env={"NO_COLOR": ""}).stdout.decode(), "piped: no colour"
    assert red_code.encode() in _on_terminal(tmp_path, "--output-format", fmt, "m.py", env=piped)
    assert b"\x1b[" not in _on_terminal(tmp_path, "--output-format", fmt, "m.py", env={**piped, "NO_COLOR": "1"})
    assert b"\x1b[" not in _on_terminal(tmp_path, "--color", "never", "--output-format", fmt, "m.py", env=piped)


# Issue 26 item 10: `fixdev --diff . | git apply`, byte for byte.
def _patch_tree(root: Path) -> None:
    near_change = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)  # \u00e9t\u00e9\n"
    files = {
        "sub/crlf.py": BUGGY.replace("\n", "\r\n").encode(),
        "sub/bom.py": codecs.BOM_UTF8 + "import torch\nmask = torch.ones(x.shape)  # ✓\n".encode(),
        "sub/latin1.py": b"# -*- coding: latin-1 -*-\n" + near_change.encode("latin-1"),  # non-ASCII in the hunk
        "sub/plain.py": BUGGY.encode(),
        "top.py": BUGGY.encode(),
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    import shutil

    shutil.copyfile(Path(__file__).resolve().parent.parent / "fixtures" / "notebooks" / "training_loop.before.ipynb", root / "sub" / "nb.ipynb")


@pytest.mark.parametrize("where", [".", "sub"])
def test_diff_piped_to_git_apply_gives_what_apply_writes(tmp_path, fixdev, where):
    import subprocess

    repo, expected = tmp_path / "repo", tmp_path / "expected"
    for root in (repo, expected):
        root.mkdir()
        _patch_tree(root)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "tree"], cwd=repo, check=True)
    notebook = (repo / "sub" / "nb.ipynb").read_bytes()
    # FDV101's fixes are unsafe (dtype): both runs apply them.
    assert fixdev("--apply", "--unsafe-fixes", "--no-cache", where, cwd=expected).returncode == 0
    diff = fixdev("--diff", "--unsafe-fixes", "--no-cache", ".", cwd=repo / where)
    assert diff.returncode == 1 and b"ipynb" not in diff.stdout
    if where == ".":
        assert b"--- a/sub/nb.ipynb:cell 2" in diff.stderr, "notebook hunks go to stderr"
    applied = subprocess.run(["git", "apply", "-v"], cwd=repo / where, input=diff.stdout, capture_output=True)
    assert applied.returncode == 0, applied.stderr.decode()
    names = ["sub/crlf.py", "sub/bom.py", "sub/latin1.py", "sub/plain.py"] + (["top.py"] if where == "." else [])
    for name in names:
        assert (repo / name).read_bytes() == (expected / name).read_bytes(), name
        assert (repo / name).read_bytes() != subprocess.run(["git", "show", f"HEAD:{name}"], cwd=repo, capture_output=True).stdout, name
    assert (repo / "sub" / "nb.ipynb").read_bytes() == notebook


def test_statistics_counts_each_rules_findings(tmp_path, fixdev):
    """``--statistics`` as Ruff prints it: a line a rule, the most frequent
    first, ``[*]`` where ``--apply`` applies its fixes (like-factory's are
    unsafe, so not without ``--unsafe-fixes``)."""
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(x):\n    a = x.cuda()\n    b = x.cuda()\n    return a + b + torch.ones(x.shape)\n"
    )
    done = fixdev("--check", "--no-cache", "--statistics", "m.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.decode().splitlines() == ["2  FDV104  [*]  cuda-call", "1  FDV101       like-factory"]
    unsafe = fixdev("--check", "--no-cache", "--statistics", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert unsafe.stdout.decode().splitlines()[1] == "1  FDV101  [*]  like-factory"
    as_json = json.loads(fixdev("--check", "--no-cache", "--statistics", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert as_json == [
        {"code": "FDV104", "name": "cuda-call", "count": 2, "fixable": 2},
        {"code": "FDV101", "name": "like-factory", "count": 1, "fixable": 0},
    ]
    wrong = fixdev("--diff", "--statistics", "m.py", cwd=tmp_path)
    assert wrong.returncode == 2 and b"--statistics goes with --check" in wrong.stderr


def test_add_noqa_suppresses_every_current_finding_where_it_is(tmp_path, fixdev):
    """``--add-noqa`` as Ruff's: a ``# noqa: FDVxxx`` on each finding's line,
    merged into an existing ``# noqa:``, after another comment, the file's
    line endings kept; the next check finds nothing and a second run adds
    nothing."""
    path = tmp_path / "m.py"
    path.write_bytes(
        b"import torch\r\n\r\n\r\ndef f(x):\r\n    a = x.cuda()\r\n    b = x.cuda()  # keep\r\n"
        b"    c = x.cuda()  # noqa: E501\r\n    return a + b + c\r\n"
    )
    done = fixdev("--add-noqa", "--no-cache", "m.py", cwd=tmp_path)
    assert done.returncode == 0 and b"Added 3 noqa directives in 1 file." in done.stderr
    assert path.read_bytes() == (
        b"import torch\r\n\r\n\r\ndef f(x):\r\n    a = x.cuda()  # noqa: FDV104\r\n    b = x.cuda()  # keep  # noqa: FDV104\r\n"
        b"    c = x.cuda()  # noqa: E501, FDV104\r\n    return a + b + c\r\n"
    )
    assert fixdev("--check", "--no-cache", "m.py", cwd=tmp_path).returncode == 0
    again = fixdev("--add-noqa", "--no-cache", "m.py", cwd=tmp_path)
    assert b"Added 0 noqa directives in 0 files." in again.stderr
    assert fixdev("--add-noqa", "--diff", "m.py", cwd=tmp_path).returncode == 2


def test_show_fixes_lists_what_apply_would_fix_per_file_and_rule(tmp_path, fixdev):
    """``--show-fixes``, as Ruff's: after the findings, the fixes ``--apply``
    would apply, a file at a time, a line a rule (``2 × FDV104 (cuda-call)``);
    the unsafe ones apart, with the hint for ``--unsafe-fixes``; with
    ``--apply``, what it fixed (on stderr: stdout carries the diffs)."""
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(x):\n    a = x.cuda()\n    b = x.cuda()\n    return a + b + torch.ones(x.shape)\n"
    )
    (tmp_path / "n.py").write_text("import torch\n\n\ndef g(x):\n    return x.cuda()\n")
    done = fixdev("--check", "--no-cache", "--show-fixes", "--output-format", "concise", "n.py", "m.py", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.decode().splitlines()
    assert lines[:4] == [  # in the order given; the summary is sorted by path
        "n.py:5:12: FDV104 [*] `.cuda()` ties the code to CUDA; use `.to(device)`",
        "m.py:5:9: FDV104 [*] `.cuda()` ties the code to CUDA; use `.to(device)`",
        "m.py:6:9: FDV104 [*] `.cuda()` ties the code to CUDA; use `.to(device)`",
        lines[3],  # like-factory's, without [*]: its fix is unsafe
    ]
    assert lines[3].startswith("m.py:7:") and "FDV101" in lines[3] and "[*]" not in lines[3]
    assert lines[4:] == [
        "",
        "3 fixable with --apply:",
        "- m.py:",
        "    2 × FDV104 (cuda-call)",
        "- n.py:",
        "    1 × FDV104 (cuda-call)",
        "1 hidden fix can be enabled with --unsafe-fixes:",
        "- m.py:",
        "    1 × FDV101 (like-factory)",
    ]
    full = fixdev("--no-cache", "--show-fixes", "--unsafe-fixes", "m.py", cwd=tmp_path).stdout.decode()
    assert full.endswith("\n\n3 fixable with --apply:\n- m.py:\n    2 × FDV104 (cuda-call)\n    1 × FDV101 (like-factory)\n")
    assert "hidden" not in full
    applied = fixdev("--apply", "--no-cache", "--show-fixes", "m.py", "n.py", cwd=tmp_path)
    assert applied.returncode == 1  # like-factory's finding remains
    assert "Fixed 3 findings:\n- m.py:\n    2 × FDV104 (cuda-call)\n- n.py:\n    1 × FDV104 (cuda-call)\n" in applied.stderr.decode()
    assert "1 hidden fix can be enabled with --unsafe-fixes:\n- m.py:\n    1 × FDV101 (like-factory)\n" in applied.stderr.decode()
    assert "fixable with" not in applied.stdout.decode() and applied.stdout.decode().startswith("--- a/m.py")
    wrong = fixdev("--show-fixes", "--output-format", "json", "m.py", cwd=tmp_path)
    assert wrong.returncode == 2 and b"--show-fixes goes with the full and concise output formats" in wrong.stderr


def _show_tree(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("ignored.py\n")
    (root / "pyproject.toml").write_text(
        '[tool.fixdev]\nignore = ["FDV106"]\nexclude = ["gen/**"]\nextend-include = ["*.pyw"]\n'
        'per-file-ignores = { "tests/**" = ["cuda-call"] }\nunsafe-fixes = true\n\n'
        "[tool.fixdev.rules.constant-buffer]\npersistent = true\n"
    )
    for name in ("a.py", "w.pyw", "sub/b.py", "sub/nb.ipynb", "tests/t.py", "gen/c.py", "ignored.py", ".venv/v.py", "notes.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n' if name.endswith(".ipynb") else "x = 1\n")


def test_show_files_prints_what_a_check_would_look_at(tmp_path, fixdev):
    """``--show-files``, as Ruff's: every file discovery keeps (configured
    exclude, .gitignore, the default excludes, include and extend-include,
    notebooks), one a line, sorted; nothing is checked; exit 0."""
    _show_tree(tmp_path)
    done = fixdev("--show-files", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["a.py", "sub/b.py", "sub/nb.ipynb", "tests/t.py", "w.pyw"]
    assert not (tmp_path / ".fixdev_cache").exists()  # nothing was checked
    walked = fixdev("--show-files", "--no-notebooks", "--exclude", "tests", "sub", "a.py", "gen/c.py", cwd=tmp_path)
    assert walked.stdout.decode().splitlines() == ["a.py", "gen/c.py", "sub/b.py"]  # a named file is taken, as a check takes it
    forced = fixdev("--show-files", "--force-exclude", "gen/c.py", "a.py", cwd=tmp_path)
    assert forced.stdout.decode().splitlines() == ["a.py"]
    missing = fixdev("--show-files", "nope.py", "a.py", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stdout == b"a.py\n" and b"nope.py: error: no such file or directory" in missing.stderr
    assert fixdev("--show-files", "--diff", cwd=tmp_path).returncode == 2


def test_show_settings_prints_what_governs_the_first_file(tmp_path, fixdev):
    """``--show-settings``, as Ruff's: the settings of the named file (of the
    first file found, sorted, when several paths or a folder are named): the
    pyproject.toml used, its keys after the flags (``--select`` replaces
    ``select``, ``--ignore`` adds), the rules that run on that file after its
    per-file-ignores, the rules' options; exit 0."""
    proj = tmp_path / "proj"
    proj.mkdir()
    _show_tree(proj)
    done = fixdev("--show-settings", "--ignore", "FDV107", "tests/t.py", cwd=proj)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    lines = text.splitlines()
    assert lines[:2] == ['Resolved settings for: "tests/t.py"', f'Settings path: "{proj / "pyproject.toml"}"']
    for line in ('select = ["ALL"]', 'ignore = ["FDV106", "FDV107"]', 'exclude = ["gen/**"]', 'include = ["*.py", "*.ipynb"]',
                 'extend-include = ["*.pyw"]', 'per-file-ignores = { "tests/**" = ["cuda-call"] }', "unsafe-fixes = true",
                 "[tool.fixdev.rules.constant-buffer]", "persistent = true"):
        assert line in lines, line
    running = [line.split()[1] for line in lines if line.startswith("#   FDV")]
    assert running == [rule.code for rule in all_rules() if rule.code not in ("FDV104", "FDV106", "FDV107") and not rule.explicit]
    assert "per-file-ignores take out FDV104" in text
    other = fixdev("--show-settings", "--select", "FDV104", "--extend-select", "unused-noqa", "--no-unsafe-fixes", "sub", "a.py", cwd=proj)
    other = other.stdout.decode().splitlines()
    assert other[0] == 'Resolved settings for: "a.py"'  # sorted, the first file found
    assert 'select = ["FDV104"]' in other and 'extend-select = ["unused-noqa"]' in other and "unsafe-fixes = false" in other
    assert [line.split()[1] for line in other if line.startswith("#   FDV")] == ["FDV100", "FDV104"]
    (tmp_path / "free").mkdir()
    (tmp_path / "free" / "pyproject.toml").write_text("[tool.other]\n")
    (tmp_path / "free" / "m.py").write_text("x = 1\n")
    defaults = fixdev("--show-settings", "m.py", cwd=tmp_path / "free").stdout.decode().splitlines()
    assert defaults[1].startswith("Settings path: none") and "persistent = false  # the default" in defaults
    assert fixdev("--show-settings", "notes.txt.d", cwd=proj).returncode == 2  # no such path
    assert fixdev("--show-settings", "tests", "--show-files", cwd=proj).returncode == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "pyproject.toml").write_text('[tool.fixdev]\nselect = "ALL"\n')
    (tmp_path / "bad" / "m.py").write_text("x = 1\n")
    bad = fixdev("--show-settings", "bad/m.py", cwd=tmp_path)
    assert bad.returncode == 2 and b"select must be a list of strings" in bad.stderr


def test_output_file_takes_the_report_in_any_format(tmp_path, fixdev):
    """``--output-file PATH``, as Ruff's: the report (json, sarif, or any
    format) goes to PATH, whole (made in a temporary file beside it and
    renamed), the folders above it made; stdout stays empty, the summary and
    errors stay on stderr; with ``--diff`` the patch still goes to stdout."""
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x):\n    a = x.cuda()\n    return a + torch.ones(x.shape)\n")
    for fmt in ("json", "sarif"):
        shown = fixdev("--no-cache", "--output-format", fmt, "m.py", cwd=tmp_path)
        written = fixdev("--no-cache", "--output-format", fmt, "--output-file", f"reports/{fmt}/out.{fmt}", "m.py", cwd=tmp_path)
        assert written.returncode == shown.returncode == 1
        assert written.stdout == b"" and b"Found 2 findings" in written.stderr
        report = tmp_path / "reports" / fmt / f"out.{fmt}"
        assert json.loads(report.read_text(encoding="utf-8")) == json.loads(shown.stdout)
        assert [p.name for p in report.parent.iterdir()] == [f"out.{fmt}"]  # no temporary file left
    report = tmp_path / "reports" / "json" / "out.json"
    os.chmod(report, 0o640)
    (tmp_path / "m.py").write_text("x = 1\n")
    again = fixdev("--no-cache", "--output-format", "json", "-o", "reports/json/out.json", "m.py", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(report.read_text()) == [] and os.stat(report).st_mode & 0o777 == 0o640
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x):\n    a = x.cuda()\n    return a + torch.ones(x.shape)\n")
    diff = fixdev("--diff", "--no-cache", "--show-fixes", "--output-file", "diff.txt", "m.py", cwd=tmp_path)
    assert diff.returncode == 1 and diff.stdout.decode().startswith("--- a/m.py\n+++ b/m.py\n") and b"FDV101" not in diff.stdout
    listed = (tmp_path / "diff.txt").read_text(encoding="utf-8")
    assert listed.startswith("m.py:6:16: FDV101 [like-factory] ") and "--- a/" not in listed  # the finding --diff leaves (an unsafe fix)
    assert "Would fix 1 finding:\n- m.py:\n    1 × FDV104 (cuda-call)\n" in listed and b"Would fix 1 finding in 1 file" in diff.stderr
    assert b"FDV101" not in diff.stderr
    files = fixdev("--show-files", "-o", "files.txt", ".", cwd=tmp_path)
    assert files.returncode == 0 and files.stdout == b"" and (tmp_path / "files.txt").read_text() == "m.py\n"
    (tmp_path / "folder.json").mkdir()
    assert fixdev("--output-format", "json", "-o", "folder.json", "m.py", cwd=tmp_path).returncode == 2
    assert fixdev("--add-noqa", "-o", "x.txt", "m.py", cwd=tmp_path).returncode == 2


UNUSED_NOQA = (
    "import torch\n\n\ndef f(x, device):\n"
    "    a = x.cuda()  # noqa: FDV104\n"  # used: silences cuda-call
    "    b = x.to(device)  # noqa: FDV104\n"  # unused
    "    c = x.to(device)  # noqa: E501, FDV104\n"  # unused, beside another tool's code
    "    d = x.to(device)  # keep  # noqa: FDV101, FDV104\n"  # both unused, after another comment
    "    e = x.to(device)  # noqa\n"  # bare: never judged
    "    g = x.to(device)  # noqa: FDV1\n"  # a prefix: not judged
    "    return a + b + c + d + e + g\n"
)


def test_unused_noqa_is_found_and_removed_when_selected(tmp_path, fixdev):
    """FDV100 unused-noqa, as Ruff's RUF100: off by default (ALL leaves it
    out); selected (``--extend-select FDV100`` or the configuration), a
    ``# noqa: FDV1xx`` code that silences nothing is reported, and
    ``--apply`` removes it, keeping other tools' codes and bare ``# noqa``.
    A code of a rule that did not run on the file (ignored, per-file-ignores)
    is not judged."""
    (tmp_path / "m.py").write_text(UNUSED_NOQA)
    assert fixdev("--no-cache", "m.py", cwd=tmp_path).returncode == 0  # off by default
    assert fixdev("--no-cache", "--select", "ALL", "m.py", cwd=tmp_path).returncode == 0
    done = fixdev("--no-cache", "--extend-select", "FDV100", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.decode().splitlines() == [
        "m.py:6:23: FDV100 [*] Unused `noqa` directive (unused: `FDV104`)",
        "m.py:7:23: FDV100 [*] Unused `noqa` directive (unused: `FDV104`)",
        "m.py:8:31: FDV100 [*] Unused `noqa` directive (unused: `FDV101`, `FDV104`)",
    ]
    # The rule whose code it is did not run: not judged.
    ignored = fixdev("--no-cache", "--extend-select", "unused-noqa", "--ignore", "cuda-call", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert ignored.stdout.decode().splitlines() == ["m.py:8:31: FDV100 [*] Unused `noqa` directive (unused: `FDV101`)"]
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nextend-select = ["FDV100"]\nper-file-ignores = { "legacy/**" = ["FDV104"] }\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text("import torch\ny = x.to(device)  # noqa: FDV104\n")
    applied = fixdev("--apply", "--no-cache", ".", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert (tmp_path / "m.py").read_text() == (
        "import torch\n\n\ndef f(x, device):\n"
        "    a = x.cuda()  # noqa: FDV104\n"
        "    b = x.to(device)\n"
        "    c = x.to(device)  # noqa: E501\n"
        "    d = x.to(device)  # keep\n"
        "    e = x.to(device)  # noqa\n"
        "    g = x.to(device)  # noqa: FDV1\n"
        "    return a + b + c + d + e + g\n"
    )
    assert (tmp_path / "legacy" / "old.py").read_text() == "import torch\ny = x.to(device)  # noqa: FDV104\n"
    assert fixdev("--no-cache", ".", cwd=tmp_path).returncode == 0
    (tmp_path / "n.py").write_text("import torch\ny = x.to(device)  # noqa: FDV104\n")
    noqa = fixdev("--add-noqa", "--no-cache", "n.py", cwd=tmp_path)  # no noqa for an unused noqa
    assert b"Added 0 noqa directives" in noqa.stderr and (tmp_path / "n.py").read_text().endswith("  # noqa: FDV104\n")
    listed = fixdev("--list-rules").stdout.decode()
    assert "Suppression comments (noqa)\n  FDV100  [*]  unused-noqa" in listed
    explained = fixdev("--explain", "FDV100").stdout.decode()
    assert explained.startswith("# FDV100 unused-noqa\n\nUnused `noqa` directive.\n\nFix: available")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety", "## When it stays silent"):
        assert heading in explained
