"""numpy-on-device (FDV108) and cross-device-index (FDV111): the fake GPU
fails where real CUDA fails for them, and the rules are chosen and left out
by ``--select`` / ``--ignore`` on files, as a user runs them."""

from __future__ import annotations

import pytest

from tests.fakecuda import MISMATCH, fake_gpu, require_toolchain

# -- the fake GPU answers .numpy() and indexing as CUDA does ----------------------------


@pytest.fixture
def gpu():
    require_toolchain()
    return fake_gpu


@pytest.mark.fakecuda
def test_numpy_of_a_gpu_tensor_fails_as_on_cuda(gpu):
    import numpy as np
    import torch

    with gpu():
        x = torch.randn(3).to("cuda")
        for read in (x.numpy, lambda: np.array(x), lambda: np.asarray(x)):
            with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
                read()
        with pytest.raises(RuntimeError, match=MISMATCH):
            x.numpy()
        # on the host it reads: zeros of the shape and dtype (a fake tensor has no data)
        array = x.cpu().numpy()
        assert array.shape == (3,) and array.dtype == np.float32
        assert np.array(torch.ones(2, 2, dtype=torch.int64)).dtype == np.int64
    # real tensors keep the real method
    assert torch.arange(3).numpy().tolist() == [0, 1, 2]


@pytest.mark.fakecuda
def test_numpy_of_a_tensor_that_requires_grad_fails_with_grad_enabled(gpu):
    import torch
    import torch.nn as nn

    model = nn.Linear(2, 2)
    with gpu(grad=True):
        model.to("cuda")
        out = model(torch.randn(1, 2).to("cuda"))
        with pytest.raises(RuntimeError, match="requires grad"):
            out.cpu().numpy()
        assert out.detach().cpu().numpy().shape == (1, 2)


@pytest.mark.fakecuda
def test_a_host_tensor_read_by_a_gpu_index_fails_as_on_cuda(gpu):
    import torch

    with gpu():
        table = torch.randn(5, 3)
        index = torch.tensor([0, 2]).to("cuda")
        for read in (lambda: table[index], lambda: table[:, index[:1]], lambda: table[index > 0]):
            with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"):
                read()
        assert table[index.cpu()].device.type == "cpu"
        assert table.to("cuda")[index].device.type == "cuda"
        assert table.to("cuda")[torch.tensor([0, 2])].device.type == "cuda"  # a GPU tensor read by host indices: legal


# -- the rules through the CLI, on files ------------------------------------------------

BOTH = """\
import torch


def report(model, device):
    model.to(device)
    model.eval()
    names = torch.tensor([3, 7])
    with torch.no_grad():
        best = model(torch.randn(8, 4, device=device)).argmax(1)
    return names[best], best.numpy()
"""


def _codes(result) -> list[str]:
    return [line.split()[1] for line in result.stdout.decode().splitlines() if ": FDV" in line]


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "report.py"
    path.write_text(BOTH)
    return path


def test_both_rules_report_by_default(fixdev, program):
    result = fixdev("--check", "--no-cache", "--output-format", "concise", str(program))
    assert result.returncode == 1
    assert sorted(_codes(result)) == ["FDV108", "FDV111"]


@pytest.mark.parametrize("selector, expected", [("FDV108", ["FDV108"]), ("numpy-on-device", ["FDV108"]), ("FDV111", ["FDV111"]), ("cross-device-index", ["FDV111"])])
def test_select_runs_only_the_named_rule(fixdev, program, selector, expected):
    result = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", selector, str(program))
    assert _codes(result) == expected


@pytest.mark.parametrize("ignored, left", [("FDV108", "FDV111"), ("cross-device-index", "FDV108")])
def test_ignore_leaves_the_rule_out(fixdev, program, ignored, left):
    result = fixdev("--check", "--no-cache", "--output-format", "concise", "--ignore", ignored, str(program))
    assert _codes(result) == [left]


def test_apply_with_one_rule_selected_fixes_only_its_sites(fixdev, program):
    result = fixdev("--apply", "--no-cache", "--select", "FDV111", str(program))
    assert result.returncode == 0, result.stderr.decode()
    text = program.read_text()
    assert "names[best.cpu()], best.numpy()" in text
    result = fixdev("--apply", "--no-cache", "--select", "numpy-on-device", str(program))
    assert result.returncode == 0, result.stderr.decode()
    assert "names[best.cpu()], best.detach().cpu().numpy()" in program.read_text()
