"""``fixdev --run [--gpus N] [--apply] -- COMMAND ...``: run a command with the
virtual GPU (``runtime``) installed, and on a device error say where, why and
the fix, as ``--traceback`` does for a log.

The command runs in a subprocess whose ``PYTHONPATH`` starts with
``hook/``: its ``sitecustomize`` installs the runtime in that Python and in
every Python it starts, and writes an uncaught error's traceback to a file
this process reads. Python's ``-I``, ``-E`` and ``-S`` switch that hook off,
so a command using them is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

HOOK = Path(__file__).resolve().parent / "hook"
_NO_HOOK = {"-I": "isolated mode", "-E": "PYTHON* variables ignored", "-S": "no site module"}


class RunError(Exception):
    """A command ``--run`` cannot run as asked (exit 2)."""


def command_line(argv: Sequence[str]) -> list[str]:
    """The command as it will run: a bare ``python`` is this Python (the
    one fixdev, and so the hook, can be imported from)."""
    if not argv:
        raise RunError("--run needs a command after --: fixdev --run -- python script.py")
    argv = list(argv)
    if Path(argv[0]).name in ("python", "python3", f"python3.{sys.version_info[1]}"):
        argv[0] = sys.executable
        for word in argv[1:]:
            if not word.startswith("-") or word in ("-m", "-c"):
                break
            for flag, meaning in _NO_HOOK.items():
                if word.startswith("-") and not word.startswith("--") and flag[1] in word[1:]:
                    raise RunError(f"python {flag} ({meaning}) turns off the hook that installs the virtual GPU; run without it")
    return argv


def run_once(argv: Sequence[str], gpus: int, cwd: Path | None = None) -> tuple[int, str | None]:
    """Run the command once; its exit code and, when it died of an uncaught
    error, that error's traceback (the runtime's own frames left out)."""
    with tempfile.TemporaryDirectory(prefix="fixdev-run-") as folder:
        report = Path(folder) / "traceback.txt"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), env.get("PYTHONPATH")) if p)
        env["FIXDEV_RUN_GPUS"] = str(gpus)
        env["FIXDEV_RUN_REPORT"] = str(report)
        try:
            code = subprocess.run(list(argv), env=env, cwd=cwd).returncode
        except FileNotFoundError:
            raise RunError(f"no such command: {argv[0]}") from None
        text = report.read_text(encoding="utf-8") if report.is_file() else None
    return code, text


def user_frame(text: str):
    """The device error in a traceback's text and the deepest frame of the
    program's own code (not a library's), or None when it is no device error."""
    from fixdev.diagnose.log import is_library, parse_log

    reports = parse_log(text)
    if not reports:
        return None
    report = reports[-1]
    own = [frame for frame in report.frames if not is_library(frame.path) and Path(frame.path).is_file()]
    return report, (own[-1] if own else None)


def run(argv: Sequence[str], gpus: int, apply: bool, max_rounds: int, overrides, fmt: str, color: bool,
        echo: Callable[..., None]) -> int:
    """What ``fixdev --run`` does; returns the exit code."""
    from fixdev.diagnose import traceback as tracebacks

    argv = command_line(argv)
    rounds = max_rounds if apply else 1
    for number in range(1, rounds + 1):
        said = f"fixdev --run: round {number}: " if apply else "fixdev --run: "
        code, text = run_once(argv, gpus)
        found = user_frame(text) if text else None
        if found is None:
            if apply:
                echo(said + ("the command completed" if code == 0 else f"the command failed (exit {code}), not with a device error"), err=True)
            return code
        report, frame = found
        where = f"{frame.path}:{frame.line}: in {frame.function}: " if frame else ""
        echo(f"{said}device error at {where}{report.exception}", err=True)
        if frame is None:
            echo(f"{said}the error is in no file of the program's own; nothing to fix", err=True)
            return 1
        paths = sorted({Path(f.path) for f in report.frames if Path(f.path).is_file() and not _library(f.path)})
        before = {path: path.read_bytes() for path in paths}
        tracebacks.run(text, paths, "apply" if apply else "diff", overrides, fmt, False, False, color, echo, source="the run")
        if not apply:
            return 1
        if all(path.read_bytes() == data for path, data in before.items()):
            echo(f"{said}no fix was written for this error (an unsafe one needs --unsafe-fixes); stopping", err=True)
            return 1
        echo(f"{said}fixed; running again", err=True)
    echo(f"fixdev --run: {max_rounds} rounds and the command still fails with a device error (--max-rounds)", err=True)
    return 1


def _library(path: str) -> bool:
    from fixdev.diagnose.log import is_library

    return is_library(path)
