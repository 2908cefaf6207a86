"""Nothing lost: a killed run leaves every file exactly old or exactly new, a
file edited while fixdev ran is not overwritten, and very large or deeply
nested code gets a result or one clear line, never a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from fixdev.interfaces import cli
from fixdev.engine import core as engine

BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape) + torch.zeros(x.size())\n"
FIXED = "import torch\n\n\ndef f(x):\n    return x * torch.ones_like(x) + torch.zeros_like(x)\n"


# The files a killed run works on: enough that a kill lands mid-run, few enough
# that the next run, which fixes the rest, is quick.
FILES = 24
BODY = BUGGY + "".join(f"\n\ndef g{i}(y):\n    return torch.rand(y.shape) * y\n" for i in range(12))
BODY_FIXED = FIXED + "".join(f"\n\ndef g{i}(y):\n    return torch.rand(y.shape, device=y.device) * y\n" for i in range(12))
# Loaded into fixdev and its workers (any start method) by Python's site
# machinery: the Nth rename of a fixdev temporary file, and every later one,
# leaves a marker and waits to be killed, its temporary file complete beside the
# original. Renames are numbered across processes by creating files exclusively.
PAUSE_HOOK = """
import os, time
_at = os.environ.get("FIXDEV_TEST_PAUSE_AT")
if _at:
    _folder, _nth = os.path.split(_at)
    _replace = os.replace

    def _paused_replace(src, dst, *args, **kwargs):
        if os.path.basename(os.fspath(src)).startswith(".fixdev-"):
            n = 1
            while True:
                try:
                    os.close(os.open(os.path.join(_folder, f"rename-{n}"), os.O_CREAT | os.O_EXCL))
                    break
                except FileExistsError:
                    n += 1
            if n >= int(_nth):
                open(os.path.join(_folder, "paused"), "a").close()
                time.sleep(600)
        return _replace(src, dst, *args, **kwargs)

    os.replace = _paused_replace
"""


def _wait_for(condition, what: str, proc: subprocess.Popen, limit: float = 120.0) -> None:
    """Poll until ``condition()``; fail if fixdev ends first or ``limit`` passes
    (a generous bound: a loaded machine is slow, not stuck)."""
    deadline = time.monotonic() + limit
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"fixdev ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {limit:.0f} s")
        time.sleep(0.003)


@pytest.mark.parametrize("moment", ["first file written", "half the files written", "a temporary file complete, not yet renamed"])
def test_killed_run_leaves_files_old_or_new(tmp_path, moment):
    """SIGKILL at three moments of an ``--apply`` run on two workers: each file
    is old or new, the next run fixes the rest, no temporary file is left."""
    tree, control = tmp_path / "tree", tmp_path / "control"
    tree.mkdir()
    control.mkdir()
    paths = []
    for i in range(FILES):
        folder = tree / f"pkg{i % 4}"
        folder.mkdir(exist_ok=True)
        paths.append(folder / f"m{i}.py")
        paths[-1].write_text(BODY)
    new_size = len(BODY_FIXED.encode())

    def written() -> int:
        return sum(os.stat(path).st_size == new_size for path in paths)

    env = dict(os.environ)
    nth = FILES // 3
    if moment.startswith("a temporary file"):
        (control / "sitecustomize.py").write_text(PAUSE_HOOK)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(control), env.get("PYTHONPATH")]))
        env["FIXDEV_TEST_PAUSE_AT"] = str(control / str(nth))
    command = [sys.executable, "-m", "fixdev", "--apply", "--unsafe-fixes", "--quiet", "--no-cache", "--jobs", "2", "."]  # FDV101's fixes are unsafe
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if moment == "first file written":
            _wait_for(lambda: written() >= 1, moment, proc)
        elif moment == "half the files written":
            _wait_for(lambda: written() >= FILES // 2, moment, proc)
        else:
            _wait_for((control / "paused").exists, moment, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    states = [path.read_text() for path in paths]
    assert all(state in (BODY, BODY_FIXED) for state in states), "a file is neither old nor new"
    assert BODY in states and BODY_FIXED in states, "the kill came mid-run"
    temps = [p.name for p in tree.rglob(".fixdev-*")]
    if moment.startswith("a temporary file"):
        assert states.count(BODY_FIXED) == nth - 1 and temps, "killed with a temporary file beside its original"
    again = subprocess.run([sys.executable, "-m", "fixdev", "--apply", "--unsafe-fixes", "--quiet", "--no-cache", "."], cwd=tree, capture_output=True)
    assert again.returncode == 0, again.stderr.decode()
    assert all(path.read_text() == BODY_FIXED for path in paths), "the next run fixes the rest"
    leftovers = [p.name for p in tree.rglob("*") if p.name.startswith(".fixdev-")]
    assert leftovers == [], "no stray temporary files after the next run"


def test_file_edited_while_fixdev_runs_is_not_overwritten(tmp_path, monkeypatch):
    target = tmp_path / "m.py"
    target.write_text(BUGGY)
    real_fix = engine.Engine.fix

    def slow_fix(self, text, *rest, **keywords):
        outcome = real_fix(self, text, *rest, **keywords)
        target.write_text(BUGGY + "# saved by an editor meanwhile\n")
        return outcome

    monkeypatch.setattr(engine.Engine, "fix", slow_fix)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.app, ["--apply", "--unsafe-fixes", "--no-cache", "--jobs", "1", "m.py"])  # FDV101's fixes are unsafe
    assert result.exit_code == 2
    assert "m.py: error: changed on disk while fixdev was running; not overwritten" in result.output
    assert target.read_text().endswith("# saved by an editor meanwhile\n")


def test_stale_temporary_files_are_removed_by_the_next_apply(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / ".fixdev-m.py.abc123.tmp").write_text("half written")
    (tmp_path / "notes.tmp").write_text("not ours")
    fixdev("--apply", ".", cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["m.py", "notes.tmp"]


def test_very_large_file(tmp_path, fixdev):
    chunk = BUGGY.split("\n", 1)[1]
    text = "import torch\n" + "".join(chunk.replace("def f(", f"def f{i}(") for i in range(int(10e6 / len(chunk))))
    (tmp_path / "big.py").write_text(text)
    result = fixdev("--check", "--output-format", "concise", "big.py", cwd=tmp_path)  # over the size limit
    assert result.returncode in (1, 2) and b"Traceback" not in result.stderr
    if result.returncode == 1:
        assert result.stdout.count(b"FDV101") > 100_000
    else:
        assert result.stderr.decode().count("\n") == 1 and "big.py: error:" in result.stderr.decode()


@pytest.mark.parametrize("depth", [50, 1000])
def test_deeply_nested_code(tmp_path, fixdev, depth):
    nested = "import torch\nx = " + "(" * depth + "torch.ones(y.shape)" + ")" * depth + "\n"
    ifs = "import torch\n" + "".join("    " * i + f"if a{i}:\n" for i in range(depth // 10)) + "    " * (depth // 10) + "z = torch.zeros(w.size())\n"
    (tmp_path / "nested.py").write_text(nested)
    (tmp_path / "ifs.py").write_text(ifs)
    result = fixdev("--apply", "--unsafe-fixes", ".", cwd=tmp_path)  # FDV101's fixes are unsafe
    assert b"Traceback" not in result.stderr
    errors = [line for line in result.stderr.decode().splitlines() if ": error: " in line]
    assert result.returncode in (0, 2)
    for name in ("nested.py", "ifs.py"):
        text = (tmp_path / name).read_text()
        assert ("_like(" in text) or any(line.startswith(name) for line in errors)
