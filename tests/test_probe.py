"""``fixdev --probe FILE:CLASS`` and the ``fake_gpu`` pytest fixture: a
module's device errors found on a fake GPU in CPU-only CI, at the user's
line, explained and fixed as ``--traceback`` does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_fixdev
from tests.fakecuda import require_toolchain

PROGRAM = ROOT / "tests" / "programs" / "robust_trainer.py"
ROBUST = ["--probe", "robust_trainer.py:RobustModel", "--input", "4,12", "--init", '{"input_dim": 12, "hidden_dim": 8, "num_classes": 3}']

TINY_LM = '''\
import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(64, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1))
        return self.out(self.embed(tokens) + self.pos(positions))
'''


@pytest.fixture
def toolchain():
    require_toolchain()


@pytest.mark.fakecuda
def test_probe_finds_the_seed_programs_mismatch_and_passes_after_apply(tmp_path, toolchain):
    shutil.copyfile(PROGRAM, tmp_path / "robust_trainer.py")
    # eval mode adds no noise: the bug is in the training path only
    clean = run_fixdev("--no-cache", *ROBUST, cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr.decode()
    assert clean.stdout.decode() == "robust_trainer.py:RobustModel: no device error on a fake GPU (eval mode, 1 input).\n"

    # both fixes of the error (randn on x's device, a buffer) are unsafe: shown and applied with --unsafe-fixes
    before = run_fixdev("--no-cache", *ROBUST, "--train", "--unsafe-fixes", cwd=tmp_path)
    out = before.stdout.decode()
    assert before.returncode == 1, before.stderr.decode()
    # torch's error, the user's line (not torch's), then what --traceback says, fix included
    assert out.startswith("robust_trainer.py:RobustModel: forward in train mode fails on a fake GPU:\nRuntimeError: Expected all tensors to be on the same device")
    assert f'File "{tmp_path / "robust_trainer.py"}", line 31, in forward\n    x = x + noise\n' in out
    assert "robust_trainer.py:31: RuntimeError: Expected all tensors to be on the same device" in out
    assert "`noise` is made by `torch.randn(x.shape)` on line 30" in out
    assert "fix: FDV101 [like-factory]" in out and "fix: FDV103 [constant-buffer]" in out
    assert "+            noise = torch.randn(x.shape, device=x.device) * self.noise_scale" in out
    assert (tmp_path / "robust_trainer.py").read_text() == PROGRAM.read_text(), "--probe alone writes nothing"

    fixed = run_fixdev("--no-cache", "--apply", "--unsafe-fixes", "robust_trainer.py", cwd=tmp_path)
    assert fixed.returncode == 0
    after = run_fixdev("--no-cache", *ROBUST, "--train", cwd=tmp_path)
    assert after.returncode == 0, after.stderr.decode()
    lines = after.stdout.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robust_trainer.py:RobustModel: no device error on a fake GPU (train mode, 1 input;")


@pytest.mark.fakecuda
def test_probe_apply_and_json(tmp_path, toolchain):
    """Integer inputs and constructor arguments; --apply writes the fix the
    probe found; JSON is the list --traceback prints (empty when clean)."""
    (tmp_path / "lm.py").write_text(TINY_LM)
    args = ["--no-cache", "--probe", "lm.py:TinyLM", "--input", "8,16:long", "--init", '{"vocab": 50}']
    found = run_fixdev(*args, "--output-format", "json", cwd=tmp_path)
    assert found.returncode == 1, found.stderr.decode()
    (item,) = json.loads(found.stdout)
    assert item["family"] == "same-device" and item["frame"]["line"] == 14
    assert [f["code"] for f in item["findings"]] == ["FDV102"]
    applied = run_fixdev(*args, "--apply", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr.decode()
    assert "positions = torch.arange(tokens.size(1), device=tokens.device)" in (tmp_path / "lm.py").read_text()
    clean = run_fixdev(*args, "--output-format", "json", cwd=tmp_path)
    assert clean.returncode == 0 and json.loads(clean.stdout) == []


@pytest.mark.fakecuda
def test_probe_errors_are_one_line(tmp_path, toolchain):
    (tmp_path / "lm.py").write_text(TINY_LM)
    cases = [
        (["--probe", "lm.py"], "--probe takes FILE:CLASS"),
        (["--probe", "nope.py:Net", "--input", "2"], "nope.py: no such file"),
        (["--probe", "lm.py:TinyLM"], "at least one --input"),
        (["--probe", "lm.py:TinyLM", "--input", "8,x"], "a shape is numbers"),
        (["--probe", "lm.py:TinyLM", "--input", "8,4:complex"], "unknown dtype 'complex'"),
        (["--probe", "lm.py:TinyLM", "--input", "8,4", "--init", "{vocab"], "--init is not JSON"),
        (["--probe", "lm.py:Net", "--input", "8,4:long"], "lm.py has no Net (its nn.Module classes: TinyLM)"),
        (["--probe", "lm.py:TinyLM", "--input", "8,4:long"], "building lm.py:TinyLM failed: TypeError"),
        (["--probe", "lm.py:TinyLM", "--input", "8,4", "--init", '{"vocab": 5}'], "not a device error"),
        (["--probe", "lm.py:TinyLM", "--input", "2", "x.py"], "--probe takes no PATH"),
    ]
    from tests.test_traceback import fixdev_in  # in this process: ten runs, one torch import

    for args, words in cases:
        result = fixdev_in(tmp_path, "--no-cache", *args)
        err = result.stderr.decode()
        assert result.returncode == 2, (args, err)
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)


TAGGER = ROOT / "fixtures" / "traceback" / "rnn_hidden" / "tagger.py"


@pytest.mark.fakecuda
def test_probe_knows_an_rnn_hidden_state_on_the_cpu(tmp_path, toolchain):
    """An LSTM whose h0/c0 are made without device=: the fake GPU raises
    torch's RNN wording, which is a device error to the probe (not "the fake
    GPU could not run forward ... not a device error"), fixed by factory-device."""
    shutil.copyfile(TAGGER, tmp_path / "tagger.py")
    args = ["--no-cache", "--probe", "tagger.py:Tagger", "--input", "2,5,8", "--init", '{"features": 8, "hidden": 16, "tags": 3}']
    found = run_fixdev(*args, cwd=tmp_path)
    out = found.stdout.decode()
    assert found.returncode == 1, found.stderr.decode()
    assert "RuntimeError: Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu" in out
    assert "tagger.py:17: RuntimeError" in out and "fix: FDV102 [factory-device]" in out
    assert run_fixdev(*args, "--apply", cwd=tmp_path).returncode == 0
    assert "h0 = torch.zeros(1, x.size(0), self.hidden, device=x.device)" in (tmp_path / "tagger.py").read_text()
    clean = run_fixdev(*args, cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout.decode() + clean.stderr.decode()


# -- the pytest fixture ------------------------------------------------------------


TEST_FILE = '''\
import torch

from robust_trainer import RobustModel


def test_train_step_on_gpu(fake_gpu):
    model = RobustModel(input_dim=12, hidden_dim=8, num_classes=3)
    model, x = fake_gpu(model, torch.randn(4, 12))
    assert model(x).device.type == "cuda"


def test_without_the_fixture():
    assert 1 + 1 == 2
'''


def _pytest(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """pytest as a user's CI runs it. An installed fixdev registers the plugin
    through its pytest11 entry point; a checkout installed before the entry
    point existed needs -p (both at once would register it twice)."""
    env = {**os.environ, **(env or {})}
    ask = "from importlib.metadata import entry_points as e; print(any(p.value == 'fixdev.gpu.pytest_plugin' for p in e(group='pytest11')))"
    # asked where pytest will run: this process may see the checkout's own metadata
    installed = subprocess.run([sys.executable, "-c", ask], cwd=folder, capture_output=True, text=True, env=env, timeout=120).stdout.strip() == "True"
    plugin = [] if installed else ["-p", "fixdev.gpu.pytest_plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-q", *args],
        cwd=folder, capture_output=True, text=True, timeout=600, env=env,
    )


@pytest.mark.fakecuda
def test_fixture_fails_where_a_gpu_would_and_passes_after_the_fix(tmp_path, toolchain):
    shutil.copyfile(PROGRAM, tmp_path / "robust_trainer.py")
    # the error's fixes (randn on x's device, a buffer) are unsafe: the project enables them for the plugin's diff and --apply
    (tmp_path / "pyproject.toml").write_text("[tool.fixdev]\nunsafe-fixes = true\n")
    (tmp_path / "test_model.py").write_text(TEST_FILE)
    before = _pytest(tmp_path)
    assert before.returncode == 1, before.stdout
    out = before.stdout
    assert "1 failed, 1 passed" in out, out
    # the shown traceback ends at the user's line, not in the fake device
    report = out[out.index("test_train_step_on_gpu") : out.index("- fixdev -")]
    assert ">           x = x + noise" in report and "\nrobust_trainer.py:31: RuntimeError" in report
    assert "fakegpu.py" not in report and "_dynamo" not in report
    # and fixdev's section says why, with the fix
    section = out[out.index("- fixdev -") :]
    assert "robust_trainer.py:31: RuntimeError: Expected all tensors to be on the same device" in section
    assert "fix: FDV101 [like-factory]" in section and "--- a/robust_trainer.py" in section
    assert run_fixdev("--no-cache", "--apply", "robust_trainer.py", cwd=tmp_path).returncode == 0
    after = _pytest(tmp_path)
    assert after.returncode == 0 and "2 passed" in after.stdout, after.stdout


RNN_TEST = """\
import torch

from tagger import Tagger


def test_tagger_on_gpu(fake_gpu):
    model, x = fake_gpu(Tagger(8, 16, 3), torch.randn(2, 5, 8))
    with torch.no_grad():
        assert model(x).shape == (2, 5, 3)
"""


@pytest.mark.fakecuda
def test_fixture_report_explains_an_rnn_error(tmp_path, toolchain):
    shutil.copyfile(TAGGER, tmp_path / "tagger.py")
    (tmp_path / "test_tagger.py").write_text(RNN_TEST)
    result = _pytest(tmp_path)
    out = result.stdout
    assert result.returncode == 1 and "1 failed" in out, out
    section = out[out.index("- fixdev -") :]
    assert "tagger.py:17: RuntimeError: Input and hidden tensors are not at the same device" in section
    assert "fix: FDV102 [factory-device]" in section and "--- a/tagger.py" in section


def test_plugin_loads_without_torch_and_says_what_to_install(tmp_path):
    """pytest loads a pytest11 plugin wherever fixdev is installed: with no
    torch it must not break the run, and the fixture says what is missing."""
    blocker = tmp_path / "no_torch"
    (blocker / "torch").mkdir(parents=True)
    (blocker / "torch" / "__init__.py").write_text("raise ImportError('No module named torch (blocked by the test)')\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_x.py").write_text(
        "def test_plain():\n    assert True\n\n\ndef test_gpu(fake_gpu):\n    fake_gpu(object())\n"
    )
    result = _pytest(project, env={"PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed, 1 error" in result.stdout  # the fixture could not be set up: the test did not run
    assert "fake_gpu: the fake GPU needs torch (install the torch build you use first" in result.stdout
    assert "Traceback" not in result.stdout and "ImportError" not in result.stdout


def test_plugin_and_cli_import_no_torch():
    script = (
        "import sys\n"
        "import fixdev.gpu.pytest_plugin, fixdev.interfaces.cli, fixdev.diagnose.traceback, fixdev.gpu.probe, fixdev.gpu.fakegpu\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_wheel_declares_the_plugin_the_extra_and_ships_the_guard(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )
    (wheel,) = tmp_path.glob("fixdev-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert "fixdev/gpu/noop_cuda_guard.cpp" in names
    assert "fixdev/gpu/pytest_plugin.py" in names and "fixdev/gpu/fakegpu.py" in names
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = archive.read(info).decode()
    assert "[pytest11]\nfixdev = fixdev.gpu.pytest_plugin" in entry_points
    metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    # no torch requirement at all: an open one makes pip resolve a CUDA build
    # of several GB where no torch is installed yet (the user installs theirs)
    assert 'Requires-Dist: ninja; extra == "probe"' in metadata
    assert not [line for line in metadata.splitlines() if line.startswith("Requires-Dist: torch")]
