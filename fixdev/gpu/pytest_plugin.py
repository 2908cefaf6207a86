"""fixdev's pytest plugin (entry point ``pytest11``): the ``fake_gpu`` fixture
and ``pytest --fixdev-gpu``.

A test moves its model and tensors to a fake CUDA device and runs them, so a
device mismatch fails in CPU-only CI at the line where a real GPU fails::

    def test_forward_on_gpu(fake_gpu):
        model, x = fake_gpu(Net(), torch.randn(8, 3, 32, 32))
        model(x)

``fake_gpu(..., real=True)`` does it on the virtual GPU of ``runtime.py``
(values, ``backward`` and ``.item()`` are real). ``pytest --fixdev-gpu
[--fixdev-gpus N]`` runs a whole suite on that virtual GPU, installed before
the first conftest and test module are imported, and ends with a "fixdev:
device errors" section: each device error, where, and its fix.

pytest loads this module whenever fixdev is installed, so it imports nothing
but pytest here: torch and the GPUs load inside the fixture, or when the
option is given. A failing test that used the fixture (or any failing test
under ``--fixdev-gpu``) gets a "fixdev" section in its report: what
``fixdev --traceback`` says about the error, fix included.
"""

from __future__ import annotations

import contextlib

import pytest

_KEY = "fixdev_device_error"  # the user property a report carries its device error in (xdist sends it back)


def pytest_addoption(parser):
    group = parser.getgroup("fixdev", "fixdev's virtual GPU")
    group.addoption("--fixdev-gpu", action="store_true", default=False, dest="fixdev_gpu",
                    help="run the tests on fixdev's virtual GPU (CUDA tensors are CPU tensors that mismatch as on a GPU) "
                         "and list the device errors, with their fixes, at the end")
    group.addoption("--fixdev-gpus", action="store", type=int, default=1, dest="fixdev_gpus", metavar="N",
                    help="with --fixdev-gpu: how many virtual GPUs (default 1; 0: a CPU-only machine)")


class _Session:
    """What ``--fixdev-gpu`` keeps for the run: the device errors seen."""

    def __init__(self) -> None:
        self.errors: list[dict] = []


_SESSION = _Session()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Before the first conftest and test module are imported: a module-level
    ``torch.cuda.is_available()`` (a ``skipif``) sees the virtual GPU."""
    namespace = early_config.known_args_namespace
    if not getattr(namespace, "fixdev_gpu", False):
        return
    gpus = getattr(namespace, "fixdev_gpus", 1)
    if gpus is None or gpus < 0:
        raise pytest.UsageError("--fixdev-gpus takes 0 or more")
    _install(gpus)


def _install(gpus: int) -> None:
    import os

    try:
        from fixdev.gpu import runtime
    except ImportError as exc:  # pragma: no cover - fixdev's own package
        raise pytest.UsageError(f"--fixdev-gpu: {exc}") from None
    try:
        runtime.install(gpus)
    except ImportError as exc:
        raise pytest.UsageError(f"--fixdev-gpu needs torch ({exc}); install the torch build you use first") from None
    # the processes the tests start (DataLoader workers under spawn, a
    # subprocess running python) get it from the hook, as under fixdev --run
    from fixdev.gpu.run import HOOK

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), os.environ.get("PYTHONPATH")) if p)
    os.environ["FIXDEV_RUN_GPUS"] = str(gpus)


def pytest_unconfigure(config):
    if config.getoption("fixdev_gpu", False):
        from fixdev.gpu import runtime

        runtime.uninstall()


@pytest.fixture
def fake_gpu(request):
    """``fake_gpu(*objects, grad=False, real=False)`` moves modules and
    tensors to a fake CUDA device and returns them (one object, or a tuple).
    From the first call to the end of the test, code runs as on a GPU
    machine: ``torch.cuda.is_available()`` is true. By default tensors on
    ``"cuda"`` carry shapes, not data (no memory for weights); ``grad=True``
    (on the first call) keeps autograd on, though the fake device cannot run
    ``backward``. ``real=True`` (on the first call): the virtual GPU of
    ``fixdev --run``, with values, ``backward`` and ``.item()``; it needs no
    compiler. Under ``pytest --fixdev-gpu`` every call is on that virtual
    GPU, already installed. Build modules before the first call."""
    from fixdev.gpu import fakegpu

    try:
        import torch  # noqa: F401 - both GPUs need it: said at setup, the test does not run
    except ImportError:
        try:
            fakegpu.require()
        except fakegpu.FakeGpuUnavailable as exc:
            pytest.fail(f"fake_gpu: {exc}", pytrace=False)
    stack = contextlib.ExitStack()
    entered = False
    suite_wide = request.config.getoption("fixdev_gpu", False)

    def enter(grad: bool, real: bool) -> None:
        if suite_wide:
            return
        if real:
            from fixdev.gpu.runtime import virtual_gpu

            stack.enter_context(virtual_gpu(gpus=1))
            return
        try:
            fakegpu.require()
        except fakegpu.FakeGpuUnavailable as exc:
            pytest.fail(f"fake_gpu: {exc} (fake_gpu(..., real=True) needs none of it)", pytrace=False)
        from fixdev.gpu.probe import quiet_fake_tensors

        stack.enter_context(fakegpu.fake_gpu(grad=grad))
        stack.enter_context(quiet_fake_tensors())

    def move(*objects, grad: bool = False, real: bool = False):
        nonlocal entered
        if not objects:
            raise TypeError("fake_gpu() takes the modules and tensors to move: model, x = fake_gpu(model, x)")
        if not entered:
            enter(grad, real)
            entered = True
        moved = tuple(item.to("cuda") if hasattr(item, "to") else item for item in objects)
        return moved[0] if len(moved) == 1 else moved

    with stack:
        yield move


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is None or call.when not in ("setup", "call"):
        return
    suite_wide = item.config.getoption("fixdev_gpu", False)
    if not suite_wide and (call.when != "call" or "fake_gpu" not in getattr(item, "fixturenames", ())):
        return
    report = outcome.get_result()
    try:
        text, error = _explain(call.excinfo.value, item, "diff" if suite_wide else "check")
        if text and call.when == "call":
            _end_at_user_code(call.excinfo)
            report.longrepr = item.repr_failure(call.excinfo)
    except Exception:  # the explanation is a courtesy: never the test run's problem
        return
    if text:
        report.sections.append(("fixdev", text))
        if suite_wide:
            report.user_properties.append((_KEY, {"test": report.nodeid, **error, "fix": text}))


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", ()):
        if name == _KEY and isinstance(value, dict):
            _SESSION.errors.append(value)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not config.getoption("fixdev_gpu", False):
        return
    errors = _SESSION.errors
    if not errors:
        terminalreporter.write_sep("=", "fixdev: no device errors", bold=True)
        return
    terminalreporter.section("fixdev: device errors", sep="=", bold=True)
    for error in errors:
        terminalreporter.write_line(f"{error['test']}")
        terminalreporter.write_line(f"  {error['where']}: {error['error']}")
        lines = error["fix"].rstrip().splitlines()
        if lines and lines[0].endswith(error["error"]):  # --traceback's own first line says the same
            lines = lines[1:]
        for line in lines:
            terminalreporter.write_line(f"    {line}" if line else "")
        terminalreporter.write_line("")
    tests = len({error["test"] for error in errors})
    terminalreporter.write_line(f"{len(errors)} device error{'s' if len(errors) != 1 else ''} in {tests} test{'s' if tests != 1 else ''} "
                                "on fixdev's virtual GPU")


def _end_at_user_code(excinfo) -> None:
    """End the shown traceback at the user's innermost line: below it runs
    the fake device's machinery, not what a GPU would run."""
    from pathlib import Path

    from fixdev.diagnose.log import is_library

    package = Path(__file__).resolve().parent
    last, node = None, excinfo.tb
    while node is not None:
        name = node.tb_frame.f_code.co_filename
        if not is_library(name) and not Path(name).resolve().is_relative_to(package):
            last = node
        node = node.tb_next
    if last is not None and last.tb_next is not None:
        # pytest rebuilds tracebacks from the raw chain (Traceback.cut), so
        # the chain itself ends here (tb_next is writable since Python 3.7)
        last.tb_next = None
        excinfo.traceback = type(excinfo.traceback)(excinfo.tb)


def _explain(exc: BaseException, item, mode: str = "check") -> tuple[str | None, dict]:
    """What ``fixdev --traceback`` says about a device error a test raised
    (None when it is none), and where the error is: the test's innermost
    line in the user's own code and the error's first line."""
    import io
    import os
    from pathlib import Path

    from fixdev.diagnose import traceback as tracebacks
    from fixdev.diagnose.log import parse_log
    from fixdev.gpu.probe import as_log
    from fixdev.gpu.run import user_frame
    from fixdev.files.runner import Overrides

    root = Path(str(getattr(item.config, "rootpath", None) or item.config.rootdir))
    log = as_log(exc, root)
    if not parse_log(log):
        return None, {}
    out = io.StringIO()

    def echo(message: str = "", nl: bool = True, err: bool = False, color: bool | None = None) -> None:
        out.write(message + ("\n" if nl else ""))

    try:  # paths shown as the user types them, from where pytest runs
        shown = Path(os.path.relpath(root))
    except ValueError:  # another drive (Windows)
        shown = root
    tracebacks.run(log, [shown], mode, Overrides(), "full", True, False, False, echo)
    report, frame = user_frame(log) or (None, None)
    where = "?"
    if frame is not None:
        try:
            where = f"{os.path.relpath(frame.path)}:{frame.line}"
        except ValueError:
            where = f"{frame.path}:{frame.line}"
    return out.getvalue(), {"where": where, "error": report.exception if report is not None else str(exc).splitlines()[0]}
