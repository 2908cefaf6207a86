from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# The fixdev processes the tests start read its compiled .pyc files, as an
# installed fixdev's are (pip compiles them at install). Where
# PYTHONDONTWRITEBYTECODE is set, each of several hundred processes would
# otherwise compile fixdev's source again (about 0.3 s each).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
import compileall  # noqa: E402

for _package in ("fixdev", "codemods"):
    compileall.compile_dir(ROOT / _package, quiet=1)


def run_fixdev(*args: str, cwd: Path | None = None, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real entry point, as a user runs it: a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "fixdev", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        timeout=600,
    )


@pytest.fixture
def fixdev():
    return run_fixdev


# Property tests: a quick profile for CI, a thorough one for local runs
# (HYPOTHESIS_PROFILE=thorough pytest tests/test_properties.py).
from hypothesis import HealthCheck, settings  # noqa: E402

_LENIENT = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large, HealthCheck.large_base_example]
# CI: derandomized, so a run is repeatable; local "thorough": random and long.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=_LENIENT)
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=_LENIENT)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
