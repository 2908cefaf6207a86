"""``fixdev --run`` (fixdev/gpu/run.py) as a user runs it: the rounds'
timeout and the JSON document. The virtual GPU itself: tests/test_runtime.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.test_runtime import BUGGY  # noqa: E402 - the buggy training script both run

# The first round fails (a mask made on the CPU meets a tensor on the GPU);
# once fixed, the program starts a helper process and sleeps, as a long
# training run would.
SLOW = """\
import subprocess
import sys
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.ones(3, device=device)
mask = torch.ones(3)
print("product", (x * mask).sum().item(), flush=True)
helper = subprocess.Popen(["sleep", "120"])
open(sys.argv[1], "w").write(str(helper.pid))
time.sleep(120)
"""


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie left for PID 1 to reap does not)."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_run_apply_stops_a_round_that_runs_past_the_round_timeout_without_a_device_error(tmp_path, fixdev):
    script, pid_file = tmp_path / "slow.py", tmp_path / "helper.pid"
    script.write_text(SLOW)
    started = time.monotonic()
    shown = fixdev("--run", "--apply", "--round-timeout", "20", "--", "python", str(script), str(pid_file), cwd=tmp_path)
    took = time.monotonic() - started
    err = shown.stderr.decode()
    assert shown.returncode == 0, err
    assert "round 1: fixed; running again" in err
    assert "round 2: ran 20 s without a device error; stopped" in err
    assert "torch.ones(3, device=device)" in script.read_text().split("mask = ")[1]
    assert took < 60, "the sleeping round was stopped, not waited for"
    helper = int(pid_file.read_text())
    for _ in range(50):  # the helper was in the command's process group
        if not alive(helper):
            break
        time.sleep(0.1)
    assert not alive(helper), "the command's whole process group is stopped"


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_run_without_apply_takes_a_round_timeout_only_when_given(tmp_path, fixdev):
    script = tmp_path / "nap.py"
    script.write_text("import time\nprint('napping', flush=True)\ntime.sleep(60)\n")
    shown = fixdev("--run", "--round-timeout", "2", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert "fixdev --run: ran 2 s without a device error; stopped" in shown.stderr.decode()
    script.write_text("import time\ntime.sleep(1.5)\nprint('woke')\n")
    plain = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert plain.returncode == 0 and plain.stdout.decode() == "woke\n" and b"stopped" not in plain.stderr




def test_run_json_is_one_document_with_traceback_jsons_objects(tmp_path, fixdev):
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    shown = fixdev("--run", "--unsafe-fixes", "--output-format", "json", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr.decode()
    document = json.loads(shown.stdout)
    assert document["command"] == ["python", str(script)] and document["result"] == "device-error" and document["exit_code"] == 1
    [first] = document["rounds"]
    assert first["round"] == 1 and first["outcome"] == "device-error" and first["exit_code"] == 1
    [error] = first["errors"]
    assert error["family"] == "same-device" and error["status"] == "fixable" and error["frame"]["line"] == 12
    assert [f["code"] for f in error["findings"]] == ["FDV101"] and "+        mask = torch.ones_like(x)" in error["diff"]
    # the objects are --traceback --output-format json's for the traceback the run printed
    log = tmp_path / "error.log"
    log.write_bytes(shown.stderr)
    told = fixdev("--traceback", str(log), "--unsafe-fixes", "--output-format", "json", str(tmp_path), cwd=tmp_path)
    assert json.loads(told.stdout) == first["errors"]
    assert script.read_text() == BUGGY


def test_run_apply_json_lists_the_rounds_and_keeps_the_commands_output_off_stdout(tmp_path, fixdev):
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    shown = fixdev("--run", "--apply", "--unsafe-fixes", "--output-format", "json", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    document = json.loads(shown.stdout)  # the command's own stdout went to stderr
    assert b"loss" in shown.stderr and document["result"] == "completed" and document["exit_code"] == 0
    assert [(r["round"], r["outcome"], r["exit_code"]) for r in document["rounds"]] == [(1, "device-error", 1), (2, "completed", 0)]
    [error] = document["rounds"][0]["errors"]
    assert error["status"] == "fixed" and error["findings"][0]["fix"]["applied"] is True
    assert document["rounds"][1]["errors"] == [] and all(r["seconds"] >= 0 for r in document["rounds"])


@pytest.mark.skipif(os.name != "posix", reason="terminals and process groups")
def test_run_apply_gives_its_process_group_the_terminal(tmp_path):
    """The command runs in a process group of its own (so that a timeout
    stops all of it); on a terminal it is made the foreground group, as a
    shell does for a job, or reading the terminal would stop it (SIGTTIN)."""
    import pty
    import select
    import sys

    pid, fd = pty.fork()
    if pid == 0:  # the child: fixdev, on the pseudo-terminal
        try:
            os.chdir(tmp_path)
            os.execve(sys.executable, [sys.executable, "-m", "fixdev", "--run", "--apply", "--round-timeout", "20", "--",
                                       "python", "-c", "print('got', input())"], {**os.environ, "NO_COLOR": "1"})
        finally:
            os._exit(127)
    os.write(fd, b"typed\n")
    out, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            try:
                data = os.read(fd, 1024)
            except OSError:  # the child ended
                break
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert b"got typed" in out and b"round 1: the command completed" in out, out
    assert os.waitstatus_to_exitcode(status) == 0
