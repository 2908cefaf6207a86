"""``fixdev --probe --real`` and ``--input-from MODULE:FUNCTION`` on the CLI:
the probe on the virtual GPU of ``fixdev --run`` (values, ``.item()`` and
``backward`` are real; no compiler needed), with inputs from the user's own
function instead of random tensors of typed shapes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

NET = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.fc = nn.Linear(width, 2)

    def forward(self, x, scale=None):
        out = self.fc(x)
        if out.abs().sum().item() > 1e9:  # a data-dependent branch: it needs values
            out = out * 0
        if scale is not None:
            out = out * scale
        return out


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        weights = torch.ones(x.shape[0], 2)
        return self.fc(x) * weights
"""

LOADERS = """\
import torch


def one():
    return torch.ones(3, 4)


def pair():
    return torch.ones(3, 4), torch.full((3, 2), 2.0)


def named():
    return {"x": torch.ones(3, 4), "scale": torch.tensor(3.0)}


def wrong():
    return 5
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "loaders.py").write_text(LOADERS)
    return tmp_path


def probe(fixdev, folder, *args):
    shown = fixdev("--probe", *args, cwd=folder)
    return shown.returncode, shown.stdout.decode(), shown.stderr.decode()


def test_real_runs_what_needs_values_and_backward(fixdev, folder):
    code, out, err = probe(fixdev, folder, "net.py:Net", "--real", "--train", "--input", "3,4")
    assert code == 0, err
    assert out == "net.py:Net: no device error on the virtual GPU (train mode, 1 input; backward ran).\n"


def test_real_finds_a_mismatch_at_the_users_line_with_the_fix(fixdev, folder):
    code, out, err = probe(fixdev, folder, "net.py:Masked", "--real", "--input", "3,4")
    assert code == 1, out + err
    assert "net.py:Masked: forward fails on the virtual GPU:\nRuntimeError: Expected all tensors to be on the same device" in out
    assert 'net.py", line 26, in forward\n    return self.fc(x) * weights' in out
    assert "fix: FDV102 [factory-device] [*] Add `device=x.device` (line 25)" in out


@pytest.mark.parametrize(("function", "count"), [("loaders:one", "1 input"), ("loaders:pair", "2 inputs"), ("loaders.py:named", "2 inputs")])
def test_input_from_gives_forward_the_users_inputs(fixdev, folder, function, count):
    code, out, err = probe(fixdev, folder, "net.py:Net", "--real", "--input-from", function)
    assert code == 0, err
    assert out == f"net.py:Net: no device error on the virtual GPU (eval mode, {count} from {function}).\n"


def test_input_from_a_mismatch_and_json(fixdev, folder):
    code, out, err = probe(fixdev, folder, "net.py:Masked", "--real", "--input-from", "loaders:one", "--output-format", "json")
    assert code == 1, err
    [error] = json.loads(out)
    assert error["error"].startswith("RuntimeError: Expected all tensors to be on the same device")


@pytest.mark.parametrize(("args", "said"), [
    (["--real", "--input-from", "loaders:wrong"], "loaders:wrong() returned int: return a tensor, a tuple of forward's arguments or a dict"),
    (["--real", "--input-from", "loaders:missing"], "--input-from: loaders has no function missing"),
    (["--real", "--input-from", "nowhere:one"], "--input-from nowhere: importing it failed: ModuleNotFoundError"),
    (["--real", "--input-from", "loaders"], "--input-from takes MODULE:FUNCTION"),
    (["--real", "--input-from", "loaders:one", "--input", "3,4"], "--input and --input-from: choose one"),
    (["--real"], "at least one --input SHAPE"),
])
def test_input_from_errors_are_one_line(fixdev, folder, args, said):
    code, out, err = probe(fixdev, folder, "net.py:Net", *args)
    assert code == 2, out + err
    assert err.startswith("fixdev: error: ") and said in err and err.count("\n") == 1, err


def test_real_and_input_from_go_with_probe(fixdev, folder):
    for args in (["--real"], ["--input-from", "loaders:one"]):
        shown = fixdev(*args, "net.py", cwd=folder)
        assert shown.returncode == 2
        assert "go with --probe FILE:CLASS" in shown.stderr.decode()
