"""``pytest --fixdev-gpu`` and ``fake_gpu(real=True)`` (fixdev/gpu/pytest_plugin.py)
as a user runs them: pytest in a subprocess on a small suite written here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

CONFTEST = """\
import torch

ON_GPU = torch.cuda.is_available()  # read when the conftest is imported
"""

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        mask = torch.ones(x.shape[0], 2)
        return self.fc(x) * mask
"""

TESTS = """\
import pytest
import torch

from conftest import ON_GPU
from model import Net

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_on_cpu():
    assert Net()(torch.randn(3, 4)).shape == (3, 2)


@needs_gpu
def test_on_gpu():
    model = Net().cuda()
    out = model(torch.randn(3, 4).cuda())
    assert out.shape == (3, 2)


@needs_gpu
def test_a_wrong_value():
    assert torch.ones(2).cuda().sum().item() == 3


@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
def test_devices():
    assert torch.cuda.device_count() == int(__import__("os").environ.get("WANTED_GPUS", "1"))
"""


def suite(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "test_model.py").write_text(TESTS)
    return tmp_path


def pytest_run(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfs", *args], cwd=folder,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)


def test_without_the_option_gpu_only_tests_are_skipped_and_nothing_heavy_is_imported(tmp_path):
    folder = suite(tmp_path)
    (folder / "test_light.py").write_text(
        "import sys\n\ndef test_light():\n    assert 'fixdev.gpu.runtime' not in sys.modules\n"
        "    assert 'fixdev.diagnose' not in sys.modules\n")
    (folder / "conftest.py").write_text("import sys\n\nLOADED = sorted(sys.modules)\n" + CONFTEST)
    (folder / "test_before.py").write_text("from conftest import LOADED\n\ndef test_before():\n    assert 'torch' not in LOADED\n")
    shown = pytest_run(folder)
    assert shown.returncode == 0, shown.stdout
    assert "3 passed, 3 skipped" in shown.stdout
    assert "fixdev: " not in shown.stdout


def test_fixdev_gpu_runs_the_gpu_only_tests_and_lists_each_device_error_with_its_fix(tmp_path):
    folder = suite(tmp_path)
    shown = pytest_run(folder, "--fixdev-gpu")
    out = shown.stdout
    assert shown.returncode == 1, out
    assert "2 failed, 2 passed" in out, "the GPU-only tests ran: the module-level is_available() saw the virtual GPU"
    section = out.split("= fixdev: device errors =")[1].split("short test summary info")[0]
    assert "test_model.py::test_on_gpu\n  model.py:12: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!" in section
    assert "fix: FDV102 [factory-device] [*] Add `device=x.device` (line 11)" in section
    assert "+        mask = torch.ones(x.shape[0], 2, device=x.device)" in section
    assert "test_a_wrong_value" not in section, "a test failing for another reason is no device error"
    assert "1 device error in 1 test on fixdev's virtual GPU" in section
    assert "FAILED test_model.py::test_a_wrong_value - AssertionError: assert 2.0 == 3" in out  # as pytest reports it
    assert (folder / "model.py").read_text() == MODEL, "the fix is shown, not written"


def test_fixdev_gpu_under_xdist_with_two_gpus(tmp_path):
    folder = suite(tmp_path)
    shown = pytest_run(folder, "--fixdev-gpu", "--fixdev-gpus", "2", "-n", "2", env={"WANTED_GPUS": "2"})
    out = shown.stdout
    assert "2 failed, 2 passed" in out, out
    assert "test_model.py::test_on_gpu\n  model.py:12: RuntimeError: Expected all tensors" in out.split("= fixdev: device errors =")[1]


def test_fixdev_gpus_0_is_a_cpu_only_machine(tmp_path):
    folder = suite(tmp_path)
    shown = pytest_run(folder, "--fixdev-gpu", "--fixdev-gpus", "0")
    assert shown.returncode == 0, shown.stdout
    assert "1 passed, 3 skipped" in shown.stdout
    assert "= fixdev: no device errors =" in shown.stdout


REAL = """\
import torch

from model import Net


def test_trains_with_real_values(fake_gpu):
    model, x = fake_gpu(torch.nn.Linear(4, 2), torch.ones(3, 4), real=True)
    assert x.device == torch.device("cuda:0") and torch.cuda.is_available()
    loss = model(x).sum()
    loss.backward()
    assert model.weight.grad.is_cuda
    assert torch.equal(model.weight.grad.cpu(), torch.full((2, 4), 3.0))
    assert isinstance(loss.item(), float)


def test_a_mismatch_fails_at_the_users_line(fake_gpu):
    model, x = fake_gpu(Net(), torch.randn(3, 4), real=True)
    model(x)


def test_the_metadata_mode_stays_the_default(fake_gpu):
    x = fake_gpu(torch.ones(3))
    assert type(x).__name__ == "FakeTensor"
"""


def test_fake_gpu_real_true_runs_values_and_backward_and_reports_a_mismatch(tmp_path):
    from fixdev.gpu import fakegpu

    folder = suite(tmp_path)
    (folder / "test_model.py").unlink()
    (folder / "test_real.py").write_text(REAL)
    args = () if not fakegpu.missing_toolchain() else ("-k", "not metadata")
    shown = pytest_run(folder, *args)
    out = shown.stdout
    assert shown.returncode == 1, out
    assert f"1 failed, {2 - len(args) // 2} passed" in out, out
    assert "FAILED test_real.py::test_a_mismatch_fails_at_the_users_line - RuntimeError" in out
    assert "model.py:12: RuntimeError: Expected all tensors to be on the same device" in out
    assert "fix: FDV102" in out  # the report's fixdev section
