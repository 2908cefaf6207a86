"""The fake CUDA GPU the tests use: ``fixdev/fakegpu.py`` (also behind
``--probe`` and the ``fake_gpu`` pytest fixture), re-exported here so the
tests read ``from .fakecuda import fake_gpu``.

Set ``FIXDEV_SKIP_FAKECUDA=1`` to skip these tests on purpose; without it a
missing torch, ninja or C++ compiler fails them with what to install.
"""

from __future__ import annotations

import os

import pytest

from fixdev.gpu.fakegpu import (  # noqa: F401 - re-exported for the tests
    GUARD_SOURCE,
    MISMATCH,
    SKIP_VARIABLE,
    _device_check_mode,
    cache_dir,
    cuda_available,
    fake_gpu,
    load_guard,
    missing_toolchain,
)


def require_toolchain() -> None:
    """Fail loudly (or skip, when asked to) if the fake GPU cannot be built."""
    if os.environ.get(SKIP_VARIABLE):
        pytest.skip(f"{SKIP_VARIABLE} is set")
    missing = missing_toolchain()
    if missing:
        pytest.fail(f"the fake-GPU tests need {', '.join(missing)}; set {SKIP_VARIABLE}=1 to skip them", pytrace=False)
