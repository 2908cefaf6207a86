"""``nn.DataParallel`` and custom autograd Functions on the virtual GPU
(fixdev/gpu/parallel.py), through ``fixdev --run`` on scripts."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

DATA_PARALLEL = """\
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(6, 4)
if sys.argv[1] == "plain":
    out = net(x)
else:
    model = nn.DataParallel(net).cuda()
    out = model(x)  # a CPU batch: DataParallel scatters it to the devices
out.sum().backward()
print(out.device, tuple(out.shape), net[0].weight.grad.device, net[0].weight.grad.sum().item())
"""


@pytest.mark.parametrize("gpus", ["1", "2"])
def test_run_data_parallel_runs_forward_and_backward_with_the_cpus_gradients(tmp_path, fixdev, gpus):
    (tmp_path / "dp.py").write_text(DATA_PARALLEL)
    plain = fixdev("--run", "--", "python", "dp.py", "plain", cwd=tmp_path)
    grad = plain.stdout.decode().split()[-1]
    shown = fixdev("--run", "--gpus", gpus, "--", "python", "dp.py", "parallel", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    device, *shape, grad_device, value = shown.stdout.decode().split()
    assert (device, grad_device) == ("cuda:0", "cuda:0") and " ".join(shape) == "(6, 2)"
    assert float(value) == pytest.approx(float(grad), rel=1e-6), "the gradients summed over the replicas"


CUSTOM = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(weight)
        return x * weight

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        print("grad on", grad.device)
        return grad * weight, None


x = torch.ones(3, device="cuda", requires_grad=True)
Scale.apply(x, torch.full((3,), 2.0, device="cuda")).sum().backward()
print("x.grad", x.grad.tolist(), x.grad.device)
"""


def test_run_a_custom_backward_gets_its_gradients_on_the_device(tmp_path, fixdev):
    (tmp_path / "custom.py").write_text(CUSTOM)
    shown = fixdev("--run", "--", "python", "custom.py", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == ["grad on cuda:0", "x.grad [2.0, 2.0, 2.0] cuda:0"]
