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
import time
from dataclasses import dataclass
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


DEFAULT_ROUND_TIMEOUT = 120.0  # seconds a round of --apply may run without a device error
_GRACE = 5.0  # seconds a stopped command has to end after SIGTERM, before SIGKILL


@dataclass
class Ran:
    """One run of the command: its exit code (negative: the signal that
    ended it), the uncaught errors' tracebacks, its time, and whether the
    round's timeout stopped it."""

    code: int
    text: str | None
    seconds: float
    stopped: bool = False


def run_once(argv: Sequence[str], gpus: int, cwd: Path | None = None, timeout: float | None = None, stdout: int | None = None) -> Ran:
    """Run the command once. With ``timeout``, it runs in a process group of
    its own, and when it runs longer the whole group is stopped (SIGTERM,
    then SIGKILL after a grace period)."""
    with tempfile.TemporaryDirectory(prefix="fixdev-run-") as folder:
        report = Path(folder) / "traceback.txt"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), env.get("PYTHONPATH")) if p)
        env["FIXDEV_RUN_GPUS"] = str(gpus)
        env["FIXDEV_RUN_REPORT"] = str(report)
        group = timeout is not None and os.name == "posix"
        options: dict = {}
        if group:
            options = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        started = time.monotonic()
        try:
            process = subprocess.Popen(list(argv), env=env, cwd=cwd, stdout=stdout, **options)
        except FileNotFoundError:
            raise RunError(f"no such command: {argv[0]}") from None
        terminal = _give_terminal(process.pid) if group else None
        stopped = False
        previous = _on_sigterm()
        try:
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stopped = True
                code = _stop(process, group)
        except BaseException:  # Ctrl-C or a SIGTERM to fixdev: the command goes too
            _stop(process, group)
            raise
        finally:
            _restore_sigterm(previous)
            if terminal is not None:
                _take_terminal(terminal)
        seconds = time.monotonic() - started
        text = report.read_text(encoding="utf-8") if report.is_file() else None
    return Ran(code, text, seconds, stopped)


def _stop(process: subprocess.Popen, group: bool) -> int:
    """End the command (its whole process group with ``group``); its exit code."""
    import signal

    def send(sig: int) -> None:
        try:
            if group:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    send(signal.SIGTERM)
    try:
        process.wait(timeout=_GRACE)
    except subprocess.TimeoutExpired:
        pass
    if group or process.poll() is None:  # what ignored SIGTERM, the leader or another of the group
        send(signal.SIGKILL)
    return process.wait()


def _on_sigterm():
    """While the command runs, a SIGTERM to fixdev ends it (and so the
    command, in ``run_once``) as Ctrl-C does."""
    import signal

    def stop(number, frame):
        raise SystemExit(128 + number)

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        return None


def _restore_sigterm(previous) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _give_terminal(group: int) -> int | None:
    """A command in a process group of its own gets the terminal, as a
    shell gives it to a job: Ctrl-C reaches it, and it can read the
    terminal. The terminal's descriptor, or None when fixdev has none."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        _foreground(fd, group)
        return fd
    except (OSError, ValueError, AttributeError):
        return None


def _take_terminal(fd: int) -> None:
    try:
        _foreground(fd, os.getpgrp())
    except OSError:
        pass


def _foreground(fd: int, group: int) -> None:
    import signal

    # a background group that sets the foreground is sent SIGTTOU; ignored here
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, group)
    finally:
        signal.signal(signal.SIGTTOU, previous)


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
        echo: Callable[..., None], round_timeout: float | None = None) -> int:
    """What ``fixdev --run`` does; returns the exit code. ``round_timeout``
    (default: ``DEFAULT_ROUND_TIMEOUT`` with ``apply``, none without):
    a round that runs that long without a device error is stopped, and ends
    the rounds. With ``fmt`` json, one JSON document on stdout (the
    command's own stdout goes to stderr)."""
    typed = list(argv)
    argv = command_line(argv)
    timeout = round_timeout if round_timeout is not None else DEFAULT_ROUND_TIMEOUT if apply else None
    as_json = fmt == "json"
    rounds: list[dict] = []

    def say(words: str) -> None:
        echo(words, err=True)

    def finish(result: str, code: int) -> int:
        if as_json:
            import json

            echo(json.dumps({"command": typed, "gpus": gpus, "apply": apply, "rounds": rounds, "result": result, "exit_code": code}, indent=2))
        return code

    for number in range(1, (max_rounds if apply else 1) + 1):
        said = f"fixdev --run: round {number}: " if apply else "fixdev --run: "
        ran = run_once(argv, gpus, timeout=timeout, stdout=_stderr() if as_json else None)
        found = user_frame(ran.text) if ran.text else None
        record = {"round": number, "outcome": "device-error", "exit_code": ran.code, "seconds": round(ran.seconds, 3), "errors": []}
        rounds.append(record)
        if found is None:
            if ran.stopped:
                record["outcome"] = "stopped"
                say(f"{said}ran {timeout:g} s without a device error; stopped")  # the limit it reached
                return finish("stopped", 0)
            record["outcome"] = "completed" if ran.code == 0 else "failed"
            if apply:
                say(said + ("the command completed" if ran.code == 0 else f"the command failed (exit {ran.code}), not with a device error"))
            return finish(record["outcome"], ran.code)
        report, frame = found
        where = f"{frame.path}:{frame.line}: in {frame.function}: " if frame else ""
        say(f"{said}device error at {where}{report.exception}" + ("; it ran past the round's timeout and was stopped" if ran.stopped else ""))
        paths = sorted({Path(f.path) for f in report.frames if Path(f.path).is_file() and not _library(f.path)})
        before = {path: path.read_bytes() for path in paths}
        if as_json:
            from fixdev.diagnose.traceback import diagnose

            diagnosis = diagnose(ran.text, paths, "apply" if apply else "diff", overrides)
            record["errors"] = diagnosis.as_json() if diagnosis is not None else []
        elif frame is not None:
            from fixdev.diagnose import traceback as tracebacks

            tracebacks.run(ran.text, paths, "apply" if apply else "diff", overrides, fmt, False, False, color, echo, source="the run")
        if frame is None:
            say(f"{said}the error is in no file of the program's own; nothing to fix")
            return finish("device-error", 1)
        if not apply:
            return finish("device-error", 1)
        if all(path.read_bytes() == data for path, data in before.items()):
            say(f"{said}no fix was written for this error (an unsafe one needs --unsafe-fixes); stopping")
            return finish("no-fix", 1)
        say(f"{said}fixed; running again")
    say(f"fixdev --run: {max_rounds} rounds and the command still fails with a device error (--max-rounds)")
    return finish("max-rounds", 1)


def _stderr() -> int | None:
    """fixdev's stderr, for the command's stdout (None: where it cannot be named)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _library(path: str) -> bool:
    from fixdev.diagnose.log import is_library

    return is_library(path)
