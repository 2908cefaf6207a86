"""fixdev's pytest plugin (entry point ``pytest11``): the ``fake_gpu`` fixture.

A test moves its model and tensors to a fake CUDA device and runs them, so a
device mismatch fails in CPU-only CI at the line where a real GPU fails::

    def test_forward_on_gpu(fake_gpu):
        model, x = fake_gpu(Net(), torch.randn(8, 3, 32, 32))
        model(x)

pytest loads this module whenever fixdev is installed, so it imports nothing
but pytest here: torch and the fake GPU load inside the fixture, which says
what to install when they are missing. A failing test that used the fixture
gets a "fixdev" section in its report: what ``fixdev --traceback`` says about
the error, fix included.
"""

from __future__ import annotations

import contextlib

import pytest


@pytest.fixture
def fake_gpu():
    """``fake_gpu(*objects, grad=False)`` moves modules and tensors to a fake
    CUDA device and returns them (one object, or a tuple). From the first
    call to the end of the test, code runs as on a GPU machine:
    ``torch.cuda.is_available()`` is true and tensors on ``"cuda"`` carry
    shapes, not data. Build modules before the first call. ``grad=True``
    (on the first call) keeps autograd on; the fake device cannot run
    ``backward``."""
    from fixdev.gpu import fakegpu

    try:
        fakegpu.require()
    except fakegpu.FakeGpuUnavailable as exc:
        pytest.fail(f"fake_gpu: {exc}", pytrace=False)
    from fixdev.gpu.probe import quiet_fake_tensors

    stack = contextlib.ExitStack()
    entered = False

    def move(*objects, grad: bool = False):
        nonlocal entered
        if not objects:
            raise TypeError("fake_gpu() takes the modules and tensors to move: model, x = fake_gpu(model, x)")
        if not entered:
            stack.enter_context(fakegpu.fake_gpu(grad=grad))
            stack.enter_context(quiet_fake_tensors())
            entered = True
        moved = tuple(item.to("cuda") if hasattr(item, "to") else item for item in objects)
        return moved[0] if len(moved) == 1 else moved

    with stack:
        yield move


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call" or call.excinfo is None or "fake_gpu" not in getattr(item, "fixturenames", ()):
        return
    report = outcome.get_result()
    try:
        text = _explain(call.excinfo.value, item)
        if text:
            _end_at_user_code(call.excinfo)
            report.longrepr = item.repr_failure(call.excinfo)
    except Exception:  # the explanation is a courtesy: never the test run's problem
        return
    if text:
        report.sections.append(("fixdev", text))


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


def _explain(exc: BaseException, item) -> str | None:
    """What ``fixdev --traceback`` says about a device error a test raised."""
    import io
    import os
    from pathlib import Path

    from fixdev.diagnose import traceback as tracebacks
    from fixdev.diagnose.log import parse_log
    from fixdev.gpu.probe import as_log
    from fixdev.files.runner import Overrides

    root = Path(str(getattr(item.config, "rootpath", None) or item.config.rootdir))
    log = as_log(exc, root)
    if not parse_log(log):
        return None
    out = io.StringIO()

    def echo(message: str = "", nl: bool = True, err: bool = False, color: bool | None = None) -> None:
        out.write(message + ("\n" if nl else ""))

    try:  # paths shown as the user types them, from where pytest runs
        shown = Path(os.path.relpath(root))
    except ValueError:  # another drive (Windows)
        shown = root
    tracebacks.run(log, [shown], "check", Overrides(), "full", True, False, False, echo)
    return out.getvalue()
